"""The composite tensor ops (src/ops/composite.cpp, linalg_norms.cpp) against numpy:
tril/triu, masked_fill, flip, roll, repeat, clamp with tensor bounds, the norms, multinomial; their
gradients against finite differences; and their bad input (raises naming the op, records
nothing). PyTorch agreement: tests/python/torch_frontend/test_composites_vs_torch.py."""
import math

import numpy as np
import pytest

import lazuli as lz
from conftest import raises_without_leak


def rnd(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).uniform(-3, 3, shape).astype(dtype)


def numeric_grad(fn, a, eps=1e-6):
    """d sum(fn(a) * w) / da by central differences, fn evaluated through lazuli (float64)."""
    w = np.random.default_rng(99).standard_normal(np.shape(fn(lz.tensor(a)).numpy()))
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = ((fn(lz.tensor(hi)).numpy() - fn(lz.tensor(lo)).numpy()) * w).sum() / (2 * eps)
    return g, w


def check_grad(fn, a, rtol=1e-5, atol=1e-6):
    """The gradient lazuli's backward gives fn at a equals the finite-difference one."""
    want, w = numeric_grad(fn, a)
    x = lz.tensor(a).requires_grad_()
    (fn(x) * lz.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=rtol, atol=atol)


# ---- values against numpy ----------------------------------------------------------------------
@pytest.mark.parametrize("diagonal", [-1, 0, 2])
@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 3)])
def test_tril_and_triu_match_numpy(shape, diagonal):
    a = rnd(*shape)
    np.testing.assert_array_equal(lz.tril(lz.tensor(a), diagonal).numpy(), np.tril(a, diagonal))
    np.testing.assert_array_equal(lz.tensor(a).triu(diagonal).numpy(), np.triu(a, diagonal))
    b = a > 0
    np.testing.assert_array_equal(lz.tensor(b).tril(diagonal).numpy(), np.tril(b, diagonal))


def test_tril_and_triu_in_place_write_through_views():
    x = lz.ones(2, 3, 3)
    x[1].tril_()
    x[0].triu_(1)
    np.testing.assert_array_equal(x.numpy(), np.stack([np.triu(np.ones((3, 3)), 1), np.tril(np.ones((3, 3)))]))


def test_causal_mask_the_usual_way():
    t = 4
    scores = lz.tensor(rnd(2, t, t))
    causal = lz.ones(t, t, dtype=lz.bool).tril()
    p = scores.masked_fill(~causal, float("-inf")).softmax(-1).numpy()
    assert np.all(p[:, np.triu_indices(t, 1)[0], np.triu_indices(t, 1)[1]] == 0)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)


def test_masked_fill_matches_numpy_where():
    a, m = rnd(3, 4), rnd(4, seed=1) > 0
    np.testing.assert_array_equal(lz.tensor(a).masked_fill(lz.tensor(m), -7.0).numpy(), np.where(m, -7.0, a))
    v = lz.tensor(2.5)
    np.testing.assert_array_equal(lz.masked_fill(lz.tensor(a), lz.tensor(m), v).numpy(), np.where(m, 2.5, a))
    x = lz.tensor(a)
    x.masked_fill_(lz.tensor(m), 0.0)
    np.testing.assert_array_equal(x.numpy(), np.where(m, 0.0, a))


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1), (-1,)])
def test_flip_matches_numpy(dims):
    a = rnd(3, 4)
    np.testing.assert_array_equal(lz.flip(lz.tensor(a), dims).numpy(), np.flip(a, dims))
    np.testing.assert_array_equal(lz.tensor(a).flip(*dims).numpy(), np.flip(a, dims))


@pytest.mark.parametrize("shifts, dims", [(1, 0), (-2, 1), (9, 1), ((1, 3), (0, 1)), (5, None)])
def test_roll_matches_numpy(shifts, dims):
    a = rnd(3, 4)
    np.testing.assert_array_equal(lz.roll(lz.tensor(a), shifts, dims).numpy(), np.roll(a, shifts, dims))


