"""Scans, attention and multi-index writes in Lazuli's own API, against numpy and finite differences:
cumsum/cumprod (new primitives), scaled_dot_product_attention (a C++ composite), index_put with
several index tensors and accumulate, cross_entropy over (N, C, d...) inputs; values, dtypes,
gradients and bad input. PyTorch agreement (and MultiheadAttention / TransformerEncoderLayer with
PyTorch's state_dicts): tests/python/torch_frontend/test_scans_attention_vs_torch.py."""
import math

import numpy as np
import pytest

import lazuli as lz
from lazuli.nn import functional as F
from conftest import raises_without_leak


def numeric_grad(f, a, eps=1e-6):
    """d sum(f(a) * w) / da by central differences (float64), with fixed weights w."""
    w = np.random.default_rng(7).uniform(0.5, 1.5, np.shape(f(a)))
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i] = eps
        g[i] = (np.sum(f(a + d) * w) - np.sum(f(a - d) * w)) / (2 * eps)
    return g, w


# ---- cumsum / cumprod -------------------------------------------------------------------------

@pytest.mark.parametrize("fn", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape, dim", [((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -2),
                                        ((2, 0, 3), 1), ((), 0)])
def test_scans_match_numpy(backend, fn, shape, dim):
    a = np.random.default_rng(0).uniform(0.5, 1.5, shape)
    want = getattr(np, fn)(a, axis=dim) if a.ndim else a
    for dt, tol in ((np.float64, 1e-12), (np.float32, 1e-6)):
        got = getattr(lz, fn)(lz.tensor(a.astype(dt)), dim)
        assert got.dtype == (lz.float64 if dt == np.float64 else lz.float32)
        np.testing.assert_allclose(got.numpy(), want, rtol=tol)
        np.testing.assert_allclose(getattr(lz.tensor(a.astype(dt)), fn)(dim).numpy(), want, rtol=tol)


@pytest.mark.parametrize("dtype", [lz.int32, lz.int64, lz.bool])
def test_integer_and_bool_scans_give_int64(backend, dtype):
    a = np.array([[1, 0, 3], [2, 2, 1]])
    x = lz.tensor(a).to(dtype)
    ref = a.astype(bool).astype(np.int64) if dtype == lz.bool else a
    for fn in ("cumsum", "cumprod"):
        got = getattr(lz, fn)(x, 1)
        assert got.dtype == lz.int64
        np.testing.assert_array_equal(got.numpy(), getattr(np, fn)(ref, axis=1))
    got = lz.cumsum(x, 1, dtype=lz.float64)
    assert got.dtype == lz.float64
    np.testing.assert_array_equal(got.numpy(), np.cumsum(ref, axis=1))


def test_cumsum_gradient_is_the_reversed_cumsum():
    a = np.random.default_rng(1).standard_normal((3, 5))
    x = lz.tensor(a).requires_grad_()
    num, w = numeric_grad(lambda v: np.cumsum(v, axis=1), a)
    (lz.cumsum(x, 1) * lz.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), num, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(x.grad.numpy(), np.flip(np.cumsum(np.flip(w, 1), 1), 1), rtol=1e-12)


@pytest.mark.parametrize("zeros", [[], [2], [1, 3], [0, 4]])
def test_cumprod_gradient_handles_zeros_as_pytorch(zeros):
    a = np.random.default_rng(2).uniform(0.5, 1.5, (2, 5))
    a[:, zeros] = 0.0
    x = lz.tensor(a).requires_grad_()
    num, w = numeric_grad(lambda v: np.cumprod(v, axis=1), a)
    (lz.cumprod(x, 1) * lz.tensor(w)).sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_scans_keep_one_program_for_any_values():
    rng = np.random.default_rng(3)
    h = {lz.debug.graph_hash([lz.cumprod(lz.tensor(rng.standard_normal((4, 6))), 1)])
         for _ in range(2)}
    assert len(h) == 1


@pytest.mark.parametrize("call, exc, words", [
    (lambda: lz.cumsum(lz.zeros(2, 3), 2), IndexError, ["cumsum", "dim"]),
    (lambda: lz.cumprod(lz.zeros(2, 3), -3), IndexError, ["cumprod"]),
    (lambda: lz.cumsum(lz.zeros(3), 0, dtype=lz.bool), TypeError, ["cumsum", "bool"]),
    (lambda: lz.cumsum(lz.zeros(3), "0"), TypeError, ["cumsum", "dim"]),
    (lambda: lz.cumsum([1, 2], 0), TypeError, ["cumsum"]),
])
def test_scan_bad_input_names_the_op_and_records_nothing(call, exc, words):
    raises_without_leak(exc, call, *words)


