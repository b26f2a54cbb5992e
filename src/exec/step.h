// The step marker: sync(wait, reset_scope) (DESIGN.md section 4) and what ends a step.
#pragma once

#include <cstdint>
#include <functional>

#include "core/hash.h"
#include "exec/cut_reason.h"

namespace lz {

struct ProgramCapture;

// The barrier: syncs every live pending tensor as one program, then finishes the step.
void step_barrier(bool wait, bool reset_scope, CutReason reason = CutReason::UserSync,
                  ProgramCapture* capture = nullptr);
// The end of a step (after its barrier's sync, or a capture replay): MarkStep, the step log, the
// step closures.
void finish_step(bool ran, const Hash128& hash);
void register_step_closure(std::function<void()> fn);
int64_t step_count();

}  // namespace lz