@pytest.mark.parametrize("shape, reps", [((3,), (2,)), ((2, 3), (2, 2)), ((2, 3), (3, 1, 2)), ((2,), (0, 2))])
def test_repeat_matches_numpy_tile(shape, reps):
    a = rnd(*shape)
    np.testing.assert_array_equal(lz.tensor(a).repeat(*reps).numpy(), np.tile(a, reps))


def test_clamp_with_tensor_bounds_matches_numpy():
    a, lo, hi = rnd(3, 4), rnd(4, seed=1) - 1, rnd(3, 1, seed=2) + 1
    want = np.minimum(np.maximum(a, lo), hi)
    np.testing.assert_array_equal(lz.clamp(lz.tensor(a), lz.tensor(lo), lz.tensor(hi)).numpy(), want)
    np.testing.assert_array_equal(lz.tensor(a).clamp(max=lz.tensor(hi)).numpy(), np.minimum(a, hi))
    np.testing.assert_array_equal(lz.tensor(a).clip(lz.tensor(lo), 1.0).numpy(), np.clip(a, lo, 1.0))
    assert lz.clamp(lz.tensor([1, 5]), lz.tensor(1.5)).dtype == lz.float32  # promoted as torch
    assert lz.clamp(lz.tensor([1.0, 5.0]), 2, 3).tolist() == [2.0, 3.0]  # numbers still work


@pytest.mark.parametrize("ord", [2, 1, math.inf, -math.inf, 0, 3, -1])
def test_vector_norm_matches_numpy(ord):
    a = rnd(3, 4)
    np.testing.assert_allclose(lz.linalg.vector_norm(lz.tensor(a), ord).numpy(),
                               np.linalg.norm(a.ravel(), ord), rtol=1e-12)
    np.testing.assert_allclose(lz.linalg.vector_norm(lz.tensor(a), ord, 1, True).numpy(),
                               np.linalg.norm(a, ord, axis=1, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf])
def test_matrix_norm_matches_numpy(ord):
    a = rnd(2, 3, 4)
    np.testing.assert_allclose(lz.linalg.matrix_norm(lz.tensor(a), ord).numpy(),
                               np.linalg.norm(a, ord, axis=(-2, -1)), rtol=1e-12)
    np.testing.assert_allclose(lz.linalg.norm(lz.tensor(a[0]), ord).numpy(), np.linalg.norm(a[0], ord),
                               rtol=1e-12)


def test_tensor_norm_defaults_to_the_frobenius_norm():
    a = rnd(3, 4)
    np.testing.assert_allclose(lz.tensor(a).norm().item(), np.linalg.norm(a), rtol=1e-12)
    np.testing.assert_allclose(lz.tensor(a).norm(1, dim=0).numpy(), np.abs(a).sum(0), rtol=1e-12)
    assert lz.tensor(a.astype(np.float32)).norm(dtype=lz.float64).dtype == lz.float64


# ---- gradients against finite differences ------------------------------------------------------
GRAD_CASES = [
    ("tril", lambda x: lz.tril(x, -1), (3, 4)),
    ("triu", lambda x: x.triu(1), (2, 3, 3)),
    ("masked_fill", lambda x: x.masked_fill(lz.tensor([True, False, True]), 1.0), (2, 3)),
    ("flip", lambda x: x.flip(0, 1), (3, 4)),
    ("roll", lambda x: x.roll((1, -1), (0, 1)), (3, 4)),
    ("repeat", lambda x: x.repeat(2, 1, 3), (2, 3)),
    ("clamp_tensor", lambda x: lz.clamp(x, lz.tensor([-1.0, 0.0, 1.0]), lz.tensor(2.0)), (4, 3)),
    ("vector_norm_2", lambda x: lz.linalg.vector_norm(x, 2, 1), (3, 4)),
    ("vector_norm_3", lambda x: lz.linalg.vector_norm(x, 3), (3, 4)),
    ("vector_norm_half", lambda x: lz.linalg.vector_norm(x, 0.5, 0), (3, 4)),
    ("matrix_norm_inf", lambda x: lz.linalg.matrix_norm(x, math.inf), (3, 4)),
    ("norm_fro", lambda x: x.norm(), (3, 4)),
]


