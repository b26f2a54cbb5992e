// lz::nn (include/lazuli/nn.h): the functional ops (lz.nn.functional binds these) and a minimal
// module type, in public ops. Losses: nn_loss.cpp; normalization: nn_normalization.cpp.
#include <cmath>
#include <cstdio>

#include "core/shape.h"
#include "ir/origin.h"
#include "lazuli/autograd.h"
#include "lazuli/nn.h"
#include "lazuli/runtime.h"
#include "ops/frontend.h"
#include "ops/nn_checks.h"

namespace lz::nn {
using detail::check_defined;
using detail::number_str;
using frontend::desc;

namespace detail {

void check_defined(const char* op, const Tensor& t, const char* what) {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + what + " is an undefined tensor");
}

std::string number_str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace detail

namespace {

// The shift only keeps exp in range; it cancels in the value, so no gradient flows through it.
Tensor shifted(const char* op, const Tensor& x, int64_t dim) {
  check_defined(op, x, "the input");
  wrap_dim(dim, x.dim(), op);  // a bad dim names this op, not the amax inside
  return x - detach(amax(x, {dim}, true));
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? y + frontend::autocast_bias(bias) : y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  Tensor s = shifted("log_softmax", x, dim);
  return s - log(sum(exp(s), {dim}, true));
}

Tensor softmax(const Tensor& x, int64_t dim) {
  Tensor e = exp(shifted("softmax", x, dim));
  return e / sum(e, {dim}, true);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return lz::gelu(x);
  if (approximate != "tanh") {
    throw ValueError("gelu: approximate must be 'none' or 'tanh', got '" + approximate + "'");
  }
  check_defined("gelu", x, "the input");
  const double sqrt_2_over_pi = std::sqrt(2.0 / M_PI);
  Tensor inner = (x + x * x * x * 0.044715) * sqrt_2_over_pi;
  return x * (tanh(inner) + 1.0) * 0.5;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  check_defined("dropout", x, "the input");
  if (!(p >= 0.0 && p <= 1.0)) {
    throw ValueError(desc("dropout", x) + ": p must be in [0, 1], got " + number_str(p));
  }
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  Tensor keep = ge(rand(x.shape()), p).to(x.dtype());
  return x * keep * (1.0 / (1.0 - p));
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  ir::UserOpScope scope("embedding");  // a bad index is reported as embedding's
  check_defined("embedding", indices, "indices");
  check_defined("embedding", weight, "weight");
  if (indices.dtype() != DType::Int64 && indices.dtype() != DType::Int32) {
    throw TypeError("embedding: indices must be an int64 or int32 tensor, got " +
                    std::string(dtype_name(indices.dtype())) + shape_str(indices.shape()));
  }
  if (weight.dim() != 2) {
    throw ValueError("embedding: weight must be 2-D [num_embeddings, embedding_dim], got " +
                     std::string(dtype_name(weight.dtype())) + shape_str(weight.shape()));
  }
  frontend::check_index_values(indices, weight.shape()[0], /*allow_negative=*/false, "embedding");
  IntList out_shape = indices.shape();
  out_shape.push_back(weight.shape()[1]);
  return reshape(index_select(weight, 0, reshape(indices, {-1})), out_shape);
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
