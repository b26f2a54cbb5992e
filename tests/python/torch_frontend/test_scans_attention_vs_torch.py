"""Scans, attention and multi-index writes against PyTorch: cumsum/cumprod, scaled_dot_product_attention,
index_put/indexing with several index tensors, cross_entropy over (N, C, d...); and
nn.MultiheadAttention / nn.TransformerEncoderLayer loading PyTorch's own state_dicts and giving
its outputs and gradients. Values, dtypes and gradients of the same calls on the same inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazuli as lz
from lazuli.nn import functional as F
from lazuli.torch import to_lazuli, to_torch

from test_composites_vs_torch import _lz, agree


def rnd(*shape, seed=0, lo=None, hi=None):
    g = np.random.default_rng(seed)
    if lo is not None:
        return g.uniform(lo, hi, shape)
    return g.standard_normal(shape)


# ---- scans ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape, dim", [((6,), 0), ((3, 5), 1), ((3, 5), -2), ((2, 3, 4), 1)])
def test_scans_agree_with_torch(fn, shape, dim):
    a = rnd(*shape, seed=1, lo=0.5, hi=1.5)
    agree(lambda x: getattr(lz, fn)(x, dim), lambda t: getattr(torch, fn)(t, dim), a, rtol=1e-10)
    agree(lambda x: getattr(lz, fn)(x, dim), lambda t: getattr(torch, fn)(t, dim),
          a.astype(np.float32), rtol=1e-5)


def test_cumprod_gradient_with_zeros_agrees_with_torch():
    a = rnd(3, 6, seed=2, lo=0.5, hi=1.5)
    a[0, 2] = 0.0
    a[1, [1, 4]] = 0.0
    a[2, 0] = 0.0
    agree(lambda x: lz.cumprod(x, 1), lambda t: torch.cumprod(t, 1), a, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_scans_agree_with_torch(dtype):
    a = (rnd(3, 4, seed=3) * 3).astype(dtype)
    for fn in ("cumsum", "cumprod"):
        agree(lambda x: getattr(lz, fn)(x, 1), lambda t: getattr(torch, fn)(t, 1), a, grad=False)
    agree(lambda x: lz.cumsum(x, 0, dtype=lz.float64), lambda t: torch.cumsum(t, 0, dtype=torch.float64),
          a, grad=False)


# ---- attention --------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes, kw", [
    (((2, 2, 5, 8), (2, 2, 7, 8), (2, 2, 7, 4)), dict()),
    (((2, 2, 5, 8), (2, 2, 7, 8), (2, 2, 7, 4)), dict(is_causal=True)),
    (((2, 2, 7, 8), (2, 2, 5, 8), (2, 2, 5, 4)), dict(is_causal=True, scale=0.2)),
    (((3, 4), (6, 4), (6, 2)), dict()),
    (((1, 4, 3, 8), (1, 2, 6, 8), (1, 2, 6, 8)), dict(enable_gqa=True)),
])
def test_attention_agrees_with_torch(shapes, kw):
    arrays = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    agree(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw),
          lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, **kw), *arrays, rtol=1e-9,
          atol=1e-10)


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_attention_masks_agree_with_torch(mask_kind):
    q, k, v = rnd(2, 3, 4, 8, seed=4), rnd(2, 3, 6, 8, seed=5), rnd(2, 3, 6, 8, seed=6)
    if mask_kind == "bool":
        m = rnd(2, 1, 4, 6, seed=7) > -0.5
        m[..., 0] = True  # no row fully masked: torch's math path gives nan there, Lazuli 0
        lz_mask, t_mask = _lz(m), torch.tensor(m)
    else:
        m = rnd(4, 6, seed=7)
        lz_mask, t_mask = _lz(m), torch.tensor(m)
    agree(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=lz_mask),
          lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, attn_mask=t_mask), q, k, v,
          rtol=1e-9, atol=1e-10)


# ---- indexing with several index tensors --------------------------------------------------------

KEYS = [
    lambda i, j: (i, j),                              # adjacent: result dims in place
    lambda i, j: (slice(None), i, j),                 # adjacent after a slice
    lambda i, j: (i, slice(None), j),                 # separated: result dims first
    lambda i, j: (i, slice(1, 3), None, j),
    lambda i, j: (Ellipsis, i, j),
]


@pytest.mark.parametrize("key", KEYS)
def test_reads_with_several_index_tensors_agree_with_torch(key):
    a = rnd(4, 5, 6, seed=8)
    i, j = np.array([[0, 3], [-1, 2]]), np.array([1, 0])
    got = _lz(a)[key(_lz(i), _lz(j))]
    want = torch.tensor(a)[key(torch.tensor(i), torch.tensor(j))]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("key", KEYS[:3])
def test_index_put_agrees_with_torch(key, accumulate):
    a = rnd(4, 5, 6, seed=9)
    i, j = np.array([[0, 3], [2, 1]]), np.array([1, 0])  # distinct places (no duplicate order)
    t = torch.tensor(a)
    tk = key(torch.tensor(i), torch.tensor(j))
    vals = rnd(*t[tk].shape, seed=10)
    want = t.clone()
    if accumulate:
        want[tk] += torch.tensor(vals)
    else:
        want[tk] = torch.tensor(vals)
    # index_put's indices: None for a whole dim, as aten.index_put's (torch.index_put takes
    # tensors only: there the key must start with its tensors).
    lz_idx = tuple(None if isinstance(x, slice) else x for x in key(_lz(i), _lz(j)))
    got = lz.index_put(_lz(a), lz_idx, _lz(vals), accumulate=accumulate)
    if not isinstance(tk[0], slice):
        torch_put = t.index_put(tuple(x for x in tk if not isinstance(x, slice))
                                if all(not isinstance(x, slice) for x in tk) else tk[:1],
                                torch.tensor(vals), accumulate) if len(tk) == 2 else None
        if torch_put is not None:
            np.testing.assert_allclose(torch_put.numpy(), want.numpy())
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    x = _lz(a)
    if accumulate:
        x[key(_lz(i), _lz(j))] += _lz(vals)
    else:
        x[key(_lz(i), _lz(j))] = _lz(vals)
    np.testing.assert_allclose(x.numpy(), want.numpy(), rtol=1e-12)


def test_index_put_accumulate_with_repeated_indices_agrees_with_torch():
    a = rnd(3, 4, seed=11)
    i, j = np.array([0, 2, 0, 0, 1]), np.array([1, 3, 1, 1, 1])
    vals = rnd(5, seed=12)
    want = torch.tensor(a).index_put((torch.tensor(i), torch.tensor(j)), torch.tensor(vals), True)
    got = lz.index_put(_lz(a), (_lz(i), _lz(j)), _lz(vals), accumulate=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


# ---- cross_entropy over (N, C, d...) ------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(ignore_index=2), dict(label_smoothing=0.2),
                                dict(reduction="sum"), dict(reduction="none"),
                                dict(weight=True, label_smoothing=0.1)])
def test_cross_entropy_on_sequences_agrees_with_torch(kw):
    logits = rnd(2, 7, 5, seed=13)  # [B, C, T]
    target = np.random.default_rng(14).integers(0, 7, (2, 5))
    target[1, 3] = 2
    w = rnd(7, seed=15, lo=0.5, hi=1.5)
    lz_kw, t_kw = dict(kw), dict(kw)
    if kw.get("weight"):
        lz_kw["weight"], t_kw["weight"] = _lz(w), torch.tensor(w)
    agree(lambda x: F.cross_entropy(x, _lz(target), **lz_kw),
          lambda t: TF.cross_entropy(t, torch.tensor(target), **t_kw), logits, rtol=1e-10,
          atol=1e-12)


# ---- MultiheadAttention and TransformerEncoderLayer with PyTorch's state_dicts -------------------

def load_from_torch(lz_module, torch_module):
    state = {k: _lz(v.detach().numpy()) for k, v in torch_module.state_dict().items()}
    lz_module.load_state_dict(state)
    assert set(lz_module.state_dict()) == set(torch_module.state_dict())


def _same(got, want, rtol=1e-5, atol=1e-6):
    if want is None:
        assert got is None
        return
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("cfg, call", [
    (dict(), dict()),
    (dict(batch_first=True), dict(need_weights=False)),
    (dict(batch_first=True), dict(average_attn_weights=False)),
    (dict(bias=False), dict(kpm=True)),
    (dict(add_bias_kv=True, add_zero_attn=True), dict(mask="bool", kpm=True)),
    (dict(kdim=6, vdim=3), dict(mask="float")),
    (dict(batch_first=True), dict(mask="float3", need_weights=False)),
    (dict(), dict(unbatched=True, mask="bool")),
])
def test_multihead_attention_loads_torch_state_and_agrees(cfg, call):
    torch.manual_seed(0)
    E, H, N, L, S = 8, 2, 3, 4, 5
    tm = torch.nn.MultiheadAttention(E, H, **cfg).double()
    m = lz.nn.MultiheadAttention(E, H, **cfg, dtype=lz.float64)
    load_from_torch(m, tm)
    bf = cfg.get("batch_first", False)
    kd, vd = cfg.get("kdim", E), cfg.get("vdim", E)
    if call.get("unbatched"):
        shapes = [(L, E), (S, kd), (S, vd)]
    elif bf:
        shapes = [(N, L, E), (N, S, kd), (N, S, vd)]
    else:
        shapes = [(L, N, E), (S, N, kd), (S, N, vd)]
    arrays = [rnd(*s, seed=20 + i) for i, s in enumerate(shapes)]
    kw_lz, kw_t = {}, {}
    mask = call.get("mask")
    if mask == "bool":
        a = rnd(L, S, seed=30) > 0.5
        a[:, 0] = False  # every query attends to something
        kw_lz["attn_mask"], kw_t["attn_mask"] = _lz(a), torch.tensor(a)
    elif mask == "float":
        a = rnd(L, S, seed=30)
        kw_lz["attn_mask"], kw_t["attn_mask"] = _lz(a), torch.tensor(a)
    elif mask == "float3":
        a = rnd(N * H, L, S, seed=30)
        kw_lz["attn_mask"], kw_t["attn_mask"] = _lz(a), torch.tensor(a)
    if call.get("kpm"):
        p = np.zeros((N, S), dtype=bool)
        p[0, -2:] = True
        kw_lz["key_padding_mask"], kw_t["key_padding_mask"] = _lz(p), torch.tensor(p)
    for k in ("need_weights", "average_attn_weights"):
        if k in call:
            kw_lz[k] = kw_t[k] = call[k]
    xs = [_lz(a).requires_grad_() for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, w = m(*xs, **kw_lz)
    tout, tw = tm(*ts, **kw_t)
    _same(out, tout, rtol=1e-10, atol=1e-12)
    _same(w, tw, rtol=1e-10, atol=1e-12)
    g = rnd(*tout.shape, seed=40)
    (out * _lz(g)).sum().backward()
    (tout * torch.tensor(g)).sum().backward()
    for x, t in zip(xs, ts):
        _same(x.grad, t.grad, rtol=1e-9, atol=1e-11)
    named = dict(m.named_parameters())
    for name, p in tm.named_parameters():
        _same(named[name].grad, p.grad, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("cfg", [dict(), dict(norm_first=True, activation="gelu"),
                                 dict(batch_first=True, dim_feedforward=16)])
def test_transformer_encoder_layer_loads_torch_state_and_agrees(cfg):
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(8, 2, dropout=0.0, **{"dim_feedforward": 32, **cfg})
    tl = tl.double()
    layer = lz.nn.TransformerEncoderLayer(8, 2, dropout=0.0, dtype=lz.float64,
                                          **{"dim_feedforward": 32, **cfg})
    load_from_torch(layer, tl)
    x = rnd(3, 4, 8, seed=50)
    mask = np.triu(np.full((4, 4) if cfg.get("batch_first") else (3, 3), -np.inf), 1)
    xs, ts = _lz(x).requires_grad_(), torch.tensor(x, requires_grad=True)
    out = layer(xs, src_mask=_lz(mask))
    tout = tl(ts, src_mask=torch.tensor(mask))
    _same(out, tout, rtol=1e-9, atol=1e-10)
    g = rnd(*tout.shape, seed=51)
    (out * _lz(g)).sum().backward()
    (tout * torch.tensor(g)).sum().backward()
    _same(xs.grad, ts.grad, rtol=1e-8, atol=1e-10)
    named = dict(layer.named_parameters())
    for name, p in tl.named_parameters():
        _same(named[name].grad, p.grad, rtol=1e-8, atol=1e-10)
    # eval: PyTorch may take its fused fast path; the values agree all the same.
    layer.eval(), tl.eval()
    with torch.no_grad():
        _same(layer(_lz(x)), tl(torch.tensor(x)), rtol=1e-8, atol=1e-10)


def test_transformer_encoder_layer_dropout_draws_masks_only_in_training():
    layer = lz.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.5)
    x = lz.randn(2, 3, 8)
    a, b = layer(x).numpy(), layer(x).numpy()
    assert (a != b).any()
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), layer(x).numpy())


def test_bad_module_arguments():
    with pytest.raises(ValueError, match="divisible"):
        lz.nn.MultiheadAttention(10, 3)
    m = lz.nn.MultiheadAttention(8, 2)
    with pytest.raises(ValueError, match="last dim"):
        m(lz.zeros(3, 2, 7), lz.zeros(3, 2, 8), lz.zeros(3, 2, 8))
    with pytest.raises(ValueError, match="key_padding_mask"):
        m(lz.zeros(3, 2, 8), lz.zeros(5, 2, 8), lz.zeros(5, 2, 8),
          key_padding_mask=lz.zeros(2, 4, dtype=lz.bool))
    with pytest.raises(ValueError, match="attn_mask"):
        m(lz.zeros(3, 2, 8), lz.zeros(5, 2, 8), lz.zeros(5, 2, 8), attn_mask=lz.zeros(3, 4))
    with pytest.raises(ValueError, match="is_causal"):
        m(lz.zeros(3, 2, 8), lz.zeros(3, 2, 8), lz.zeros(3, 2, 8), is_causal=True)
    with pytest.raises(ValueError, match="activation"):
        lz.nn.TransformerEncoderLayer(8, 2, activation="tanh")
