// Table entries: convolution, pooling, losses, batch norm, embedding's backward, scaled dot-product
// attention (aten/table.h).
//
// Convolution and pooling go through lz::nn (one or two spatial dims). Group norm reaches Lazuli
// through its decomposition into means and variances. The losses, batch norm and their backward
// ops are what eager's autograd dispatches (the lazy device); a graph decomposed with the core
// decompositions has their formulas instead.
//
// On the CPU, F.scaled_dot_product_attention reaches aot_autograd's graphs as
// _scaled_dot_product_flash_attention_for_cpu, returning the output and the row-wise logsumexp of
// the scores that its backward reads. PyTorch's decomposition returns the attention weights in the
// logsumexp's place (it is meant for export), so the table keeps the op whole (kept_whole()).
#include <cmath>
#include <sstream>

#include "aten/entries.h"
#include "lazuli/nn.h"

namespace lz::aten {
namespace {

Tensor optional_tensor(const Arg& a) { return a.is_none() ? Tensor() : a.tensor(); }

// An int[] argument with one value per spatial dim (a single value stands for all).
IntList per_dim(const Arg& a, size_t n) {
  IntList v = a.ints(n);
  if (v.size() == 1) v.assign(n, v[0]);
  return v;
}

// ---- convolution --------------------------------------------------------------------------------

std::optional<std::string> conv_when_weight(const Arg& weight) {
  int64_t d = weight.tensor_dim();
  if (d != 3 && d != 4) return std::to_string(d - 2) + "-D convolution";
  return std::nullopt;
}

using ConvFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const IntList&,
                          const nn::ConvPadding&, const IntList&, int64_t);

ConvFn conv_for(const Tensor& weight) { return weight.dim() == 3 ? nn::conv1d : nn::conv2d; }

// convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
Arg convolution_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const Tensor& w = a[1].tensor();
  Tensor bias = optional_tensor(a[2]);
  IntList stride = a[3].ints(), padding = a[4].ints(), dilation = a[5].ints();
  int64_t groups = a[8].to_int();
  if (a[6].to_bool()) {
    auto f = w.dim() == 3 ? nn::conv_transpose1d : nn::conv_transpose2d;
    return f(x, w, bias, stride, padding, a[7].ints(), groups, dilation);
  }
  return conv_for(w)(x, w, bias, stride, padding, dilation, groups);
}

// convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
// transposed, output_padding, groups, output_mask)
Arg convolution_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor& x = a[1].tensor();
  const Tensor& w = a[2].tensor();
  const size_t spatial = static_cast<size_t>(w.dim()) - 2;
  IntList stride = per_dim(a[4], spatial), padding = per_dim(a[5], spatial),
          dilation = per_dim(a[6], spatial);
  int64_t groups = a[9].to_int();
  const std::vector<Arg>& mask = a[10].list();
  Tensor grad_input, grad_weight, grad_bias;
  if (a[7].to_bool()) {  // y = conv_transpose(x, w) is the input gradient of conv(y_shape, w)
    // An output padding of at least the stride gives conv(y_shape, w) output_padding // stride
    // more positions per dim than x has: x's gradient drops them, and as conv's output gradient
    // x is extended by zeros to them.
    IntList output_padding = per_dim(a[8], spatial), grow(spatial);
    bool grows = false;
    for (size_t i = 0; i < spatial; ++i) {
      grow[i] = output_padding[i] / stride[i];
      grows |= grow[i] != 0;
    }
    if (mask[0].to_bool()) {
      grad_input = conv_for(w)(grad, w, Tensor(), stride, padding, dilation, groups);
      for (size_t i = 0; grows && i < spatial; ++i) {
        grad_input = slice(grad_input, static_cast<int64_t>(i) + 2, 0, x.shape()[i + 2]);
      }
    }
    if (mask[1].to_bool()) {
      Tensor dy = x;
      if (grows) {
        IntList pads;  // (left, right) of the last dim first
        for (size_t i = spatial; i-- > 0;) pads.insert(pads.end(), {0, grow[i]});
        dy = nn::pad(x, pads);
      }
      grad_weight = nn::conv_weight_grad(grad, w.shape(), dy, stride, padding, dilation, groups);
    }
  } else {
    if (mask[0].to_bool()) {
      grad_input = nn::conv_input_grad(x.shape(), w, grad, stride, padding, dilation, groups);
    }
    if (mask[1].to_bool()) {
      grad_weight = nn::conv_weight_grad(x, w.shape(), grad, stride, padding, dilation, groups);
    }
  }
  if (mask[2].to_bool()) {
    IntList dims = {0};
    for (int64_t d = 2; d < grad.dim(); ++d) dims.push_back(d);
    grad_bias = sum(grad, dims);
  }
  return std::vector<Arg>{grad_input, grad_weight, grad_bias};
}