# ---- scaled_dot_product_attention ---------------------------------------------------------------

def np_attention(q, k, v, mask=None, causal=False, scale=None):
    s = (q @ np.swapaxes(k, -1, -2)) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), dtype=bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    m = np.max(s, -1, keepdims=True)
    m = np.where(np.isinf(m), 0, m)
    e = np.exp(s - m)
    tot = e.sum(-1, keepdims=True)
    return (e / np.where(tot == 0, 1, tot)) @ v


def qkv(rng, q_shape, k_shape, v_shape):
    return [rng.standard_normal(s) for s in (q_shape, k_shape, v_shape)]


@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 5, 4), (2, 5, 6)),
                                    ((2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8)),
                                    ((1, 3, 4), (2, 1, 5, 4), (5, 2))])
def test_attention_matches_numpy(backend, shapes):
    q, k, v = qkv(np.random.default_rng(3), *shapes)
    got = F.scaled_dot_product_attention(lz.tensor(q), lz.tensor(k), lz.tensor(v))
    np.testing.assert_allclose(got.numpy(), np_attention(q, k, v), rtol=1e-10, atol=1e-12)


def test_attention_masks_causal_and_scale_match_numpy(backend):
    rng = np.random.default_rng(4)
    q, k, v = qkv(rng, (2, 2, 4, 3), (2, 2, 6, 3), (2, 2, 6, 5))
    Q, K, V = lz.tensor(q), lz.tensor(k), lz.tensor(v)
    bool_mask = rng.uniform(size=(2, 1, 4, 6)) > 0.3
    float_mask = rng.standard_normal((4, 6))
    cases = [
        (dict(attn_mask=lz.tensor(bool_mask)), dict(mask=bool_mask)),
        (dict(attn_mask=lz.tensor(float_mask)), dict(mask=float_mask)),
        (dict(is_causal=True), dict(causal=True)),
        (dict(is_causal=True, scale=0.3), dict(causal=True, scale=0.3)),
    ]
    for kw, ref in cases:
        got = F.scaled_dot_product_attention(Q, K, V, **kw)
        np.testing.assert_allclose(got.numpy(), np_attention(q, k, v, **ref), rtol=1e-10,
                                   atol=1e-12)


def test_causal_attention_stores_no_mask_tensor():
    if lz.backend() != "cpu":
        pytest.skip("a plan of the cpu backend")
    q = lz.randn(2, 4, 8, 16)
    lz.sync()
    plan = lz.debug.dump_kernels([F.scaled_dot_product_attention(q, q, q, is_causal=True)])
    values = plan.split("values:")[1].split("steps:")[0]
    # The mask is iota >= iota inside the kernel that masks the scores: no buffer holds it.
    assert "bool" not in values
    assert "linear index (iota)" in plan


def test_fully_masked_rows_give_zero_and_no_gradient():
    rng = np.random.default_rng(5)
    q, k, v = (lz.tensor(a).requires_grad_() for a in qkv(rng, (3, 2), (4, 2), (4, 2)))
    mask = lz.tensor(np.array([[True] * 4, [False] * 4, [True, False, True, False]]))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out.numpy()[1].tolist() == [0.0, 0.0]
    out.sum().backward()
    assert q.grad.numpy()[1].tolist() == [0.0, 0.0]
    assert np.isfinite(k.grad.numpy()).all() and np.isfinite(v.grad.numpy()).all()


@pytest.mark.parametrize("kw", [dict(), dict(is_causal=True), dict(mask=True)])
def test_attention_gradients_match_finite_differences(kw):
    rng = np.random.default_rng(6)
    q, k, v = qkv(rng, (2, 3, 4), (2, 5, 4), (2, 5, 3))
    mask = rng.standard_normal((3, 5)) if kw.get("mask") else None
    causal = kw.get("is_causal", False)
    args = [q, k, v]
    for i in range(3):
        def f(a, i=i):
            xs = list(args)
            xs[i] = a
            return np_attention(*xs, mask=mask, causal=causal)
        num, w = numeric_grad(f, args[i])
        ts = [lz.tensor(a).requires_grad_() for a in args]
        out = F.scaled_dot_product_attention(*ts, attn_mask=None if mask is None else
                                             lz.tensor(mask), is_causal=causal)
        (out * lz.tensor(w)).sum().backward()
        np.testing.assert_allclose(ts[i].grad.numpy(), num, rtol=1e-5, atol=1e-8)


def test_grouped_query_attention_repeats_key_heads_in_groups():
    rng = np.random.default_rng(8)
    q, k, v = qkv(rng, (1, 6, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4))
    got = F.scaled_dot_product_attention(lz.tensor(q), lz.tensor(k), lz.tensor(v), enable_gqa=True)
    want = np_attention(q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)


