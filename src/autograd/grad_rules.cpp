// The VJP rules. Each is written in primitives (recorded as IR, like everything else), with the
// forward values it needs taken from the node's operands and output. Binary and ternary ops
// broadcast implicitly, so their rules reduce each gradient back to its operand's shape.
#include "autograd/grad_rules.h"

#include <cmath>
#include <numbers>

#include "lazuli/error.h"
#include "ops/frontend.h"

namespace lz::autograd {
namespace {

using ir::Attrs;
using ir::Node;
using ir::OpKind;
using ir::Value;
using Grads = std::vector<Value>;

Value nd(OpKind op, std::vector<Value> operands, Attrs a = {}) {
  return frontend::node(op, std::move(operands), std::move(a));
}
// A baked constant: rule constants are fixed numbers, so hashing their value costs nothing.
Value k(double v, DType dt) { return {ir::make_constant(v, dt), 0}; }
Value add(Value a, Value b) { return nd(OpKind::Add, {std::move(a), std::move(b)}); }
Value sub(Value a, Value b) { return nd(OpKind::Sub, {std::move(a), std::move(b)}); }
Value mul(Value a, Value b) { return nd(OpKind::Mul, {std::move(a), std::move(b)}); }
Value div(Value a, Value b) { return nd(OpKind::Div, {std::move(a), std::move(b)}); }
Value neg(Value a) { return nd(OpKind::Neg, {std::move(a)}); }
Value where(Value c, Value a, Value b) { return nd(OpKind::Where, {std::move(c), std::move(a), std::move(b)}); }
Value reshape(Value v, const Shape& s) {
  if (v.shape() == s) return v;
  return nd(OpKind::Reshape, {std::move(v)}, ir::ShapeAttrs{s});
}
Value zeros_v(const Shape& s, DType dt) { return frontend::broadcast_to(k(0, dt), s); }
Value sum_dims(Value v, std::vector<int64_t> dims, bool keepdim) {
  return nd(OpKind::ReduceSum, {std::move(v)}, ir::ReduceAttrs{std::move(dims), keepdim});
}
Value as_float(Value mask, DType dt) { return frontend::cast(std::move(mask), dt); }

// Sums a broadcast gradient back to `target` (numpy broadcasting: leading dims, and dims of 1).
Value reduce_to(Value g, const Shape& target) {
  const Shape s = g.shape();
  if (s == target) return g;
  size_t lead = s.size() - target.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i < lead || (target[i - lead] == 1 && s[i] != 1)) dims.push_back(static_cast<int64_t>(i));
  }
  if (!dims.empty()) g = sum_dims(g, dims, true);
  return reshape(g, target);
}

// The reduced output (or its gradient) with the reduced dims back as 1s, expanded to `in`.
Value unreduce(const Value& v, const Node& n, const Shape& in) {
  Shape kept = in;
  for (int64_t d : n.attr<ir::ReduceAttrs>().dims) kept[d] = 1;
  return frontend::broadcast_to(reshape(v, kept), in);
}

const Value& x0(const Node& n) { return n.operands[0]; }
const Value& x1(const Node& n) { return n.operands[1]; }

