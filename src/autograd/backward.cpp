// backward(): an iterative reverse topological walk over the nodes that require grad, reachable
// from the root. Each interior node's rule (grad_rules.cpp) records its operands' gradients as IR;
// contributions to one node are summed; at leaves they are added to the tensor's .grad. Runs with
// grad mode off, so the recorded gradients do not themselves require grad (no create_graph).
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/grad_rules.h"
#include "core/grad_mode.h"
#include "lazuli/autograd.h"
#include "lazuli/ops.h"
#include "ops/distributed.h"
#include "ops/frontend.h"
#include "tensor/leaf_registry.h"

namespace lz {
namespace {

using ir::NodePtr;
using ir::Value;

// Post-order over requires-grad nodes (operands first); leaves are not expanded.
std::vector<NodePtr> requires_grad_post_order(const NodePtr& root) {
  std::vector<NodePtr> order;
  std::unordered_map<const ir::Node*, bool> seen;
  struct Frame {
    NodePtr node;
    size_t next;
  };
  std::vector<Frame> stack{{root, 0}};
  seen[root.get()] = true;
  while (!stack.empty()) {
    Frame& f = stack.back();
    const ir::Node& n = *f.node;
    bool leaf = autograd::grad_rule(n.op).kind == autograd::GradKind::Leaf;
    if (!leaf && f.next < n.operands.size()) {
      const Value& v = n.operands[f.next++];
      const NodePtr& c = v.node;
      if (v.requires_grad() && !seen[c.get()]) {
        seen[c.get()] = true;
        stack.push_back({c, 0});
      }
      continue;
    }
    order.push_back(f.node);
    stack.pop_back();
  }
  return order;
}

// A contribution to `leaf`'s gradient, of the leaf's dtype and shape.
Value leaf_contribution(const internal::TensorImpl& leaf, Value g) {
  g = frontend::cast(std::move(g), leaf.dtype());
  if (g.shape() != leaf.shape()) g = frontend::broadcast_to(g, leaf.shape());
  return g;
}

void accumulate_grad(const std::shared_ptr<internal::TensorImpl>& leaf, Value g) {
  std::shared_ptr<internal::TensorImpl> cur = leaf->grad();
  if (!cur) {
    leaf->set_grad(frontend::wrap(g).impl());
    return;
  }
  // In place on the existing grad tensor, so its old buffer can be donated at the barrier.
  cur->set_value(frontend::node(ir::OpKind::Add, {cur->value(), g}));
}

// Data parallelism: the contributions of one backward() to the leaves whose gradients are averaged
// over the ranks, summed per leaf, in the order the walk reached each leaf first (the last layer's
// first). Averaging the sum equals summing the averages, and an accumulated gradient is then the
// same on every rank.
class AveragedGrads {
 public:
  void add(const std::shared_ptr<internal::TensorImpl>& leaf, Value g) {
    auto [it, fresh] = at_.try_emplace(leaf.get(), items_.size());
    if (fresh) {
      items_.push_back({leaf, std::move(g)});
    } else {
      Value& sum = items_[it->second].g;
      sum = frontend::node(ir::OpKind::Add, {sum, std::move(g)});
    }
  }

  // One all_reduce per bucket: consecutive gradients of one dtype until their bytes reach the
  // leaves' cap (PyTorch's DDP closes its buckets so), concatenated flat; a bucket of one is
  // reduced as it is. Each leaf then accumulates its slice of the average (a view: the slice
  // fuses into the accumulation). Fewer, larger all_reduces: the engine's per-call cost is paid
  // per bucket (bench/RESULTS.md 20.4).
  void reduce() {
    for (size_t i = 0; i < items_.size();) {
      const int64_t cap = items_[i].leaf->grad_bucket_bytes();
      const DType dt = items_[i].g.dtype();
      size_t j = i;
      int64_t bytes = 0;
      do {
        bytes += numel(items_[j].g.shape()) * static_cast<int64_t>(dtype_size(dt));
        ++j;
      } while (j < items_.size() && bytes < cap && items_[j].g.dtype() == dt &&
               items_[j].leaf->grad_bucket_bytes() == cap);
      if (j - i == 1) {
        accumulate_grad(items_[i].leaf, frontend::average_over_world(items_[i].g, "backward"));
      } else {
        std::vector<Tensor> flat;
        for (size_t k = i; k < j; ++k) flat.push_back(reshape(frontend::wrap(items_[k].g), {-1}));
        const Tensor avg = frontend::wrap(
            frontend::average_over_world(frontend::value_of(cat(flat, 0), "backward"), "backward"));
        int64_t at = 0;
        for (size_t k = i; k < j; ++k) {
          const Shape& s = items_[k].g.shape();
          const int64_t n = numel(s);
          const Tensor part = reshape(avg.slice(0, at, at + n), IntList(s.begin(), s.end()));
          accumulate_grad(items_[k].leaf, frontend::value_of(part, "backward"));
          at += n;
        }
      }
      i = j;
    }
  }

