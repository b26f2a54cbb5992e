// The collectives' frontend pieces other layers use (autograd's gradient averaging).
#pragma once
#include "ir/node.h"

namespace lz::frontend {

// v all-reduced (summed) over the default process group and divided by its size: recorded IR.
// Throws lz::Error naming `op` when no group is started.
ir::Value average_over_world(ir::Value v, const char* op);

}  // namespace lz::frontend
