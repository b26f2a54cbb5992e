"""Convolution, pooling and normalization against torch.nn.functional: values and gradients of
every input, on both backends, over strides, paddings ('same' included), dilations, groups,
ceil_mode, count_include_pad, divisors and unbatched inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazuli as lz
import lazuli.nn.functional as F


def _run(lz_fn, torch_fn, shapes, seed=0, rtol=1e-4, atol=1e-5, grad=True, dtype=np.float32):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    tt = [torch.tensor(a, requires_grad=grad) for a in arrays]
    lt = [lz.tensor(a) for a in arrays]
    if grad:
        for t in lt:
            t.requires_grad_()
    want = torch_fn(*tt)
    got = lz_fn(*lt)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=rtol, atol=atol)
    if grad:
        w = rng.standard_normal(tuple(want.shape)).astype(dtype)
        (want * torch.tensor(w)).sum().backward()
        (got * lz.tensor(w)).sum().backward()
        for i, (a, b) in enumerate(zip(lt, tt)):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"gradient of input {i}")


CONV2D = [
    dict(x=(2, 4, 9, 8), w=(6, 4, 3, 3), kw={}),
    dict(x=(2, 4, 9, 8), w=(6, 2, 3, 2), kw=dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    dict(x=(1, 3, 7, 7), w=(3, 1, 3, 3), kw=dict(padding=1, groups=3)),  # depthwise
    dict(x=(2, 3, 6, 5), w=(4, 3, 4, 3), kw=dict(padding="same")),  # odd total padding on one dim
    dict(x=(2, 3, 6, 5), w=(4, 3, 3, 3), kw=dict(padding="valid", stride=2)),
    dict(x=(4, 6, 5), w=(2, 2, 1, 1), kw=dict(groups=2)),  # unbatched, pointwise
    dict(x=(2, 3, 16, 16), w=(8, 3, 7, 7), kw=dict(stride=2, padding=3)),  # resnet's stem
]


@pytest.mark.parametrize("case", CONV2D, ids=[str(i) for i in range(len(CONV2D))])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv2d_matches_torch(backend, case, with_bias):
    shapes = [case["x"], case["w"]] + ([(case["w"][0],)] if with_bias else [])
    _run(lambda *t: F.conv2d(*t, **case["kw"]), lambda *t: TF.conv2d(*t, **case["kw"]), shapes)


@pytest.mark.parametrize("kw", [{}, dict(stride=2, padding=1, dilation=2), dict(padding="same", dilation=3),
                                dict(groups=3, stride=3)])
def test_conv1d_matches_torch(backend, kw):
    _run(lambda x, w, b: F.conv1d(x, w, b, **kw), lambda x, w, b: TF.conv1d(x, w, b, **kw),
         [(2, 6, 11), (3, 6 // kw.get("groups", 1), 3), (3,)])


@pytest.mark.parametrize("kw", [{}, dict(stride=2, padding=1, output_padding=1),
                                dict(stride=(2, 1), padding=(0, 1), groups=2, dilation=(1, 2)),
                                # output padding at least the stride (below the dilation)
                                dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3),
                                     groups=2, dilation=(4, 4))])
def test_conv_transpose2d_matches_torch(backend, kw):
    g = kw.get("groups", 1)
    _run(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
         lambda x, w, b: TF.conv_transpose2d(x, w, b, **kw),
         [(2, 4, 5, 4), (4, 6 // g, 3, 2), (6,)])


def test_conv_transpose1d_matches_torch(backend):
    kw = dict(stride=3, padding=1, output_padding=2)
    _run(lambda x, w: F.conv_transpose1d(x, w, **kw), lambda x, w: TF.conv_transpose1d(x, w, **kw),
         [(2, 3, 6), (3, 2, 4)])


POOL = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), ceil_mode=True),
        dict(kernel_size=3, stride=2, ceil_mode=True)]


@pytest.mark.parametrize("kw", POOL + [dict(kernel_size=2, dilation=2)])
def test_max_pool2d_values_indices_and_gradient(backend, kw):
    _run(lambda x: F.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw), [(2, 3, 9, 8)])
    x = np.random.default_rng(1).standard_normal((2, 3, 9, 8)).astype(np.float32)
    _, li = F.max_pool2d(lz.tensor(x), return_indices=True, **kw)
    _, ti = TF.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(li.numpy(), ti.numpy())


def test_max_pool1d_and_unbatched_input(backend):
    _run(lambda x: F.max_pool1d(x, 3, 2, 1), lambda x: TF.max_pool1d(x, 3, 2, 1), [(2, 4, 10)])
    _run(lambda x: F.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2), [(3, 6, 6)])


@pytest.mark.parametrize("kw", POOL + [dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
                                       dict(kernel_size=2, padding=1, divisor_override=3)])
def test_avg_pool2d_matches_torch(backend, kw):
    _run(lambda x: F.avg_pool2d(x, **kw), lambda x: TF.avg_pool2d(x, **kw), [(2, 3, 9, 8)])


def test_avg_pool1d_matches_torch(backend):
    _run(lambda x: F.avg_pool1d(x, 4, 3, 2, True, False), lambda x: TF.avg_pool1d(x, 4, 3, 2, True, False),
         [(2, 3, 11)])


@pytest.mark.parametrize("out", [1, (3, 5), (4, 4), (7, 2)])
def test_adaptive_avg_pool2d_matches_torch(backend, out):
    _run(lambda x: F.adaptive_avg_pool2d(x, out), lambda x: TF.adaptive_avg_pool2d(x, out), [(2, 3, 8, 7)])


def test_adaptive_avg_pool1d_matches_torch(backend):
    _run(lambda x: F.adaptive_avg_pool1d(x, 4), lambda x: TF.adaptive_avg_pool1d(x, 4), [(2, 3, 10)])


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_values_gradients_and_running_stats(backend, training):
    rng = np.random.default_rng(3)
    rm, rv = rng.standard_normal(4).astype(np.float32), rng.uniform(0.5, 2, 4).astype(np.float32)
    lrm, lrv, trm, trv = lz.tensor(rm), lz.tensor(rv), torch.tensor(rm), torch.tensor(rv)
    _run(lambda x, w, b: F.batch_norm(x, lrm, lrv, w, b, training, 0.2, 1e-3),
         lambda x, w, b: TF.batch_norm(x, trm, trv, w, b, training, 0.2, 1e-3),
         [(5, 4, 3, 2), (4,), (4,)])
    np.testing.assert_allclose(lrm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lrv.numpy(), trv.numpy(), rtol=1e-5, atol=1e-6)


def test_group_norm_and_rms_norm_match_torch(backend):
    _run(lambda x, w, b: F.group_norm(x, 2, w, b), lambda x, w, b: TF.group_norm(x, 2, w, b),
         [(3, 6, 4, 2), (6,), (6,)])
    _run(lambda x, w: F.rms_norm(x, (3, 4), w), lambda x, w: TF.rms_norm(x, (3, 4), w),
         [(2, 3, 4), (3, 4)])


def test_float64_convolution_matches_torch(backend):
    _run(lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: TF.conv2d(x, w, padding=1),
         [(2, 3, 5, 5), (2, 3, 3, 3)], dtype=np.float64, rtol=1e-10, atol=1e-12)