// ---- unary ----
Grads neg_rule(const Node&, const Value&, const Value& g) { return {neg(g)}; }
Grads abs_rule(const Node& n, const Value&, const Value& g) { return {mul(g, nd(OpKind::Sign, {x0(n)}))}; }
Grads exp_rule(const Node&, const Value& out, const Value& g) { return {mul(g, out)}; }
Grads log_rule(const Node& n, const Value&, const Value& g) { return {div(g, x0(n))}; }
Grads log1p_rule(const Node& n, const Value&, const Value& g) {
  return {div(g, add(x0(n), k(1, g.dtype())))};
}
Grads expm1_rule(const Node&, const Value& out, const Value& g) { return {mul(g, add(out, k(1, g.dtype())))}; }
Grads sqrt_rule(const Node&, const Value& out, const Value& g) { return {div(mul(g, k(0.5, g.dtype())), out)}; }
Grads rsqrt_rule(const Node&, const Value& out, const Value& g) {  // d x^-1/2 = -x^-3/2 / 2
  return {mul(mul(g, k(-0.5, g.dtype())), mul(out, mul(out, out)))};
}
Grads sin_rule(const Node& n, const Value&, const Value& g) { return {mul(g, nd(OpKind::Cos, {x0(n)}))}; }
Grads cos_rule(const Node& n, const Value&, const Value& g) { return {neg(mul(g, nd(OpKind::Sin, {x0(n)})))}; }
// d tan x = 1 + tan^2 x, from the output (no second call of tan).
Grads tan_rule(const Node&, const Value& out, const Value& g) {
  return {mul(g, add(k(1, g.dtype()), mul(out, out)))};
}
Grads tanh_rule(const Node&, const Value& out, const Value& g) {
  return {mul(g, sub(k(1, g.dtype()), mul(out, out)))};
}
Grads sigmoid_rule(const Node&, const Value& out, const Value& g) {
  return {mul(g, mul(out, sub(k(1, g.dtype()), out)))};
}
Grads relu_rule(const Node& n, const Value&, const Value& g) {
  return {where(nd(OpKind::Gt, {x0(n), k(0, g.dtype())}), g, k(0, g.dtype()))};
}
Grads gelu_rule(const Node& n, const Value&, const Value& g) {  // Phi(x) + x phi(x)
  DType dt = g.dtype();
  const Value& x = x0(n);
  Value cdf = mul(k(0.5, dt), add(k(1, dt), nd(OpKind::Erf, {mul(x, k(1 / std::numbers::sqrt2, dt))})));
  Value pdf = mul(nd(OpKind::Exp, {mul(mul(x, x), k(-0.5, dt))}),
                  k(1 / std::sqrt(2 * std::numbers::pi), dt));
  return {mul(g, add(cdf, mul(x, pdf)))};
}
Grads erf_rule(const Node& n, const Value&, const Value& g) {
  DType dt = g.dtype();
  const Value& x = x0(n);
  return {mul(g, mul(k(2 / std::sqrt(std::numbers::pi), dt), nd(OpKind::Exp, {neg(mul(x, x))})))};
}
Grads reciprocal_rule(const Node&, const Value& out, const Value& g) { return {neg(mul(g, mul(out, out)))}; }
// Piecewise constant: the gradient is zero. PyTorch still sends that zero on, so a leaf used only
// through floor/round/sign gets a zeros .grad, not none.
Grads zero_rule(const Node& n, const Value&, const Value& g) {
  Grads out;
  for (const Value& v : n.operands) {
    out.push_back(is_floating(v.dtype()) ? zeros_v(v.shape(), g.dtype()) : Value{});
  }
  return out;
}
Grads cast_rule(const Node& n, const Value&, const Value& g) {
  if (!is_floating(x0(n).dtype())) return {Value{}};
  return {frontend::cast(g, x0(n).dtype())};
}

// ---- binary (operands broadcast to the output) ----
Grads add_rule(const Node& n, const Value&, const Value& g) {
  return {reduce_to(g, x0(n).shape()), reduce_to(g, x1(n).shape())};
}
Grads sub_rule(const Node& n, const Value&, const Value& g) {
  return {reduce_to(g, x0(n).shape()), reduce_to(neg(g), x1(n).shape())};
}
Grads mul_rule(const Node& n, const Value&, const Value& g) {
  return {reduce_to(mul(g, x1(n)), x0(n).shape()), reduce_to(mul(g, x0(n)), x1(n).shape())};
}
Grads div_rule(const Node& n, const Value& out, const Value& g) {
  Value ga = div(g, x1(n));
  return {reduce_to(ga, x0(n).shape()), reduce_to(neg(mul(ga, out)), x1(n).shape())};
}
Grads remainder_rule(const Node& n, const Value&, const Value& g) {  // a - floor(a / b) * b
  Value q = nd(OpKind::Floor, {div(x0(n), x1(n))});
  return {reduce_to(g, x0(n).shape()), reduce_to(neg(mul(g, q)), x1(n).shape())};
}
Grads pow_rule(const Node& n, const Value& out, const Value& g) {
  DType dt = g.dtype();
  const Value &a = x0(n), &b = x1(n);
  Value zero = k(0, dt);
  // As PyTorch: no gradient to the base where the exponent is 0, nor to the exponent where
  // 0 ** b with b >= 0 (log 0 would give nan).
  Value ga = where(nd(OpKind::Eq, {b, zero}), zero,
                   mul(g, mul(b, nd(OpKind::Pow, {a, sub(b, k(1, dt))}))));
  Value base_zero = nd(OpKind::BitwiseAnd, {nd(OpKind::Eq, {a, zero}), nd(OpKind::Ge, {b, zero})});
  Value gb = where(base_zero, zero, mul(g, mul(out, nd(OpKind::Log, {a}))));
  return {reduce_to(ga, a.shape()), reduce_to(gb, b.shape())};
}
// Maximum/minimum: the winner takes the gradient; a tie splits it evenly (as PyTorch).
Grads extremum_rule(const Node& n, const Value& g, OpKind wins) {
  DType dt = g.dtype();
  const Value &a = x0(n), &b = x1(n);
  Value wa = add(as_float(nd(wins, {a, b}), dt), mul(as_float(nd(OpKind::Eq, {a, b}), dt), k(0.5, dt)));
  Value ga = mul(g, wa);
  return {reduce_to(ga, a.shape()), reduce_to(sub(g, ga), b.shape())};
}
Grads maximum_rule(const Node& n, const Value&, const Value& g) { return extremum_rule(n, g, OpKind::Gt); }
Grads minimum_rule(const Node& n, const Value&, const Value& g) { return extremum_rule(n, g, OpKind::Lt); }
Grads where_rule(const Node& n, const Value&, const Value& g) {
  Value zero = k(0, g.dtype());
  return {Value{}, reduce_to(where(x0(n), g, zero), x1(n).shape()),
          reduce_to(where(x0(n), zero, g), n.operands[2].shape())};
}