// ---- pooling ------------------------------------------------------------------------------------

std::optional<std::string> pool_when_kernel(const Arg& kernel_size) {
  if (kernel_size.is_list() && kernel_size.list().size() != 1 && kernel_size.list().size() != 2) {
    return std::to_string(kernel_size.list().size()) + "-D pooling";
  }
  return std::nullopt;
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
Arg max_pool2d_with_indices_entry(const Args& a, Call&) {
  auto [values, indices] = nn::max_pool2d_with_indices(a[0].tensor(), a[1].ints(2), a[2].ints(2),
                                                       a[3].ints(2), a[4].ints(2), a[5].to_bool());
  return std::vector<Arg>{values, indices};
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
// ceil_mode, indices): each plane's gradient added at its maxima's flat offsets.
Arg max_pool2d_with_indices_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Shape& shape = a[1].tensor().shape();
  int64_t planes = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) planes *= shape[i];
  const int64_t in_plane = shape[shape.size() - 2] * shape[shape.size() - 1];
  const int64_t out_plane = grad.shape()[grad.dim() - 2] * grad.shape()[grad.dim() - 1];
  Tensor g = zeros({planes, in_plane}, grad.dtype());
  g = scatter_add(g, 1, reshape(a[7].tensor(), {planes, out_plane}),
                  reshape(grad, {planes, out_plane}));
  return reshape(g, shape);
}

// The int64 indices are a tensor argument too: the gradient must be floating.
std::optional<std::string> max_pool_backward_when(const Args& a) {
  DType dt = dtype_of(a[0]);
  if (is_floating(dt)) return std::nullopt;
  return "gradient of dtype " + std::string(dtype_name(dt));
}

std::optional<int64_t> optional_int(const Arg& a) {
  return a.is_none() ? std::nullopt : std::optional<int64_t>(a.to_int());
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
Arg avg_pool2d_entry(const Args& a, Call&) {
  return nn::avg_pool2d(a[0].tensor(), a[1].ints(2), a[2].ints(2), a[3].ints(2), a[4].to_bool(),
                        a[5].to_bool(), optional_int(a[6]));
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override)
Arg avg_pool2d_backward_entry(const Args& a, Call&) {
  return nn::avg_pool_input_grad(a[0].tensor(), a[1].tensor().shape(), a[2].ints(2), a[3].ints(2),
                                 a[4].ints(2), a[5].to_bool(), a[6].to_bool(), optional_int(a[7]));
}

// adaptive average pooling: each output cell averages input positions
// [floor(i * in / out), ceil((i + 1) * in / out)) of each spatial dim.
std::optional<std::string> adaptive_pool_input_refused(const Arg& input) {
  int64_t d = input.tensor_dim();
  if (d != 3 && d != 4) return std::to_string(d) + "-D input";
  return std::nullopt;
}

std::optional<std::string> adaptive_pool_when(const Args& a) {
  if (auto r = adaptive_pool_input_refused(a[0])) return r;
  for (int64_t s : a[1].ints(2)) {
    if (s <= 0) return "an output size of " + std::to_string(s);
  }
  return std::nullopt;
}

// The forward's averaging along one dim, as an [out, in] matrix.
Tensor adaptive_matrix(int64_t in, int64_t out, DType dtype) {
  std::vector<double> m(static_cast<size_t>(in * out), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    int64_t start = (i * in) / out, end = ((i + 1) * in + out - 1) / out;
    for (int64_t j = start; j < end; ++j) {
      m[static_cast<size_t>(i * in + j)] = 1.0 / static_cast<double>(end - start);
    }
  }
  return tensor<double>(m, {out, in}).to(dtype);
}

// _adaptive_avg_pool2d_backward(grad_output, self): each output cell's gradient spread evenly
// over its window.
Arg adaptive_avg_pool2d_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Shape& in = a[1].tensor().shape();
  const int64_t r = static_cast<int64_t>(in.size());
  const int64_t h = in[r - 2], w = in[r - 1];
  const int64_t oh = grad.shape()[r - 2], ow = grad.shape()[r - 1];
  if (oh == 1 && ow == 1) return broadcast_to(div(div(grad, h), w), in);
  if (h % oh == 0 && w % ow == 0) {
    IntList k = {h / oh, w / ow};
    return nn::avg_pool_input_grad(grad, in, k, k, {0, 0}, false, true);
  }
  Tensor g = grad;  // the forward's averaging matrices, transposed, one spatial dim at a time
  for (int64_t d = r - 2; d < r; ++d) {
    Tensor m = adaptive_matrix(in[d], grad.shape()[d], grad.dtype());
    g = transpose(matmul(transpose(g, d, -1), m), d, -1);
  }
  return g;
}