def test_attention_dropout_scales_kept_weights_and_draws_new_masks():
    # v = identity: the output rows are the (dropped, rescaled) attention weights themselves.
    n = 64
    q = lz.zeros(1, n, 4)  # equal scores: every weight is 1/n before dropout
    v = lz.eye(n).reshape(1, n, n)
    outs = [F.scaled_dot_product_attention(q, lz.zeros(1, n, 4), v, dropout_p=0.25).numpy()
            for _ in range(2)]
    for o in outs:
        kept = o != 0
        np.testing.assert_allclose(o[kept], 1 / n / 0.75, rtol=1e-6)
        assert abs(kept.mean() - 0.75) < 0.03  # 4096 draws: 0.03 is 4.4 standard deviations
    assert (outs[0] != outs[1]).any()
    q1 = lz.randn(2, 3, 4)
    np.testing.assert_array_equal(F.scaled_dot_product_attention(q1, q1, q1, dropout_p=0.0).numpy(),
                                  F.scaled_dot_product_attention(q1, q1, q1).numpy())


@pytest.mark.parametrize("call, exc, words", [
    (lambda: F.scaled_dot_product_attention(lz.zeros(2, 3, 4), lz.zeros(2, 5, 3), lz.zeros(2, 5, 4)),
     ValueError, ["scaled_dot_product_attention", "[2, 5, 3]", "embedding"]),
    (lambda: F.scaled_dot_product_attention(lz.zeros(2, 3, 4), lz.zeros(2, 5, 4), lz.zeros(2, 4, 4)),
     ValueError, ["sequence length"]),
    (lambda: F.scaled_dot_product_attention(lz.zeros(3, 4), lz.zeros(5, 4).double(), lz.zeros(5, 4)),
     TypeError, ["dtype", "float64"]),
    (lambda: F.scaled_dot_product_attention(lz.zeros(3, 4), lz.zeros(5, 4), lz.zeros(5, 4),
                                            attn_mask=lz.zeros(3, 4)), ValueError, ["attn_mask"]),
    (lambda: F.scaled_dot_product_attention(lz.zeros(3, 4), lz.zeros(5, 4), lz.zeros(5, 4),
                                            attn_mask=lz.zeros(3, 5).long()), TypeError, ["attn_mask"]),
    (lambda: F.scaled_dot_product_attention(lz.zeros(3, 4), lz.zeros(5, 4), lz.zeros(5, 4),
                                            attn_mask=lz.zeros(3, 5), is_causal=True),
     ValueError, ["is_causal"]),
    (lambda: F.scaled_dot_product_attention(lz.zeros(3, 4), lz.zeros(5, 4), lz.zeros(5, 4),
                                            dropout_p=-0.1), ValueError, ["dropout_p"]),
    (lambda: F.scaled_dot_product_attention(lz.zeros(1, 3, 2, 4), lz.zeros(1, 2, 5, 4),
                                            lz.zeros(1, 2, 5, 4), enable_gqa=True),
     ValueError, ["heads"]),
    (lambda: F.scaled_dot_product_attention(lz.zeros(3, 4), lz.zeros(5, 4), "v"), TypeError,
     ["value"]),
])
def test_attention_bad_input_names_the_op_and_records_nothing(call, exc, words):
    raises_without_leak(exc, call, *words)


# ---- index_put with several index tensors and accumulate ------------------------------------

def test_index_put_accumulate_adds_every_repeated_index(backend):
    x = lz.zeros(3, 4)
    rows, cols = lz.tensor([0, 2, 0, 0]), lz.tensor([1, 3, 1, 1])
    got = x.index_put((rows, cols), lz.tensor([1.0, 2.0, 3.0, 4.0]), accumulate=True)
    want = np.zeros((3, 4))
    np.add.at(want, ([0, 2, 0, 0], [1, 3, 1, 1]), [1, 2, 3, 4])
    np.testing.assert_array_equal(got.numpy(), want)
    assert x.numpy().sum() == 0  # out of place
    x.index_put_((rows, cols), lz.tensor(1.0), accumulate=True)  # a value broadcast
    np.testing.assert_array_equal(x.numpy(), (want != 0) * np.array([[0, 3, 0, 0]] * 3).clip(1))


