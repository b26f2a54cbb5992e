// One vector-Jacobian product rule per IR primitive. Which rule a primitive has is its op table
// row's grad column (ir/op_table.def); grad_rule() is generated from it, so a row without a
// decision does not compile.
#pragma once
#include <vector>

#include "ir/node.h"

namespace lz::autograd {

enum class GradKind {
  Rule,               // interior node: fn gives operand gradients
  Leaf,               // gradients stop here and accumulate into a tensor's .grad
  NotDifferentiable,  // never requires grad (non-float output, or a stop); reaching it is a bug
};

// Operand gradients of `node` (output `out`) given the output gradient `g`, one per operand,
// each of that operand's shape and dtype; an empty Value means "no gradient" (zero).
using VjpFn = std::vector<ir::Value> (*)(const ir::Node& node, const ir::Value& out,
                                         const ir::Value& g);
// A multi-output node's rule: `g` has one gradient per output, an empty Value where none reached.
using MultiVjpFn = std::vector<ir::Value> (*)(const ir::NodePtr& node,
                                              const std::vector<ir::Value>& g);

struct GradRule {
  GradKind kind;
  VjpFn fn = nullptr;
  MultiVjpFn multi = nullptr;  // set instead of fn for multi-output ops
};

GradRule grad_rule(ir::OpKind op);

}  // namespace lz::autograd
