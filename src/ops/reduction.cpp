// Reductions. Composite ones (mean, var, std, logsumexp, all, any) are written in primitives.
#include <cmath>
#include <limits>

#include "lazuli/autograd.h"
#include "ops/frontend.h"

namespace lz {
using frontend::desc;
using frontend::node;
using frontend::wrap;
using ir::OpKind;

namespace {

ir::Value reduce(OpKind op, ir::Value v, const std::vector<int64_t>& dims, bool keepdim) {
  return node(op, {std::move(v)}, ir::ReduceAttrs{dims, keepdim});
}

// Elements per output: a shape-derived constant, baked like the shape itself (it changes only
// when a leaf shape does, and that already changes the hash).
int64_t reduced_count(const Shape& s, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= s[d];
  return n;
}

ir::Value count_constant(int64_t n, DType dt) {
  return {ir::make_constant(static_cast<double>(n), dt, /*from_sizes=*/true), 0};
}

ir::Value float_input(const char* op, const Tensor& x) {
  ir::Value v = frontend::value_of(x, op);
  if (!is_floating(v.dtype())) {
    throw TypeError(desc(op, x) + ": needs a floating point input; convert it first (to float32: .float() in Python, .to(lz::kFloat32) in C++)");
  }
  return v;
}

}  // namespace

Tensor sum(const Tensor& x, const IntList& dims, bool keepdim) {
  ir::Value v = frontend::value_of(x, "sum");
  auto d = frontend::reduce_dims(dims, x, "sum");
  if (!is_floating(v.dtype())) v = frontend::cast(v, DType::Int64);  // as PyTorch
  return wrap(reduce(OpKind::ReduceSum, v, d, keepdim));
}

Tensor prod(const Tensor& x, const IntList& dims, bool keepdim) {
  ir::Value v = frontend::value_of(x, "prod");
  auto d = frontend::reduce_dims(dims, x, "prod");
  if (!is_floating(v.dtype())) v = frontend::cast(v, DType::Int64);
  return wrap(reduce(OpKind::ReduceProd, v, d, keepdim));
}

Tensor mean(const Tensor& x, const IntList& dims, bool keepdim) {
  ir::Value v = float_input("mean", x);
  auto d = frontend::reduce_dims(dims, x, "mean");
  ir::Value s = reduce(OpKind::ReduceSum, v, d, keepdim);
  return wrap(node(OpKind::Div, {s, count_constant(reduced_count(x.shape(), d), v.dtype())}));
}

namespace {
// max/min have no identity: reducing over a zero-size dim is an IndexError (PyTorch's class), named
// after the user's op; over other dims of an empty tensor the result is empty.
// `all_dims`: no dim was named (PyTorch raises RuntimeError there; a ValueError here).
void check_nonempty(const char* op, const Tensor& x, const std::vector<int64_t>& dims,
                    bool all_dims = false) {
  for (int64_t d : dims) {
    if (x.shape()[d] == 0) {
      std::string msg = desc(op, x) + ": cannot reduce over the zero-size dim " + std::to_string(d) +
                        " (the operation has no identity)";
      if (all_dims) throw ValueError(msg + "; name a non-empty dim to get an empty result");
      throw IndexError(msg);
    }
  }
}
}  // namespace

Tensor amax(const Tensor& x, const IntList& dims, bool keepdim) {
  ir::Value v = frontend::value_of(x, "amax");
  auto d = frontend::reduce_dims(dims, x, "amax");
  check_nonempty("amax", x, d, dims.empty());
  return wrap(reduce(OpKind::ReduceMax, v, d, keepdim));
}

Tensor amin(const Tensor& x, const IntList& dims, bool keepdim) {
  ir::Value v = frontend::value_of(x, "amin");
  auto d = frontend::reduce_dims(dims, x, "amin");
  check_nonempty("amin", x, d, dims.empty());
  return wrap(reduce(OpKind::ReduceMin, v, d, keepdim));
}

namespace {
Tensor arg_reduce(const char* name, OpKind op, const Tensor& x, std::optional<int64_t> dim,
                  bool keepdim) {
  ir::Value v = frontend::value_of(x, name);
  if (x.dtype() == DType::Bool) {
    throw TypeError(desc(name, x) + ": bool is not supported (as in PyTorch); compare, or cast first");
  }
  ir::ReduceAttrs a{{}, keepdim};
  if (dim && x.dim() > 0) a.dims = {wrap_dim(*dim, x.dim(), name)};
  else if (dim) wrap_dim(*dim, 0, name);
  if (x.numel() == 0 && (!dim || x.dim() == 0)) {
    throw IndexError(desc(name, x) + ": cannot take the " + name + " of an empty tensor without a dim");
  }
  // Over a non-empty dim of an empty tensor the result is empty (PyTorch's too).
  if (!a.dims.empty()) check_nonempty(name, x, a.dims);
  if (!dim || x.dim() == 0) {
    // Over the flattened tensor: keepdim keeps every dim as size 1.
    if (x.dim() > 1) v = node(OpKind::Reshape, {v}, ir::ShapeAttrs{{x.numel()}});
    if (x.dim() == 0) v = node(OpKind::Reshape, {v}, ir::ShapeAttrs{{1}});
    ir::Value out = node(op, {v}, ir::ReduceAttrs{{0}, false});
    if (keepdim && x.dim() > 0) out = node(OpKind::Reshape, {out}, ir::ShapeAttrs{Shape(x.dim(), 1)});
    return wrap(out);
  }
  return wrap(node(op, {v}, a));
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce("argmax", OpKind::ArgMax, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce("argmin", OpKind::ArgMin, x, dim, keepdim);
}

namespace {
// max/min(dim) return one index per row, and PyTorch sends the gradient to that element only
// (amax/amin split it across ties). So when a gradient can flow, the values are read at the
// indices; otherwise the plain reduction (which fuses) gives the same values.
std::pair<Tensor, Tensor> extremum_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  if (x.dim() > 0) check_nonempty(is_max ? "max" : "min", x, {wrap_dim(dim, x.dim(), is_max ? "max" : "min")});
  // max/min(dim) take bool (argmax/argmin alone do not): the indices of its 0/1 values.
  const Tensor xi = x.dtype() == DType::Bool ? cast(x, DType::Int32) : x;
  Tensor idx = is_max ? argmax(xi, dim, keepdim) : argmin(xi, dim, keepdim);
  if (x.dim() == 0 || !is_grad_enabled() || !requires_grad(x)) {
    return {is_max ? amax(x, {dim}, keepdim) : amin(x, {dim}, keepdim), idx};
  }
  int64_t d = wrap_dim(dim, x.dim(), is_max ? "max" : "min");
  Tensor v = gather(x, d, keepdim ? idx : unsqueeze(idx, d));
  return {keepdim ? v : squeeze(v, d), idx};
}
}  // namespace

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_dim(x, dim, keepdim, true);
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extremum_dim(x, dim, keepdim, false);
}
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }

