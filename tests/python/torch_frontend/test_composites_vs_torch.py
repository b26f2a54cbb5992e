"""The composite ops (src/ops/composite*.cpp) against PyTorch: values, dtypes and gradients of the
same calls on the same inputs, over the argument combinations PyTorch's own tests care about
(negative and oversized pads, align_corners both ways, ties at clamp bounds, zero norms)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazuli as lz
from lazuli.nn import functional as F
from lazuli.torch import to_lazuli

_DTYPES = {
    torch.float32: lz.float32, torch.float64: lz.float64, torch.int32: lz.int32,
    torch.int64: lz.int64, torch.bool: lz.bool,
}


def _lz(a):
    """A lazuli tensor holding a copy of array a (through torch's memory: the pinned torch's
    numpy need not be the one the extension was built against)."""
    return to_lazuli(torch.tensor(np.asarray(a))).clone()


def _pair(a, requires_grad):
    """The same array as a lazuli and a torch tensor (floats require grad when asked)."""
    a = np.asarray(a)
    grad = requires_grad and a.dtype.kind == "f"
    t = torch.tensor(a, requires_grad=grad)
    x = _lz(a)
    if grad:
        x.requires_grad_()
    return x, t


def agree(lz_fn, torch_fn, *arrays, grad=True, rtol=1e-5, atol=1e-6, seed=0):
    """lz_fn and torch_fn on the same inputs give the same shape, dtype and values; with grad,
    the gradients of a random weighting of the output agree for every float input."""
    pairs = [_pair(a, grad) for a in arrays]
    got = lz_fn(*[p[0] for p in pairs])
    want = torch_fn(*[p[1] for p in pairs])
    assert got.shape == tuple(want.shape), (got.shape, tuple(want.shape))
    assert got.dtype == _DTYPES[want.dtype], (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
    if not grad or not want.requires_grad:
        return
    if not got.requires_grad:  # a piecewise-constant result (a 0-norm): torch gives no gradient
        want.sum().backward()
        assert all(t.grad is None or not t.grad.any() for _, t in pairs)
        return
    w = np.random.default_rng(seed).standard_normal(tuple(want.shape)).astype(np.float64)
    (got * _lz(w).to(got.dtype)).sum().backward()
    (want * torch.tensor(w, dtype=want.dtype)).sum().backward()
    for i, ((x, t), a) in enumerate(zip(pairs, arrays)):
        if t.grad is None:
            continue
        assert x.grad is not None, f"input {i} got no gradient"
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")


def rnd(*shape, dtype=np.float64, seed=0, lo=-3.0, hi=3.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


# ---- tril / triu ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 3, 5), (1, 0, 2)])
@pytest.mark.parametrize("diagonal", [-2, -1, 0, 1, 3])
@pytest.mark.parametrize("fn", ["tril", "triu"])
def test_tril_triu_values_and_gradients_match_torch(shape, diagonal, fn):
    agree(lambda x: getattr(lz, fn)(x, diagonal), lambda t: getattr(torch, fn)(t, diagonal),
          rnd(*shape))
    agree(lambda x: getattr(x, fn)(diagonal=diagonal), lambda t: getattr(t, fn)(diagonal=diagonal),
          rnd(*shape))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.float32])
def test_tril_triu_keep_the_dtype(dtype):
    a = (rnd(3, 3) > 0).astype(dtype) if dtype is np.bool_ else rnd(3, 3).astype(dtype)
    agree(lz.tril, torch.tril, a, grad=False)
    agree(lambda x: x.triu(-1), lambda t: t.triu(-1), a, grad=False)


# ---- masked_fill ---------------------------------------------------------------------------
@pytest.mark.parametrize("x_shape, mask_shape", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3, 4), (3, 1)),
                                                 ((4,), (2, 4))])
def test_masked_fill_with_a_number_broadcasts_as_torch(x_shape, mask_shape):
    mask = rnd(*mask_shape, seed=1) > 0
    agree(lambda x, m: x.masked_fill(m, -1.5), lambda t, m: t.masked_fill(m, -1.5), rnd(*x_shape), mask)
    agree(lambda x, m: lz.masked_fill(x, m, float("-inf")),
          lambda t, m: torch.masked_fill(t, m, float("-inf")), rnd(*x_shape), mask)


def test_masked_fill_with_a_0d_tensor_sends_the_masked_gradient_to_it():
    mask = rnd(3, 4, seed=2) > 0
    agree(lambda x, m, v: x.masked_fill(m, v), lambda t, m, v: t.masked_fill(m, v),
          rnd(3, 4), mask, np.array(2.5))


def test_masked_fill_converts_the_value_to_the_tensor_dtype():
    mask = np.array([True, False, True])
    agree(lambda x, m: x.masked_fill(m, 2.7), lambda t, m: t.masked_fill(m, 2.7),
          np.array([1, 2, 3]), mask, grad=False)
    agree(lambda x, m, v: x.masked_fill(m, v), lambda t, m, v: t.masked_fill(m, v),
          np.array([1, 2, 3], dtype=np.int32), mask, np.array(-4.9), grad=False)


def test_masked_fill_in_place_matches_torch():
    a, mask = rnd(2, 3), np.array([True, False, True])
    x, t = _lz(a), torch.tensor(a)
    assert x.masked_fill_(_lz(mask), 7.0) is x
    t.masked_fill_(torch.tensor(mask), 7.0)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


# ---- flip / roll / repeat ------------------------------------------------------------------
@pytest.mark.parametrize("dims", [(0,), (1,), (-1,), (0, 2), (2, 0, 1), ()])
def test_flip_matches_torch(dims):
    agree(lambda x: lz.flip(x, dims), lambda t: torch.flip(t, dims), rnd(3, 4, 2))
    if dims:
        agree(lambda x: x.flip(*dims), lambda t: t.flip(*dims), rnd(3, 4, 2))


@pytest.mark.parametrize("shifts, dims", [(1, 0), (-1, 1), (5, 1), (-7, -1), ((1, 2), (0, 1)),
                                          ((2, -1), (1, 1)), (3, None), (-13, None), (0, 0)])
def test_roll_matches_torch(shifts, dims):
    agree(lambda x: lz.roll(x, shifts, dims), lambda t: torch.roll(t, shifts, dims), rnd(3, 4))
    agree(lambda x: x.roll(shifts, dims), lambda t: t.roll(shifts, dims), rnd(3, 4))


@pytest.mark.parametrize("shape, repeats", [((3,), (2,)), ((3,), (2, 2)), ((2, 3), (1, 2)),
                                            ((2, 3), (2, 1, 3)), ((2, 3), (0, 1)), ((), (3,)),
                                            ((2, 1, 3), (1, 4, 1))])
def test_repeat_matches_torch(shape, repeats):
    agree(lambda x: x.repeat(*repeats), lambda t: t.repeat(*repeats), rnd(*shape))
    agree(lambda x: x.repeat(repeats), lambda t: t.repeat(repeats), rnd(*shape))


# ---- clamp with tensor bounds ----------------------------------------------------------------
def test_clamp_with_tensor_bounds_matches_torch_values_and_gradients():
    # Ties on both bounds, min > max, min == max, broadcast bounds.
    x = np.array([[-2.0, -1.0, 0.0, 1.0, 2.0, 3.0], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]])
    lo = np.array([-1.0, -1.0, 1.0, 1.0, 0.0, 2.0])
    hi = np.array([[1.0], [0.5]])
    agree(lambda a, b, c: lz.clamp(a, b, c), lambda a, b, c: torch.clamp(a, b, c), x, lo, hi)
    agree(lambda a, b, c: a.clamp(min=b, max=c), lambda a, b, c: a.clamp(min=b, max=c), x, hi, lo)
    agree(lambda a, b: a.clamp(min=b), lambda a, b: a.clamp(min=b), x, lo)
    agree(lambda a, c: a.clip(max=c), lambda a, c: a.clip(max=c), x, hi)
    # A number beside a tensor bound is a 0-d bound (PyTorch refuses the mix: it takes the tensor)
    agree(lambda a, b: lz.clamp(a, b, 0.75),
          lambda a, b: torch.clamp(a, b, torch.tensor(0.75, dtype=a.dtype)), x, lo)
    eq = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5])  # min == max, x below, at and above
    agree(lambda a, b, c: lz.clamp(a, b, c), lambda a, b, c: torch.clamp(a, b, c),
          np.array([0.0, 0.5, 1.0, 0.0, 0.5, 1.0]), eq, eq.copy())


def test_clamp_with_tensor_bounds_propagates_nan_and_promotes():
    x = np.array([np.nan, 1.0, 2.0, 3.0])
    lo = np.array([0.0, np.nan, 0.0, 0.0])
    hi = np.array([1.0, 1.0, np.nan, 2.5])
    agree(lambda a, b, c: lz.clamp(a, b, c), lambda a, b, c: torch.clamp(a, b, c), x, lo, hi,
          grad=False)
    agree(lambda a, b: lz.clamp(a, b), lambda a, b: torch.clamp(a, b),
          np.array([1, 2, 3]), np.array(1.5, dtype=np.float32), grad=False)


def test_clamp_in_place_with_tensor_bounds_matches_torch():
    a, lo = rnd(2, 3), np.array([0.0, 0.5, 1.0])
    x, t = _lz(a), torch.tensor(a)
    assert x.clamp_(_lz(lo)) is x
    t.clamp_(torch.tensor(lo))
    np.testing.assert_array_equal(x.numpy(), t.numpy())


# ---- norms ---------------------------------------------------------------------------------
_VECTOR_ORDS = [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1, 1.5]


@pytest.mark.parametrize("ord", _VECTOR_ORDS)
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, False), (-1, True), ((0, 2), False),
                                          ((0, 1, 2), True)])
def test_vector_norm_matches_torch(ord, dim, keepdim):
    a = rnd(3, 4, 2, seed=3)
    agree(lambda x: lz.linalg.vector_norm(x, ord, dim, keepdim),
          lambda t: torch.linalg.vector_norm(t, ord, dim, keepdim), a, rtol=1e-6)


@pytest.mark.parametrize("ord", [2, 1, math.inf, 3, 0.5])
def test_vector_norm_of_zeros_has_a_zero_gradient_as_torch(ord):
    a = np.zeros((2, 3))
    a[1] = [0.0, 1.0, -2.0]  # one zero row (a zero norm) and zero entries in a non-zero row
    agree(lambda x: lz.linalg.vector_norm(x, ord, 1), lambda t: torch.linalg.vector_norm(t, ord, 1), a)


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf])
@pytest.mark.parametrize("dim", [(-2, -1), (0, 2), (2, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_matches_torch(ord, dim, keepdim):
    a = rnd(3, 4, 5, seed=4)
    agree(lambda x: lz.linalg.matrix_norm(x, ord, dim, keepdim),
          lambda t: torch.linalg.matrix_norm(t, ord, dim, keepdim), a)


@pytest.mark.parametrize("shape, ord, dim", [((3, 4), None, None), ((3, 4, 2), None, None),
                                             ((5,), 3, None), ((3, 4), 1, None), ((3, 4), "fro", None),
                                             ((3, 4, 2), 2, 1), ((3, 4, 2), math.inf, (0, 2)),
                                             ((3, 4, 2), None, (1, 2))])
def test_linalg_norm_picks_vector_or_matrix_norms_as_torch(shape, ord, dim):
    agree(lambda x: lz.linalg.norm(x, ord, dim), lambda t: torch.linalg.norm(t, ord, dim),
          rnd(*shape, seed=5))


@pytest.mark.parametrize("p, dim, keepdim", [("fro", None, False), (2, None, False), (1, 0, True),
                                             ("fro", (0, 1), False), (math.inf, 1, False),
                                             (None, -1, False), (3, (0, 1), True)])
def test_tensor_norm_and_torch_norm_match_torch(p, dim, keepdim):
    a = rnd(3, 4, seed=6)
    agree(lambda x: x.norm(p, dim, keepdim), lambda t: t.norm(p, dim, keepdim), a)
    agree(lambda x: lz.norm(x, p, dim, keepdim), lambda t: torch.norm(t, p, dim, keepdim), a)


def test_norm_dtype_argument_computes_in_that_dtype():
    a = rnd(3, 4).astype(np.float32)
    agree(lambda x: lz.linalg.vector_norm(x, dtype=lz.float64),
          lambda t: torch.linalg.vector_norm(t, dtype=torch.float64), a)


# ---- F.pad -----------------------------------------------------------------------------------
_PAD_CASES = [
    ((2, 3, 5), (1, 2)), ((2, 3, 5), (0, 3)), ((2, 3, 5), (-1, 2)), ((2, 3, 5), (2, -2)),
    ((3, 5), (2, 1)), ((2, 3, 4, 5), (1, 2, 2, 1)), ((3, 4, 5), (1, 1, 3, 0)),
    ((1, 2, 3, 4, 5), (1, 2, 1, 2, 2, 1)), ((2, 3, 4, 5), (-1, 1, 0, -2)),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, pad", _PAD_CASES)
def test_pad_matches_torch_in_every_mode(mode, shape, pad):
    agree(lambda x: F.pad(x, pad, mode=mode), lambda t: TF.pad(t, pad, mode=mode), rnd(*shape))


@pytest.mark.parametrize("shape, pad", [((3,), (1, 2)), ((2, 3, 4), (1, 1, 0, 2, 1, 0)),
                                        ((2, 3), (-1, -1)), ((2, 3, 4), (0, 0, -2, 1))])
def test_constant_pad_pads_any_dims_with_its_value(shape, pad):
    agree(lambda x: F.pad(x, pad, value=2.5), lambda t: TF.pad(t, pad, value=2.5), rnd(*shape))
    agree(lambda x: F.pad(x, pad, value=-1), lambda t: TF.pad(t, pad, value=-1),
          rnd(*shape).astype(np.int64), grad=False)


# ---- F.interpolate ---------------------------------------------------------------------------
_SIZES = [dict(size=(6, 10)), dict(size=(3, 2)), dict(size=7), dict(size=(4, 5)),
          dict(scale_factor=2), dict(scale_factor=(1.5, 0.7)), dict(scale_factor=0.5),
          dict(scale_factor=1.3), dict(scale_factor=3, recompute_scale_factor=True),
          dict(scale_factor=(2.6, 1.0), recompute_scale_factor=False)]


@pytest.mark.parametrize("kw", _SIZES)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nearest_interpolation_matches_torch(kw, mode, dtype):
    agree(lambda x: F.interpolate(x, mode=mode, **kw), lambda t: TF.interpolate(t, mode=mode, **kw),
          rnd(2, 3, 4, 5, dtype=dtype))


@pytest.mark.parametrize("kw", _SIZES)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bilinear_interpolation_matches_torch(kw, align_corners, dtype):
    tol = dict(rtol=1e-5, atol=1e-5) if dtype is np.float32 else {}
    agree(lambda x: F.interpolate(x, mode="bilinear", align_corners=align_corners, **kw),
          lambda t: TF.interpolate(t, mode="bilinear", align_corners=align_corners, **kw),
          rnd(2, 3, 4, 5, dtype=dtype), **tol)


@pytest.mark.parametrize("mode, shape, kw", [
    ("linear", (2, 3, 5), dict(size=8)), ("linear", (2, 3, 5), dict(scale_factor=0.6)),
    ("trilinear", (1, 2, 3, 4, 5), dict(size=(5, 3, 7))), ("nearest", (2, 3, 5), dict(size=12)),
    ("nearest", (1, 2, 3, 4, 5), dict(scale_factor=(2, 1.5, 0.5))),
])
@pytest.mark.parametrize("align_corners", [None, True])
def test_linear_trilinear_and_other_ranks_match_torch(mode, shape, kw, align_corners):
    if mode == "nearest" and align_corners:
        pytest.skip("align_corners is refused with nearest (tested in the bad-input tests)")
    agree(lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **kw),
          lambda t: TF.interpolate(t, mode=mode, align_corners=align_corners, **kw),
          rnd(*shape))


def test_nearest_interpolation_of_integers_keeps_the_dtype():
    a = np.arange(2 * 3 * 4).reshape(1, 2, 3, 4)
    got = F.interpolate(_lz(a), scale_factor=2)
    want = TF.interpolate(torch.tensor(a, dtype=torch.float64), scale_factor=2).long()
    assert got.dtype == lz.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---- activations, one_hot, dropout2d ------------------------------------------------------------
_ACT_INPUT = np.array([-5.0, -3.0, -2.9, -1.0, 0.0, 0.5, 2.9, 3.0, 4.0, 100.0, -100.0])


@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid", "silu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activations_match_torch_at_the_kinks(name, dtype):
    agree(getattr(F, name), getattr(TF, name), _ACT_INPUT.astype(dtype))


@pytest.mark.parametrize("name", ["Hardswish", "Hardsigmoid", "SiLU"])
def test_activation_modules_match_torch(name):
    agree(getattr(lz.nn, name)(), getattr(torch.nn, name)(), _ACT_INPUT)


@pytest.mark.parametrize("shape, num_classes", [((5,), -1), ((2, 3), 6), ((0,), 3), ((4,), 4)])
def test_one_hot_matches_torch(shape, num_classes):
    a = np.random.default_rng(7).integers(0, 4, shape)
    agree(lambda x: F.one_hot(x, num_classes), lambda t: TF.one_hot(t, num_classes), a, grad=False)


def test_dropout2d_in_eval_and_with_p_0_or_1_matches_torch():
    a = rnd(2, 3, 4, 4)
    agree(lambda x: F.dropout2d(x, 0.5, training=False), lambda t: TF.dropout2d(t, 0.5, training=False), a)
    agree(lambda x: F.dropout2d(x, 0.0), lambda t: TF.dropout2d(t, 0.0), a)
    agree(lambda x: F.dropout2d(x, 1.0), lambda t: TF.dropout2d(t, 1.0), a)


# ---- nn.init: PyTorch's fan computation and gain ---------------------------------------------
@pytest.mark.parametrize("shape", [(4, 3), (8, 3, 3, 3), (16, 4, 5)])
def test_init_fans_and_gains_are_pytorch_s(shape):
    t, x = torch.empty(shape), lz.zeros(*shape)
    assert lz.nn.init._calculate_fan_in_and_fan_out(x) == torch.nn.init._calculate_fan_in_and_fan_out(t)
    for nl, param in [("linear", None), ("relu", None), ("tanh", None), ("leaky_relu", None),
                      ("leaky_relu", 0.2), ("selu", None), ("conv2d", None), ("sigmoid", None)]:
        assert lz.nn.init.calculate_gain(nl, param) == pytest.approx(torch.nn.init.calculate_gain(nl, param))
