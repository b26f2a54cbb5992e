// The one run-compiled path (DESIGN.md 4, step 5): a compiled program and the function that
// schedules one run of it on given parameter buffers. The graph executor (after a lookup or a
// compile), capture replay and front ends replaying a warm program (exec/warm_program.h) all
// schedule through run_compiled, so placeholders, restore-on-failure and origins behave the same
// whoever runs the program.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/hash.h"
#include "ir/origin.h"

namespace lz {

// Post-order index -> origin of the graph's nodes that have one (index ops: ir/origin.h), so a
// run-time error names what the user called and where.
using NodeOrigins = std::vector<std::pair<int, ir::Origin>>;

// What a compiled program's runs read besides the executable, fixed when it is compiled and
// shared by every run (a replay schedules one per call: nothing here is copied per run).
struct ProgramFacts {
  std::vector<std::pair<DType, Shape>> root_types;  // per output, in root order
  NodeOrigins origins;
  // The program's collectives in order ("all_reduce float32[16, 5] sum; ..."; empty: none) and
  // where it was cut ("train.py:41"): before it runs, every rank checks that the others run the
  // same collectives (dist/process_group.h check_same_collectives).
  std::string collectives;
  std::string site;
  // What the program profile calls it (exec/program_profile.h): its name, else where it was cut.
  std::string label;
};

// What running a compiled program needs besides its parameters. Holding one keeps the executable
// alive: a compile-cache eviction never affects it.
struct CompiledProgram {
  Hash128 hash;
  std::shared_ptr<Executable> exe;
  std::shared_ptr<const ProgramFacts> facts;  // never null once compiled
};

struct ScheduledRun {
  std::shared_ptr<Execution> exec;  // the run; its outputs' producer
  std::vector<BufferPtr> outputs;   // placeholders, one per root, filled when the run finishes
  // Scheduled for its caller to run (caller_waits): once the executor lock is released, the
  // caller calls device_executor().run_here_or_wake(exec), which runs it there when it is next.
  bool run_here = false;
};

// Called with the output placeholders before the run is scheduled, so the caller can hand them
// to tensors; returns, per output, the data its tensor held before (or null): if the program
// fails to compute an output, that output takes its old value back instead of the error.
using BindOutputs = std::function<std::vector<SlotPtr>(const std::vector<BufferPtr>& outputs)>;

// Schedules one run of `program` on `params` (one buffer per parameter slot) on the device's
// executor thread and returns at once. The caller holds lock_executor() (exec/graph_executor.h).
// A donated pair (parameter, output) computes the output into the parameter's memory.
// A run whose program last ran in under LAZULI_WAITER_RUN_MS (config().waiter_run_ms: 10 ms; below
// it a run costs about as much as the two thread hand-offs it saves, above it the waiter would hold
// off an interrupt for the run's length) and has no collectives may run on the
// thread that waits for it instead (DeviceExecutor::run_here_if_next). caller_waits: the caller
// waits for this run at once (a value read, a partition's replay); such a run is left to the
// caller (ScheduledRun::run_here) instead of waking the executor thread, which would cost two
// thread hand-offs.
ScheduledRun run_compiled(const CompiledProgram& program, const std::vector<BufferPtr>& params,
                          std::vector<std::pair<int, int>> donations = {},
                          const BindOutputs& bind = {}, bool caller_waits = false);
// The same over the parameters' slots (what a run reads of a parameter): a replay over external
// memory makes a slot per input and no DeviceBuffer.
ScheduledRun run_compiled(const CompiledProgram& program, std::vector<SlotPtr> params,
                          std::vector<std::pair<int, int>> donations = {},
                          const BindOutputs& bind = {}, bool caller_waits = false);

// Logs a run that replayed a program without tracing, hashing or compiling (capture replay, a
// warm program): in the cut log and, under LAZULI_DEBUG, the execution report with the user's
// frames. `name`: the replayed function's or partition's name.
void note_replay(const CompiledProgram& program, size_t inputs, const std::string& name);

}  // namespace lz
