"""Lowering entries: elementwise ops and activations (part of the table in lowering.py).

Type promotion is PyTorch's (lowering.promote: dimensioned tensors, zero-dim tensors, then Python
numbers): each binary entry casts its operands to the result dtype first, so an op never computes
in a narrower type than eager does (float64 + int64 * alpha stays float64 throughout).
"""
import math

import torch

import lazuli as lz

from .lowering import ALL, FLOATS, INTS, NUMBERS, aten, cast, lower, promote, torch_dtype


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _result_dtype(a, b):
    """Eager's result dtype for metas and numbers (in `when` functions)."""
    return torch.result_type(a, b)


def _binary(a, b, dt=None):
    dt = dt or promote(a, b)
    return cast(a, dt), cast(b, dt), dt


# ---- add, sub, mul, div ----------------------------------------------------------------------

def _alpha_when(a, b, alpha=1):
    dt = _result_dtype(a, b)
    if alpha != 1 and dt is not None:
        if not dt.is_floating_point and not _is_int(alpha) and not isinstance(alpha, bool):
            return "a float alpha on an integer result"
    if dt == torch.bool and alpha != 1:
        return "alpha on bool operands"
    return None


def _scaled(b, alpha, dt):
    """alpha * b in the result dtype (b already cast to it)."""
    if alpha == 1:
        return b
    if isinstance(b, lz.Tensor):
        return lz.mul(b, cast(alpha, dt))
    return cast(b * alpha, dt)


@lower(aten.add.Tensor, aten.add.Scalar, dtypes=ALL, when=_alpha_when,
       note="bool + bool is logical or")
def _add(a, b, alpha=1):
    a, b, dt = _binary(a, b)
    if dt == torch.bool:
        return lz.logical_or(a, b)
    return lz.add(a, _scaled(b, alpha, dt))


@lower(aten.sub.Tensor, aten.sub.Scalar, dtypes=NUMBERS, when=_alpha_when)
def _sub(a, b, alpha=1):
    a, b, dt = _binary(a, b)
    return lz.sub(a, _scaled(b, alpha, dt))


@lower(aten.rsub.Tensor, aten.rsub.Scalar, dtypes=NUMBERS, when=_alpha_when)
def _rsub(a, b, alpha=1):
    a, b, dt = _binary(a, b)
    return lz.sub(b, _scaled(a, alpha, dt))


@lower(aten.mul.Tensor, aten.mul.Scalar, dtypes=ALL, note="bool * bool is logical and")
def _mul(a, b):
    a, b, dt = _binary(a, b)
    if dt == torch.bool:
        return lz.logical_and(a, b)
    return lz.mul(a, b)


def _true_div_dtype(a, b):
    dt = promote(a, b)
    return dt if dt.is_floating_point else torch.get_default_dtype()


@lower(aten.div.Tensor, aten.div.Scalar, dtypes=ALL, note="integers divide in float32, as eager")
def _div(a, b):
    a, b, dt = _binary(a, b, _true_div_dtype(a, b))
    return lz.div(a, b)


def _trunc(x):
    if not torch_dtype(x).is_floating_point:
        return x
    return lz.where(x < 0, lz.ceil(x), lz.floor(x))


def _int_trunc_div(a, b):
    q = lz.floor_divide(a, b)
    # Floor and truncation differ when the quotient is negative and inexact.
    inexact = lz.ne(lz.mul(q, b), a)
    return lz.where(lz.logical_and(inexact, lz.lt(q, 0)), q + 1, q)


def _mode_when(a, b, *, rounding_mode=None):
    if rounding_mode not in (None, "trunc", "floor"):
        return f"rounding_mode={rounding_mode!r}"
    dt = _result_dtype(a, b)
    if rounding_mode is not None and dt == torch.bool:
        return "rounding division of bools"
    return None


@lower(aten.div.Tensor_mode, aten.div.Scalar_mode, dtypes=NUMBERS, when=_mode_when,
       note="rounding_mode None, 'trunc' or 'floor'")
