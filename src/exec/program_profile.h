// The program profile (debug::profile_programs, LAZULI_PROFILE_PROGRAMS; docs/debugging.md
// "Where a step's time goes"): while it is on, every run of a compiled program is timed, and on a
// backend that names its steps (Executable::step_labels: the cpu backend's kernel launches,
// matrix products, library calls, fallbacks and final copies) each step of it too. Times add up
// per program (by graph hash) and per step, so a report shows which programs and which of their
// steps take a training step's time, in words: the ops a kernel computes, a product's shapes.
//
// Off, it costs a relaxed atomic load per run. On, a clock read per step and one lock per run.
#pragma once
#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "core/hash.h"

namespace lz::profile {

// Whether runs are being timed (starts as LAZULI_PROFILE_PROGRAMS says).
bool enabled();
void set_enabled(bool on);

// Adds one successful run of `exe` (graph `hash`, named `label`: its program name or where it was
// cut) that took `total_ns`; `steps`: its per-step times, when the backend gave them (the
// executable's step_labels() are read once, at the program's first record).
void record_run(const Hash128& hash, const std::string& label, const Executable& exe,
                int64_t total_ns, const StepTimes& steps);

}  // namespace lz::profile
