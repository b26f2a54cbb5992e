// Collective nodes (ir op class Collective) run through the process group they were recorded
// for (dist/process_group.h). Every backend's step for one calls this; the buffers are host
// memory, dense.
#pragma once
#include "backend/interp/kernels.h"
#include "ir/attrs.h"
#include "ir/ops.h"

namespace lz {

// Throws lz::Error naming the op when no group is started, when the group is not the size the
// program was recorded for, or when the engine fails.
void run_collective(ir::OpKind op, const ir::CollectiveAttrs& a, const interp::ConstArray& in,
                    const interp::MutArray& out);

}  // namespace lz
