"""Every op of API.md through lazuli and through numpy on random inputs: values and dtypes on
every backend (the reference one and the compiled cpu one), and the gradient of every
differentiable case against central finite differences in float64.

One helper (`check`, with `check_gradient`) and one table (`CASES`): a row is an op's whole test. The expected dtype is numpy's result dtype unless the
case names one: lazuli follows PyTorch's promotion rules, not numpy's, and where they differ the
case says which PyTorch rule gives the expected dtype.
"""
import math
import pathlib
import re

import numpy as np
import pytest

import lazuli as lz

F32, F64, I32, I64, B = "float32", "float64", "int32", "int64", "bool"
_LZ_DTYPES = {F32: lz.float32, F64: lz.float64, I32: lz.int32, I64: lz.int64, B: lz.bool}


class In:
    """A random input: shape, numpy dtype name, value range (ints: [lo, hi)), and whether the
    lazuli side gets a non-contiguous view of it (a transpose of a transposed copy)."""

    def __init__(self, shape, dtype=F32, lo=-3.0, hi=3.0, value=None):
        self.shape, self.dtype, self.lo, self.hi, self.value = tuple(shape), dtype, lo, hi, value

    def make(self, rng):
        if self.value is not None:
            return np.array(self.value, dtype=self.dtype)
        if self.dtype == B:
            return rng.random(self.shape) < 0.5
        if self.dtype in (I32, I64):
            return rng.integers(int(self.lo), int(self.hi), self.shape).astype(self.dtype)
        return rng.uniform(self.lo, self.hi, self.shape).astype(self.dtype)


def _flatten_results(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def check(lz_fn, np_fn, *arrays, dtype=None, rtol=1e-5, atol=1e-6):
    """Runs lz_fn on lz.tensor copies of `arrays` and np_fn on the arrays; compares shapes, values
    and dtypes. `dtype` (a name, or a list of names for several results) overrides numpy's result
    dtype where PyTorch's rules differ. Results may be tuples (split, chunk, max(dim))."""
    got = _flatten_results(lz_fn(*[lz.tensor(a) for a in arrays]))
    want = _flatten_results(np_fn(*[a.copy() for a in arrays]))
    assert len(got) == len(want), f"{len(got)} results, expected {len(want)}"
    dtypes = dtype if isinstance(dtype, (list, tuple)) else [dtype] * len(want)
    for i, (g, w, dt) in enumerate(zip(got, want, dtypes)):
        assert isinstance(g, lz.Tensor), f"result {i} is {type(g).__name__}, not a tensor"
        w = np.asarray(w)
        expected_dtype = dt if dt is not None else w.dtype.name
        assert g.dtype == _LZ_DTYPES[expected_dtype], f"result {i}: dtype {g.dtype}, expected {expected_dtype}"
        g_np = np.asarray(g)
        assert g_np.dtype == np.dtype(expected_dtype)
        assert g.shape == w.shape, f"result {i}: shape {g.shape}, expected {w.shape}"
        assert g_np.shape == w.shape
        if np.dtype(expected_dtype).kind == "f":
            np.testing.assert_allclose(g_np, w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g_np, w.astype(expected_dtype))


_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_gelu(x):
    x = x.astype(np.float64)
    return x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))


def np_logsumexp(x, axis=None, keepdims=False):
    x = x.astype(np.float64)
    return np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))


def f64(fn):
    """Computes a float32 reference in float64 (the expected dtype stays float32)."""
    return lambda *a: fn(*[x.astype(np.float64) for x in a])


def _float_outputs(lz_fn, tensors):
    return [o for o in _flatten_results(lz_fn(*tensors))
            if isinstance(o, lz.Tensor) and o.dtype in (lz.float32, lz.float64)]


def _weighted_loss(outs, weights):
    loss = None
    for o, w in zip(outs, weights):
        term = (o * lz.tensor(w)).sum()
        loss = term if loss is None else loss + term
    return loss


def gradients(lz_fn, *arrays):
    """The gradients (numpy, per floating input index) of L = sum_k <out_k, w_k>, with fixed
    random weights w over the float64 outputs, from lazuli's autograd on float64 copies of the
    inputs; None when no float64 output depends on a floating input."""
    base = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    floats = [i for i, a in enumerate(base) if a.dtype.kind == "f" and a.size]
    if not floats:
        return None
    ts = [lz.tensor(a) for a in base]
    for i in floats:
        ts[i].requires_grad_()
    outs = [o for o in _float_outputs(lz_fn, ts) if o.requires_grad and o.dtype == lz.float64]
    if not outs:
        return None
    weights = [np.random.default_rng(99 + k).standard_normal(o.shape) for k, o in enumerate(outs)]
    _weighted_loss(outs, weights).backward()
    return {i: (ts[i].grad.numpy() if ts[i].grad is not None else np.zeros_like(base[i]))
            for i in floats}


def finite_differences(lz_fn, *arrays, eps=1e-6):
    """The same gradients by central finite differences of L (each a value read of lazuli)."""
    base = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]

    def value(arrs):
        outs = [o for o in _float_outputs(lz_fn, [lz.tensor(a) for a in arrs])
                if o.dtype == lz.float64]
        weights = [np.random.default_rng(99 + k).standard_normal(o.shape) for k, o in enumerate(outs)]
        return sum(float((o.numpy() * w).sum()) for o, w in zip(outs, weights))

    out = {}
    for i, a in enumerate(base):
        if a.dtype.kind != "f" or not a.size:
            continue
        numeric = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            plus = [x.copy() for x in base]
            minus = [x.copy() for x in base]
            plus[i][j] += eps
            minus[i][j] -= eps
            numeric[j] = (value(plus) - value(minus)) / (2 * eps)
        out[i] = numeric
    return out


