// lz::nn convolution and pooling (include/lazuli/nn.h): argument checks in PyTorch's words, then
// the Conv / Pool primitives (ir/op_table.def). Unbatched inputs ([C, ...]) get a batch dim of 1
// around the primitive, as PyTorch does.
#include <algorithm>

#include "lazuli/nn.h"
#include "ops/frontend.h"

namespace lz::nn {
namespace {

using frontend::desc;
using frontend::node;
using frontend::wrap;
using ir::OpKind;

// `v` expanded to `n` spatial dims (one value is repeated, as PyTorch's _pair); named `arg` of `op`
// in the error.
IntList per_dim(const IntList& v, size_t n, const char* op, const char* arg) {
  if (v.size() == n) return v;
  if (v.size() == 1) return IntList(n, v[0]);
  throw ValueError(std::string(op) + ": " + arg + " needs 1 or " + std::to_string(n) +
                   " values, got " + shape_str(v));
}

void require(const Tensor& t, const char* op, const char* arg) {
  if (!t.defined()) throw ValueError(std::string(op) + ": " + arg + " is undefined");
}

// Runs `f` on x with a batch dim (adding one to an unbatched input of rank sp + 1, removing it
// from the result), after checking the rank.
Tensor batched(const Tensor& x, size_t sp, const char* op,
               const std::function<Tensor(const Tensor&)>& f) {
  const int64_t r = x.dim();
  if (r == static_cast<int64_t>(sp) + 2) return f(x);
  if (r == static_cast<int64_t>(sp) + 1) return squeeze(f(unsqueeze(x, 0)), 0);
  throw ValueError(desc(op, x) + ": expected a " + std::to_string(sp + 1) + "-D (unbatched) or " +
                   std::to_string(sp + 2) + "-D (batched) input");
}

Tensor add_bias(const Tensor& y, const Tensor& bias, const char* op) {
  if (!bias.defined()) return y;
  if (bias.dim() != 1 || bias.shape()[0] != y.shape()[1]) {
    throw ValueError(std::string(op) + ": bias of shape " + shape_str(bias.shape()) +
                     " does not match " + std::to_string(y.shape()[1]) + " output channels");
  }
  IntList s(y.dim(), 1);
  s[1] = y.shape()[1];
  return y + reshape(frontend::autocast_bias(bias), s);
}

Tensor conv_nd(size_t sp, const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
               const IntList& stride, const IntList& padding, const IntList& dilation,
               int64_t groups) {
  require(x, op, "input");
  require(w, op, "weight");
  ir::ConvAttrs a{per_dim(stride, sp, op, "stride"),
                  per_dim(padding, sp, op, "padding"),
                  per_dim(dilation, sp, op, "dilation"),
                  groups,
                  {}};
  if (w.dim() != static_cast<int64_t>(sp) + 2) {
    throw ValueError(desc(op, w) + ": the weight must be " + std::to_string(sp + 2) + "-D");
  }
  return batched(x, sp, op, [&](const Tensor& xb) {
    DType dt = promote_types(xb.dtype(), w.dtype());
    if (!is_floating(dt)) {
      throw TypeError(std::string(op) + ": needs floating input and weight, got " +
                      std::string(dtype_name(xb.dtype())) + " and " +
                      std::string(dtype_name(w.dtype())));
    }
    ir::Value xv = frontend::cast(frontend::value_of(xb, op), dt);
    ir::Value wv = frontend::cast(frontend::value_of(w, op), dt);
    return add_bias(wrap(node(OpKind::Conv, {xv, wv}, a)), bias, op);
  });
}

// padding="same" / "valid": "valid" is 0; "same" keeps each spatial size at stride 1, padding
// the input explicitly first when the total padding is odd (the extra column goes at the end,
// as PyTorch).
Tensor conv_nd_str(size_t sp, const char* op, const Tensor& x, const Tensor& w, const Tensor& bias,
                   const IntList& stride, const std::string& padding, const IntList& dilation,
                   int64_t groups) {
  require(w, op, "weight");
  if (padding == "valid") return conv_nd(sp, op, x, w, bias, stride, {0}, dilation, groups);
  if (padding != "same") {
    throw ValueError(std::string(op) +
                     ": padding must be 'valid', 'same' or a list of ints, got '" + padding + "'");
  }
  IntList st = per_dim(stride, sp, op, "stride"), dil = per_dim(dilation, sp, op, "dilation");
  for (int64_t s : st) {
    if (s != 1)
      throw ValueError(std::string(op) +
                       ": padding='same' is not supported for strided convolutions");
  }
  if (w.dim() != static_cast<int64_t>(sp) + 2) {
    throw ValueError(desc(op, w) + ": the weight must be " + std::to_string(sp + 2) + "-D");
  }
  Tensor xin = x;
  IntList pad(sp);
  for (size_t i = 0; i < sp; ++i) {
    int64_t total = dil[i] * (w.shape()[2 + i] - 1);
    pad[i] = total / 2;
    if (total % 2) {  // one more zero at the end of this dim
      int64_t d = xin.dim() - static_cast<int64_t>(sp) + static_cast<int64_t>(i);
      IntList zs = xin.shape();
      zs[d] = 1;
      xin = cat({xin, zeros(zs, xin.dtype())}, d);
    }
  }
  return conv_nd(sp, op, xin, w, bias, st, pad, dil, groups);
}

Tensor conv_transpose_nd(size_t sp, const char* op, const Tensor& x, const Tensor& w,
                         const Tensor& bias, const IntList& stride, const IntList& padding,
                         const IntList& output_padding, int64_t groups, const IntList& dilation) {
  require(x, op, "input");
  require(w, op, "weight");
  IntList st = per_dim(stride, sp, op, "stride"), pad = per_dim(padding, sp, op, "padding");
  IntList opad = per_dim(output_padding, sp, op, "output_padding");
  IntList dil = per_dim(dilation, sp, op, "dilation");
  if (w.dim() != static_cast<int64_t>(sp) + 2) {
    throw ValueError(desc(op, w) + ": the weight must be " + std::to_string(sp + 2) + "-D");
  }
  if (groups < 1) throw ValueError(std::string(op) + ": groups must be positive");
  for (size_t i = 0; i < sp; ++i) {
    if (opad[i] < 0 || opad[i] >= std::max(st[i], dil[i])) {
      throw ValueError(std::string(op) +
                       ": output padding must be smaller than either stride or "
                       "dilation, got output_padding " +
                       shape_str(opad) + ", stride " + shape_str(st) + ", dilation " +
                       shape_str(dil));
    }
  }
  return batched(x, sp, op, [&](const Tensor& xb) {
    if (xb.shape()[1] != w.shape()[0]) {
      throw ValueError(std::string(op) + ": input with " + std::to_string(xb.shape()[1]) +
                       " channels does not match the weight " + shape_str(w.shape()) +
                       " (expects " + std::to_string(w.shape()[0]) + ")");
    }
    DType dt = promote_types(xb.dtype(), w.dtype());
    if (!is_floating(dt)) throw TypeError(std::string(op) + ": needs floating input and weight");
    // The gradient of the convolution whose input has the shape we want.
    Shape out{xb.shape()[0], w.shape()[1] * groups};
    for (size_t i = 0; i < sp; ++i) {
      int64_t o = (xb.shape()[2 + i] - 1) * st[i] - 2 * pad[i] + dil[i] * (w.shape()[2 + i] - 1) +
                  opad[i] + 1;
      if (o < 1) throw ValueError(desc(op, xb) + ": the output would be empty");
      out.push_back(o);
    }
    // An output padding of at least the stride (allowed below the dilation) makes the output
    // larger than any input whose convolution has xb's size: the convolution of `out` has
    // opad / stride more positions per dim, whose gradients are zero, so xb is padded to them.
    IntList grow;
    bool grows = false;
    for (size_t i = sp; i-- > 0;) {
      grow.push_back(0);
      grow.push_back(opad[i] / st[i]);
      grows = grows || opad[i] >= st[i];
    }
    Tensor xg = grows ? lz::nn::pad(xb, grow) : xb;
    ir::ConvAttrs a{st, pad, dil, groups, out};
    ir::Value xv = frontend::cast(frontend::value_of(xg, op), dt);
    ir::Value wv = frontend::cast(frontend::value_of(w, op), dt);
    return add_bias(wrap(node(OpKind::ConvBackwardInput, {xv, wv}, a)), bias, op);
  });
}

ir::PoolAttrs pool_attrs(size_t sp, const char* op, const IntList& kernel, const IntList& stride,
                         const IntList& padding, const IntList& dilation, bool ceil_mode) {
  IntList k = per_dim(kernel, sp, op, "kernel_size");
  // An empty stride means the kernel size, as PyTorch's default.
  IntList st = stride.empty() ? k : per_dim(stride, sp, op, "stride");
  return {k,
          st,
          per_dim(padding, sp, op, "padding"),
          per_dim(dilation, sp, op, "dilation"),
          ceil_mode,
          true,
          0,
          {}};
}

Tensor pool_input(const Tensor& x, size_t sp, const char* op) {
  require(x, op, "input");
  if (x.dim() != static_cast<int64_t>(sp) + 1 && x.dim() != static_cast<int64_t>(sp) + 2) {
    throw ValueError(desc(op, x) + ": expected a " + std::to_string(sp + 1) + "-D (unbatched) or " +
                     std::to_string(sp + 2) + "-D (batched) input");
  }
  return x;
}

std::pair<Tensor, Tensor> max_pool_nd(size_t sp, const char* op, const Tensor& x,
                                      const IntList& kernel, const IntList& stride,
                                      const IntList& padding, const IntList& dilation,
                                      bool ceil_mode) {
  pool_input(x, sp, op);
  std::vector<ir::Value> v =
      frontend::node_outputs(OpKind::MaxPool, {frontend::value_of(x, op)},
                             pool_attrs(sp, op, kernel, stride, padding, dilation, ceil_mode));
  return {wrap(v[0]), wrap(v[1])};
}

Tensor avg_pool_nd(size_t sp, const char* op, const Tensor& x, const IntList& kernel,
                   const IntList& stride, const IntList& padding, bool ceil_mode,
                   bool count_include_pad, std::optional<int64_t> divisor_override) {
  pool_input(x, sp, op);
  ir::PoolAttrs a = pool_attrs(sp, op, kernel, stride, padding, {1}, ceil_mode);
  a.count_include_pad = count_include_pad;
  if (divisor_override) {
    if (*divisor_override == 0) throw ValueError(std::string(op) + ": divisor must be not zero");
    a.divisor = *divisor_override;
  }
  ir::Value v = frontend::value_of(x, op);
  if (!is_floating(v.dtype())) {
    throw TypeError(desc(op, x) +
                    ": needs a floating input (PyTorch's avg_pool is not implemented "
                    "for integers)");
  }
  return wrap(node(OpKind::AvgPool, {v}, a));
}

// The [out, in] matrix whose row i averages input positions [floor(i*in/out), ceil((i+1)*in/out)).
Tensor adaptive_matrix(int64_t in, int64_t out, DType dt) {
  std::vector<double> m(static_cast<size_t>(in * out), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    int64_t s = (i * in) / out, e = ((i + 1) * in + out - 1) / out;
    for (int64_t j = s; j < e; ++j)
      m[static_cast<size_t>(i * in + j)] = 1.0 / static_cast<double>(e - s);
  }
  return tensor<double>(m, {out, in}).to(dt);
}

Tensor adaptive_avg_pool_nd(size_t sp, const char* op, const Tensor& x,
                            const IntList& output_size) {
  pool_input(x, sp, op);
  if (!is_floating(x.dtype())) throw TypeError(desc(op, x) + ": needs a floating input");
  IntList out = per_dim(output_size, sp, op, "output_size");
  const int64_t r = x.dim();
  IntList in(x.shape().end() - static_cast<int64_t>(sp), x.shape().end());
  for (size_t i = 0; i < sp; ++i) {
    if (out[i] <= 0)
      throw ValueError(desc(op, x) + ": output_size must be positive, got " + shape_str(out));
  }
  bool ones = std::all_of(out.begin(), out.end(), [](int64_t o) { return o == 1; });
  if (ones) {  // a global average: a mean, which fuses with its producers
    IntList dims;
    for (size_t i = 0; i < sp; ++i)
      dims.push_back(r - static_cast<int64_t>(sp) + static_cast<int64_t>(i));
    return mean(x, dims, true);
  }
  bool divisible = true;
  for (size_t i = 0; i < sp; ++i) divisible = divisible && in[i] % out[i] == 0;
  if (divisible) {
    IntList k(sp);
    for (size_t i = 0; i < sp; ++i) k[i] = in[i] / out[i];
    return avg_pool_nd(sp, op, x, k, k, {0}, false, true, std::nullopt);
  }
  // Separable: average each spatial dim with a constant matrix.
  Tensor y = x;
  for (size_t i = 0; i < sp; ++i) {
    const int64_t d = r - static_cast<int64_t>(sp) + static_cast<int64_t>(i);
    Tensor m = adaptive_matrix(in[i], out[i], x.dtype());
    y = transpose(matmul(transpose(y, d, -1), transpose(m, 0, 1)), d, -1);
  }
  return y;
}

// A gradient op of the convolution whose input, weight and output shapes are known.
Tensor conv_grad(OpKind op, const char* name, const Tensor& p, const Tensor& q, const Shape& shape,
                 size_t sp, const IntList& stride, const IntList& padding,
                 const IntList& dilation, int64_t groups) {
  require(p, name, "operand");
  require(q, name, "operand");
  ir::ConvAttrs a{per_dim(stride, sp, name, "stride"), per_dim(padding, sp, name, "padding"),
                  per_dim(dilation, sp, name, "dilation"), groups, shape};
  DType dt = promote_types(p.dtype(), q.dtype());
  if (!is_floating(dt)) throw TypeError(std::string(name) + ": needs floating operands");
  return wrap(node(op, {frontend::cast(frontend::value_of(p, name), dt),
                        frontend::cast(frontend::value_of(q, name), dt)},
                   a));
}

}  // namespace

Tensor conv_input_grad(const IntList& input_shape, const Tensor& weight, const Tensor& grad_output,
                       const IntList& stride, const IntList& padding, const IntList& dilation,
                       int64_t groups) {
  if (input_shape.size() < 3) throw ValueError("conv_input_grad: input_shape needs rank 3 or 4");
  return conv_grad(OpKind::ConvBackwardInput, "conv_input_grad", grad_output, weight, input_shape,
                   input_shape.size() - 2, stride, padding, dilation, groups);
}

Tensor conv_weight_grad(const Tensor& input, const IntList& weight_shape, const Tensor& grad_output,
                        const IntList& stride, const IntList& padding, const IntList& dilation,
                        int64_t groups) {
  if (weight_shape.size() < 3) throw ValueError("conv_weight_grad: weight_shape needs rank 3 or 4");
  return conv_grad(OpKind::ConvBackwardWeight, "conv_weight_grad", input, grad_output, weight_shape,
                   weight_shape.size() - 2, stride, padding, dilation, groups);
}

Tensor avg_pool_input_grad(const Tensor& grad_output, const IntList& input_shape,
                           const IntList& kernel_size, const IntList& stride,
                           const IntList& padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  const char* name = "avg_pool_input_grad";
  require(grad_output, name, "grad_output");
  const size_t sp = kernel_size.size();
  ir::PoolAttrs a = pool_attrs(sp, name, kernel_size, stride, padding, {1}, ceil_mode);
  a.count_include_pad = count_include_pad;
  a.divisor = divisor_override.value_or(0);
  a.shape = input_shape;
  return wrap(node(OpKind::AvgPoolBackward, {frontend::value_of(grad_output, name)}, a));
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& bias, const IntList& stride,
              const ConvPadding& padding, const IntList& dilation, int64_t groups) {
  if (!padding.mode.empty()) {
    return conv_nd_str(1, "conv1d", x, w, bias, stride, padding.mode, dilation, groups);
  }
  return conv_nd(1, "conv1d", x, w, bias, stride, padding.sizes, dilation, groups);
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const IntList& stride,
              const ConvPadding& padding, const IntList& dilation, int64_t groups) {
  if (!padding.mode.empty()) {
    return conv_nd_str(2, "conv2d", x, w, bias, stride, padding.mode, dilation, groups);
  }
  return conv_nd(2, "conv2d", x, w, bias, stride, padding.sizes, dilation, groups);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& bias, const IntList& stride,
                        const IntList& padding, const IntList& output_padding, int64_t groups,
                        const IntList& dilation) {
  return conv_transpose_nd(1, "conv_transpose1d", x, w, bias, stride, padding, output_padding,
                           groups, dilation);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& bias, const IntList& stride,
                        const IntList& padding, const IntList& output_padding, int64_t groups,
                        const IntList& dilation) {
  return conv_transpose_nd(2, "conv_transpose2d", x, w, bias, stride, padding, output_padding,
                           groups, dilation);
}

std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, const IntList& kernel_size,
                                                  const IntList& stride, const IntList& padding,
                                                  const IntList& dilation, bool ceil_mode) {
  return max_pool_nd(1, "max_pool1d", x, kernel_size, stride, padding, dilation, ceil_mode);
}
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const IntList& kernel_size,
                                                  const IntList& stride, const IntList& padding,
                                                  const IntList& dilation, bool ceil_mode) {
  return max_pool_nd(2, "max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode);
}
Tensor max_pool1d(const Tensor& x, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, const IntList& dilation, bool ceil_mode) {
  return max_pool_nd(1, "max_pool1d", x, kernel_size, stride, padding, dilation, ceil_mode).first;
}
Tensor max_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, const IntList& dilation, bool ceil_mode) {
  return max_pool_nd(2, "max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode).first;
}
Tensor avg_pool1d(const Tensor& x, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, bool ceil_mode, bool count_include_pad) {
  return avg_pool_nd(1, "avg_pool1d", x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     std::nullopt);
}
Tensor avg_pool2d(const Tensor& x, const IntList& kernel_size, const IntList& stride,
                  const IntList& padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return avg_pool_nd(2, "avg_pool2d", x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override);
}
Tensor adaptive_avg_pool1d(const Tensor& x, const IntList& output_size) {
  return adaptive_avg_pool_nd(1, "adaptive_avg_pool1d", x, output_size);
}
Tensor adaptive_avg_pool2d(const Tensor& x, const IntList& output_size) {
  return adaptive_avg_pool_nd(2, "adaptive_avg_pool2d", x, output_size);
}

}  // namespace lz::nn