@pytest.mark.parametrize("fn, shape", [pytest.param(f, s, id=n) for n, f, s in GRAD_CASES])
def test_gradients_match_finite_differences(fn, shape):
    check_grad(fn, rnd(*shape, seed=3))


def test_clamp_with_tensor_bounds_sends_each_gradient_where_torch_does():
    # x below, at, inside, at and above [min, max] = [0, 1]; then min > max.
    x = lz.tensor([-1.0, 0.0, 0.5, 1.0, 2.0, 0.5]).requires_grad_()
    lo = lz.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 1.0]).requires_grad_()
    hi = lz.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 0.0]).requires_grad_()
    lz.clamp(x, lo, hi).sum().backward()
    # PyTorch 2.15's rule: a tie of x with one bound splits the gradient; min > max: all to max
    assert x.grad.tolist() == [0, 0.5, 1, 0.5, 0, 0]
    assert lo.grad.tolist() == [1, 0.5, 0, 0, 0, 0]
    assert hi.grad.tolist() == [0, 0, 0, 0.5, 1, 1]


def test_norm_of_zeros_has_a_zero_gradient_not_nan():
    for ord in (2, 3, 0.5, math.inf, 1):
        x = lz.zeros(2, 3, dtype=lz.float64).requires_grad_()
        lz.linalg.vector_norm(x, ord).backward()
        assert x.grad.tolist() == [[0.0] * 3] * 2, ord


# ---- multinomial ---------------------------------------------------------------------------------
def test_multinomial_with_replacement_draws_the_weights_proportions():
    lz.manual_seed(0)
    w = np.array([1.0, 0.0, 3.0, 6.0])  # unnormalized, one zero
    s = lz.multinomial(lz.tensor(w), 20000, replacement=True)
    assert s.dtype == lz.int64 and s.shape == (20000,)
    freq = np.bincount(s.numpy(), minlength=4) / 20000
    assert freq[1] == 0
    np.testing.assert_allclose(freq, w / w.sum(), atol=0.015)


def test_multinomial_without_replacement_draws_distinct_categories():
    lz.manual_seed(1)
    w = lz.tensor([[0.1, 0.2, 0.3, 0.4, 0.0], [5.0, 0.0, 1.0, 1.0, 1.0]])
    s = lz.multinomial(w, 4).numpy()
    assert s.shape == (2, 4)
    for row, zero in zip(s, (4, 1)):
        assert sorted(row) == sorted(set(row)) and zero not in row


def test_multinomial_without_replacement_orders_draws_by_weight_on_average():
    lz.manual_seed(2)
    w = lz.tensor([[1.0, 10.0, 100.0]]).repeat(3000, 1)
    first = lz.multinomial(w, 2).numpy()[:, 0]
    freq = np.bincount(first, minlength=3) / 3000
    np.testing.assert_allclose(freq, np.array([1, 10, 100]) / 111, atol=0.02)


def test_multinomial_draws_again_each_step_with_the_same_graph():
    w = lz.tensor([1.0, 1.0, 1.0, 1.0])
    lz.sync()
    draws, hashes = [], []
    for _ in range(4):
        s = lz.multinomial(w, 4)
        hashes.append(lz.debug.graph_hash([s]))
        draws.append(tuple(s.tolist()))
        lz.sync()
    assert len(set(hashes)) == 1  # the RNG key is derived inside the graph
    assert len(set(draws)) > 1