// ---- losses -------------------------------------------------------------------------------------

// ATen's reduction argument: 0 none, 1 mean, 2 sum.
std::optional<std::string> reduction_refused(const Arg& reduction) {
  int64_t r = reduction.to_int();
  if (r < 0 || r > 2) return "reduction " + std::to_string(r);
  return std::nullopt;
}

const char* reduction_name(const Arg& reduction) {
  static const char* names[] = {"none", "mean", "sum"};
  return names[reduction.to_int()];
}

// nll_loss_forward(self, target, weight, reduction, ignore_index) and nll_loss_backward(
// grad_output, self, target, weight, reduction, ignore_index, total_weight): self [N, C] or [C],
// int64 class indices [N] or [].
std::optional<std::string> nll_loss_when(const Arg& self, const Arg& target, const Arg& weight,
                                         const Arg& reduction) {
  DType x = dtype_of(self);
  if (!is_floating(x)) return "input of dtype " + std::string(dtype_name(x));
  if (self.tensor_dim() != 1 && self.tensor_dim() != 2) {
    return std::to_string(self.tensor_dim()) + "-D input";
  }
  if (DType t = dtype_of(target); t != DType::Int64) {
    return "target of dtype " + std::string(dtype_name(t));
  }
  if (!weight.is_none() && dtype_of(weight) != x) {
    return "a " + std::string(dtype_name(dtype_of(weight))) + " weight";
  }
  return reduction_refused(reduction);
}

// weight[target] where the target is not ignored, else 0 (1 for each target without a weight).
Tensor target_weights(const Tensor& target, const Tensor& keep, const Arg& weight, DType dtype) {
  if (weight.is_none()) return keep.to(dtype);
  Tensor safe = where(keep, target, 0);
  Tensor w = reshape(index_select(weight.tensor(), 0, reshape(safe, {-1})), target.shape());
  return where(keep, w, zeros({}, dtype));
}

// (output, total_weight): the total weight is the sum of weight[target] over the targets not
// ignored, and 0 for a 2-D input's "none" reduction, as eager.
Arg nll_loss_forward_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  const Tensor& target = a[1].tensor();
  const int64_t ignore_index = a[4].to_int();
  Tensor out = nn::nll_loss(x, target, optional_tensor(a[2]), ignore_index, reduction_name(a[3]));
  Tensor total;
  if (a[3].to_int() == 0 && x.dim() == 2) {
    total = zeros({}, x.dtype());
  } else {
    total = sum(target_weights(target, ne(target, ignore_index), a[2], x.dtype()));
  }
  return std::vector<Arg>{out, total};
}

// -weight[target] * grad at each sample's target class (grad / total_weight for "mean"), 0
// elsewhere and for ignored targets.
Arg nll_loss_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor& x = a[1].tensor();
  const Tensor& target = a[2].tensor();
  const int64_t classes = x.shape().back();
  Tensor keep = ne(target, a[5].to_int());
  Tensor coef = neg(grad);
  if (a[4].to_int() == 1) coef = div(coef, a[6].tensor());
  if (!a[3].is_none()) coef = mul(target_weights(target, keep, a[3], x.dtype()), coef);
  Tensor per_sample = where(keep, coef, zeros({}, x.dtype()));
  Tensor classes_iota = arange(0, classes, 1, DType::Int64);
  Tensor safe = where(keep, target, 0);
  if (x.dim() == 2) {
    Tensor hit = eq(reshape(classes_iota, {1, classes}), unsqueeze(safe, 1));
    return where(hit, unsqueeze(per_sample, 1), zeros({}, x.dtype()));
  }
  return where(eq(classes_iota, safe), per_sample, zeros({}, x.dtype()));
}

std::optional<std::string> mse_loss_when(const Arg& reduction) {
  return reduction_refused(reduction);
}

// mse_loss(self, target, reduction)
Arg mse_loss_entry(const Args& a, Call&) {
  DType dt = promote({&a[0], &a[1]});
  return nn::mse_loss(cast(operand(a[0]), dt).tensor(), cast(operand(a[1]), dt).tensor(),
                      reduction_name(a[2]));
}