 private:
  struct Item {
    std::shared_ptr<internal::TensorImpl> leaf;
    Value g;
  };
  std::vector<Item> items_;
  std::unordered_map<const internal::TensorImpl*, size_t> at_;
};

}  // namespace

bool requires_grad(const Tensor& t) {
  if (!t.defined()) throw ValueError("requires_grad: the tensor is undefined");
  if (t.impl()->requires_grad_flag()) return true;
  EnableGradGuard on;  // the question is about the tensor, not about the current mode
  return t.impl()->autograd_value().requires_grad();
}

Tensor& set_requires_grad(Tensor& t, bool on) {
  if (!t.defined()) throw ValueError("requires_grad_: the tensor is undefined");
  if (on && !is_floating(t.dtype())) {
    throw Error("only tensors of floating point dtype can require gradients (got " +
                std::string(dtype_name(t.dtype())) + ")");
  }
  if (!is_leaf(t)) {
    if (on) return t;  // already requires grad through its graph
    throw Error("you can only change requires_grad flags of leaf tensors; use detach() to get a "
                "tensor that does not require grad");
  }
  t.impl()->set_requires_grad_flag(on);
  return t;
}

bool is_leaf(const Tensor& t) {
  if (!t.defined()) throw ValueError("is_leaf: the tensor is undefined");
  return t.impl()->requires_grad_flag() || !requires_grad(t);
}

Tensor grad(const Tensor& t) {
  if (!t.defined()) throw ValueError("grad: the tensor is undefined");
  return Tensor(t.impl()->grad());
}

void set_grad(const Tensor& t, const Tensor& g) {
  if (!t.defined()) throw ValueError("grad: the tensor is undefined");
  if (g.defined() && g.shape() != t.shape()) {
    throw ValueError("assigned grad has shape " + shape_str(g.shape()) + ", expected " +
                     shape_str(t.shape()));
  }
  t.impl()->set_grad(g.impl());
}

Tensor detach(const Tensor& t) {
  if (!t.defined()) throw ValueError("detach: the tensor is undefined");
  Value in = frontend::value_of(t, "detach");
  Value out = frontend::node(ir::OpKind::StopGradient, {in});
  return Tensor(internal::TensorImpl::make_view(t.impl(), {ir::OpKind::StopGradient, {}, t.shape()},
                                                out.dtype(), out.shape()));
}

void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) {
  if (!root.defined()) throw ValueError("backward: the tensor is undefined");
  Value rv;
  {
    EnableGradGuard on;
    rv = root.impl()->autograd_value();
  }
  if (!rv.requires_grad()) {
    throw Error("backward: the tensor does not require grad (no input of its computation has "
                "requires_grad=True, or it was computed under no_grad)");
  }
  NoGradGuard off;
  Value g0;
  if (!gradient.defined()) {
    if (root.numel() != 1) {
      throw Error("backward: grad can be implicitly created only for scalar outputs; pass a "
                  "gradient for a tensor of shape " + shape_str(root.shape()));
    }
    g0 = frontend::broadcast_to({ir::make_constant(1, rv.dtype()), 0}, rv.shape());
  } else {
    if (gradient.shape() != root.shape()) {
      throw ValueError("backward: the gradient has shape " + shape_str(gradient.shape()) +
                       ", the tensor " + shape_str(root.shape()));
    }
    g0 = frontend::cast(frontend::value_of(gradient, "backward"), rv.dtype());
  }

  std::vector<NodePtr> order = requires_grad_post_order(rv.node);
  for (const NodePtr& n : order) {
    if (n->grad_consumed) {
      throw Error("backward: trying to backward through the graph a second time; pass "
                  "retain_graph=True to the first backward if you need to");
    }
  }
  // The gradient reaching each output of each node (an empty Value: none reached it).
  std::unordered_map<const ir::Node*, std::vector<Value>> grads;
  auto add_grad = [&grads](const Value& to, Value g) {
    auto [it, fresh] = grads.try_emplace(to.node.get());
    if (fresh) it->second.resize(static_cast<size_t>(to.node->num_outputs()));
    Value& slot = it->second[static_cast<size_t>(to.index)];
    slot = slot ? frontend::node(ir::OpKind::Add, {slot, std::move(g)}) : std::move(g);
  };
  add_grad(rv, g0);
  AveragedGrads averaged;
  for (size_t i = order.size(); i-- > 0;) {
    const NodePtr& n = order[i];
    auto it = grads.find(n.get());
    if (it == grads.end()) continue;
    std::vector<Value> g = std::move(it->second);
    grads.erase(it);
    autograd::GradRule rule = autograd::grad_rule(n->op);
    if (rule.kind == autograd::GradKind::Leaf) {
      if (auto t = autograd::leaf_tensor(n.get())) {
        Value c = leaf_contribution(*t, g[0]);
        if (t->averages_grad()) {
          averaged.add(t, std::move(c));
        } else {
          accumulate_grad(t, std::move(c));
        }
      }
      continue;
    }
    if (rule.kind == autograd::GradKind::NotDifferentiable) {
      throw Error("internal: gradient reached " + std::string(ir::op_name(n->op)) +
                  ", which is not differentiable");
    }
    ir::InheritOriginScope inherit(n->origin);  // a gradient's index ops report the forward op
    std::vector<Value> og = rule.multi ? rule.multi(n, g) : rule.fn(*n, Value{n, 0}, g[0]);
    for (size_t j = 0; j < n->operands.size(); ++j) {
      const Value& operand = n->operands[j];
      if (!operand.requires_grad() || !og[j]) continue;
      add_grad(operand, frontend::cast(og[j], operand.dtype()));
    }
    if (!retain_graph) n->grad_consumed = true;
  }
  averaged.reduce();
  if (!retain_graph) root.impl()->release_tape();
}

}  // namespace lz