def _div_mode(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return _div(a, b)
    a, b, dt = _binary(a, b)
    if rounding_mode == "floor":
        return lz.floor_divide(a, b)
    if dt.is_floating_point:
        return _trunc(lz.div(a, b))
    if not isinstance(b, lz.Tensor):
        b = lz.full((), b, dtype=a.dtype)
    return _int_trunc_div(a, b)


@lower(aten.floor_divide.default, aten.floor_divide.Scalar, dtypes=NUMBERS)
def _floor_divide(a, b):
    a, b, _ = _binary(a, b)
    return lz.floor_divide(a, b)


@lower(aten.remainder.Tensor, aten.remainder.Scalar, dtypes=NUMBERS)
def _remainder(a, b):
    a, b, _ = _binary(a, b)
    return lz.remainder(a, b)


@lower(aten.remainder.Scalar_Tensor, dtypes=NUMBERS)
def _remainder_st(a, b):
    a, b, _ = _binary(a, b)
    return lz.remainder(a, b)


@lower(aten.fmod.Tensor, aten.fmod.Scalar, dtypes=INTS, note="integers only")
def _fmod(a, b):
    a, b, _ = _binary(a, b)
    r = lz.remainder(a, b)
    # remainder takes the divisor's sign, fmod the dividend's.
    fix = lz.logical_and(lz.ne(r, 0), lz.ne(lz.lt(r, 0), lz.lt(a, 0)))
    return lz.where(fix, lz.sub(r, b), r)


def _pow_when(a, b):
    dt = _result_dtype(a, b)
    if dt is not None and not dt.is_floating_point:
        if dt == torch.bool:
            return "pow of bools"
        if _is_int(b) and b < 0:
            return "an integer to a negative integer power"
        if isinstance(b, torch.Tensor) and not b.dtype.is_floating_point:
            return "an integer tensor exponent (negative values raise in eager)"
    return None


@lower(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar, dtypes=NUMBERS,
       when=_pow_when, note="no integer tensor exponents")
def _pow(a, b):
    a, b, dt = _binary(a, b)
    if not isinstance(a, lz.Tensor):
        a = lz.full((), a, dtype=b.dtype)
    if not isinstance(b, lz.Tensor) and b == 2:
        return lz.mul(a, a)
    if not isinstance(b, lz.Tensor) and b == 0.5 and dt.is_floating_point:
        return lz.sqrt(a)
    return lz.pow(a, b)


@lower(aten.maximum.default, dtypes=ALL, note="NaN propagates")
def _maximum(a, b):
    a, b, _ = _binary(a, b)
    return lz.maximum(a, b)


@lower(aten.minimum.default, dtypes=ALL, note="NaN propagates")
def _minimum(a, b):
    a, b, _ = _binary(a, b)
    return lz.minimum(a, b)


def _cmp(fn):
    def compare(a, b):
        a, b, _ = _binary(a, b)
        return fn(a, b)
    return compare


for _name, _fn in (("eq", lz.eq), ("ne", lz.ne), ("lt", lz.lt), ("le", lz.le), ("gt", lz.gt),
                   ("ge", lz.ge)):
    _packet = getattr(aten, _name)
    lower(_packet.Tensor, _packet.Scalar, dtypes=ALL)(_cmp(_fn))


@lower(aten.logical_and.default, dtypes=ALL)
def _logical_and(a, b):
    return lz.logical_and(cast(a, torch.bool), cast(b, torch.bool))


@lower(aten.logical_or.default, dtypes=ALL)
def _logical_or(a, b):
    return lz.logical_or(cast(a, torch.bool), cast(b, torch.bool))


@lower(aten.logical_xor.default, dtypes=ALL)
def _logical_xor(a, b):
    return lz.logical_xor(cast(a, torch.bool), cast(b, torch.bool))


for _name, _fn in (("bitwise_and", lz.bitwise_and), ("bitwise_or", lz.bitwise_or),
                   ("bitwise_xor", lz.bitwise_xor)):
    _packet = getattr(aten, _name)
    lower(_packet.Tensor, _packet.Scalar, dtypes=INTS | {torch.bool})(_cmp(_fn))


@lower(aten.where.self, dtypes=ALL)
def _where(cond, a, b):
    a, b, _ = _binary(a, b)
    return lz.where(cond, a, b)


def _clamp_when(x, min=None, max=None):
    if min is None and max is None:
        return "neither min nor max"
    if x.dtype == torch.bool:
        return "clamp of bools"
    return None


def _clamp_impl(x, lo, hi):
    dt = promote(x, lo, hi)
    y = cast(x, dt)
    if lo is not None:
        y = lz.maximum(y, cast(lo, dt))
    if hi is not None:
        y = lz.minimum(y, cast(hi, dt))
    return y


@lower(aten.clamp.default, aten.clamp.Tensor, dtypes=NUMBERS, when=_clamp_when,
       note="NaN propagates")
def _clamp(x, min=None, max=None):
    return _clamp_impl(x, min, max)


@lower(aten.clamp_min.default, aten.clamp_min.Tensor, dtypes=NUMBERS)
def _clamp_min(x, min):
    return _clamp_impl(x, min, None)


@lower(aten.clamp_max.default, aten.clamp_max.Tensor, dtypes=NUMBERS)
def _clamp_max(x, max):
    return _clamp_impl(x, None, max)


@lower("prims::fma.default", dtypes=FLOATS, note="rounded twice (a*b, then +c)")
def _fma(a, b, c):
    return lz.add(lz.mul(a, b), c)


# ---- unary -----------------------------------------------------------------------------------

# Overloads that are one Lazuli op of the same name, with the dtypes it takes as eager does.
# Integer and bool inputs of the float functions compute in the default float dtype, as in eager.
_UNARY = {
    **{name: (NUMBERS, "") for name in ("neg", "abs", "floor", "ceil", "relu")},
    "round": (NUMBERS, "half to even"),
    "sign": (ALL, ""),
    "logical_not": (ALL, ""),
    "bitwise_not": (INTS | {torch.bool}, ""),
    **{name: (ALL, "") for name in ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
                                     "tanh", "sigmoid", "erf", "reciprocal")},
}
for _name, (_dtypes, _note) in _UNARY.items():
    lower(getattr(aten, _name).default, dtypes=_dtypes, note=_note)(getattr(lz, _name))