// ---- reductions ----
Grads reduce_sum_rule(const Node& n, const Value&, const Value& g) {
  return {unreduce(g, n, x0(n).shape())};
}
// out / x where x != 0. At a zero, out / x is nan; PyTorch gives the product of the others there
// when it is its reduction's only zero, and 0 when there are more.
Grads reduce_prod_rule(const Node& n, const Value& out, const Value& g) {
  DType dt = g.dtype();
  const Value& x = x0(n);
  const Shape& in = x.shape();
  Value zero = k(0, dt), one = k(1, dt);
  Value is_zero = nd(OpKind::Eq, {x, zero});
  Value nonzero = where(is_zero, one, x);
  const std::vector<int64_t>& dims = n.attr<ir::ReduceAttrs>().dims;
  Value others = nd(OpKind::ReduceProd, {nonzero}, ir::ReduceAttrs{dims, true});  // the nonzero ones
  Value one_zero = nd(OpKind::Eq, {sum_dims(as_float(is_zero, dt), dims, true), one});
  Value at_zero = frontend::broadcast_to(where(one_zero, others, zero), in);
  Value elsewhere = div(unreduce(out, n, in), nonzero);
  return {mul(unreduce(g, n, in), where(is_zero, at_zero, elsewhere))};
}
// Max/min: the gradient is shared evenly by the elements equal to the extremum (as amax).
Grads reduce_extremum_rule(const Node& n, const Value& out, const Value& g) {
  const Shape& in = x0(n).shape();
  Value mask = as_float(nd(OpKind::Eq, {x0(n), unreduce(out, n, in)}), g.dtype());
  Value count = sum_dims(mask, n.attr<ir::ReduceAttrs>().dims, true);
  return {div(mul(mask, unreduce(g, n, in)), count)};
}

// ---- matrix ----
Value transpose_last(const Value& v) {
  ir::PermuteAttrs a;
  int64_t r = static_cast<int64_t>(v.shape().size());
  for (int64_t i = 0; i < r; ++i) a.perm.push_back(i);
  std::swap(a.perm[r - 1], a.perm[r - 2]);
  return nd(OpKind::Permute, {v}, a);
}
Grads matmul_rule(const Node& n, const Value&, const Value& g) {
  const Value &a = x0(n), &b = x1(n);
  return {reduce_to(nd(OpKind::MatMul, {g, transpose_last(b)}), a.shape()),
          reduce_to(nd(OpKind::MatMul, {transpose_last(a), g}), b.shape())};
}

