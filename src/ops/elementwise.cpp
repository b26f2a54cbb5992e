// Elementwise ops: type promotion, broadcasting checks, and the unary/binary/ternary primitives.
#include <limits>
#include <optional>

#include "ops/frontend.h"

namespace lz {
using frontend::desc;
using frontend::describe;
using frontend::node;
using frontend::wrap;
using ir::OpKind;

DType result_type(const std::vector<Operand>& operands) {
  // PyTorch's three tiers: tensors with dims, zero-dim tensors, then numbers. A lower tier only
  // matters when its category (bool < integer < float) is higher than everything above it.
  std::optional<DType> dimmed, zero_dim;
  int scalar_cat = -1;
  for (const Operand& o : operands) {
    if (o.is_tensor()) {
      DType t = o.tensor().dtype();
      auto& slot = o.tensor().dim() > 0 ? dimmed : zero_dim;
      slot = slot ? promote_types(*slot, t) : t;
    } else {
      int c = o.scalar().kind() == Scalar::Kind::Float ? 2 : o.scalar().kind() == Scalar::Kind::Int ? 1 : 0;
      scalar_cat = std::max(scalar_cat, c);
    }
  }
  std::optional<DType> r = dimmed;
  if (zero_dim && (!r || dtype_category(*zero_dim) > dtype_category(*r))) r = zero_dim;
  if (scalar_cat >= 0 && (!r || scalar_cat > dtype_category(*r))) {
    r = scalar_cat == 2 ? default_float_dtype() : scalar_cat == 1 ? DType::Int64 : DType::Bool;
  }
  return r.value_or(DType::Float32);
}

namespace {

void checked_broadcast(const char* name, const std::vector<Operand>& ops) {
  Shape s = frontend::operand_shape(ops[0], name);
  for (size_t i = 1; i < ops.size(); ++i) {
    const Shape& o = frontend::operand_shape(ops[i], name);
    if (o == s || o.empty()) continue;
    try {
      s = broadcast_shapes(s, o, name);
    } catch (const ValueError&) {
      throw ValueError(describe(name, ops) + ": shapes " + shape_str(s) + " and " + shape_str(o) +
                       " are not broadcastable");
    }
  }
}

bool is_bool(const Operand& o) {
  return o.is_tensor() ? o.tensor().defined() && o.tensor().dtype() == DType::Bool
                       : o.scalar().kind() == Scalar::Kind::Bool;
}

Tensor binary(const char* name, OpKind op, const Operand& a, const Operand& b,
              bool logical = false) {
  if (op == OpKind::Sub && (is_bool(a) || is_bool(b))) {
    // PyTorch refuses it too, even when the other operand promotes the result to a number.
    throw TypeError(describe(name, {a, b}) +
                    ": subtraction, the `-` operator, with a bool tensor or a bool is not supported; "
                    "to invert a mask use `~` or logical_not()");
  }
  DType dt;
  const internal::TensorImpl* ta = a.is_tensor() ? a.tensor().impl().get() : nullptr;
  const internal::TensorImpl* tb = b.is_tensor() ? b.tensor().impl().get() : nullptr;
  if (ta && tb && ta->dtype() == tb->dtype() && ta->shape() == tb->shape()) {
    dt = ta->dtype();  // the common case: nothing to promote or broadcast
  } else {
    std::vector<Operand> ops{a, b};
    checked_broadcast(name, ops);
    dt = result_type(ops);
  }
  // The op table's dtype policy (op_table.def): float-only ops promote (true division of
  // integers is a float), others refuse what they are not defined for. Logical ops compute on
  // bools whatever the operands.
  const uint8_t accepts = ir::op_info(op).accepts;
  if (logical) {
    dt = DType::Bool;
  } else if (ir::float_only(op)) {
    if (!is_floating(dt)) dt = default_float_dtype();
  } else if (!ir::accepts_dtype(accepts, dt)) {
    throw TypeError(describe(name, {a, b}) + ": is not supported for " +
                    (dt == DType::Bool ? "bool" : "floating") + " operands (needs " +
                    ir::dtype_set_str(accepts) + " operands)");
  }
  if (is_reduced_float(dt) && (!a.is_tensor() || !b.is_tensor()) &&
      (op == OpKind::Add || op == OpKind::Sub || op == OpKind::Mul || op == OpKind::Div)) {
    // PyTorch's CPU kernels apply a Python number to a 16-bit tensor in float32, unrounded
    // (`original_scalar_value<opmath_t>`): x * 0.1 multiplies by float32's 0.1, not bfloat16's.
    return wrap(frontend::cast(node(op, {frontend::operand_value(a, DType::Float32, name),
                                         frontend::operand_value(b, DType::Float32, name)}),
                               dt));
  }
  return wrap(node(op, {frontend::operand_value(a, dt, name), frontend::operand_value(b, dt, name)}));
}

// A unary primitive by its op table row: an op defined only for floats computes integer and bool
// inputs in the default float dtype (exp(int) is a float, as in PyTorch); a dtype outside the
// row's accepts column is refused here, at the user's line, in the user's words.
Tensor unary_op(const char* name, OpKind op, const Tensor& x) {
  ir::Value v = frontend::value_of(x, name);
  if (ir::float_only(op)) {
    if (!is_floating(v.dtype())) v = frontend::cast(v, default_float_dtype());
  } else if (uint8_t set = ir::op_info(op).accepts; !ir::accepts_dtype(set, v.dtype())) {
    throw TypeError(desc(name, x) + ": " + std::string(dtype_name(v.dtype())) +
                    " is not supported (needs a " + ir::dtype_set_str(set) + " tensor)");
  }
  return wrap(frontend::unary(op, v));
}

// floor/ceil/round of an integer tensor is the tensor itself (a new tensor with the same value).
Tensor unary_rounding(const char* name, OpKind op, const Tensor& x) {
  ir::Value v = frontend::value_of(x, name);
  if (!is_floating(v.dtype())) return wrap(v);
  return unary_op(name, op, x);
}

}  // namespace

Tensor neg(const Tensor& x) {
  if (x.defined() && x.dtype() == DType::Bool) {
    throw TypeError("neg(bool" + shape_str(x.shape()) + "): negation of a bool tensor is not supported; use logical_not");
  }
  return unary_op("neg", OpKind::Neg, x);
}

// The functions of lazuli/elementwise.def, one primitive each.
#define LZ_UNARY(fn, op) \
  Tensor fn(const Tensor& x) { return unary_op(#fn, OpKind::op, x); }
#define LZ_UNARY_ROUNDING(fn, op) \
  Tensor fn(const Tensor& x) { return unary_rounding(#fn, OpKind::op, x); }
#define LZ_BINARY(fn, op) \
  Tensor fn(const Operand& a, const Operand& b) { return binary(#fn, OpKind::op, a, b); }
#define LZ_BINARY_LOGICAL(fn, op) \
  Tensor fn(const Operand& a, const Operand& b) { return binary(#fn, OpKind::op, a, b, true); }
#include "lazuli/elementwise.def"
#undef LZ_UNARY
#undef LZ_UNARY_ROUNDING
#undef LZ_BINARY
#undef LZ_BINARY_LOGICAL

Tensor logical_not(const Tensor& x) {
  ir::Value v = frontend::cast(frontend::value_of(x, "logical_not"), DType::Bool);
  return wrap(frontend::unary(OpKind::BitwiseNot, v));
}
Tensor cast(const Tensor& x, DType dtype) { return wrap(frontend::cast(frontend::value_of(x, "to"), dtype)); }

Tensor pow(const Operand& a, const Operand& b) {
  // PyTorch refuses an integer tensor to a negative integer number (tensor exponents are fine).
  if (a.is_tensor() && a.tensor().defined() && !is_floating(a.tensor().dtype()) && !b.is_tensor() &&
      b.scalar().kind() != Scalar::Kind::Float && b.scalar().to_int() < 0) {
    throw ValueError(describe("pow", {a, b}) +
                     ": Integers to negative integer powers are not allowed; use a float base "
                     "(x.float() ** " + std::to_string(b.scalar().to_int()) +
                     ") or a tensor exponent");
  }
  // x ** 0.5 and x ** -0.5 are sqrt and rsqrt, as PyTorch computes them: -0.0 gives -0.0 and
  // -inf, where pow's formula gives +0.0 and +inf.
  if (a.is_tensor() && a.tensor().defined() && is_floating(a.tensor().dtype()) && !b.is_tensor() &&
      b.scalar().kind() == Scalar::Kind::Float) {
    const double e = b.scalar().to_double();
    if (e == 0.5) return unary_op("pow", OpKind::Sqrt, a.tensor());
    if (e == -0.5) return unary_op("pow", OpKind::Rsqrt, a.tensor());
  }
  // Small integer exponents are products, as PyTorch's CPU kernel computes them (x, x * x * x,
  // 1 / (x * x)): the same bits as eager, and no pow call, which is slow for negative bases (the
  // vector powf takes a scalar path per lane). The exponent is then part of the program, as 0.5
  // is. Only where the result keeps the base's dtype; float16 and bfloat16 keep pow's one
  // rounding.
  if (a.is_tensor() && a.tensor().defined() && !b.is_tensor()) {
    const Tensor& x = a.tensor();
    const DType dt = x.dtype();
    const bool wide_float = dt == DType::Float32 || dt == DType::Float64;
    const bool int_power =
        dt != DType::Bool && !is_floating(dt) && b.scalar().kind() != Scalar::Kind::Float;
    const double e = b.scalar().kind() == Scalar::Kind::Float
                         ? b.scalar().to_double()
                         : static_cast<double>(b.scalar().to_int());
    if (wide_float || int_power) {
      if (e == 1.0) return contiguous(x);  // eager copies the base (a backward's x ** (2 - 1))
      if (e == 2.0) return mul(x, x);
      if (e == 3.0) return mul(mul(x, x), x);
    }
    if (wide_float && e == -1.0) return div(1, x);
    if (wide_float && e == -2.0) return div(1, mul(x, x));
  }
  return binary("pow", OpKind::Pow, a, b);
}

Tensor where(const Tensor& cond, const Operand& a, const Operand& b) {
  std::vector<Operand> ops{cond, a, b};
  if (!cond.defined() || cond.dtype() != DType::Bool) {
    throw TypeError(describe("where", ops) + ": the condition must be a bool tensor");
  }
  checked_broadcast("where", ops);
  DType dt = result_type({a, b});
  return wrap(node(OpKind::Where, {frontend::value_of(cond, "where"),
                                   frontend::operand_value(a, dt, "where"),
                                   frontend::operand_value(b, dt, "where")}));
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  if (!min && !max) throw ValueError("clamp: at least one of min and max must be given");
  if (!x.defined()) throw ValueError("clamp: got an undefined tensor");
  std::vector<Operand> ops{x};
  if (min) ops.push_back(*min);
  if (max) ops.push_back(*max);
  // A bool tensor computes in the bounds' type, as PyTorch's: int64 for integer bounds.
  DType dt = result_type(ops);
  if (dt == DType::Bool) throw TypeError(describe("clamp", ops) + ": bool is not supported");
  ir::Value v = frontend::cast(frontend::value_of(x, "clamp"), dt);
  // Selects, not maximum/minimum (which split a tie): as the pinned PyTorch (2.15), x at a bound
  // takes the bound (gradient 0; only x strictly inside passes it), and a nan (in x or the bound)
  // comes out nan with gradient 0.
  auto bound = [&](ir::Value v, const Scalar& b, OpKind outside, OpKind inside) {
    ir::Value bv = frontend::scalar_value(b, dt);
    ir::Value in = v;
    if (is_floating(dt)) {
      ir::Value nan{ir::make_constant(std::numeric_limits<double>::quiet_NaN(), dt), 0};
      in = node(OpKind::Where, {node(inside, {v, bv}), v, nan});
    }
    return node(OpKind::Where, {node(outside, {v, bv}), bv, in});
  };
  if (min) v = bound(v, *min, OpKind::Le, OpKind::Ge);
  if (max) v = bound(v, *max, OpKind::Ge, OpKind::Le);
  return wrap(v);
}

Tensor operator+(const Tensor& a, const Operand& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Operand& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Operand& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Operand& b) { return div(a, b); }
Tensor operator%(const Tensor& a, const Operand& b) { return remainder(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(a, b); }
Tensor operator==(const Tensor& a, const Operand& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Operand& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Operand& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Operand& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Operand& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Operand& b) { return ge(a, b); }
Tensor operator&(const Tensor& a, const Operand& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Operand& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Operand& b) { return bitwise_xor(a, b); }

}  // namespace lz