// mse_loss_backward(grad_output, self, target, reduction): norm * (self - target) * grad, norm 2
// (2 / self's numel for "mean").
Arg mse_loss_backward_entry(const Args& a, Call&) {
  DType dt = promote({&a[0], &a[1], &a[2]});
  Operand grad = cast(operand(a[0]), dt), x = cast(operand(a[1]), dt), t = cast(operand(a[2]), dt);
  double norm = 2.0;
  if (a[3].to_int() == 1) norm /= static_cast<double>(a[1].tensor_numel());
  return mul(mul(sub(x, t), norm), grad);
}

// ---- batch norm ---------------------------------------------------------------------------------

// The dims batch norm reduces (all but the channels, dim 1) and the [1, C, 1...] shape its
// per-channel values broadcast in.
struct ChannelDims {
  IntList reduce, broadcast;
  int64_t count = 1;  // elements per channel
};
ChannelDims channel_dims(const Tensor& x) {
  ChannelDims c;
  c.broadcast.assign(static_cast<size_t>(x.dim()), 1);
  c.broadcast[1] = x.shape()[1];
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == 1) continue;
    c.reduce.push_back(d);
    c.count *= x.shape()[static_cast<size_t>(d)];
  }
  return c;
}

Tensor in_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

// The dtype of batch norm's statistics and parameter gradients: the parameters' (float32 beside
// a 16-bit input in eager's mixed-type kernels), else the input's.
DType parameter_dtype(const Tensor& x, const std::vector<const Arg*>& params) {
  for (const Arg* p : params) {
    if (!p->is_none()) return p->tensor().dtype();
  }
  return x.dtype();
}

bool has_16_bit(const Args& a) {
  for (const Arg& t : a) {
    if (t.is_tensor() && is_reduced_float(t.tensor().dtype())) return true;
  }
  return false;
}

// The batch norm forwards, by their argument lists:
//   native_batch_norm, _native_batch_norm_legit, _native_batch_norm_legit_functional:
//     (input, weight, bias, running_mean, running_var, training, momentum, eps)
//   _native_batch_norm_legit.no_stats: (input, weight, bias, training, momentum, eps)
//   _native_batch_norm_legit_no_training: (input, weight, bias, running_mean, running_var,
//     momentum, eps)
// BatchNormArgs puts each in one form.
struct BatchNormArgs {
  const Arg *input, *weight, *bias;
  const Arg* running_mean = nullptr;  // nullptr: the overload has none (no_stats)
  const Arg* running_var = nullptr;
  bool training;
  double momentum, eps;
};

BatchNormArgs with_stats(const Args& a) {
  return {&a[0], &a[1], &a[2], &a[3], &a[4], a[5].to_bool(), a[6].to_double(), a[7].to_double()};
}
BatchNormArgs no_stats(const Args& a) {
  return {&a[0],           &a[1], &a[2], nullptr, nullptr, a[3].to_bool(), a[4].to_double(),
          a[5].to_double()};
}
BatchNormArgs no_training(const Args& a) {
  return {&a[0], &a[1], &a[2], &a[3], &a[4], false, a[5].to_double(), a[6].to_double()};
}

bool has_stat(const Arg* stat) { return stat != nullptr && !stat->is_none(); }

// `in_place`: training updates the running statistics in place (native_batch_norm and
// _native_batch_norm_legit do, as eager's kernel, although their schemas do not mark it).
std::optional<std::string> batch_norm_refused(const BatchNormArgs& b, bool in_place) {
  if (b.input->tensor_dim() < 2) return std::to_string(b.input->tensor_dim()) + "-D input";
  if (!b.training && (!has_stat(b.running_mean) || !has_stat(b.running_var))) {
    return "inference without running statistics";
  }
  if (b.training && in_place) {
    for (const Arg* stat : {b.running_mean, b.running_var}) {
      if (has_stat(stat) && is_reduced_float(dtype_of(*stat))) {
        return "16-bit running statistics in training (updated in place, and lower() computes "
               "in float32 copies)";
      }
    }
  }
  return std::nullopt;
}

// One forward for every overload: (output, save_mean, save_invstd[, new_running_mean,
// new_running_var]). Training normalizes with the batch's statistics, each computed in two
// passes (the mean, then the mean of the squared deviations from it; float32 sums accumulate in
// double), never as E[x^2] - E[x]^2, which cancels when the mean is large against the spread.
// The variance is biased; the running variance is updated with the unbiased one. `Stats` says
// where the new running statistics go: into the running tensors (in place), into two more
// results (functional), or nowhere. lz::nn::batch_norm gives inference's output. Inference
// returns empty statistics, as eager's CPU kernel.
enum class Stats { InPlace, Returned, None };