@lower(aten.exp2.default, dtypes=ALL)
def _exp2(a):
    if not torch_dtype(a).is_floating_point:
        a = a.to(lz.float32)
    return lz.pow(lz.full((), 2.0, dtype=a.dtype), a)


@lower(aten.log2.default, dtypes=ALL, note="log(x) / log(2)")
def _log2(a):
    return lz.div(lz.log(a), math.log(2.0))


@lower(aten.log10.default, dtypes=ALL, note="log(x) / log(10)")
def _log10(a):
    return lz.div(lz.log(a), math.log(10.0))


@lower(aten.round.decimals, dtypes=FLOATS)
def _round_decimals(a, *, decimals=0):
    if decimals == 0:
        return lz.round(a)
    if decimals > 0:
        scale = 10.0 ** decimals
        return lz.div(lz.round(lz.mul(a, scale)), scale)
    scale = 10.0 ** -decimals
    return lz.mul(lz.round(lz.div(a, scale)), scale)


@lower(aten.trunc.default, dtypes=NUMBERS)
def _trunc_entry(a):
    return _trunc(a) if torch_dtype(a).is_floating_point else lz.add(a, 0)


@lower(aten.isnan.default, dtypes=ALL)
def _isnan(a):
    return lz.ne(a, a)


@lower(aten.isinf.default, dtypes=ALL)
def _isinf(a):
    if not torch_dtype(a).is_floating_point:
        return lz.zeros(*a.shape, dtype=lz.bool)
    return lz.eq(lz.abs(a), math.inf)


@lower(aten.isfinite.default, dtypes=ALL)
def _isfinite(a):
    if not torch_dtype(a).is_floating_point:
        return lz.ones(*a.shape, dtype=lz.bool)
    return lz.lt(lz.abs(a), math.inf)


def _gelu_when(a, *, approximate="none"):
    return None if approximate in ("none", "tanh") else f"approximate={approximate!r}"


@lower(aten.gelu.default, when=_gelu_when, note="approximate 'none' or 'tanh'")
def _gelu(a, *, approximate="none"):
    if approximate == "none":
        return lz.gelu(a)
    inner = lz.mul(lz.add(a, lz.mul(lz.mul(lz.mul(a, a), a), 0.044715)), math.sqrt(2.0 / math.pi))
    return lz.mul(lz.mul(a, 0.5), lz.add(lz.tanh(inner), 1.0))


@lower(aten.hardtanh.default, dtypes=NUMBERS, note="integer inputs truncate the bounds, as eager")
def _hardtanh(a, min_val=-1.0, max_val=1.0):
    dt = torch_dtype(a)
    return lz.minimum(lz.maximum(a, cast(min_val, dt)), cast(max_val, dt))


@lower(aten.leaky_relu.default)
def _leaky_relu(a, negative_slope=0.01):
    return lz.where(a > 0, a, lz.mul(a, float(negative_slope)))


@lower(aten.elu.default)
def _elu(a, alpha=1.0, scale=1.0, input_scale=1.0):
    neg = lz.mul(lz.expm1(lz.mul(a, float(input_scale))), float(alpha) * float(scale))
    return lz.where(a > 0, lz.mul(a, float(scale)), neg)


@lower(aten.threshold_backward.default, dtypes=NUMBERS)
def _threshold_backward(grad, x, threshold):
    return lz.where(x <= threshold, lz.zeros_like(grad), grad)