// ---- movement ----
Grads reshape_rule(const Node& n, const Value&, const Value& g) { return {reshape(g, x0(n).shape())}; }
Grads permute_rule(const Node& n, const Value&, const Value& g) {
  const std::vector<int64_t>& perm = n.attr<ir::PermuteAttrs>().perm;
  ir::PermuteAttrs inv{std::vector<int64_t>(perm.size())};
  for (size_t i = 0; i < perm.size(); ++i) inv.perm[perm[i]] = static_cast<int64_t>(i);
  return {nd(OpKind::Permute, {g}, inv)};
}
Grads expand_rule(const Node& n, const Value&, const Value& g) { return {reduce_to(g, x0(n).shape())}; }
Grads slice_rule(const Node& n, const Value&, const Value& g) {
  return {nd(OpKind::SliceScatter, {zeros_v(x0(n).shape(), g.dtype()), g}, n.attrs)};
}
Grads cat_rule(const Node& n, const Value&, const Value& g) {
  Grads out;
  int64_t dim = n.attr<ir::DimAttrs>().dim, at = 0;
  for (const Value& v : n.operands) {
    int64_t len = v.shape()[dim];
    out.push_back(nd(OpKind::Slice, {g}, ir::SliceAttrs{dim, at, at + len, 1}));
    at += len;
  }
  return out;
}
Grads slice_scatter_rule(const Node& n, const Value&, const Value& g) {
  return {nd(OpKind::SliceScatter, {g, zeros_v(x1(n).shape(), g.dtype())}, n.attrs),
          nd(OpKind::Slice, {g}, n.attrs)};
}

// ---- indexing (index operands are integers: no gradient) ----
Grads index_select_rule(const Node& n, const Value&, const Value& g) {
  const Shape& in = x0(n).shape();
  if (in.empty()) return {reshape(g, in), Value{}};
  int64_t dim = n.attr<ir::DimAttrs>().dim;
  Shape is(in.size(), 1);
  is[dim] = x1(n).shape()[0];
  Value idx = frontend::broadcast_to(reshape(x1(n), is), g.shape());
  return {nd(OpKind::ScatterAdd, {zeros_v(in, g.dtype()), idx, g}, n.attrs), Value{}};
}
Grads gather_rule(const Node& n, const Value&, const Value& g) {
  return {nd(OpKind::ScatterAdd, {zeros_v(x0(n).shape(), g.dtype()), x1(n), g}, n.attrs), Value{}};
}
Grads scatter_add_rule(const Node& n, const Value&, const Value& g) {
  const Value& src = n.operands[2];
  if (x1(n).shape() != src.shape()) {
    throw Error("backward of scatter_add: an index smaller than src is not supported");
  }
  return {g, Value{}, nd(OpKind::Gather, {g, x1(n)}, n.attrs)};
}
Grads index_copy_rule(const Node& n, const Value&, const Value& g) {
  const Value& src = n.operands[2];
  return {nd(OpKind::IndexCopy, {g, x1(n), zeros_v(src.shape(), g.dtype())}, n.attrs), Value{},
          nd(OpKind::IndexSelect, {g, x1(n)}, n.attrs)};
}

// ---- ordering (multi-output) ----
// The values' gradient goes back to where each value came from: the indices are a permutation
// along dim, so scatter_add puts each element exactly once. The indices take no gradient.
Grads sort_rule(const ir::NodePtr& n, const Grads& g) {
  if (!g[0]) return {Value{}};
  const Shape& in = x0(*n).shape();
  if (in.empty()) return {g[0]};
  return {nd(OpKind::ScatterAdd, {zeros_v(in, g[0].dtype()), Value{n, 1}, g[0]},
             ir::DimAttrs{n->attr<ir::SortAttrs>().dim})};
}