Arg batch_norm_forward(const BatchNormArgs& b, Stats stats, bool sixteen_bit) {
  const Tensor& input = b.input->tensor();
  std::vector<const Arg*> params = {b.weight, b.bias};
  if (b.running_mean) params.insert(params.end(), {b.running_mean, b.running_var});
  const DType stat_dtype = parameter_dtype(input, params);
  // 16-bit operands reach here only in an entry that keeps them (kMutates): computed in float32.
  auto widen = [](const Tensor& t) {
    return t.defined() && is_reduced_float(t.dtype()) ? t.to(DType::Float32) : t;
  };
  const Tensor x = widen(input);
  Tensor weight = widen(optional_tensor(*b.weight)), bias = widen(optional_tensor(*b.bias));
  Tensor running_mean = b.running_mean ? optional_tensor(*b.running_mean) : Tensor();
  Tensor running_var = b.running_var ? optional_tensor(*b.running_var) : Tensor();
  std::vector<Arg> results;
  Tensor new_mean = running_mean, new_var = running_var;
  if (!b.training) {
    Tensor out = nn::batch_norm(x, widen(running_mean), widen(running_var), weight, bias, false,
                                b.momentum, b.eps);
    results = {in_dtype(out, input.dtype()), zeros({0}, stat_dtype), zeros({0}, stat_dtype)};
  } else {
    ChannelDims c = channel_dims(x);
    Tensor mean = lz::mean(x, c.reduce, true);
    Tensor centered = sub(x, mean);
    Tensor var = lz::mean(mul(centered, centered), c.reduce, true);
    Tensor invstd = rsqrt(add(var, b.eps));
    Tensor out = mul(centered, invstd);
    if (weight.defined()) out = mul(out, reshape(weight, c.broadcast));
    if (bias.defined()) out = add(out, reshape(bias, c.broadcast));
    const IntList channels = {x.shape()[1]};
    if (running_mean.defined()) {
      new_mean = add(mul(running_mean, 1.0 - b.momentum), mul(reshape(mean, channels), b.momentum));
    }
    if (running_var.defined()) {
      const double unbias = static_cast<double>(c.count) / static_cast<double>(c.count - 1);
      new_var =
          add(mul(running_var, 1.0 - b.momentum), mul(reshape(var, channels), b.momentum * unbias));
    }
    // lower() first records an entry on 16-bit operands to learn its result dtypes and drops
    // that recording: the running statistics are updated by the recording that runs.
    if (stats == Stats::InPlace && !sixteen_bit) {
      if (running_mean.defined()) running_mean.copy_(new_mean);
      if (running_var.defined()) running_var.copy_(new_var);
    }
    results = {in_dtype(out, input.dtype()), in_dtype(reshape(mean, channels), stat_dtype),
               in_dtype(reshape(invstd, channels), stat_dtype)};
  }
  if (stats == Stats::Returned) {
    // The functional overload's new statistics are new tensors, as its decomposition's.
    results.push_back(!b.training && new_mean.defined() ? new_mean.clone() : new_mean);
    results.push_back(!b.training && new_var.defined() ? new_var.clone() : new_var);
  }
  return Arg(std::move(results));
}

Arg native_batch_norm_entry(const Args& a, Call&) {
  return batch_norm_forward(with_stats(a), Stats::InPlace, has_16_bit(a));
}
// Flagged kMutates (its schema marks the running statistics): lower() records it once.
Arg batch_norm_legit_entry(const Args& a, Call&) {
  return batch_norm_forward(with_stats(a), Stats::InPlace, false);
}
Arg batch_norm_functional_entry(const Args& a, Call&) {
  return batch_norm_forward(with_stats(a), Stats::Returned, has_16_bit(a));
}
Arg batch_norm_no_stats_entry(const Args& a, Call&) {
  return batch_norm_forward(no_stats(a), Stats::None, has_16_bit(a));
}
Arg batch_norm_no_training_entry(const Args& a, Call&) {
  return batch_norm_forward(no_training(a), Stats::None, has_16_bit(a));
}

// native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
// save_invstd, train, eps, output_mask).
std::optional<std::string> batch_norm_backward_when(const Args& a) {
  if (a[1].tensor_dim() < 2) return std::to_string(a[1].tensor_dim()) + "-D input";
  if (a[7].to_bool() ? (a[5].is_none() || a[6].is_none()) : (a[3].is_none() || a[4].is_none())) {
    return "no statistics";
  }
  return std::nullopt;
}