def test_index_put_non_adjacent_indices_put_result_dims_first():
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    i, j = np.array([[0, 1], [1, 0]]), np.array([[4, 3], [0, 0]])
    vals = np.random.default_rng(9).standard_normal((2, 2, 3, 4))  # (index dims, then 3, 4)
    want = a.copy()
    np.add.at(want, (i, slice(None), slice(None), j), vals)
    got = lz.index_put(lz.tensor(a), (lz.tensor(i), None, None, lz.tensor(j)), lz.tensor(vals),
                       accumulate=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_index_put_gradient_flows_to_input_and_values():
    x = lz.tensor(np.ones((3, 3))).requires_grad_()
    v = lz.tensor([1.0, 2.0, 3.0]).requires_grad_()
    out = lz.index_put(x, (lz.tensor([0, 0, 2]), lz.tensor([1, 1, 0])), v, accumulate=True)
    (out * lz.tensor(np.arange(9.0).reshape(3, 3))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(9.0).reshape(3, 3))
    np.testing.assert_array_equal(v.grad.numpy(), [1.0, 1.0, 6.0])


def test_device_index_out_of_range_raises_when_the_program_runs():
    idx = lz.tensor([0, 5]) + 0  # computed: its values are checked when the program runs
    x = lz.index_put(lz.zeros(3, 4), (lz.tensor([0, 1]), idx), lz.tensor(1.0), accumulate=True)
    with pytest.raises(lz.Error, match="out of range"):
        x.numpy()


@pytest.mark.parametrize("call, exc, words", [
    (lambda: lz.zeros(3, 4).index_put((lz.tensor([0, 3]), lz.tensor([0, 0])), lz.tensor(1.0),
                                      accumulate=True), IndexError, ["index 3", "size 3"]),
    (lambda: lz.zeros(3, 4).index_put((lz.tensor([0, 1]), lz.tensor([0, 0, 1])), lz.tensor(1.0),
                                      accumulate=True), IndexError, ["broadcast"]),
    (lambda: lz.zeros(3, 4).index_put((lz.tensor([0, 1]), lz.tensor([0, 2])), lz.ones(3),
                                      accumulate=True), ValueError, ["shape mismatch", "[3]"]),
    (lambda: lz.zeros(3, 4).index_put([0, 1], lz.tensor(1.0)), TypeError, ["index_put", "indices"]),
    (lambda: lz.zeros(3, 4).index_put((lz.tensor([0]),), 1.0), TypeError, ["values", "Tensor"]),
    (lambda: lz.zeros(3).index_put((lz.tensor([0]), lz.tensor([0])), lz.tensor(1.0)), IndexError,
     ["too many indices"]),
])
def test_index_put_bad_input(call, exc, words):
    raises_without_leak(exc, call, *words)


# ---- cross_entropy over (N, C, d...) -----------------------------------------------------------

def np_cross_entropy(logits, target, ignore_index=-100, smoothing=0.0):
    """Mean cross entropy with the class dim at 1 (PyTorch's layout)."""
    lp = logits - logits.max(1, keepdims=True)
    lp = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    keep = target != ignore_index
    picked = np.take_along_axis(lp, np.expand_dims(np.where(keep, target, 0), 1), 1).squeeze(1)
    nll = -(picked * keep).sum() / keep.sum()
    smooth = -(lp.sum(1) * keep).sum() / keep.sum() / logits.shape[1]
    return (1 - smoothing) * nll + smoothing * smooth


def test_cross_entropy_over_sequences_matches_numpy():
    rng = np.random.default_rng(10)
    b, t, v = 2, 5, 7
    logits = rng.standard_normal((b, t, v))
    target = rng.integers(0, v, (b, t))
    target[0, 1] = -100
    # A language model's [B, T, V] logits: the class dim to 1, or both flattened.
    want = np_cross_entropy(np.swapaxes(logits, 1, 2), target, smoothing=0.1)
    got = F.cross_entropy(lz.tensor(logits).transpose(1, 2), lz.tensor(target), label_smoothing=0.1)
    np.testing.assert_allclose(got.item(), want, rtol=1e-12)
    got = F.cross_entropy(lz.tensor(logits).reshape(-1, v), lz.tensor(target).reshape(-1),
                          label_smoothing=0.1)
    np.testing.assert_allclose(got.item(), want, rtol=1e-12)
    none = F.cross_entropy(lz.tensor(logits).transpose(1, 2), lz.tensor(target), reduction="none")
    assert tuple(none.shape) == (b, t) and none.numpy()[0, 1] == 0.0


def test_cross_entropy_with_btv_logits_and_bt_targets_says_where_the_class_dim_is():
    msg = raises_without_leak(ValueError, lambda: F.cross_entropy(lz.zeros(2, 5, 7),
                                                                  lz.zeros(2, 5).long()),
                              "cross_entropy", "(2, 5, 7)", "(2, 5)")
    assert "transpose(1, 2)" in msg
