// A small C++ neural-network layer (the Python package has the full lz.nn): the functional ops
// used by training loops, and a minimal module type. All composite: their gradients come from the
// primitives' rules.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lazuli/ops.h"
#include "lazuli/tensor.h"

namespace lz::nn {

// The functional ops lz.nn.functional binds (one implementation: Python forwards here). Each is
// composite in public ops, so its gradient comes from the primitives' rules. Errors name the op,
// the shapes and the dtypes.

// x @ weight^T (+ bias): weight [out, in], bias [out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// exp(x - max) / sum along dim; the max is detached (it cancels in the value).
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// PyTorch's gelu: approximate "none" is lz::gelu (erf); "tanh" is the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x, const std::string& approximate);
// Zeroes elements with probability p (a mask from the device RNG, so each step draws a new one
// without changing the graph) and scales the rest by 1 / (1 - p); x itself when !training or
// p == 0. p must be in [0, 1].
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// Normalizes over the last dims (normalized_shape), the variance biased, then weight and bias
// (of normalized_shape) when given.
Tensor layer_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// The rows of weight [num_embeddings, dim] at integer indices [...] -> [..., dim]. A bad index
// raises naming embedding (at the line for indices on the host, else when the program runs).
Tensor embedding(const Tensor& indices, const Tensor& weight);

// ---- losses (src/ops/nn_loss.cpp), PyTorch's semantics ----
// reduction: "mean", "sum" or "none". Inside an autocast region 16-bit inputs compute in float32.
// Class-index losses take input (N, C, d...) or unbatched (C,), target (N, d...) or () of int64
// (or int32) class indices; targets equal to ignore_index add nothing, and "mean" is the mean
// weighted by weight[target] over the targets not ignored. weight: one per class, or undefined.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                int64_t ignore_index = -100, const std::string& reduction = "mean");
// log_softmax over dim 1, then nll_loss. A target of the input's shape holds class probabilities
// instead (floating point; "mean" is over the samples). label_smoothing in [0, 1] mixes the
// target with the uniform distribution, as PyTorch.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0.0);
// The mean over class indices without a weight (the common training loss).
Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

// ---- convolution (PyTorch's names and arguments; inputs [N, C, *spatial] or unbatched
// [C, *spatial]; a single value of stride/padding/dilation applies to every spatial dim) ----
// A convolution's padding: sizes (one value for every spatial dim, or one per dim), or a mode,
// "valid" (none) or "same" (output size = input size; stride 1 only), as PyTorch's argument.
struct ConvPadding {
  ConvPadding(std::initializer_list<int64_t> s) : sizes(s) {}
  ConvPadding(IntList s) : sizes(std::move(s)) {}
  ConvPadding(const char* m) : mode(m) {}
  ConvPadding(std::string m) : mode(std::move(m)) {}
  IntList sizes;
  std::string mode;  // empty: sizes apply
};
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const IntList& stride = {1}, const ConvPadding& padding = {0},
              const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const IntList& stride = {1}, const ConvPadding& padding = {0},
              const IntList& dilation = {1}, int64_t groups = 1);
// weight [C_in, C_out / groups, *kernel].
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& output_padding = {0}, int64_t groups = 1,
                        const IntList& dilation = {1});

// The gradients of a convolution (as torch.nn.grad.conv2d_input / conv2d_weight): the input
// gradient for an input of `input_shape`, the weight gradient for a weight of `weight_shape`.
// One or two spatial dims, given by the shapes.
Tensor conv_input_grad(const IntList& input_shape, const Tensor& weight, const Tensor& grad_output,
                       const IntList& stride = {1}, const IntList& padding = {0},
                       const IntList& dilation = {1}, int64_t groups = 1);
Tensor conv_weight_grad(const Tensor& input, const IntList& weight_shape, const Tensor& grad_output,
                        const IntList& stride = {1}, const IntList& padding = {0},
                        const IntList& dilation = {1}, int64_t groups = 1);

// ---- pooling (an empty stride means the kernel size) ----
// (values, indices): indices are flat offsets within each input plane, as PyTorch's.
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, const IntList& kernel_size,
                                                  const IntList& stride = {},
                                                  const IntList& padding = {0},
                                                  const IntList& dilation = {1},
                                                  bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntList& kernel_size,
                                                  const IntList& stride = {},
                                                  const IntList& padding = {0},
                                                  const IntList& dilation = {1},
                                                  bool ceil_mode = false);
Tensor max_pool1d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1},
                  bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1},
                  bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false,
                  bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// The input gradient of avg_pool1d/2d (the spatial dims are kernel_size's) for an input of