// As eager's CPU kernel, per channel over the other dims: with s = sum(dy) and
// p = sum((x - mean) dy), training gives dx = (dy - s / n - (x - mean) p invstd^2 / n) invstd w,
// inference dx = dy invstd w; dweight = p invstd, dbias = s.
Arg native_batch_norm_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor& x = a[1].tensor();
  Tensor weight = optional_tensor(a[2]);
  const bool train = a[7].to_bool();
  const std::vector<Arg>& mask = a[9].list();
  ChannelDims c = channel_dims(x);
  Tensor mean, invstd;
  if (train) {
    mean = reshape(a[5].tensor(), c.broadcast);
    invstd = reshape(a[6].tensor(), c.broadcast);
  } else {
    mean = reshape(a[3].tensor(), c.broadcast);
    invstd = rsqrt(add(reshape(a[4].tensor(), c.broadcast), a[8].to_double()));
  }
  Tensor centered = sub(x, mean);
  Tensor grad_sum = sum(grad, c.reduce, true);
  Tensor dot = sum(mul(grad, centered), c.reduce, true);
  const double n = static_cast<double>(c.count);
  const DType param_dtype = weight.defined() ? weight.dtype() : x.dtype();
  Tensor grad_input, grad_weight, grad_bias;
  if (mask[0].to_bool()) {
    Tensor scale = weight.defined() ? mul(invstd, reshape(weight, c.broadcast)) : invstd;
    if (train) {
      Tensor proj = mul(centered, div(mul(mul(dot, invstd), invstd), n));
      grad_input = mul(sub(sub(grad, div(grad_sum, n)), proj), scale);
    } else {
      grad_input = mul(grad, scale);
    }
    grad_input = in_dtype(grad_input, x.dtype());
  }
  const IntList channels = {x.shape()[1]};
  if (mask[1].to_bool()) grad_weight = in_dtype(reshape(mul(dot, invstd), channels), param_dtype);
  if (mask[2].to_bool()) grad_bias = in_dtype(reshape(grad_sum, channels), param_dtype);
  return std::vector<Arg>{grad_input, grad_weight, grad_bias};
}

// ---- embedding ----------------------------------------------------------------------------------

std::optional<std::string> embedding_backward_when(const Args& a) {
  DType g = dtype_of(a[0]), i = dtype_of(a[1]);
  if (!is_floating(g)) return "gradient of dtype " + std::string(dtype_name(g));
  if (i != DType::Int64 && i != DType::Int32)
    return "indices of dtype " + std::string(dtype_name(i));
  return std::nullopt;
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
// each index's gradient row added into its weight row (none into padding_idx's), divided by the
// index's count first when scale_grad_by_freq.
Arg embedding_dense_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor indices = reshape(a[1].tensor().to(DType::Int64), {-1});
  const int64_t rows = a[2].to_int(), n = indices.shape()[0];
  const int64_t dim = grad.shape().back();
  Tensor g = reshape(grad, {n, dim});
  if (a[4].to_bool()) {
    Tensor counts = scatter_add(zeros({rows}, grad.dtype()), 0, indices, ones({n}, grad.dtype()));
    g = div(g, unsqueeze(index_select(counts, 0, indices), 1));
  }
  g = where(unsqueeze(eq(indices, a[3].to_int()), 1), zeros({}, grad.dtype()), g);
  Tensor at = broadcast_to(unsqueeze(indices, 1), {n, dim});
  return scatter_add(zeros({rows, dim}, grad.dtype()), 0, at, g);
}

// ---- attention ----------------------------------------------------------------------------------

// The arguments both directions share.
struct Attention {
  const Arg &q, &k, &v, &dropout_p, &is_causal, &mask, &scale;
};
Attention forward_args(const Args& a) { return {a[0], a[1], a[2], a[3], a[4], a[5], a[6]}; }
// The backward's (grad_out, q, k, v, out, logsumexp, dropout_p, is_causal, attn_mask, scale).
Attention backward_args(const Args& a) { return {a[1], a[2], a[3], a[6], a[7], a[8], a[9]}; }

