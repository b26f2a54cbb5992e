// What the executor hands a backend to compile (Backend::compile, backend/backend.h) and the
// planner lowers (lower/plan.h build_plan): the post-ordered nodes of one sync, with parameter
// slots and roots. It lives with the IR so that the planner depends on no backend.
#pragma once
#include <unordered_map>
#include <vector>

#include "ir/node.h"

namespace lz::ir {

struct LoweringGraph {
  std::vector<const Node*> post_order;              // operands before users
  std::unordered_map<const Node*, int> param_slot;  // DeviceData node -> parameter index
  int num_params = 0;
  std::vector<Value> roots;                         // the program's outputs, in order
};

}  // namespace lz::ir
