// lz::nn normalization (include/lazuli/nn.h): layer_norm, batch_norm, group_norm and rms_norm,
// composite in public ops (their gradients come from the primitives' rules; mean and variance are
// reductions the cpu backend fuses with their producers).
#include "ops/nn_normalization.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/shape.h"
#include "lazuli/autograd.h"
#include "lazuli/nn.h"
#include "ops/frontend.h"

namespace lz::nn {
namespace {

void check_channel_param(const Tensor& p, int64_t channels, const char* op, const char* arg) {
  if (!p.defined()) return;
  if (p.dim() != 1 || p.shape()[0] != channels) {
    throw ValueError(std::string(op) + ": " + arg + " of shape " + shape_str(p.shape()) +
                     " does not match " + std::to_string(channels) + " channels");
  }
}

// [C] -> [1, C, 1, ...] for a rank-`rank` input.
Tensor per_channel(const Tensor& p, int64_t rank) {
  IntList s(static_cast<size_t>(rank), 1);
  s[1] = p.shape()[0];
  return reshape(p, s);
}

// The last dims of x that normalized_shape names, checked against it and against weight and bias.
IntList trailing_dims(const char* op, const Tensor& x, const IntList& normalized_shape,
                      const Tensor& weight, const Tensor& bias) {
  if (!x.defined()) throw ValueError(std::string(op) + ": the input is undefined");
  const size_t k = normalized_shape.size();
  if (k == 0 || k > x.shape().size() ||
      !std::equal(normalized_shape.begin(), normalized_shape.end(),
                  x.shape().end() - static_cast<int64_t>(k))) {
    throw ValueError(frontend::desc(op, x) + ": the input's last dims do not match " +
                     "normalized_shape " + shape_str(normalized_shape));
  }
  auto check_param = [&](const Tensor& p, const char* arg) {
    if (p.defined() && p.shape() != normalized_shape) {
      throw ValueError(std::string(op) + ": " + arg + " of shape " + shape_str(p.shape()) +
                       " does not match normalized_shape " + shape_str(normalized_shape));
    }
  };
  check_param(weight, "weight");
  check_param(bias, "bias");
  IntList dims;
  for (size_t i = 0; i < k; ++i)
    dims.push_back(x.dim() - static_cast<int64_t>(k) + static_cast<int64_t>(i));
  return dims;
}

Tensor affine(Tensor y, const Tensor& weight, const Tensor& bias, int64_t rank) {
  if (weight.defined()) y = y * per_channel(weight, rank);
  if (bias.defined()) y = y + per_channel(bias, rank);
  return y;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  return internal::layer_norm_with_stats(x, normalized_shape, weight, bias, eps).out;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  if (!x.defined()) throw ValueError("batch_norm: the input is undefined");
  if (x.dim() < 2)
    throw ValueError("batch_norm: expected an input of rank >= 2, got " + shape_str(x.shape()));
  if (!is_floating(x.dtype())) throw TypeError("batch_norm: needs a floating input");
  const int64_t c = x.shape()[1], rank = x.dim();
  check_channel_param(running_mean, c, "batch_norm", "running_mean");
  check_channel_param(running_var, c, "batch_norm", "running_var");
  check_channel_param(weight, c, "batch_norm", "weight");
  check_channel_param(bias, c, "batch_norm", "bias");
  IntList dims{0};
  int64_t n = x.shape()[0];
  for (int64_t d = 2; d < rank; ++d) {
    dims.push_back(d);
    n *= x.shape()[static_cast<size_t>(d)];
  }
  Tensor mean_, var_;
  if (training) {
    if (n <= 1) {
      throw ValueError(
          "batch_norm: expected more than 1 value per channel when training, got input "
          "of shape " +
          shape_str(x.shape()));
    }
    mean_ = mean(x, dims, true);
    Tensor centered = x - mean_;
    var_ = mean(centered * centered, dims, true);
    if (running_mean.defined() || running_var.defined()) {
      NoGradGuard off;  // the running statistics are state, not part of the graph being trained
      if (running_mean.defined()) {
        Tensor rm = running_mean;
        rm.copy_(rm * (1.0 - momentum) + reshape(detach(mean_), {c}) * momentum);
      }
      if (running_var.defined()) {
        Tensor rv = running_var;
        double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
        rv.copy_(rv * (1.0 - momentum) + reshape(detach(var_), {c}) * (momentum * unbias));
      }
    }
    return affine(centered * rsqrt(var_ + eps), weight, bias, rank);
  }
  if (!running_mean.defined() || !running_var.defined()) {
    throw ValueError("batch_norm: running_mean and running_var are needed when not training");
  }
  mean_ = per_channel(running_mean, rank);
  var_ = per_channel(running_var, rank);
  return affine((x - mean_) * rsqrt(var_ + eps), weight, bias, rank);
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (!x.defined()) throw ValueError("group_norm: the input is undefined");
  if (x.dim() < 2)
    throw ValueError("group_norm: expected an input of rank >= 2, got " + shape_str(x.shape()));
  if (!is_floating(x.dtype())) throw TypeError("group_norm: needs a floating input");
  const int64_t c = x.shape()[1];
  if (num_groups <= 0 || c % num_groups != 0) {
    throw ValueError("group_norm: expected number of channels in input (" + std::to_string(c) +
                     ") to be divisible by num_groups (" + std::to_string(num_groups) + ")");
  }
  check_channel_param(weight, c, "group_norm", "weight");
  check_channel_param(bias, c, "group_norm", "bias");
  Tensor g = reshape(x, {x.shape()[0], num_groups, -1});
  Tensor m = mean(g, {2}, true);
  Tensor centered = g - m;
  Tensor v = mean(centered * centered, {2}, true);
  Tensor y = reshape(centered * rsqrt(v + eps), x.shape());
  return affine(y, weight, bias, x.dim());
}

Tensor rms_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  if (!x.defined()) throw ValueError("rms_norm: the input is undefined");
  if (!is_floating(x.dtype())) throw TypeError("rms_norm: needs a floating input");
  IntList dims = trailing_dims("rms_norm", x, normalized_shape, weight, Tensor());
  // PyTorch's default eps: the machine epsilon of the input's dtype.
  double e = eps.value_or(x.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                      : std::numeric_limits<float>::epsilon());
  Tensor y = x * rsqrt(mean(x * x, dims, true) + e);
  return weight.defined() ? y * weight : y;
}

}  // namespace lz::nn

namespace lz::internal {

LayerNormStats layer_norm_with_stats(const Tensor& x, const IntList& normalized_shape,
                                     const Tensor& weight, const Tensor& bias, double eps) {
  IntList dims = nn::trailing_dims("layer_norm", x, normalized_shape, weight, bias);
  Tensor m = mean(x, dims, true);
  Tensor centered = x - m;
  Tensor rstd = rsqrt(mean(centered * centered, dims, true) + eps);
  Tensor y = centered * rstd;
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return {y, m, rstd};
}

}  // namespace lz::internal