std::optional<std::string> attention_when(const Attention& a) {
  if (double p = a.dropout_p.to_double(); p != 0.0) {
    std::ostringstream s;
    s << "dropout_p=" << p;
    return s.str();
  }
  if (a.q.tensor_dim() != 4 || a.k.tensor_dim() != 4 || a.v.tensor_dim() != 4) {
    return "q, k, v not 4-dimensional";
  }
  if (a.q.tensor_shape()[1] != a.k.tensor_shape()[1] ||
      a.k.tensor_shape()[1] != a.v.tensor_shape()[1]) {
    return "different head counts (grouped-query attention)";
  }
  if (!a.mask.is_none()) {  // eager's op takes no bool mask (F.sdpa makes it a float one)
    DType m = dtype_of(a.mask), q = dtype_of(a.q);
    if (m != q) {
      return "a " + std::string(dtype_name(m)) + " mask on " + std::string(dtype_name(q)) +
             " inputs";
    }
  }
  return std::nullopt;
}

std::optional<double> optional_double(const Arg& a) {
  return a.is_none() ? std::nullopt : std::optional<double>(a.to_double());
}

Tensor scores(const Attention& a) {
  return nn::scaled_dot_product_attention_scores(a.q.tensor(), a.k.tensor(),
                                                 optional_tensor(a.mask), a.is_causal.to_bool(),
                                                 optional_double(a.scale));
}

double scale_of(const Attention& a) {
  if (!a.scale.is_none()) return a.scale.to_double();
  return 1.0 / std::sqrt(static_cast<double>(a.q.tensor_shape().back()));
}

Arg flash_attention_entry(const Args& args, Call&) {
  Attention a = forward_args(args);
  const Tensor& q = a.q.tensor();
  auto [out, lse] = nn::scaled_dot_product_attention_with_logsumexp(
      q, a.k.tensor(), a.v.tensor(), optional_tensor(a.mask), a.is_causal.to_bool(),
      optional_double(a.scale));
  // Eager's logsumexp is float32 for 16-bit inputs (lower() computes them in float32 anyway;
  // this tells its probe of the result dtypes).
  if (is_reduced_float(q.dtype())) lse = lse.to(DType::Float32);
  return std::vector<Arg>{out, lse};
}

// The gradients from the saved logsumexp (no Lazuli composite computes them):
//   p = exp(scores - lse) (0 on a fully masked row: lse 0, scores -inf),
//   dv = p^T @ dout, ds = p * (dout @ v^T - rowsum(dout * out)), dq = ds @ k * scale,
//   dk = ds^T @ q * scale.
Arg flash_attention_backward_entry(const Args& args, Call&) {
  Attention a = backward_args(args);
  const Tensor& grad = args[0].tensor();
  const Tensor& q = a.q.tensor();
  const Tensor& k = a.k.tensor();
  const Tensor& out = args[4].tensor();
  // float32 for 16-bit inputs: in their dtype, so that lower()'s probe of the result dtypes
  // computes in one dtype (its real call has every operand in float32).
  Tensor lse = args[5].tensor();
  if (lse.dtype() != q.dtype()) lse = lse.to(q.dtype());
  Tensor p = exp(sub(scores(a), unsqueeze(lse, -1)));
  Tensor grad_v = matmul(transpose(p, -2, -1), grad);
  Tensor dp = matmul(grad, transpose(a.v.tensor(), -2, -1));
  Tensor ds = mul(p, sub(dp, sum(mul(grad, out), {-1}, true)));
  const double s = scale_of(a);
  Tensor grad_q = mul(matmul(ds, k), s);
  Tensor grad_k = mul(matmul(transpose(ds, -2, -1), q), s);
  return std::vector<Arg>{grad_q, grad_k, grad_v};
}

}  // namespace