# ---- bad input -----------------------------------------------------------------------------------
BAD = [
    (ValueError, lambda: lz.tril(lz.ones(3)), ["tril", "[3]"]),
    (ValueError, lambda: lz.ones(3).triu_(), ["triu_", "[3]"]),
    (TypeError, lambda: lz.ones(3).masked_fill(lz.ones(3), 0.0), ["masked_fill", "bool"]),
    (ValueError, lambda: lz.ones(3).masked_fill(lz.ones(4, dtype=lz.bool), 0.0), ["masked_fill", "[3]", "[4]"]),
    (ValueError, lambda: lz.ones(3).masked_fill(lz.ones(3, dtype=lz.bool), lz.ones(1)), ["masked_fill", "0-d"]),
    (ValueError, lambda: lz.ones(3).masked_fill_(lz.ones(2, 3, dtype=lz.bool), 1.0), ["masked_fill_", "[2, 3]"]),
    (ValueError, lambda: lz.ones(3, dtype=lz.int64).masked_fill(lz.ones(3, dtype=lz.bool), math.nan),
     ["masked_fill", "int64"]),
    (IndexError, lambda: lz.flip(lz.ones(2, 3), (2,)), ["flip"]),
    (ValueError, lambda: lz.ones(2, 3).flip(0, 0), ["flip", "dim 0"]),
    (ValueError, lambda: lz.ones(2, 3).roll((1, 2), 0), ["roll", "2 shifts"]),
    (ValueError, lambda: lz.ones(2, 3).roll((1, 2)), ["roll", "one shift"]),
    (IndexError, lambda: lz.ones(2, 3).roll(1, 2), ["roll"]),
    (ValueError, lambda: lz.ones(2, 3).repeat(2), ["repeat", "[2, 3]"]),
    (ValueError, lambda: lz.ones(2).repeat(-1), ["repeat"]),
    (ValueError, lambda: lz.clamp(lz.ones(3), lz.ones(2)), ["clamp", "[3]", "[2]"]),
    (TypeError, lambda: lz.clamp(lz.ones(3, dtype=lz.bool), lz.ones(3)), ["clamp", "bool"]),
    (ValueError, lambda: lz.ones(3).clamp_(lz.ones(2, 3)), ["clamp_", "[2, 3]"]),
    (TypeError, lambda: lz.ones(3, dtype=lz.int64).clamp_(lz.tensor(0.5)), ["clamp_", "float32", "int64"]),
    (ValueError, lambda: lz.multinomial(lz.ones(3), 4), ["multinomial", "without replacement"]),
    (ValueError, lambda: lz.multinomial(lz.ones(3), 0), ["multinomial", "num_samples"]),
    (ValueError, lambda: lz.multinomial(lz.ones(2, 2, 3), 1), ["multinomial", "[2, 2, 3]"]),
    (TypeError, lambda: lz.multinomial(lz.ones(3, dtype=lz.int64), 1), ["multinomial", "int64"]),
    (TypeError, lambda: lz.linalg.vector_norm(lz.ones(3, dtype=lz.int64)), ["vector_norm", "int64"]),
    (TypeError, lambda: lz.linalg.vector_norm(lz.ones(3), dtype=lz.int64), ["vector_norm", "int64"]),
    (ValueError, lambda: lz.linalg.vector_norm(lz.ones(0), -1), ["vector_norm", "empty"]),
    (ValueError, lambda: lz.linalg.vector_norm(lz.ones(0), math.inf), ["vector_norm", "empty"]),
    (ValueError, lambda: lz.linalg.matrix_norm(lz.ones(3)), ["matrix_norm", "2 dims"]),
    (ValueError, lambda: lz.linalg.matrix_norm(lz.ones(3, 3), 3), ["matrix_norm", "ord 3"]),
    (ValueError, lambda: lz.linalg.matrix_norm(lz.ones(3, 3), "nuc"), ["matrix_norm", "singular values"]),
    (ValueError, lambda: lz.linalg.norm(lz.ones(2, 2, 2), 2), ["linalg.norm", "1-D or 2-D"]),
    (ValueError, lambda: lz.ones(3).norm("foo"), ["norm", "foo"]),
]


@pytest.mark.parametrize("exc, fn, match", [pytest.param(e, f, m, id=f"{i}-{m[0]}") for i, (e, f, m) in enumerate(BAD)])
def test_bad_input_raises_naming_the_op_and_records_nothing(exc, fn, match):
    raises_without_leak(exc, fn, *match)
