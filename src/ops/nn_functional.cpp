// lz::nn (include/lazuli/nn.h): functional ops and a minimal module type, in public ops.
#include <cmath>

#include "core/shape.h"
#include "ir/origin.h"
#include "ops/frontend.h"
#include "lazuli/autograd.h"
#include "lazuli/nn.h"
#include "lazuli/runtime.h"

namespace lz::nn {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? y + frontend::autocast_bias(bias) : y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  // The shift only keeps exp in range; it cancels in the value, so no gradient flows through it.
  Tensor shifted = x - detach(amax(x, {dim}, true));
  return shifted - log(sum(exp(shifted), {dim}, true));
}

Tensor softmax(const Tensor& x, int64_t dim) {
  Tensor e = exp(x - detach(amax(x, {dim}, true)));
  return e / sum(e, {dim}, true);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index) {
  lz::ir::UserOpScope scope("cross_entropy");  // a bad target is reported as cross_entropy's
  if (!input.defined() || !target.defined()) throw ValueError("cross_entropy: got an undefined tensor");
  const Tensor logits = frontend::autocast_float32(input);
  if (logits.dim() != 2 || target.dim() != 1 || target.shape()[0] != logits.shape()[0]) {
    throw ValueError("cross_entropy: expects logits [N, C] and targets [N], got " +
                     shape_str(logits.shape()) + " and " + shape_str(target.shape()));
  }
  lz::frontend::check_index_values(target, logits.shape()[1], false, "cross_entropy", ignore_index);
  // Ignored targets read class 0 (any valid index) and weigh 0, as PyTorch's nll_loss.
  Tensor keep = ne(target, ignore_index);
  Tensor picked = gather(log_softmax(logits, 1), 1, unsqueeze(where(keep, target, 0), 1));
  Tensor w = keep.to(logits.dtype());
  return -sum(squeeze(picked, 1) * w) / sum(w);
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  Tensor d = frontend::autocast_float32(input) - frontend::autocast_float32(target);
  return mean(d * d);
}

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = (rand({out_features, in_features}) * 2.0 - 1.0) * bound;
  set_requires_grad(weight);
  if (with_bias) {
    bias = (rand({out_features}) * 2.0 - 1.0) * bound;
    set_requires_grad(bias);
  }
}

std::vector<Tensor> Linear::parameters() const {
  std::vector<Tensor> p{weight};
  if (bias.defined()) p.push_back(bias);
  return p;
}

MLP::MLP(const std::vector<int64_t>& sizes) {
  if (sizes.size() < 2) throw ValueError("MLP: needs at least an input and an output size");
  for (size_t i = 0; i + 1 < sizes.size(); ++i) layers.emplace_back(sizes[i], sizes[i + 1]);
  sync_tensors(parameters());  // materialize the initial weights once
}

Tensor MLP::forward(const Tensor& x) const {
  Tensor h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    h = layers[i].forward(h);
    if (i + 1 < layers.size()) h = relu(h);
  }
  return h;
}

std::vector<Tensor> MLP::parameters() const {
  std::vector<Tensor> out;
  for (const Linear& l : layers) {
    for (const Tensor& p : l.parameters()) out.push_back(p);
  }
  return out;
}

void sgd_step(const std::vector<Tensor>& params, double lr) {
  NoGradGuard off;
  for (Tensor p : params) {
    Tensor g = grad(p);
    if (g.defined()) p.sub_(g, lr);
  }
}

void zero_grad(const std::vector<Tensor>& params) {
  for (const Tensor& p : params) set_grad(p, Tensor());
}

}  // namespace lz::nn
