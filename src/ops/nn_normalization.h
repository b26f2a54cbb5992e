// Layer norm with the statistics ATen's native_layer_norm returns beside its output (the ATen
// table lowers that op with it; lz::nn::layer_norm is its output alone, the same graph).
#pragma once
#include "lazuli/tensor.h"

namespace lz::internal {

struct LayerNormStats {
  Tensor out;
  Tensor mean;  // over the normalized dims, kept as dims of size 1
  Tensor rstd;  // 1 / sqrt(biased variance + eps), the same shape as mean
};
// As lz::nn::layer_norm, with its argument checks.
LayerNormStats layer_norm_with_stats(const Tensor& x, const IntList& normalized_shape,
                                     const Tensor& weight, const Tensor& bias, double eps);

}  // namespace lz::internal
