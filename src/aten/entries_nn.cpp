// Table entries: convolution, pooling, scaled dot-product attention (aten/table.h).
//
// Convolution and pooling go through lz::nn (one or two spatial dims). Batch norm, group norm and
// adaptive average pooling reach Lazuli through their decompositions into means and variances.
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