def check_gradient(lz_fn, *arrays, rtol=1e-4, atol=1e-6):
    """Lazuli's gradients of the case against finite differences; False when nothing is
    differentiable (nothing checked)."""
    analytic = gradients(lz_fn, *arrays)
    if analytic is None:
        return False
    numeric = finite_differences(lz_fn, *arrays)
    for i, g in analytic.items():
        np.testing.assert_allclose(g, numeric[i], rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")
    return True


def np_conv2d(x, w):
    """A valid, stride-1 2-D convolution (PyTorch's cross-correlation) in float64."""
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), w.shape[2:], axis=(2, 3))
    return np.einsum("ncijkl,ockl->noij", windows, w.astype(np.float64))


def np_pool2d(x, reduce):
    """2x2 pooling with stride 2 over the last two dims."""
    n, c, h, w = x.shape
    return reduce(x.reshape(n, c, h // 2, 2, w // 2, 2), axis=(3, 5))


def np_scatter_add(a, i, src):
    out = a.copy()
    for j in np.ndindex(i.shape):
        out[(i[j],) + j[1:]] += src[j]
    return out


def lz_index_assign(a, v):
    a = a.clone()
    a[lz.tensor([2, 0])] = v
    return a


def np_index_assign(a, v):
    a = a.copy()
    a[[2, 0]] = v
    return a


def lz_slice_assign(a, v):
    a = a.clone()
    a[1:3] = v
    return a


def np_slice_assign(a, v):
    a = a.copy()
    a[1:3] = v
    return a


class Case:
    """One op's row: its lazuli and numpy forms, inputs, the expected dtype where PyTorch's rules
    differ from numpy's, tolerances, and `grad=False` for piecewise-constant or kinked cases whose
    inputs sit on a kink (finite differences are meaningless there; autograd_test.cpp checks their
    rules at smooth points)."""

    def __init__(self, name, lz_fn, np_fn, inputs, dtype=None, rtol=1e-5, atol=1e-6, xfail=None,
                 grad=True):
        self.name, self.lz_fn, self.np_fn, self.inputs = name, lz_fn, np_fn, inputs
        self.dtype, self.rtol, self.atol, self.xfail, self.grad = dtype, rtol, atol, xfail, grad


X = In((3, 4))
POS = In((3, 4), lo=0.1, hi=4.0)
I64_34 = In((3, 4), I64, -5, 6)
I32_34 = In((3, 4), I32, -5, 6)
# Values away from .5 and 0, so floor/ceil/round/sign are well defined in float32.
ROUNDISH = In((3, 4), value=[[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, -0.2, 0.7], [3.49, -3.51, 0.0, 2.0]])

CASES = [
    # ---- unary math --------------------------------------------------------------------------
    Case("exp", lz.exp, f64(np.exp), [X], dtype=F32),
    Case("exp_method", lambda t: t.exp(), f64(np.exp), [X], dtype=F32),
    Case("log", lz.log, f64(np.log), [POS], dtype=F32),
    Case("log1p", lz.log1p, f64(np.log1p), [In((3, 4), lo=-0.9, hi=3.0)], dtype=F32),
    Case("expm1", lz.expm1, f64(np.expm1), [In((3, 4), lo=-1e-3, hi=1e-3)], dtype=F32, atol=1e-9),
    Case("sqrt", lz.sqrt, f64(np.sqrt), [POS], dtype=F32),
    Case("rsqrt", lz.rsqrt, f64(lambda x: 1 / np.sqrt(x)), [POS], dtype=F32),
    Case("sin", lz.sin, f64(np.sin), [X], dtype=F32),
    Case("cos", lz.cos, f64(np.cos), [X], dtype=F32),
    Case("tan", lz.tan, f64(np.tan), [In((3, 4), lo=-1.3, hi=1.3)], dtype=F32),
    Case("tanh", lz.tanh, f64(np.tanh), [X], dtype=F32),
    Case("sigmoid", lz.sigmoid, f64(lambda x: 1 / (1 + np.exp(-x))), [X], dtype=F32),
    Case("relu", lz.relu, lambda x: np.maximum(x, 0), [X]),
    Case("relu_int", lz.relu, lambda x: np.maximum(x, 0), [I64_34]),
    Case("gelu", lz.gelu, np_gelu, [X], dtype=F32),
    Case("erf", lz.erf, f64(_erf), [X], dtype=F32),
    Case("floor", lz.floor, np.floor, [ROUNDISH], grad=False),
    Case("ceil", lz.ceil, np.ceil, [ROUNDISH], grad=False),
    # torch.round rounds half to even, as numpy does.
    Case("round_half_even", lz.round, np.round, [ROUNDISH], grad=False),
    Case("sign", lz.sign, np.sign, [ROUNDISH], grad=False),
    Case("sign_int", lz.sign, np.sign, [I64_34]),
    Case("abs", lz.abs, np.abs, [X]),
    Case("abs_builtin", abs, np.abs, [I32_34]),
    Case("neg", lz.neg, np.negative, [X]),
    Case("neg_operator", lambda t: -t, np.negative, [I64_34]),
    Case("reciprocal", lz.reciprocal, f64(lambda x: 1 / x), [POS], dtype=F32),
    Case("exp_float64", lz.exp, np.exp, [In((5,), F64)]),
    # PyTorch: a float op on an integer tensor computes in the default float dtype (float32);
    # numpy would give float64.
    Case("sqrt_of_int64_is_float32", lz.sqrt, f64(np.sqrt), [In((6,), I64, 0, 50)], dtype=F32),
    Case("exp_of_int32_is_float32", lz.exp, f64(np.exp), [In((6,), I32, -3, 3)], dtype=F32),
    # ---- binary arithmetic, broadcasting, promotion ------------------------------------------
    Case("add_broadcast", lambda a, b: a + b, lambda a, b: a + b, [In((3, 1)), In((1, 4))]),
    Case("sub_broadcast_3d", lambda a, b: a - b, lambda a, b: a - b, [In((2, 3, 4)), In((4,))]),
    Case("mul", lz.mul, np.multiply, [X, X]),
    Case("div", lambda a, b: a / b, f64(np.divide), [X, POS], dtype=F32),
    Case("add_method", lambda a, b: a.add(b), np.add, [X, In((4,))]),
    # float32 tensor + int64 tensor -> float32 (numpy: float64).
    Case("float32_plus_int64", lambda a, b: a + b, f64(np.add), [X, I64_34], dtype=F32),
    Case("int32_plus_int64", lambda a, b: a + b, np.add, [I32_34, I64_34]),
    Case("int32_plus_float64", lambda a, b: a + b, np.add, [I32_34, In((4,), F64)]),
    Case("float32_plus_float64", lambda a, b: a + b, np.add, [X, In((4,), F64)]),
    # int64 tensor + Python float -> default float dtype, float32 (numpy: float64).
    Case("int64_plus_python_float", lambda a: a + 2.5, f64(lambda a: a + 2.5), [I64_34], dtype=F32),
    # int32 tensor + Python int stays int32 (a Python scalar never widens a tensor's dtype).
    Case("int32_plus_python_int", lambda a: a + 7, lambda a: a + np.int32(7), [I32_34], dtype=I32),
    # float32 tensor * Python float stays float32.
    Case("float32_times_python_float", lambda a: a * 0.1, f64(lambda a: a * 0.1), [X], dtype=F32),
    Case("float64_plus_python_int", lambda a: a + 3, lambda a: a + 3, [In((4,), F64)]),
    Case("bool_plus_python_int", lambda a: a + 1, lambda a: a.astype(np.int64) + 1, [In((5,), B)], dtype=I64),
    Case("python_scalar_left_sub", lambda a: 2 - a, lambda a: 2 - a, [X]),
    Case("python_scalar_left_sub_int", lambda a: 2 - a, lambda a: 2 - a, [I64_34]),
    Case("python_scalar_left_mul", lambda a: 3 * a, lambda a: 3 * a, [I32_34], dtype=I32),
    Case("python_scalar_left_div", lambda a: 2.0 / a, f64(lambda a: 2.0 / a), [POS], dtype=F32),
    Case("python_scalar_left_add_float_to_int", lambda a: 0.5 + a, f64(lambda a: 0.5 + a), [I64_34], dtype=F32),
    Case("python_int_pow_float_tensor", lambda a: 2 ** a, f64(lambda a: 2.0 ** a), [X], dtype=F32),
    Case("python_int_pow_int_tensor", lambda a: 2 ** a, lambda a: 2 ** a, [In((3, 4), I64, 0, 10)]),
    Case("tensor_pow_int", lambda a: a ** 2, lambda a: a ** 2, [X]),
    Case("int_tensor_pow_int", lambda a: a ** 2, lambda a: a ** 2, [I64_34]),
    # int tensor ** Python float -> float32 (numpy: float64).
    Case("int_tensor_pow_float", lambda a: a ** 0.5, f64(lambda a: a ** 0.5), [In((6,), I64, 0, 30)], dtype=F32),
    Case("pow_tensor_tensor", lz.pow, f64(np.power), [POS, X], dtype=F32, rtol=1e-4),
    Case("pow_method", lambda a: a.pow(3), lambda a: a ** 3, [X], rtol=1e-5),
    # int tensor / int tensor is true division in the default float dtype (numpy: float64).
    Case("int_div_int_is_float32", lambda a, b: a / b, f64(np.divide), [I64_34, In((3, 4), I64, 1, 5)], dtype=F32),
    Case("int_div_python_int_is_float32", lambda a: a / 2, f64(lambda a: a / 2), [I32_34], dtype=F32),
    # A 0-d tensor does not widen a dimensioned tensor of the same category: float32[3] + float64
    # 0-d tensor is float32 (numpy: float64).
    Case("float32_plus_0d_float64", lambda a, b: a + b, f64(np.add), [In((3,)), In((), F64)], dtype=F32),
    # ... but it does when its category is higher: int32[4] + float64 0-d tensor -> float64.
    Case("int32_plus_0d_float64", lambda a, b: a + b, np.add, [In((4,), I32, -5, 5), In((), F64)]),
    Case("int64_plus_0d_int32", lambda a, b: a + b, np.add, [In((4,), I64, -5, 5), In((), I32, 1, 5)], dtype=I64),
    Case("int32_plus_0d_int64", lambda a, b: a + b, lambda a, b: a + b.astype(np.int32), [In((4,), I32, -5, 5), In((), I64, 1, 5)], dtype=I32),
    Case("maximum", lz.maximum, np.maximum, [X, In((4,))]),
    Case("minimum", lz.minimum, np.minimum, [I64_34, I64_34]),
    Case("max_of_two_tensors", lambda a, b: lz.max(a, b), np.maximum, [X, X]),
    # // and % follow Python (floor) semantics: the remainder takes the divisor's sign.
    Case("floordiv_int_negative", lambda a, b: a // b, np.floor_divide,
         [In((8,), I64, value=[7, -7, 7, -7, 0, 5, -1, 9]), In((8,), I64, value=[2, 2, -2, -2, 3, -5, 3, 10])]),
    Case("mod_int_negative", lambda a, b: a % b, np.mod,
         [In((8,), I64, value=[7, -7, 7, -7, 0, 5, -1, 9]), In((8,), I64, value=[2, 2, -2, -2, 3, -5, 3, 10])]),
    Case("floordiv_float_negative", lambda a, b: a // b, np.floor_divide,
         [In((6,), value=[7.5, -7.5, 7.5, -7.5, 0.25, -0.25]), In((6,), value=[2.0, 2.0, -2.0, -2.0, 1.0, 1.0])]),
    Case("mod_float_negative", lambda a, b: a % b, np.mod,
         [In((6,), value=[7.5, -7.5, 7.5, -7.5, 0.25, -0.25]), In((6,), value=[2.0, 2.0, -2.0, -2.0, 1.0, 1.0])]),
    Case("mod_python_int", lambda a: a % 3, lambda a: a % 3, [I64_34]),
    Case("floordiv_python_int", lambda a: a // -3, lambda a: a // -3, [I64_34]),
    Case("python_int_floordiv_tensor", lambda a: 7 // a, lambda a: 7 // a, [In((4,), I64, value=[2, -2, 3, -4])]),
    Case("python_int_mod_tensor", lambda a: 7 % a, lambda a: 7 % a, [In((4,), I64, value=[2, -2, 3, -4])]),
    Case("remainder_fn", lz.remainder, np.mod, [X, POS]),
    Case("floor_divide_fn", lz.floor_divide, np.floor_divide, [X, POS]),
    # ---- comparisons -------------------------------------------------------------------------
    Case("eq", lambda a, b: a == b, np.equal, [In((3, 4), I64, 0, 3), In((4,), I64, 0, 3)]),
    Case("ne", lambda a, b: a != b, np.not_equal, [In((3, 4), I64, 0, 3), In((3, 4), I64, 0, 3)]),
    Case("lt", lambda a, b: a < b, np.less, [X, X]),
    Case("le_scalar", lambda a: a <= 0.5, lambda a: a <= 0.5, [X]),
    Case("gt_mixed_dtypes", lambda a, b: a > b, np.greater, [X, I64_34]),
    Case("ge_fn", lz.ge, np.greater_equal, [I32_34, I32_34]),
    Case("reflected_comparison", lambda a: 1 < a, lambda a: 1 < a, [X]),
    # ---- bitwise / logical -------------------------------------------------------------------
    Case("and_bool", lambda a, b: a & b, np.logical_and, [In((6,), B), In((6,), B)]),
    Case("or_bool", lambda a, b: a | b, np.logical_or, [In((6,), B), In((6,), B)]),
    Case("xor_bool", lambda a, b: a ^ b, np.logical_xor, [In((6,), B), In((6,), B)]),
    Case("invert_bool", lambda a: ~a, np.logical_not, [In((6,), B)]),
    Case("and_int", lambda a, b: a & b, np.bitwise_and, [I64_34, I64_34]),
    Case("or_int", lambda a, b: a | b, np.bitwise_or, [I32_34, I32_34]),
    Case("xor_int", lambda a, b: a ^ b, np.bitwise_xor, [I64_34, I64_34]),
    Case("invert_int", lambda a: ~a, np.invert, [I64_34]),
    Case("and_int_python", lambda a: a & 6, lambda a: a & 6, [I64_34]),
    Case("logical_and", lz.logical_and, np.logical_and, [In((6,), B), In((6,), B)]),
    Case("logical_not", lz.logical_not, np.logical_not, [In((6,), B)]),
    # ---- where / clamp -----------------------------------------------------------------------
    Case("where", lz.where, np.where, [In((3, 4), B), X, In((4,))]),
    Case("where_scalar_other", lambda c, a: lz.where(c, a, 0.0), lambda c, a: np.where(c, a, np.float32(0)), [In((3, 4), B), X]),
    Case("clamp", lambda a: lz.clamp(a, -1.0, 0.5), lambda a: np.clip(a, -1.0, 0.5), [X]),
    Case("clamp_min_only", lambda a: a.clamp(min=0.0), lambda a: np.maximum(a, np.float32(0)), [X]),
    Case("clamp_max_only_int", lambda a: a.clamp(max=2), lambda a: np.minimum(a, 2), [I64_34]),
    # ---- reductions --------------------------------------------------------------------------
    Case("sum_all", lz.sum, f64(np.sum), [X], dtype=F32),
    Case("sum_dim", lambda a: a.sum(1), f64(lambda a: a.sum(1)), [X], dtype=F32),
    Case("sum_neg_dim_keepdim", lambda a: a.sum(-1, keepdim=True), f64(lambda a: a.sum(-1, keepdims=True)), [In((2, 3, 4))], dtype=F32),
    Case("sum_tuple_dim", lambda a: a.sum((0, 2)), f64(lambda a: a.sum((0, 2))), [In((2, 3, 4))], dtype=F32),
    # PyTorch: sum of an int32 or bool tensor is int64.
    Case("sum_int32_is_int64", lambda a: a.sum(0), lambda a: a.sum(0, dtype=np.int64), [I32_34], dtype=I64),
    Case("sum_bool_is_int64", lz.sum, lambda a: a.sum(dtype=np.int64), [In((10,), B)], dtype=I64),
    Case("mean", lambda a: a.mean(0), f64(lambda a: a.mean(0)), [X], dtype=F32),
    Case("mean_tuple_keepdim", lambda a: a.mean((-1, -2), keepdim=True), f64(lambda a: a.mean((-1, -2), keepdims=True)), [In((2, 3, 4))], dtype=F32),
    Case("prod", lambda a: a.prod(1), f64(lambda a: a.prod(1)), [In((3, 4), lo=0.5, hi=1.5)], dtype=F32),
    Case("prod_int32_is_int64", lz.prod, lambda a: a.prod(dtype=np.int64), [In((6,), I32, 1, 4)], dtype=I64),
    Case("amax", lambda a: a.amax(0), lambda a: a.max(0), [X]),
    Case("amax_tuple", lambda a: lz.amax(a, (0, 1)), lambda a: a.max((0, 1)), [In((2, 3, 4))]),
    Case("amin_keepdim", lambda a: a.amin(-1, keepdim=True), lambda a: a.min(-1, keepdims=True), [I64_34]),
    Case("max_all", lambda a: a.max(), lambda a: a.max(), [X]),
    Case("min_all", lambda a: lz.min(a), lambda a: a.min(), [I32_34]),
    Case("argmax", lambda a: a.argmax(1), lambda a: a.argmax(1), [X]),
    Case("argmax_flat", lz.argmax, lambda a: a.argmax(), [X]),
    Case("argmin_keepdim", lambda a: a.argmin(0, keepdim=True), lambda a: np.expand_dims(a.argmin(0), 0), [X]),
    Case("max_dim_values_indices", lambda a: a.max(1), lambda a: (a.max(1), a.argmax(1)), [X]),
    Case("min_dim_keepdim", lambda a: lz.min(a, -1, keepdim=True),
         lambda a: (a.min(-1, keepdims=True), np.expand_dims(a.argmin(-1), -1)), [In((2, 3, 4))]),
    # var/std: PyTorch's default is the unbiased estimate (ddof=1).
    Case("var", lambda a: a.var(1), f64(lambda a: a.var(1, ddof=1)), [X], dtype=F32),
    Case("var_all", lz.var, f64(lambda a: a.var(ddof=1)), [X], dtype=F32),
    Case("var_correction0", lambda a: a.var(0, correction=0), f64(lambda a: a.var(0)), [X], dtype=F32),
    Case("std_keepdim", lambda a: a.std(-1, keepdim=True), f64(lambda a: a.std(-1, ddof=1, keepdims=True)), [X], dtype=F32),
    Case("std_unbiased_false", lambda a: a.std(0, False), f64(lambda a: a.std(0)), [X], dtype=F32),
    Case("logsumexp", lambda a: a.logsumexp(1), lambda a: np_logsumexp(a, 1), [X], dtype=F32),
    Case("logsumexp_large", lambda a: lz.logsumexp(a, 0, keepdim=True), lambda a: np_logsumexp(a, 0, True),
         [In((3, 2), value=[[100.0, -5.0], [101.0, -6.0], [99.0, -7.0]])], dtype=F32),
    Case("all", lambda a: a.all(1), lambda a: a.all(1), [In((3, 4), B)]),
    Case("all_true", lz.all, lambda a: a.all(), [In((4,), B, value=[True] * 4)]),
    Case("any", lambda a: a.any(0), lambda a: a.any(0), [In((3, 4), B)]),
    Case("any_int_keepdim", lambda a: a.any(-1, keepdim=True), lambda a: a.any(-1, keepdims=True), [In((3, 4), I64, 0, 2)]),
    # ---- matmul ------------------------------------------------------------------------------
    Case("matmul_2d", lz.matmul, f64(np.matmul), [In((3, 4)), In((4, 5))], dtype=F32),
    Case("matmul_operator", lambda a, b: a @ b, f64(np.matmul), [In((3, 4)), In((4, 2))], dtype=F32),
    Case("matmul_vec_vec", lambda a, b: a @ b, f64(np.matmul), [In((4,)), In((4,))], dtype=F32),
    Case("matmul_mat_vec", lambda a, b: a @ b, f64(np.matmul), [In((3, 4)), In((4,))], dtype=F32),
    Case("matmul_vec_mat", lambda a, b: a @ b, f64(np.matmul), [In((4,)), In((4, 5))], dtype=F32),
    Case("matmul_batched_broadcast", lambda a, b: a @ b, f64(np.matmul), [In((2, 1, 3, 4)), In((5, 4, 2))], dtype=F32),
    Case("matmul_batched_vec", lz.matmul, f64(np.matmul), [In((2, 3, 4)), In((4,))], dtype=F32),
    Case("matmul_float64", lz.matmul, np.matmul, [In((3, 4), F64), In((4, 2), F64)]),
    Case("matmul_int64", lz.matmul, np.matmul, [I64_34, In((4, 2), I64, -3, 3)]),
    # ---- movement ----------------------------------------------------------------------------
    Case("reshape", lambda a: a.reshape(4, 3), lambda a: a.reshape(4, 3), [X]),
    Case("reshape_tuple_neg1", lambda a: a.reshape((2, -1)), lambda a: a.reshape(2, -1), [X]),
    Case("reshape_fn", lambda a: lz.reshape(a, (12,)), lambda a: a.reshape(12), [X]),
    Case("view", lambda a: a.view(2, 6), lambda a: a.reshape(2, 6), [X]),
    Case("reshape_of_transpose", lambda a: a.T.reshape(12), lambda a: a.T.reshape(12), [X]),
    Case("flatten", lambda a: a.flatten(), lambda a: a.reshape(-1), [In((2, 3, 4))]),
    Case("flatten_range", lambda a: a.flatten(1, 2), lambda a: a.reshape(2, 12, 5), [In((2, 3, 4, 5))]),
    Case("squeeze", lambda a: a.squeeze(), lambda a: a.squeeze(), [In((1, 3, 1, 4))]),
    Case("squeeze_dim", lambda a: a.squeeze(2), lambda a: a.squeeze(2), [In((1, 3, 1, 4))]),
    Case("unsqueeze", lambda a: a.unsqueeze(1), lambda a: np.expand_dims(a, 1), [X]),
    Case("unsqueeze_neg", lambda a: lz.unsqueeze(a, -1), lambda a: np.expand_dims(a, -1), [X]),
    Case("transpose", lambda a: a.transpose(0, 2), lambda a: np.swapaxes(a, 0, 2), [In((2, 3, 4))]),
    Case("transpose_neg", lambda a: lz.transpose(a, -1, -2), lambda a: np.swapaxes(a, -1, -2), [In((2, 3, 4))]),
    Case("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), [In((2, 3, 4))]),
    Case("permute_fn_tuple", lambda a: lz.permute(a, (1, 2, 0)), lambda a: a.transpose(1, 2, 0), [In((2, 3, 4))]),
    Case("T", lambda a: a.T, lambda a: a.T, [X]),
    Case("expand", lambda a: a.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), [In((3, 1))]),
    Case("expand_neg1", lambda a: a.expand(-1, 5), lambda a: np.broadcast_to(a, (3, 5)), [In((3, 1))]),
    Case("broadcast_to", lambda a: lz.broadcast_to(a, (2, 3, 4)), lambda a: np.broadcast_to(a, (2, 3, 4)), [In((4,))]),
    Case("contiguous_of_transpose", lambda a: a.T.contiguous(), lambda a: np.ascontiguousarray(a.T), [X]),
    Case("expanded_then_computed", lambda a: a.expand(3, 4) * 2, lambda a: np.broadcast_to(a, (3, 4)) * 2, [In((1, 4))]),
    Case("cat", lambda a, b: lz.cat([a, b]), lambda a, b: np.concatenate([a, b]), [In((2, 4)), In((3, 4))]),
    Case("cat_neg_dim", lambda a, b: lz.cat([a, b], dim=-1), lambda a, b: np.concatenate([a, b], -1), [In((3, 2)), In((3, 4))]),
    Case("cat_tuple", lambda a, b: lz.cat((a, b, a), 1), lambda a, b: np.concatenate([a, b, a], 1), [In((3, 2)), In((3, 1))]),
    Case("stack", lambda a, b: lz.stack([a, b]), lambda a, b: np.stack([a, b]), [X, X]),
    Case("stack_dim1", lambda a, b: lz.stack([a, b], 1), lambda a, b: np.stack([a, b], 1), [I64_34, I64_34]),
    Case("stack_neg_dim", lambda a, b: lz.stack([a, b], -1), lambda a, b: np.stack([a, b], -1), [X, X]),
    Case("split_size", lambda a: a.split(2), lambda a: np.split(a, [2, 4]), [In((5, 3))]),
    Case("split_sections", lambda a: lz.split(a, [1, 3], dim=1), lambda a: np.split(a, [1], 1), [In((2, 4))]),
    Case("chunk_uneven", lambda a: a.chunk(3), lambda a: np.array_split(a, 3), [In((5, 2))]),
    # torch.chunk(6 rows, 4) has chunk size ceil(6/4)=2: three chunks (numpy's array_split: four).
    Case("chunk_fewer_than_asked", lambda a: lz.chunk(a, 4), lambda a: [a[0:2], a[2:4], a[4:6]], [In((6,))]),
    Case("index_select", lambda a, i: a.index_select(1, i), lambda a, i: a[:, i], [X, In((5,), I64, 0, 4)]),
    Case("index_select_fn_int32_index", lambda a, i: lz.index_select(a, 0, i), lambda a, i: a[i], [X, In((4,), I32, 0, 3)]),
    Case("gather", lambda a, i: a.gather(1, i), lambda a, i: np.take_along_axis(a, i, 1), [X, In((3, 2), I64, 0, 4)]),
    Case("gather_dim0", lambda a, i: lz.gather(a, 0, i), lambda a, i: np.take_along_axis(a, i, 0), [X, In((2, 4), I64, 0, 3)]),
    # ---- casts -------------------------------------------------------------------------------
    Case("to_int64_truncates", lambda a: a.to(lz.int64), lambda a: a.astype(np.int64), [In((3, 4), lo=-5, hi=5)]),
    Case("float", lambda a: a.float(), lambda a: a.astype(np.float32), [I64_34]),
    Case("double", lambda a: a.double(), lambda a: a.astype(np.float64), [X]),
    Case("int", lambda a: a.int(), lambda a: a.astype(np.int32), [In((3, 4), lo=-5, hi=5)]),
    Case("long", lambda a: a.long(), lambda a: a.astype(np.int64), [I32_34]),
    Case("bool", lambda a: a.bool(), lambda a: a.astype(bool), [In((3, 4), I64, -1, 2)]),
    Case("bool_of_float", lambda a: a.bool(), lambda a: a != 0, [In((5,), value=[0.0, -0.0, 0.5, -2.0, 1e-30])]),
    Case("bool_to_float", lambda a: a.to(lz.float32), lambda a: a.astype(np.float32), [In((5,), B)]),
    Case("float64_to_float32", lambda a: a.to(lz.float32), lambda a: a.astype(np.float32), [In((5,), F64)]),
    # ---- scans, sorting --------------------------------------------------------------------
    Case("cumsum", lambda a: a.cumsum(1), f64(lambda a: np.cumsum(a, 1)), [X], dtype=F32),
    Case("cumprod", lambda a: lz.cumprod(a, 0), f64(lambda a: np.cumprod(a, 0)), [In((3, 4), lo=0.5, hi=1.5)], dtype=F32),
    # Random floats have no ties, so the order is the stable one.
    Case("sort", lambda a: a.sort(1), lambda a: (np.sort(a, 1), np.argsort(a, 1, kind="stable")), [X]),
    Case("sort_descending_int", lambda a: lz.sort(a, 0, descending=True, stable=True),
         lambda a: (-np.sort(-a, 0, kind="stable"), np.argsort(-a, 0, kind="stable")), [I64_34]),
    # ---- writes into a copy --------------------------------------------------------------------
    Case("scatter_add", lambda a, i, s: a.scatter_add(0, i, s), np_scatter_add, [X, In((2, 4), I64, 0, 3), In((2, 4))]),
    Case("index_assign", lz_index_assign, np_index_assign, [X, In((2, 4))]),
    Case("slice_assign", lz_slice_assign, np_slice_assign, [In((4, 3)), In((2, 3))]),
    Case("arange", lambda: lz.arange(5) * 3, lambda: np.arange(5) * 3, []),
    # ---- convolution and pooling -------------------------------------------------------------
    Case("conv2d", lambda x, w: lz.nn.functional.conv2d(x, w), np_conv2d,
         [In((2, 3, 5, 6)), In((4, 3, 3, 2))], dtype=F32, rtol=1e-4, atol=1e-5),
    Case("max_pool2d", lambda x: lz.nn.functional.max_pool2d(x, 2), lambda x: np_pool2d(x, np.max), [In((2, 3, 4, 6))]),
    Case("avg_pool2d", lambda x: lz.nn.functional.avg_pool2d(x, 2), f64(lambda x: np_pool2d(x, np.mean)),
         [In((2, 3, 4, 6))], dtype=F32),
    # ---- autograd's own primitives: values pass through (their gradients: test_autograd.py) -----
    Case("detach_of_pending", lambda a: (a * 2).detach() + a, lambda a: a * 3, [X], grad=False),
    Case("requires_grad_of_pending", lambda a: (a * 2).requires_grad_() + 1, lambda a: a * 2 + 1, [X], grad=False),
    # ---- empty tensors and zero-size dims ----------------------------------------------------
    Case("empty_exp", lz.exp, np.exp, [In((0,))]),
    Case("empty_add_broadcast", lambda a, b: a + b, np.add, [In((0, 3)), In((3,))]),
    Case("empty_sum_dim", lambda a: a.sum(0), lambda a: a.sum(0), [In((0, 3))]),
    Case("empty_sum_all", lz.sum, lambda a: a.sum(), [In((0, 3))]),
    Case("empty_prod", lambda a: a.prod(), lambda a: a.prod(), [In((0,))]),
    Case("empty_mean_is_nan", lambda a: a.mean(), lambda a: np.float32(np.nan), [In((0,))]),
    Case("empty_any_all", lambda a: (a.any(), a.all()), lambda a: (a.any(), a.all()), [In((0,), B)]),
    Case("empty_amax_nonempty_dim", lambda a: a.amax(1), lambda a: a.max(1), [In((0, 3))]),
    Case("empty_matmul_inner", lz.matmul, np.matmul, [In((2, 0)), In((0, 3))]),
    Case("empty_matmul_outer", lz.matmul, np.matmul, [In((0, 4)), In((4, 3))]),
    Case("empty_reshape", lambda a: a.reshape(3, 0, 2), lambda a: a.reshape(3, 0, 2), [In((0, 6))]),
    Case("empty_cat", lambda a, b: lz.cat([a, b]), lambda a, b: np.concatenate([a, b]), [In((0, 4)), In((2, 4))]),
    Case("empty_transpose", lambda a: a.T, lambda a: a.T, [In((0, 4))]),
    Case("empty_index_select", lambda a, i: a.index_select(0, i), lambda a, i: a[i], [X, In((0,), I64)]),
    Case("empty_cast", lambda a: a.long(), lambda a: a.astype(np.int64), [In((2, 0))]),
    Case("empty_where", lz.where, np.where, [In((0, 2), B), In((0, 2)), In((2,))]),
]


def test_case_names_are_unique():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


def _params():
    for c in CASES:
        marks = [pytest.mark.xfail(reason=c.xfail, strict=True)] if c.xfail else []
        yield pytest.param(c, id=c.name, marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_op_matches_numpy_and_finite_differences(case, rng, backend):
    """Values and dtypes against numpy on this backend; gradients against finite differences on
    the reference backend, and on the compiled one against the reference's (the same check, at a
    fraction of the cost of differencing every element again)."""
    arrays = [spec.make(rng) for spec in case.inputs]
    check(case.lz_fn, case.np_fn, *arrays, dtype=case.dtype, rtol=case.rtol, atol=case.atol)
    if not case.grad:
        return
    if backend == "interp":
        check_gradient(case.lz_fn, *arrays)
        return
    got = gradients(case.lz_fn, *arrays)
    lz._C._set_backend("interp")
    try:
        want = gradients(case.lz_fn, *arrays)
    finally:
        lz._C._set_backend(backend)
    assert (got is None) == (want is None)
    for i in (want or {}):
        np.testing.assert_allclose(got[i], want[i], rtol=1e-9, atol=1e-12,
                                   err_msg=f"gradient of input {i}: cpu against interp")


# Primitives no row of CASES records, each with the suite that checks it instead.
_PRIMITIVES_CHECKED_ELSEWHERE = {
    "rng_uniform": "random draws have no numpy counterpart: test_compiled_random_and_copies.py, cpu_random_kernels_test.cpp",
    "rng_normal": "as rng_uniform",
    "rng_advance": "as rng_uniform",
    "all_reduce": "collectives need several processes: test_distributed.py, collectives_test.cpp",
    "all_gather": "as all_reduce",
    "reduce_scatter": "as all_reduce",
    "broadcast": "as all_reduce",
}


def _op_table_primitives():
    """The primitives of src/ir/op_table.def, by name."""
    text = (pathlib.Path(__file__).resolve().parents[2] / "src" / "ir" / "op_table.def").read_text()
    return set(re.findall(r'^LZ_OP\(\w+, "(\w+)"', text, re.M))


def _recorded_primitives(case, rng):
    """The primitives a case records: its forward graph, and its backward graph when it has one.
    Dumps only: nothing is compiled or run."""
    ts = [lz.tensor(spec.make(rng)) for spec in case.inputs]
    for t in ts:
        if case.grad and t.dtype in (lz.float32, lz.float64) and t.numel():
            t.requires_grad_()
    outs = [o for o in _flatten_results(case.lz_fn(*ts)) if isinstance(o, lz.Tensor)]
    text = lz.debug.dump_graph(outs)
    differentiable = [o for o in outs if o.requires_grad]
    if differentiable:
        sum(o.sum() for o in differentiable).backward()
        grads = [t.grad for t in ts if t.requires_grad and t.grad is not None]
        if grads:
            text += lz.debug.dump_graph(grads)
    return set(re.findall(r"%\d+ = (\w+)\(", text))


def test_every_primitive_has_a_row(rng):
    """A new primitive of src/ir/op_table.def fails here until a row of CASES records it (forward
    or backward), unless another suite owns it (_PRIMITIVES_CHECKED_ELSEWHERE says which)."""
    table = _op_table_primitives()
    assert {"exp", "add", "conv", "sort", "cumsum"} <= table, "op_table.def was not parsed"
    assert set(_PRIMITIVES_CHECKED_ELSEWHERE) <= table, "an exemption names no primitive"
    recorded = set()
    for c in CASES:
        recorded |= _recorded_primitives(c, rng)
    missing = table - recorded - set(_PRIMITIVES_CHECKED_ELSEWHERE)
    assert not missing, f"primitives no row of CASES records: {sorted(missing)}"
    exempt_but_recorded = set(_PRIMITIVES_CHECKED_ELSEWHERE) & recorded
    assert not exempt_but_recorded, f"exempt but recorded (drop the exemption): {sorted(exempt_but_recorded)}"


def test_every_elementwise_function_of_the_list_is_a_public_function_and_method():
    """include/lazuli/elementwise.def reaches every front door: lazuli.<fn>, Tensor.<fn>."""
    names = lz._C._elementwise_names
    assert {"exp", "add", "bitwise_xor", "neg", "pow", "logical_not"} <= set(names)
    for n in names:
        assert getattr(lz, n) is getattr(lz._C, n), n
        assert callable(getattr(lz.Tensor, n)), n


def test_zero_d_float64_numpy_array_makes_float64_tensor():
    t = lz.tensor(np.array(2.5))
    assert t.dtype == lz.float64 and t.shape == ()
    # A 0-d tensor does not widen a dimensioned float tensor (PyTorch's rule).
    s = lz.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32)) + t
    assert s.dtype == lz.float32
    np.testing.assert_allclose(s.numpy(), [3.5, 4.5, 5.5])


def test_gradient_helper_detects_a_wrong_gradient():
    """check_gradient must be able to fail: a function whose recorded gradient is wrong (a detach
    hides one path) is caught, and the right one passes."""
    a = np.linspace(0.5, 1.5, 6).reshape(2, 3)
    assert check_gradient(lambda t: t * t, a)
    with pytest.raises(AssertionError):
        check_gradient(lambda t: t * t.detach(), a)
    assert not check_gradient(lambda t: t.argmax(1), a)  # nothing differentiable: skipped


def test_check_helper_detects_wrong_values_and_dtypes():
    """The helper must be able to fail: a wrong value and a wrong dtype are both caught."""
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(AssertionError):
        check(lambda t: t + 1, lambda x: x + 2, a)
    with pytest.raises(AssertionError):
        check(lambda t: t + 1, lambda x: x + 1, a, dtype=F64)
    with pytest.raises(AssertionError):
        check(lambda t: t.reshape(2, 2), lambda x: x.reshape(4, 1), a)
