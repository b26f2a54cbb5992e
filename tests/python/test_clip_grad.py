"""lz.nn.utils.clip_grad_norm_ (and clip_grad_value_) against numpy: the total norm of all
gradients, the in-place scaling, PyTorch's edge cases, and laziness: no value read, no graph cut,
no recompile when max_norm changes."""
import math
import warnings

import numpy as np
import pytest

import lazuli as lz
from lazuli.nn.utils import clip_grad_norm_, clip_grad_value_, get_total_norm
from conftest import executions

GRADS = [np.array([[0.5, -3.0], [2.0, 0.25]]), np.array([4.0, -1.0, 0.0]), np.array([[[-0.125]]])]


def params_with_grads(grads=GRADS, dtype=np.float32):
    ps = []
    for g in grads:
        p = lz.zeros(*g.shape, dtype=lz.float32 if dtype == np.float32 else lz.float64)
        p.requires_grad_()
        p.grad = lz.tensor(g.astype(dtype))
        ps.append(p)
    return ps


def np_vector_norm(x, p):
    x = np.abs(np.ravel(x))
    if p == math.inf:
        return x.max()
    if p == 0:
        return float(np.count_nonzero(x))
    return (x ** p).sum() ** (1 / p)


def np_norm(grads, p):
    """PyTorch's total norm: the norm of the per-tensor norms (for p > 0 the norm of all elements;
    for p = 0 the number of tensors with a nonzero element)."""
    return np_vector_norm([np_vector_norm(g, p) for g in grads], p)


@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 3.5, 0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_numpy(norm_type, max_norm):
    ps = params_with_grads()
    total = clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    want = np_norm(GRADS, norm_type)
    assert total.shape == () and total.dtype == lz.float32
    np.testing.assert_allclose(total.item(), want, rtol=1e-6)
    coef = min(max_norm / (want + 1e-6), 1.0)
    for p, g in zip(ps, GRADS):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-6)


def test_norm_is_lazy_and_costs_one_program_with_the_step():
    ps = params_with_grads()
    lz.sync()
    before = executions()
    total = clip_grad_norm_(ps, 1.0)
    assert executions() == before  # no value read, no graph cut
    assert lz.debug.tensor_state(total) == "ir"
    assert lz.debug.tensor_state(ps[0].grad) == "ir"
    lz.sync()
    assert executions() == before + 1
    np.testing.assert_allclose(total.item(), np_norm(GRADS, 2), rtol=1e-6)


def test_changing_max_norm_does_not_recompile():
    w = lz.tensor([3.0, 4.0]).requires_grad_()
    opt = lz.optim.SGD([w], lr=0.1)
    compiles = []
    for max_norm in [1.0, 2.0, 0.5, 7.0]:
        opt.zero_grad()
        (w * w).sum().backward()
        clip_grad_norm_([w], max_norm)
        opt.step()
        lz.sync()
        compiles.append(lz.debug.counter_value("UncachedCompile"))
    assert compiles[1:] == [compiles[1]] * 3, compiles


def test_gradients_below_max_norm_are_unchanged_and_float64_stays_float64():
    ps = params_with_grads(dtype=np.float64)
    total = clip_grad_norm_(ps, 1e6)
    assert total.dtype == lz.float64
    for p, g in zip(ps, GRADS):
        np.testing.assert_array_equal(p.grad.numpy(), g)


def test_parameters_without_grad_are_skipped_and_none_gives_zero():
    ps = params_with_grads()
    bare = lz.ones(3).requires_grad_()
    total = clip_grad_norm_(ps + [bare], 1.0)
    np.testing.assert_allclose(total.item(), np_norm(GRADS, 2), rtol=1e-6)
    assert bare.grad is None
    assert clip_grad_norm_([bare], 1.0).item() == 0.0
    one = params_with_grads(GRADS[:1])[0]
    np.testing.assert_allclose(clip_grad_norm_(one, 1e9).item(), np_norm(GRADS[:1], 2), rtol=1e-6)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        clip_grad_norm_((p for p in []), 1.0)
    assert any("empty generator" in str(x.message) for x in w)


def test_non_finite_norm_raises_only_when_asked():
    ps = params_with_grads([np.array([1.0, math.inf])])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    ps = params_with_grads([np.array([1.0, math.inf])])
    total = clip_grad_norm_(ps, 1.0)
    assert total.item() == math.inf
    g = ps[0].grad.numpy()
    assert g[0] == 0.0 and math.isnan(g[1])  # scaled by max_norm / inf = 0, as PyTorch


def test_get_total_norm_and_clip_grad_value():
    ts = [lz.tensor(g.astype(np.float32)) for g in GRADS]
    np.testing.assert_allclose(get_total_norm(ts, 3).item(), np_norm(GRADS, 3), rtol=1e-6)
    ps = params_with_grads()
    clip_grad_value_(ps, 1.0)
    for p, g in zip(ps, GRADS):
        np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -1.0, 1.0).astype(np.float32))
    with pytest.raises(TypeError, match="floating-point"):
        get_total_norm([lz.tensor([1, 2])])
