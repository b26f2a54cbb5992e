// Table entries: elementwise ops and activations (aten/table.h).
//
// Type promotion is PyTorch's (promote(): dimensioned tensors, 0-d tensors, then numbers): each
// binary entry casts its operands to the result dtype first, so an op never computes in a
// narrower type than eager does (float64 + int64 * alpha stays float64 throughout).
#include <cmath>
#include <limits>

#include "aten/entries.h"
#include "lazuli/nn.h"

namespace lz::aten {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Binary {
  Operand a, b;
  DType dtype;
};

// a and b cast to their promoted dtype (or to `dtype` when given).
Binary binary(const Arg& a, const Arg& b, std::optional<DType> dtype = std::nullopt) {
  DType dt = dtype ? *dtype : promote({&a, &b});
  return {cast(operand(a), dt), cast(operand(b), dt), dt};
}

bool is_int_number(const Arg& a) { return a.kind() == Arg::Kind::Int; }

// ---- add, sub, mul, div -------------------------------------------------------------------------

std::optional<std::string> alpha_when(const Args& a) {
  const Arg& alpha = a[2];
  bool one = alpha.to_double() == 1.0;
  DType dt = promote({&a[0], &a[1]});
  if (!one && !is_floating(dt) && alpha.kind() == Arg::Kind::Double) {
    return "a float alpha on an integer result";
  }
  if (dt == DType::Bool && !one) return "alpha on bool operands";
  return std::nullopt;
}

// alpha * b in the result dtype (b already cast to it).
Operand scaled(const Operand& b, const Arg& alpha, DType dt) {
  if (alpha.to_double() == 1.0) return b;
  Operand s = cast(operand(alpha), dt);
  if (b.is_tensor()) return Operand(mul(b.tensor(), s));
  if (is_floating(dt)) return cast(Operand(Scalar(b.scalar().to_double() * alpha.to_double())), dt);
  return cast(Operand(Scalar(static_cast<long long>(b.scalar().to_int() * s.scalar().to_int()))),
              dt);
}

Arg add_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  if (x.dtype == DType::Bool) return logical_or(x.a, x.b);
  return add(x.a, scaled(x.b, a[2], x.dtype));
}

Arg sub_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  return sub(x.a, scaled(x.b, a[2], x.dtype));
}

Arg rsub_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  return sub(x.b, scaled(x.a, a[2], x.dtype));
}

Arg mul_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  if (x.dtype == DType::Bool) return logical_and(x.a, x.b);
  return mul(x.a, x.b);
}

DType true_div_dtype(const Arg& a, const Arg& b) {
  DType dt = promote({&a, &b});
  return is_floating(dt) ? dt : default_float_dtype();
}

Arg div_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1], true_div_dtype(a[0], a[1]));
  return div(x.a, x.b);
}

Tensor trunc(const Tensor& x) {
  if (!is_floating(x.dtype())) return x;
  return where(lt(x, 0), ceil(x), floor(x));
}

Tensor int_trunc_div(const Tensor& a, const Operand& b) {
  Tensor q = floor_divide(a, b);
  // Floor and truncation differ when the quotient is negative and inexact.
  Tensor inexact = ne(mul(q, b), a);
  return where(logical_and(inexact, lt(q, 0)), add(q, 1), q);
}

std::optional<std::string> mode_when(const Args& a) {
  const Arg& mode = a[2];
  if (!mode.is_none() && mode.text() != "trunc" && mode.text() != "floor") {
    return "rounding_mode='" + mode.text() + "'";
  }
  if (!mode.is_none() && promote({&a[0], &a[1]}) == DType::Bool)
    return "rounding division of bools";
  return std::nullopt;
}

Arg div_mode_entry(const Args& a, Call& call) {
  const Arg& mode = a[2];
  if (mode.is_none()) return div_entry(a, call);
  Binary x = binary(a[0], a[1]);
  if (mode.text() == "floor") return floor_divide(x.a, x.b);
  if (is_floating(x.dtype)) return trunc(div(x.a, x.b));
  Tensor num = x.a.is_tensor() ? x.a.tensor() : full({}, x.a.scalar(), x.dtype);
  Operand den = x.b.is_tensor() ? x.b : Operand(full({}, x.b.scalar(), x.dtype));
  return int_trunc_div(num, den);
}

