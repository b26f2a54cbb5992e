// Text and dot renderings of a pending graph. They only walk nodes: no hash lookup, no compile,
// no execution.
#pragma once
#include <string>
#include <vector>

#include "ir/node.h"

namespace lz::ir {

// One line per node in post-order: "%3 = add(%1, %2) : float32[2, 3]"; roots are marked.
std::string dump_text(const std::vector<Value>& roots);
std::string dump_dot(const std::vector<Value>& roots);

}  // namespace lz::ir
