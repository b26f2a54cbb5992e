// Reverse-mode autograd (API.md "Autograd"), PyTorch-style, over the lazy IR: backward() records
// the gradient computation as more IR, so forward, backward and the optimizer update of a step
// become one program at the barrier. Nothing runs until a sync or a value read.
//
// Rules (as PyTorch):
// - Only floating-point tensors require grad. A tensor requires grad when it is a leaf marked with
//   set_requires_grad, or was computed, with grad mode on, from one that does.
// - backward(t) accumulates (adds) d t / d leaf into each reachable leaf's grad(); grads are lazy
//   tensors. A non-scalar t needs an explicit gradient.
// - Backward marks the graph it went through; a second backward through it throws lz::Error
//   unless the first passed retain_graph = true.
// - An in-place op on a leaf that requires grad (or a view of one) throws while grad mode is on;
//   update parameters under NoGradGuard. In-place ops on other tensors never corrupt a saved
//   value: the old IR value is immutable, so they need no check.
#pragma once
#include "lazuli/tensor.h"

namespace lz {

// Grad mode, thread-local, default on.
bool is_grad_enabled();
void set_grad_enabled(bool enabled);
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

bool requires_grad(const Tensor& t);
// Marks a leaf (throws for a non-floating tensor, or for turning off a non-leaf's flag).
Tensor& set_requires_grad(Tensor& t, bool requires_grad = true);
// True for tensors that do not require grad and for tensors marked by set_requires_grad.
bool is_leaf(const Tensor& t);
// The accumulated gradient of a leaf (undefined when none).
Tensor grad(const Tensor& t);
void set_grad(const Tensor& t, const Tensor& grad);  // an undefined grad clears it
// A view of t's value through which gradients do not flow; in-place updates write through.
Tensor detach(const Tensor& t);
// Accumulates d root / d leaf into the grad of every leaf that root depends on.
void backward(const Tensor& root, const Tensor& gradient = Tensor(), bool retain_graph = false);

}  // namespace lz