Arg floor_divide_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  return floor_divide(x.a, x.b);
}

Arg remainder_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  return remainder(x.a, x.b);
}

Arg fmod_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  Tensor r = remainder(x.a, x.b);
  // remainder takes the divisor's sign, fmod the dividend's.
  Tensor fix = logical_and(ne(r, 0), ne(lt(r, 0), lt(x.a, 0)));
  return where(fix, sub(r, x.b), r);
}

std::optional<std::string> pow_when(const Args& a) {
  DType dt = promote({&a[0], &a[1]});
  if (!is_floating(dt)) {
    if (dt == DType::Bool) return "pow of bools";
    if (is_int_number(a[1]) && a[1].to_int() < 0) return "an integer to a negative integer power";
    if (a[1].is_tensor() && !is_floating(dtype_of(a[1]))) {
      return "an integer tensor exponent (negative values raise in eager)";
    }
  }
  return std::nullopt;
}

Arg pow_entry(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  Tensor base = x.a.is_tensor() ? x.a.tensor() : full({}, x.a.scalar(), x.b.tensor().dtype());
  // lz::pow takes x ** 0.5 and the small integer exponents of the other dtypes (ops.h).
  if (!x.b.is_tensor() && is_reduced_float(x.dtype) && x.b.scalar().to_double() == 2.0) {
    return mul(base, base);
  }
  return pow(base, x.b);
}

template <Tensor (*F)(const Operand&, const Operand&)>
Arg promoted(const Args& a, Call&) {
  Binary x = binary(a[0], a[1]);
  return F(x.a, x.b);
}

template <Tensor (*F)(const Operand&, const Operand&)>
Arg logical(const Args& a, Call&) {
  return F(cast(operand(a[0]), DType::Bool), cast(operand(a[1]), DType::Bool));
}

Arg where_entry(const Args& a, Call&) {
  Binary x = binary(a[1], a[2]);
  return where(a[0].tensor(), x.a, x.b);
}

// ---- clamp --------------------------------------------------------------------------------------

Tensor clamp_bounds(const Arg& x, const Arg& lo, const Arg& hi) {
  DType dt = promote({&x, &lo, &hi});
  Tensor y = cast(operand(x), dt).tensor();
  if (!lo.is_none()) y = maximum(y, cast(operand(lo), dt));
  if (!hi.is_none()) y = minimum(y, cast(operand(hi), dt));
  return y;
}

std::optional<std::string> clamp_when(const Args& a) {
  if (a[1].is_none() && a[2].is_none()) return "neither min nor max";
  if (dtype_of(a[0]) == DType::Bool) return "clamp of bools";
  return std::nullopt;
}

// ---- unary --------------------------------------------------------------------------------------

template <Tensor (*F)(const Tensor&)>
Arg unary(const Args& a, Call&) {
  return F(a[0].tensor());
}

Tensor as_float(const Tensor& x) {
  return is_floating(x.dtype()) ? x : x.to(default_float_dtype());
}

// logit(self, eps): as eager's kernel, x below eps reads eps and x above 1 - eps reads 1 - eps
// (in that order, so eps > 0.5 swaps the bounds); NaN stays NaN.
Arg logit_entry(const Args& a, Call&) {
  Tensor x = as_float(a[0].tensor());
  if (!a[1].is_none() && a[1].to_double() >= 0) {
    double eps = a[1].to_double();
    x = where(lt(x, eps), eps, where(gt(x, 1 - eps), 1 - eps, x));
  }
  return log(div(x, sub(1.0, x)));
}

Arg exp2_entry(const Args& a, Call&) {
  Tensor x = as_float(a[0].tensor());
  return pow(full({}, 2.0, x.dtype()), x);
}

