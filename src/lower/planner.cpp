// The planner's pipeline (Planner::run) and the plan it assembles: one value per materialized
// output, one step per materialized node (a kernel, kernel_build.cpp; or a library call or
// fallback, here), then the roots' homes and which value each parameter is.
#include <algorithm>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "lazuli/error.h"
#include "lower/planner.h"

namespace lz::lower {

using ir::Node;
using ir::OpKind;

Plan Planner::run() {
  const auto& po = g_.post_order;
  for (size_t i = 0; i < po.size(); ++i) index_[po[i]] = static_cast<int>(i);
  users_.assign(po.size(), 0);
  user_list_.assign(po.size(), {});
  is_root_.assign(po.size(), false);
  for (const Node* n : po) {
    for (const ir::Value& v : n->operands) {
      users_[idx(v.node.get())]++;
      user_list_[idx(v.node.get())].push_back(n);
    }
  }
  for (const ir::Value& r : g_.roots) {
    users_[idx(r.node.get())]++;
    is_root_[idx(r.node.get())] = true;
  }
  decide();
  if (fuse_rows_) fuse_rows();
  fold_bias_adds();
  build_steps();
  plan_memory();
  return std::move(plan_);
}

int Planner::value_of(Out base) {
  if (auto it = in_place_.find(base.node); it != in_place_.end())
    return value_of(out_of(it->second));
  auto key = std::make_pair(base.node, base.index);
  auto it = value_.find(key);
  if (it != value_.end()) return it->second;
  if (trial_) trial_keys_.push_back(key);
  PlanValue v;
  v.dtype = base.dtype();
  v.shape = base.shape();
  v.nbytes = numel(v.shape) * static_cast<int64_t>(dtype_size(v.dtype));
  if (base.node->op == OpKind::DeviceData) {
    v.home = {ValueHome::Param, g_.param_slot.at(base.node), 0};
  } else {
    v.home = {ValueHome::Scratch, 0, 0};
  }
  int id = static_cast<int>(plan_.values.size());
  plan_.values.push_back(v);
  value_[key] = id;
  return id;
}

void Planner::read(int value, int step) {
  PlanValue& v = plan_.values[value];
  v.last_use = std::max(v.last_use, step);
}

// `n` computed by its own op, or (transposed_of set) the transpose `n` of a 2-D product
// computed as op(B)^T op(A)^T, or (addends set) the sum `n` of product `transposed_of`, a bias
// row and a residual (rule 7b).
void Planner::library_or_fallback(const Node* n, const Node* transposed_of,
                                  const Addends* addends) {
  const Node* src = transposed_of ? transposed_of : n;
  const bool transposed = transposed_of != nullptr && addends == nullptr;
  PlanStep step;
  step.kind = src->op == OpKind::MatMul ? PlanStep::MatMul
              : !library_of(src).empty()   ? PlanStep::Library
                                           : PlanStep::Fallback;
  if (step.kind == PlanStep::Fallback && !target_.host_fallbacks) {
    throw Error(target_.name + " backend: no kernel for " + label(src) +
                ", and its reference kernel cannot run on this target's memory");
  }
  step.op = src->op;
  step.attrs = src->attrs;
  step.node = idx(src);
  int sid = static_cast<int>(plan_.steps.size());
  for (const ir::Value& o : src->operands) {
    Out on = out_of(o);
    bool trans = false;
    if (auto it = folded_.find(o.node.get()); it != folded_.end()) {
      on = it->second.first;
      trans = it->second.second;
    }
    int v = value_of(buffer_base(on));
    step.inputs.push_back(v);
    step.in_shapes.push_back(on.shape());
    step.in_dtypes.push_back(on.dtype());
    step.trans.push_back(transposed ? !trans : trans);
    read(v, sid);
  }
  if (addends != nullptr) {
    step.product = src->shape;
    auto add_input = [&](Out o, Shape shape) {
      const int v = value_of(o);
      step.inputs.push_back(v);
      step.in_shapes.push_back(std::move(shape));
      step.in_dtypes.push_back(o.dtype());
      step.trans.push_back(false);
      read(v, sid);
    };
    if (addends->bias) {
      step.bias = true;
      add_input(addends->bias, {src->shape.back()});
    }
    if (addends->residual) {
      step.residual = true;
      add_input(addends->residual, src->shape);
    }
  }
  if (transposed) {
    std::swap(step.inputs[0], step.inputs[1]);
    std::swap(step.in_shapes[0], step.in_shapes[1]);
    std::swap(step.trans[0], step.trans[1]);
  }
  step.output = value_of(out_of(n));
  plan_.values[step.output].def_step = sid;
  for (int k = 1; k < n->num_outputs(); ++k) {
    step.more_outputs.push_back(value_of({n, k}));
    plan_.values[step.more_outputs.back()].def_step = sid;
  }
  // Bumped only when the reference kernel runs: always for a fallback, and for a library step
  // where the library has no implementation (an integer or float64 product, an odd geometry).
  // A collective has no other implementation than its engine's call: nothing falls back.
  if (ir::op_info(src->op).cls != ir::OpClass::Collective) {
    step.counter = "fallback::" + std::string(ir::op_name(src->op));
  }
  plan_.steps.push_back(std::move(step));
}

void Planner::build_steps() {
  for (const Node* n : g_.post_order) {
    if (!mat_[idx(n)] || n->op == OpKind::DeviceData) continue;
    if (row_out_of_.count(n)) continue;  // its row kernel stores it (rule 5b), later in order
    if (auto it = transposed_mm_.find(n); it != transposed_mm_.end()) {
      library_or_fallback(n, it->second);
    } else if (auto b = bias_mm_.find(n); b != bias_mm_.end()) {
      library_or_fallback(n, b->second.mm, &b->second);
    } else if (kind_of(n) == Kind::Opaque) {
      library_or_fallback(n);
    } else {
      kernel_for(n);
    }
  }
  // Roots: written in place into their output storage when they are a computed value seen for
  // the first time; otherwise copied at the end.
  const int nroots = static_cast<int>(g_.roots.size());
  plan_.root_value.resize(nroots);
  plan_.root_copy.assign(nroots, true);
  for (int r = 0; r < nroots; ++r) {
    const Out root = out_of(g_.roots[r]);
    const Out base = buffer_base(root);
    int v = value_of(base);
    plan_.root_value[r] = v;
    PlanValue& pv = plan_.values[v];
    // A root that only reinterprets a computed value (a reshape, a permute back) is that value's
    // buffer: the value lives in the root's storage, where its other readers read it.
    if (pv.home.kind == ValueHome::Scratch) {
      pv.home = {ValueHome::Output, r, 0};
      plan_.root_copy[r] = false;
    } else {
      pv.last_use = INT_MAX;
    }
  }
  // Which value each parameter is, for root_may_overwrite(); -2 (never overwritten) for a buffer
  // read through two nodes, which the check does not follow.
  plan_.param_value.assign(g_.num_params, -1);
  for (size_t vi = 0; vi < plan_.values.size(); ++vi) {
    const ValueHome& h = plan_.values[vi].home;
    if (h.kind != ValueHome::Param) continue;
    int& slot = plan_.param_value[h.index];
    slot = slot == -1 ? static_cast<int>(vi) : -2;
  }
}

Plan build_plan(const ir::LoweringGraph& graph, const Target& target, bool explain) {
  return Planner(graph, target, explain, config().fuse_rows).run();
}

}  // namespace lz::lower