void add_nn(TableBuilder& b) {
  b.add({"aten.convolution.default"}, kFloats, convolution_entry,
        {.when = [](const Args& a) { return conv_when_weight(a[1]); },
         .note = "1-D and 2-D; float32 through oneDNN, float64 on the reference kernels"});
  b.add({"aten.convolution_backward.default"}, kFloats, convolution_backward_entry,
        {.when = [](const Args& a) { return conv_when_weight(a[2]); },
         .note = "1-D and 2-D; the masked-out gradients are not computed"});
  b.add({"aten.max_pool2d_with_indices.default"}, kFloats, max_pool2d_with_indices_entry,
        {.when = [](const Args& a) { return pool_when_kernel(a[1]); },
         .note = "indices are flat offsets in each plane, as eager's"});
  b.add({"aten.max_pool2d_with_indices_backward.default"}, kFloats | DTypeSet{DType::Int64},
        max_pool2d_with_indices_backward_entry,
        {.when = max_pool_backward_when,
         .note = "a scatter_add of the gradient at the int64 indices"});
  b.add({"aten.avg_pool2d.default"}, kFloats, avg_pool2d_entry,
        {.when = [](const Args& a) { return pool_when_kernel(a[1]); }});
  b.add({"aten.avg_pool2d_backward.default"}, kFloats, avg_pool2d_backward_entry,
        {.when = [](const Args& a) { return pool_when_kernel(a[2]); }});
  b.add({"aten._adaptive_avg_pool2d.default"}, kFloats,
        [](const Args& a, Call&) -> Arg {
          return nn::adaptive_avg_pool2d(a[0].tensor(), a[1].ints(2));
        },
        {.when = adaptive_pool_when, .note = "3-D and 4-D inputs (lz::nn::adaptive_avg_pool2d)"});
  b.add({"aten._adaptive_avg_pool2d_backward.default"}, kFloats, adaptive_avg_pool2d_backward_entry,
        {.when = [](const Args& a) { return adaptive_pool_input_refused(a[1]); },
         .note = "3-D and 4-D inputs"});

  b.add({"aten.nll_loss_forward.default"}, kFloats | DTypeSet{DType::Int64}, nll_loss_forward_entry,
        {.when = [](const Args& a) { return nll_loss_when(a[0], a[1], a[2], a[3]); },
         .note = "(output, total_weight); int64 targets (lz::nn::nll_loss)"});
  b.add({"aten.nll_loss_backward.default"}, kFloats | DTypeSet{DType::Int64},
        nll_loss_backward_entry,
        {.when = [](const Args& a) { return nll_loss_when(a[1], a[2], a[3], a[4]); },
         .note = "int64 targets"});
  b.add({"aten.mse_loss.default"}, kFloats, mse_loss_entry,
        {.when = [](const Args& a) { return mse_loss_when(a[2]); }, .note = "lz::nn::mse_loss"});
  b.add({"aten.mse_loss_backward.default"}, kFloats, mse_loss_backward_entry,
        {.when = [](const Args& a) { return mse_loss_when(a[3]); }});

  b.add({"aten.native_batch_norm.default"}, kFloats, native_batch_norm_entry,
        {.when = [](const Args& a) { return batch_norm_refused(with_stats(a), true); },
         .note = "(out, save_mean, save_invstd); training updates the running statistics in "
                 "place, as eager; the statistics in two passes"});
  b.add({"aten._native_batch_norm_legit.default"}, kFloats, batch_norm_legit_entry,
        {.when = [](const Args& a) { return batch_norm_refused(with_stats(a), true); },
         .note = "as native_batch_norm",
         .flags = kMutates});
  b.add({"aten._native_batch_norm_legit_functional.default"}, kFloats, batch_norm_functional_entry,
        {.when = [](const Args& a) { return batch_norm_refused(with_stats(a), false); },
         .note = "(out, save_mean, save_invstd, new_running_mean, new_running_var)"});
  b.add({"aten._native_batch_norm_legit.no_stats"}, kFloats, batch_norm_no_stats_entry,
        {.when = [](const Args& a) { return batch_norm_refused(no_stats(a), false); },
         .note = "(out, save_mean, save_invstd): training with the batch's statistics alone"});
  b.add({"aten._native_batch_norm_legit_no_training.default"}, kFloats,
        batch_norm_no_training_entry,
        {.when = [](const Args& a) { return batch_norm_refused(no_training(a), false); },
         .note = "(out, empty, empty): inference with the running statistics"});
  b.add({"aten.native_batch_norm_backward.default"}, kFloats, native_batch_norm_backward_entry,
        {.when = batch_norm_backward_when,
         .note = "(grad_input, grad_weight, grad_bias); the masked-out gradients are None"});
  b.add({"aten.embedding_dense_backward.default"}, kFloats | kInts, embedding_dense_backward_entry,
        {.when = embedding_backward_when,
         .note = "a scatter_add of the gradient rows; padding_idx and scale_grad_by_freq"});

  b.add({"aten._scaled_dot_product_flash_attention_for_cpu.default"}, kFloats,
        flash_attention_entry,
        {.when = [](const Args& a) { return attention_when(forward_args(a)); },
         .note = "(out, logsumexp); dropout_p 0; a fully masked row gives 0"});
  b.add({"aten._scaled_dot_product_flash_attention_for_cpu_backward.default"}, kFloats,
        flash_attention_backward_entry,
        {.when = [](const Args& a) { return attention_when(backward_args(a)); },
         .note = "(grad_q, grad_k, grad_v); dropout_p 0"});
}

}  // namespace lz::aten