Arg round_decimals_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  int64_t decimals = a[1].to_int();
  if (decimals == 0) return round(x);
  if (decimals > 0) {
    double scale = std::pow(10.0, static_cast<double>(decimals));
    return div(round(mul(x, scale)), scale);
  }
  double scale = std::pow(10.0, static_cast<double>(-decimals));
  return mul(round(div(x, scale)), scale);
}

Arg trunc_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  return is_floating(x.dtype()) ? trunc(x) : add(x, 0);
}

std::optional<std::string> approximate_refused(const Arg& approximate) {
  const std::string& name = approximate.text();
  if (name == "none" || name == "tanh") return std::nullopt;
  return "approximate='" + name + "'";
}

Arg hardtanh_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  DType dt = x.dtype();
  return minimum(maximum(x, cast(operand(a[1]), dt)), cast(operand(a[2]), dt));
}

Arg leaky_relu_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  return where(gt(x, 0), x, mul(x, a[1].to_double()));
}

Arg elu_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  double alpha = a[1].to_double(), scale = a[2].to_double(), input_scale = a[3].to_double();
  Tensor neg = mul(expm1(mul(x, input_scale)), alpha * scale);
  return where(gt(x, 0), mul(x, scale), neg);
}

// ---- masked_fill ----------------------------------------------------------------------------

std::optional<std::string> masked_fill_when(const Args& a) {
  if (DType m = dtype_of(a[1]); m != DType::Bool) {
    return "a mask of dtype " + std::string(dtype_name(m));
  }
  if (a[2].is_tensor() && a[2].tensor_dim() != 0) return "a value tensor with dims";
  return std::nullopt;
}

// The value converted to self's dtype first (2.7 into an int tensor is 2), as eager.
Arg masked_fill_entry(const Args& a, Call&) {
  const Tensor& x = a[0].tensor();
  Operand value = a[2].is_tensor() ? Operand(a[2].tensor()) : cast(operand(a[2]), x.dtype());
  return masked_fill(x, a[1].tensor(), value);
}

// ---- backward formulas: autograd's derivatives (FunctionsManual.cpp, the CPU kernels) ----------

Arg gelu_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor& x = a[1].tensor();
  if (a[2].text() == "tanh") {
    // y = 0.5 x (1 + tanh(inner)), inner = beta (x + kappa x^3).
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
    Tensor x_sq = mul(x, x);
    Tensor t = tanh(mul(add(x, mul(mul(x_sq, x), kappa)), beta));
    Tensor left_derivative = mul(add(t, 1.0), 0.5);
    Tensor inner_derivative = mul(add(mul(x_sq, 3.0 * kappa), 1.0), beta);
    Tensor right_derivative = mul(mul(mul(x, 0.5), sub(1.0, mul(t, t))), inner_derivative);
    return mul(grad, add(left_derivative, right_derivative));
  }
  // cdf(x) + x pdf(x) of the standard normal.
  Tensor cdf = mul(add(erf(mul(x, M_SQRT1_2)), 1.0), 0.5);
  Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), M_2_SQRTPI * M_SQRT1_2 * 0.5);
  return mul(grad, add(cdf, mul(x, pdf)));
}

Arg silu_backward_entry(const Args& a, Call&) {
  const Tensor& x = a[1].tensor();
  Tensor s = sigmoid(x);
  return mul(mul(a[0].tensor(), s), add(mul(x, sub(1.0, s)), 1.0));
}

// The kinks take the outer pieces' slopes, as eager's kernels.
Arg hardswish_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor& x = a[1].tensor();
  Tensor middle = mul(grad, add(div(x, 3.0), 0.5));
  return where(le(x, -3.0), zeros({}, grad.dtype()), where(lt(x, 3.0), middle, grad));
}

Arg hardsigmoid_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor& x = a[1].tensor();
  return where(logical_and(gt(x, -3.0), lt(x, 3.0)), div(grad, 6.0), zeros({}, grad.dtype()));
}