Tensor var(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  ir::Value v = float_input("var", x);
  auto d = frontend::reduce_dims(dims, x, "var");
  int64_t n = reduced_count(x.shape(), d);
  ir::Value m = node(OpKind::Div, {reduce(OpKind::ReduceSum, v, d, true), count_constant(n, v.dtype())});
  ir::Value c = node(OpKind::Sub, {v, m});
  ir::Value ss = reduce(OpKind::ReduceSum, node(OpKind::Mul, {c, c}), d, keepdim);
  // n - correction <= 0 gives inf/nan, as in PyTorch.
  return wrap(node(OpKind::Div, {ss, count_constant(std::max<int64_t>(n - correction, 0), v.dtype())}));
}

Tensor std(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  float_input("std", x);
  Tensor v = var(x, dims, correction, keepdim);
  // sqrt's gradient at 0 is inf (and 0 * inf nan); PyTorch's std gives 0 there (a constant
  // input), so the square root reads 1 where the variance is 0 and the result selects 0.
  Tensor zero = eq(v, 0);
  return where(zero, 0, sqrt(where(zero, 1, v)));
}

Tensor logsumexp(const Tensor& x, const IntList& dims, bool keepdim) {
  ir::Value v = frontend::value_of(x, "logsumexp");
  if (!is_floating(v.dtype())) v = frontend::cast(v, default_float_dtype());
  auto d = frontend::reduce_dims(dims, x, "logsumexp");
  if (x.numel() == 0) {
    // log(sum(exp(empty))) = log(0) = -inf, without a max over nothing.
    ir::Value s = reduce(OpKind::ReduceSum, node(OpKind::Exp, {v}), d, keepdim);
    return wrap(node(OpKind::Log, {s}));
  }
  ir::Value m = reduce(OpKind::ReduceMax, v, d, true);
  // An infinite max (all -inf, or +inf) would give inf - inf = nan; shift by 0 there instead.
  ir::Value zero{ir::make_constant(0, v.dtype()), 0};
  ir::Value finite = node(OpKind::Lt, {node(OpKind::Abs, {m}),
                                       ir::Value{ir::make_constant(std::numeric_limits<double>::infinity(), v.dtype()), 0}});
  ir::Value shift = node(OpKind::Where, {finite, m, zero});
  ir::Value s = reduce(OpKind::ReduceSum, node(OpKind::Exp, {node(OpKind::Sub, {v, shift})}), d, keepdim);
  ir::Value shift_out = shift;
  if (!keepdim) {
    shift_out = node(OpKind::Reshape, {shift}, ir::ShapeAttrs{s.shape()});
  }
  return wrap(node(OpKind::Add, {node(OpKind::Log, {s}), shift_out}));
}

Tensor all(const Tensor& x, const IntList& dims, bool keepdim) {
  ir::Value v = frontend::cast(frontend::value_of(x, "all"), DType::Bool);
  auto d = frontend::reduce_dims(dims, x, "all");
  if (x.numel() == 0) {  // all() of nothing is true; min over nothing has no identity
    ir::Value s = reduce(OpKind::ReduceSum, frontend::cast(frontend::unary(OpKind::BitwiseNot, v), DType::Int64), d, keepdim);
    return wrap(node(OpKind::Eq, {s, ir::Value{ir::make_constant(0, DType::Int64), 0}}));
  }
  return wrap(reduce(OpKind::ReduceMin, v, d, keepdim));
}

Tensor any(const Tensor& x, const IntList& dims, bool keepdim) {
  ir::Value v = frontend::cast(frontend::value_of(x, "any"), DType::Bool);
  auto d = frontend::reduce_dims(dims, x, "any");
  if (x.numel() == 0) {
    ir::Value s = reduce(OpKind::ReduceSum, frontend::cast(v, DType::Int64), d, keepdim);
    return wrap(node(OpKind::Ne, {s, ir::Value{ir::make_constant(0, DType::Int64), 0}}));
  }
  return wrap(reduce(OpKind::ReduceMax, v, d, keepdim));
}

}  // namespace lz