// `input_shape`, as ATen's avg_pool2d_backward.
Tensor avg_pool_input_grad(const Tensor& grad_output, const IntList& input_shape,
                           const IntList& kernel_size, const IntList& stride = {},
                           const IntList& padding = {0}, bool ceil_mode = false,
                           bool count_include_pad = true,
                           std::optional<int64_t> divisor_override = std::nullopt);
Tensor adaptive_avg_pool1d(const Tensor& x, const IntList& output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, const IntList& output_size);

// ---- normalization ----
// Training: normalizes with the batch's statistics over every dim but 1 and, when given, updates
// running_mean / running_var in place (momentum; the variance unbiased), as PyTorch. Otherwise
// normalizes with the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// eps defaults to the machine epsilon of x's dtype, as PyTorch.
Tensor rms_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

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

// ---- composites (src/ops/composite_nn.cpp), as torch.nn.functional ------------------------------
// silu(x) = x * sigmoid(x); hardsigmoid(x) = clamp(x / 6 + 1/2, 0, 1); hardswish(x) =
// x * relu6(x + 3) / 6. Gradients at the kinks -3 and 3 as PyTorch's (those of the outer pieces).
// Floating-point inputs only.
Tensor silu(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
// Zeroes whole channels (dim 1) of [N, C, ...] with probability p (mask from the device RNG) and
// scales the rest by 1 / (1 - p); the identity when !training.
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);
// int64 indices [...] to [..., num_classes] int64 rows of 0/1. num_classes = -1 reads the largest
// index (a value read, as in PyTorch). Out-of-range indices raise when the program runs (at the
// line for indices still on the host), naming one_hot.
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);
// PyTorch's F.pad: pad = (left, right) for the last dim, then the dim before, ...; negative
// values crop. mode "constant" (value, default 0) pads any dims; "reflect", "replicate" and
// "circular" pad the last 1, 2 or 3 dims of an input with one or two more dims.
Tensor pad(const Tensor& x, const IntList& pad, const std::string& mode = "constant",
           std::optional<Scalar> value = std::nullopt);
// PyTorch's F.interpolate over the dims after [N, C]: mode "nearest", "nearest-exact" (3-5 dims),
// "linear" (3-D), "bilinear" (4-D), "trilinear" (5-D); one of size and scale_factor (one value
// for every spatial dim, or one each); source indices and weights computed as PyTorch's CPU
// kernels compute them.
Tensor interpolate(const Tensor& x, const std::optional<IntList>& size,
                   const std::optional<std::vector<double>>& scale_factor = std::nullopt,
                   const std::string& mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt,
                   std::optional<bool> recompute_scale_factor = std::nullopt);

// ---- attention (src/ops/attention.cpp), as torch.nn.functional ---------------------------------
// softmax(q @ k^T * scale + mask) @ v over q [..., L, E], k [..., S, E], v [..., S, Ev] (batch dims
// broadcast) -> [..., L, Ev]. scale defaults to 1/sqrt(E). attn_mask broadcasts to [..., L, S]:
// bool (true takes part) or a float bias of q's dtype. is_causal lets query i see keys 0..i (top
// left aligned, as PyTorch), computed from two iotas inside the fused kernel, never stored; it
// excludes attn_mask. A row with every key masked gives 0 (and no gradient), as PyTorch's kernels.
// dropout_p > 0 drops attention weights with a mask from the device RNG, scaling the rest by
// 1/(1-p) (no training flag, as PyTorch: pass 0 in eval). enable_gqa: k and v may have fewer heads
// (dim -3) than q, a divisor of q's; each serves q's heads in consecutive groups. Written in public
// ops: gradients come from the primitives' rules.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false);
// scaled_dot_product_attention without dropout, with the row-wise logsumexp of its scores
// ([..., L], q's dtype; 0 on a row with every key masked), as ATen's flash attention kernels
// return it for their backward. is_causal and attn_mask may both be given: both apply, as there.
std::pair<Tensor, Tensor> scaled_dot_product_attention_with_logsumexp(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = Tensor(),
    bool is_causal = false, std::optional<double> scale = std::nullopt, bool enable_gqa = false);
// The scores the attention's softmax reads, [..., L, S]: q @ k^T * scale, -inf where is_causal
// hides a key or a bool attn_mask is false, plus a float attn_mask. Arguments and checks as
// scaled_dot_product_attention_with_logsumexp's.
Tensor scaled_dot_product_attention_scores(const Tensor& q, const Tensor& k,
                                           const Tensor& attn_mask = Tensor(),
                                           bool is_causal = false,
                                           std::optional<double> scale = std::nullopt,
                                           bool enable_gqa = false);

}  // namespace lz::nn