// hardtanh_backward(grad_output, self, min_val, max_val): 0 at the bounds themselves.
Arg hardtanh_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  const Tensor& x = a[1].tensor();
  Tensor outside = logical_or(le(x, operand(a[2])), ge(x, operand(a[3])));
  return where(outside, zeros({}, grad.dtype()), grad);
}

std::optional<std::string> dropout_backward_when(const Args& a) {
  if (DType m = dtype_of(a[1]); m != DType::Bool) {
    return "a mask of dtype " + std::string(dtype_name(m));
  }
  return std::nullopt;
}

// native_dropout_backward(grad_output, mask, scale): an integer or bool gradient gives the
// default float dtype, as eager's product with the float scale.
Arg dropout_backward_entry(const Args& a, Call&) {
  const Tensor& grad = a[0].tensor();
  DType dt = is_floating(grad.dtype()) ? grad.dtype() : default_float_dtype();
  return mul(mul(as_float(grad), a[1].tensor().to(dt)), a[2].to_double());
}

}  // namespace

void add_pointwise(TableBuilder& b) {
  b.add({"aten.add.Tensor", "aten.add.Scalar"}, kAll, add_entry,
        {.when = alpha_when, .note = "bool + bool is logical or"});
  b.add({"aten.sub.Tensor", "aten.sub.Scalar"}, kNumbers, sub_entry, {.when = alpha_when});
  b.add({"aten.rsub.Tensor", "aten.rsub.Scalar"}, kNumbers, rsub_entry, {.when = alpha_when});
  b.add({"aten.mul.Tensor", "aten.mul.Scalar"}, kAll, mul_entry,
        {.note = "bool * bool is logical and"});
  b.add({"aten.div.Tensor", "aten.div.Scalar"}, kAll, div_entry,
        {.note = "integers divide in float32, as eager"});
  b.add({"aten.div.Tensor_mode", "aten.div.Scalar_mode"}, kNumbers, div_mode_entry,
        {.when = mode_when, .note = "rounding_mode None, 'trunc' or 'floor'"});
  b.add({"aten.floor_divide.default", "aten.floor_divide.Scalar"}, kNumbers, floor_divide_entry);
  b.add({"aten.remainder.Tensor", "aten.remainder.Scalar", "aten.remainder.Scalar_Tensor"},
        kNumbers, remainder_entry);
  b.add({"aten.fmod.Tensor", "aten.fmod.Scalar"}, kInts, fmod_entry, {.note = "integers only"});
  b.add({"aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar"}, kNumbers,
        pow_entry, {.when = pow_when, .note = "no integer tensor exponents"});
  b.add({"aten.maximum.default"}, kAll, promoted<maximum>, {.note = "NaN propagates"});
  b.add({"aten.minimum.default"}, kAll, promoted<minimum>, {.note = "NaN propagates"});
  b.add({"aten.eq.Tensor", "aten.eq.Scalar"}, kAll, promoted<eq>);
  b.add({"aten.ne.Tensor", "aten.ne.Scalar"}, kAll, promoted<ne>);
  b.add({"aten.lt.Tensor", "aten.lt.Scalar"}, kAll, promoted<lt>);
  b.add({"aten.le.Tensor", "aten.le.Scalar"}, kAll, promoted<le>);
  b.add({"aten.gt.Tensor", "aten.gt.Scalar"}, kAll, promoted<gt>);
  b.add({"aten.ge.Tensor", "aten.ge.Scalar"}, kAll, promoted<ge>);
  b.add({"aten.logical_and.default"}, kAll, logical<logical_and>);
  b.add({"aten.logical_or.default"}, kAll, logical<logical_or>);
  b.add({"aten.logical_xor.default"}, kAll, logical<logical_xor>);
  const DTypeSet bits = kInts | DTypeSet{DType::Bool};
  b.add({"aten.bitwise_and.Tensor", "aten.bitwise_and.Scalar"}, bits, promoted<bitwise_and>);
  b.add({"aten.bitwise_or.Tensor", "aten.bitwise_or.Scalar"}, bits, promoted<bitwise_or>);
  b.add({"aten.bitwise_xor.Tensor", "aten.bitwise_xor.Scalar"}, bits, promoted<bitwise_xor>);
  b.add({"aten.where.self"}, kAll, where_entry);
  b.add({"aten.clamp.default", "aten.clamp.Tensor"}, kNumbers,
        [](const Args& a, Call&) -> Arg { return clamp_bounds(a[0], a[1], a[2]); },
        {.when = clamp_when, .note = "NaN propagates"});
  b.add({"aten.clamp_min.default", "aten.clamp_min.Tensor"}, kNumbers,
        [](const Args& a, Call&) -> Arg { return clamp_bounds(a[0], a[1], Arg()); });
  b.add({"aten.clamp_max.default", "aten.clamp_max.Tensor"}, kNumbers,
        [](const Args& a, Call&) -> Arg { return clamp_bounds(a[0], Arg(), a[1]); });
  // inductor's decompositions of lerp and softmax_backward emit it.
  b.add({"prims.fma.default"}, kFloats,
        [](const Args& a, Call&) -> Arg {
          return add(mul(operand(a[0]), operand(a[1])), operand(a[2]));
        },
        {.note = "rounded twice (a*b, then +c)"});

  // One Lazuli op of the same name, with the dtypes it takes as eager does. Integer and bool
  // inputs of the float functions compute in the default float dtype, as in eager.
  b.add({"aten.neg.default"}, kNumbers, unary<neg>);
  b.add({"aten.abs.default"}, kNumbers, unary<abs>);
  b.add({"aten.floor.default"}, kNumbers, unary<floor>);
  b.add({"aten.ceil.default"}, kNumbers, unary<ceil>);
  b.add({"aten.relu.default"}, kNumbers, unary<relu>);
  b.add({"aten.round.default"}, kNumbers, unary<round>, {.note = "half to even"});
  b.add({"aten.sign.default"}, kAll, unary<sign>);
  b.add({"aten.sgn.default"}, kAll, unary<sign>, {.note = "sign (no complex dtypes)"});
  b.add({"aten.logical_not.default"}, kAll, unary<logical_not>);
  b.add({"aten.bitwise_not.default"}, bits, unary<bitwise_not>);
  b.add({"aten.exp.default"}, kAll, unary<exp>);
  b.add({"aten.log.default"}, kAll, unary<log>);
  b.add({"aten.log1p.default"}, kAll, unary<log1p>);
  b.add({"aten.expm1.default"}, kAll, unary<expm1>);
  b.add({"aten.sqrt.default"}, kAll, unary<sqrt>);
  b.add({"aten.rsqrt.default"}, kAll, unary<rsqrt>);
  b.add({"aten.sin.default"}, kAll, unary<sin>);
  b.add({"aten.cos.default"}, kAll, unary<cos>);
  b.add({"aten.tan.default"}, kAll, unary<tan>);
  b.add({"aten.tanh.default"}, kAll, unary<tanh>);
  b.add({"aten.sigmoid.default"}, kAll, unary<sigmoid>);
  b.add({"aten.erf.default"}, kAll, unary<erf>);
  b.add({"aten.reciprocal.default"}, kAll, unary<reciprocal>);
  b.add({"aten.exp2.default"}, kAll, exp2_entry);
  b.add({"aten.log2.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return div(log(a[0].tensor()), std::log(2.0)); },
        {.note = "log(x) / log(2)"});
  b.add({"aten.log10.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return div(log(a[0].tensor()), std::log(10.0)); },
        {.note = "log(x) / log(10)"});
  b.add({"aten.logit.default"}, kAll, logit_entry,
        {.note = "log(x / (1 - x)); eps clamps x to [eps, 1 - eps] (a negative eps: none)"});
  b.add({"aten.round.decimals"}, kFloats, round_decimals_entry);
  b.add({"aten.trunc.default"}, kNumbers, trunc_entry);
  b.add({"aten.isnan.default"}, kAll,
        [](const Args& a, Call&) -> Arg { return ne(a[0].tensor(), a[0].tensor()); });
  b.add({"aten.isinf.default"}, kAll, [](const Args& a, Call&) -> Arg {
    const Tensor& x = a[0].tensor();
    if (!is_floating(x.dtype())) return zeros(x.shape(), DType::Bool);
    return eq(abs(x), kInf);
  });
  b.add({"aten.isfinite.default"}, kAll, [](const Args& a, Call&) -> Arg {
    const Tensor& x = a[0].tensor();
    if (!is_floating(x.dtype())) return ones(x.shape(), DType::Bool);
    return lt(abs(x), kInf);
  });
  b.add({"aten.gelu.default"}, kFloats,
        [](const Args& a, Call&) -> Arg { return nn::gelu(a[0].tensor(), a[1].text()); },
        {.when = [](const Args& a) { return approximate_refused(a[1]); },
         .note = "approximate 'none' or 'tanh'"});
  b.add({"aten.hardtanh.default"}, kNumbers, hardtanh_entry,
        {.note = "integer inputs truncate the bounds, as eager"});
  b.add({"aten.leaky_relu.default"}, kFloats, leaky_relu_entry);
  b.add({"aten.elu.default"}, kFloats, elu_entry);
  b.add({"aten.threshold_backward.default"}, kNumbers, [](const Args& a, Call&) -> Arg {
    const Tensor& grad = a[0].tensor();
    return where(le(a[1].tensor(), operand(a[2])), zeros_like(grad), grad);
  });
  b.add({"aten.silu.default"}, kFloats,
        [](const Args& a, Call&) -> Arg { return nn::silu(a[0].tensor()); },
        {.note = "x * sigmoid(x) (lz::nn::silu)"});
  b.add({"aten.hardswish.default"}, kFloats,
        [](const Args& a, Call&) -> Arg { return nn::hardswish(a[0].tensor()); },
        {.note = "lz::nn::hardswish"});
  b.add({"aten.hardsigmoid.default"}, kFloats,
        [](const Args& a, Call&) -> Arg { return nn::hardsigmoid(a[0].tensor()); },
        {.note = "x / 6 + 1/2 clamped to [0, 1] (lz::nn::hardsigmoid)"});
  b.add({"aten.masked_fill.Scalar", "aten.masked_fill.Tensor"}, kAll, masked_fill_entry,
        {.when = masked_fill_when, .note = "a bool mask; the value cast to self's dtype"});

  // The backward ops eager's autograd calls (a graph decomposed with the core decompositions has
  // their formulas instead).
  b.add({"aten.gelu_backward.default"}, kFloats, gelu_backward_entry,
        {.when = [](const Args& a) { return approximate_refused(a[2]); },
         .note = "approximate 'none' or 'tanh'"});
  b.add({"aten.tanh_backward.default"}, kFloats, [](const Args& a, Call&) -> Arg {
    const Tensor& y = a[1].tensor();
    return mul(a[0].tensor(), sub(1.0, mul(y, y)));
  });
  b.add({"aten.sigmoid_backward.default"}, kFloats, [](const Args& a, Call&) -> Arg {
    const Tensor& y = a[1].tensor();
    return mul(mul(a[0].tensor(), sub(1.0, y)), y);
  });
  b.add({"aten.silu_backward.default"}, kFloats, silu_backward_entry);
  b.add({"aten.hardswish_backward.default"}, kFloats, hardswish_backward_entry,
        {.note = "0 at -3, the gradient itself at 3, as eager"});
  b.add({"aten.hardsigmoid_backward.default"}, kFloats, hardsigmoid_backward_entry,
        {.note = "0 at -3 and 3, as eager"});
  b.add({"aten.hardtanh_backward.default"}, kFloats, hardtanh_backward_entry,
        {.note = "0 at the bounds, as eager"});
  b.add({"aten.native_dropout_backward.default"}, kAll, dropout_backward_entry,
        {.when = dropout_backward_when, .note = "grad * mask * scale"});
}

}  // namespace lz::aten
