// A small C++ neural-network layer (the Python package has the full lz.nn): the functional ops
// used by training loops, and a minimal module type. All composite: their gradients come from the
// primitives' rules.
#pragma once
#include <vector>

#include "lazuli/ops.h"
#include "lazuli/tensor.h"

namespace lz::nn {

// x @ weight^T (+ bias): weight [out, in], bias [out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// Mean cross entropy of logits [N, C] against class indices [N] (int64); targets equal to
// ignore_index (PyTorch's default -100) add nothing and the mean is over the others.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target);

// Linear layer with PyTorch's default initialization, U(-1/sqrt(in), 1/sqrt(in)), drawn from the
// device RNG; weight and bias require grad.
struct Linear {
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const { return linear(x, weight, bias); }
  std::vector<Tensor> parameters() const;
  Tensor weight, bias;
};

// Linear layers with relu between them: sizes {64, 128, 10} is 64 -> 128 -> relu -> 10.
struct MLP {
  explicit MLP(const std::vector<int64_t>& sizes);
  Tensor forward(const Tensor& x) const;
  std::vector<Tensor> parameters() const;
  std::vector<Linear> layers;
};

// Plain SGD step under no_grad: p -= lr * p.grad, in place (so buffers are donated at the barrier).
void sgd_step(const std::vector<Tensor>& params, double lr);
void zero_grad(const std::vector<Tensor>& params);

}  // namespace lz::nn
