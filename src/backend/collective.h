// Collective nodes (ir op class Collective) run through the process group they were recorded
// for (dist/process_group.h). Every backend's step for one calls this; the buffers are host
// memory, dense.
#pragma once
#include <functional>

#include "backend/interp/kernels.h"
#include "ir/attrs.h"
#include "ir/ops.h"

namespace lz {

// Throws lz::Error naming the op when no group is started, when the group is not the size the
// program was recorded for, or when the engine fails.
void run_collective(ir::OpKind op, const ir::CollectiveAttrs& a, const interp::ConstArray& in,
                    const interp::MutArray& out);

// The same in two halves, so a backend can overlap the engine's work with its later steps: this
// call checks the group and copies the input into the output (all_reduce and broadcast work in
// place on it), then returns the engine's call, which touches only the output's buffer and may
// run on another thread (one at a time: the group's calls, in program order). Throws what
// run_collective throws. Empty for the collectives that read their input while they run
// (all_gather, reduce_scatter): run_collective them where they stand.
std::function<void()> start_collective(ir::OpKind op, const ir::CollectiveAttrs& a,
                                       const interp::ConstArray& in, const interp::MutArray& out);

}  // namespace lz