// ---- convolution and pooling (all linear in each operand) ----
ir::ConvAttrs conv_with_shape(const Node& n, const Shape& shape) {
  ir::ConvAttrs a = n.attr<ir::ConvAttrs>();
  a.shape = shape;
  return a;
}
Grads conv_rule(const Node& n, const Value&, const Value& g) {  // y = conv(x, w)
  const Value &x = x0(n), &w = x1(n);
  return {nd(OpKind::ConvBackwardInput, {g, w}, conv_with_shape(n, x.shape())),
          nd(OpKind::ConvBackwardWeight, {x, g}, conv_with_shape(n, w.shape()))};
}
Grads conv_backward_input_rule(const Node& n, const Value&, const Value& g) {  // dx = f(dy, w)
  const Value &dy = x0(n), &w = x1(n);
  return {nd(OpKind::Conv, {g, w}, conv_with_shape(n, {})),
          nd(OpKind::ConvBackwardWeight, {g, dy}, conv_with_shape(n, w.shape()))};
}
// Each pooled value came from one input element (its index, flat within its plane): the
// gradient is added back there, plane by plane.
Grads max_pool_rule(const ir::NodePtr& n, const Grads& g) {
  if (!g[0]) return {Value{}};
  const Shape& in = x0(*n).shape();
  const size_t sp = n->attr<ir::PoolAttrs>().kernel.size();
  int64_t planes = 1, in_plane = 1, out_plane = 1;
  for (size_t i = 0; i < in.size(); ++i) (i + sp < in.size() ? planes : in_plane) *= in[i];
  for (size_t i = n->shape.size() - sp; i < n->shape.size(); ++i) out_plane *= n->shape[i];
  Value idx = reshape(Value{n, 1}, {planes, out_plane});
  Value dx = nd(OpKind::ScatterAdd,
                {zeros_v({planes, in_plane}, g[0].dtype()), idx, reshape(g[0], {planes, out_plane})},
                ir::DimAttrs{1});
  return {reshape(dx, in)};
}
ir::PoolAttrs pool_with_shape(const Node& n, const Shape& shape) {
  ir::PoolAttrs a = n.attr<ir::PoolAttrs>();
  a.shape = shape;
  return a;
}
Grads avg_pool_rule(const Node& n, const Value&, const Value& g) {
  return {nd(OpKind::AvgPoolBackward, {g}, pool_with_shape(n, x0(n).shape()))};
}

// ---- scans ----
Value scan(OpKind op, Value v, int64_t dim, bool reverse) {
  return nd(op, {std::move(v)}, ir::ScanAttrs{dim, reverse});
}
// out = cumsum(x): each x[i] reaches every out[k] after it, so dx = the reversed cumsum of g.
Grads cumsum_rule(const Node& n, const Value&, const Value& g) {
  const auto& a = n.attr<ir::ScanAttrs>();
  return {scan(OpKind::CumSum, g, a.dim, !a.reverse)};
}
// out = cumprod(x): dx[i] = sum over k >= i of g[k] * (out[k] without the factor x[i]). Before
// a line's first zero that is the reversed cumsum of g * out, divided by x[i]; at the first zero
// it is the reversed cumsum of g * cumprod(x with that zero read as 1); after it every product
// keeps that zero, so 0 (PyTorch's cases, without its division at the zero).
Grads cumprod_rule(const Node& n, const Value& out, const Value& g) {
  const auto& a = n.attr<ir::ScanAttrs>();
  const Value& x = x0(n);
  DType dt = g.dtype();
  Value zero = k(0, dt), one = k(1, dt);
  Value is_zero = nd(OpKind::Eq, {x, zero});
  Value zeros_so_far = scan(OpKind::CumSum, as_float(is_zero, dt), a.dim, a.reverse);
  Value before = nd(OpKind::Eq, {zeros_so_far, zero});
  Value first = nd(OpKind::BitwiseAnd, {is_zero, nd(OpKind::Eq, {zeros_so_far, one})});
  Value x_nonzero = where(is_zero, one, x);
  Value plain = div(scan(OpKind::CumSum, mul(g, out), a.dim, !a.reverse), x_nonzero);
  Value without_first =
      scan(OpKind::CumProd, where(first, one, x), a.dim, a.reverse);  // the first zero read as 1
  Value at_first = scan(OpKind::CumSum, mul(g, without_first), a.dim, !a.reverse);
  return {where(before, plain, where(first, at_first, zero))};
}

constexpr GradRule rule(VjpFn f) { return {GradKind::Rule, f}; }
constexpr GradRule multi_rule(MultiVjpFn f) { return {GradKind::Rule, nullptr, f}; }
constexpr GradRule kLeaf{GradKind::Leaf};
constexpr GradRule kNone{GradKind::NotDifferentiable};

}  // namespace

GradRule grad_rule(OpKind op) {
  // Generated from op_table.def's grad column: a primitive's gradient is decided in its row.
#define leaf kLeaf
#define none kNone
#define vjp(f) rule(f)
#define multi_vjp(f) multi_rule(f)
  static constexpr GradRule kRules[] = {
#define LZ_OP(name, str, cls, arity, outputs, attrs, accepts, result, grad) grad,
#include "ir/op_table.def"
#undef LZ_OP
  };
#undef leaf
#undef none
#undef vjp
#undef multi_vjp
  static_assert(std::size(kRules) == static_cast<size_t>(OpKind::kNumOps));
  const auto i = static_cast<size_t>(op);
  return i < std::size(kRules) ? kRules[i] : kNone;
}

}  // namespace lz::autograd
