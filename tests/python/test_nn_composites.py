"""The nn.functional composites (src/ops/composite_nn.cpp): pad in each mode against
numpy's np.pad, interpolate against hand-checked PyTorch values, one_hot, hardswish /
hardsigmoid / silu, dropout2d; gradients and bad input. PyTorch agreement over many more
argument combinations: tests/python/torch_frontend/test_composites_vs_torch.py."""
import numpy as np
import pytest

import lazuli as lz
from lazuli.nn import functional as F
from conftest import raises_without_leak

_NP_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def np_pad(a, pad, mode):
    """PyTorch's pad list (last dim first) through np.pad, for non-negative pads."""
    widths = [(0, 0)] * a.ndim
    for i in range(len(pad) // 2):
        widths[a.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return np.pad(a, widths, mode=_NP_MODE[mode])


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, pad", [((2, 5), (2, 3)), ((2, 3, 4), (1, 0, 2, 1)),
                                        ((1, 2, 3, 4, 5), (1, 2, 0, 1, 2, 2)), ((3, 4), (0, 0))])
def test_pad_matches_numpy_in_every_mode(mode, shape, pad):
    a = np.random.default_rng(0).standard_normal(shape)
    np.testing.assert_array_equal(F.pad(lz.tensor(a), pad, mode=mode).numpy(), np_pad(a, pad, mode))


def test_constant_pad_crops_with_negative_values_and_fills_with_its_value():
    a = np.arange(12.0).reshape(3, 4)
    got = F.pad(lz.tensor(a), (-1, 2, 1, -2), value=-5.0).numpy()
    want = np.pad(a[:1, 1:], ((1, 0), (0, 2)), constant_values=-5.0)
    np.testing.assert_array_equal(got, want)
    assert F.pad(lz.tensor([[1, 2]]), (1, 1), value=2.7).tolist() == [[2, 1, 2, 2]]  # int: as torch


def test_reflect_pad_gradient_adds_every_reflected_use():
    x = lz.tensor([[0.0, 1.0, 2.0, 3.0]]).requires_grad_()
    F.pad(x, (2, 3), mode="reflect").sum().backward()
    # output sources: 2 1 | 0 1 2 3 | 2 1 0
    assert x.grad.tolist() == [[2.0, 3.0, 3.0, 1.0]]
    y = lz.tensor([[0.0, 1.0, 2.0]]).requires_grad_()
    F.pad(y, (2, 1), mode="circular").sum().backward()  # 1 2 | 0 1 2 | 0
    assert y.grad.tolist() == [[2.0, 2.0, 2.0]]


def test_pad_records_no_host_data_and_reuses_its_program():
    x = lz.randn(2, 3, 8)
    lz.sync()
    before = lz.debug.counter_value("TransferToDevice")
    h = [lz.debug.graph_hash(F.pad(x, (2, 2), mode=m)) for m in ("reflect", "reflect")]
    assert h[0] == h[1]
    F.pad(x, (2, 2), mode="reflect").numpy()
    assert lz.debug.counter_value("TransferToDevice") == before


def test_nearest_interpolation_by_integer_factors_repeats_pixels():
    a = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    got = F.interpolate(lz.tensor(a), scale_factor=(2, 3)).numpy()
    np.testing.assert_array_equal(got, a.repeat(2, axis=2).repeat(3, axis=3))
    got = F.interpolate(lz.tensor(a), size=(2, 5)).numpy()
    np.testing.assert_array_equal(got, a[:, :, ::2])
    # PyTorch's values: nearest floors j * in/out, nearest-exact rounds the pixel centre
    r = lz.arange(5.0).reshape(1, 1, 5)
    assert F.interpolate(r, size=3).tolist() == [[[0.0, 1.0, 3.0]]]
    assert F.interpolate(r, size=3, mode="nearest-exact").tolist() == [[[0.0, 2.0, 4.0]]]


def test_bilinear_interpolation_gives_pytorch_s_values_and_gradient():
    x = lz.tensor(np.arange(6.0, dtype=np.float32).reshape(1, 1, 2, 3)).requires_grad_()
    y = F.interpolate(x, size=(3, 5), mode="bilinear")
    np.testing.assert_allclose(y.numpy()[0, 0], [[0.0, 0.4, 1.0, 1.6, 2.0], [1.5, 1.9, 2.5, 3.1, 3.5],
                                                 [3.0, 3.4, 4.0, 4.6, 5.0]], rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[0, 0], [[2.4, 2.7, 2.4], [2.4, 2.7, 2.4]], rtol=1e-6)
    z = F.interpolate(lz.arange(6.0).reshape(1, 1, 2, 3), scale_factor=2, mode="bilinear",
                      align_corners=True)
    np.testing.assert_allclose(z.numpy()[0, 0, 0], [0.0, 0.4, 0.8, 1.2, 1.6, 2.0], rtol=1e-6)
    np.testing.assert_allclose(z.numpy()[0, 0, :, 0], [0.0, 1.0, 2.0, 3.0], rtol=1e-6)


def test_one_hot_values_and_inferred_classes():
    assert F.one_hot(lz.tensor([0, 2, 1])).tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
    oh = F.one_hot(lz.tensor([[1], [3]]), 5)
    assert oh.dtype == lz.int64 and oh.shape == (2, 1, 5) and oh.numpy().sum() == 2


def test_one_hot_out_of_range_index_computed_in_the_program_raises_at_its_wait():
    idx = lz.tensor([0, 1]) * 3  # pending IR: its values are known only when it runs
    y = F.one_hot(idx, 3)
    with pytest.raises(lz.ExecutionError, match="one_hot"):
        y.numpy()
    assert F.one_hot(lz.tensor([2]), 3).tolist() == [[0, 0, 1]]  # the runtime stays usable


def test_activation_values_and_pytorch_s_gradients_at_the_kinks():
    x = lz.tensor([-4.0, -3.0, -1.5, 0.0, 3.0, 4.0], dtype=lz.float64).requires_grad_()
    F.hardswish(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0, 0.0, 0.5, 1.0, 1.0])
    x.grad = None
    F.hardsigmoid(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0, 1 / 6, 1 / 6, 0.0, 0.0])
    x.grad = None
    s = F.silu(x)
    s.sum().backward()
    v = x.detach().numpy()
    sig = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(s.detach().numpy(), v * sig, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), sig * (1 + v * (1 - sig)), rtol=1e-12)


def test_dropout2d_drops_whole_channels_and_scales_the_rest():
    lz.manual_seed(5)
    y = F.dropout2d(lz.ones(4, 32, 2, 2), 0.25).numpy().reshape(4, 32, 4)
    assert np.all((y == 0).all(-1) | np.isclose(y, 1 / 0.75).all(-1))
    assert 0.1 < (y[..., 0] == 0).mean() < 0.4
    y3 = F.dropout2d(lz.ones(4, 32, 5), 0.5).numpy()  # 3-D: (N, C, L), as PyTorch reads it
    assert np.all((y3 == 0).all(-1) | (y3 == 2.0).all(-1))
    x = lz.ones(2, 2, 2)
    assert F.dropout2d(x, 0.5, training=False) is x


BAD = [
    (ValueError, lambda: F.pad(lz.ones(2, 3), (1,)), ["pad", "divisible by 2"]),
    (ValueError, lambda: F.pad(lz.ones(2, 3), (1, 1, 1, 1, 1, 1)), ["pad", "[2, 3]"]),
    (ValueError, lambda: F.pad(lz.ones(2, 3), (1, 1), mode="wrap"), ["pad", "wrap"]),
    (ValueError, lambda: F.pad(lz.ones(2, 3, 4), (4, 0), mode="reflect"), ["pad", "reflect", "size 4"]),
    (ValueError, lambda: F.pad(lz.ones(2, 3, 4), (5, 0), mode="circular"), ["pad", "circular"]),
    (ValueError, lambda: F.pad(lz.ones(4), (1, 1), mode="replicate"), ["pad", "1-D"]),
    (ValueError, lambda: F.pad(lz.ones(2, 3, 4), (1, 1), mode="reflect", value=1.0), ["pad", "value"]),
    (ValueError, lambda: F.pad(lz.ones(2, 3), (-2, -2)), ["pad", "size -1"]),
    (ValueError, lambda: F.interpolate(lz.ones(1, 1, 4, 4)), ["interpolate", "one of size"]),
    (ValueError, lambda: F.interpolate(lz.ones(1, 1, 4, 4), size=2, scale_factor=2), ["interpolate"]),
    (ValueError, lambda: F.interpolate(lz.ones(1, 1, 4, 4), size=2, align_corners=True),
     ["interpolate", "align_corners"]),
    (ValueError, lambda: F.interpolate(lz.ones(1, 1, 4, 4), size=2, mode="linear"), ["interpolate", "3-D"]),
    (ValueError, lambda: F.interpolate(lz.ones(1, 4), size=2), ["interpolate", "[1, 4]"]),
    (ValueError, lambda: F.interpolate(lz.ones(1, 1, 4, 4), size=(2, 2, 2)), ["interpolate", "[2, 2, 2]"]),
    (ValueError, lambda: F.interpolate(lz.ones(1, 1, 4, 4), scale_factor=0.1), ["interpolate", "greater than 0"]),
    (ValueError, lambda: F.interpolate(lz.ones(1, 1, 4, 4), size=3, mode="bicubic"), ["interpolate", "bicubic"]),
    (TypeError, lambda: F.interpolate(lz.ones(1, 1, 4, 4, dtype=lz.int64), size=3, mode="bilinear"),
     ["interpolate", "int64"]),
    (TypeError, lambda: F.one_hot(lz.tensor([1, 2], dtype=lz.int32)), ["one_hot", "int32"]),
    (IndexError, lambda: F.one_hot(lz.tensor([1, 5]), 3), ["one_hot"]),
    (ValueError, lambda: F.one_hot(lz.tensor([], dtype=lz.int64)), ["one_hot", "empty"]),
    (TypeError, lambda: F.hardswish(lz.tensor([1, 2])), ["hardswish", "int64"]),
    (TypeError, lambda: F.silu(lz.tensor([1, 2])), ["silu", "int64"]),
    (ValueError, lambda: F.dropout2d(lz.ones(3), 0.5), ["dropout2d", "[3]"]),
    (ValueError, lambda: F.dropout2d(lz.ones(3, 3), 1.5), ["dropout2d", "p"]),
]


@pytest.mark.parametrize("exc, fn, match", [pytest.param(e, f, m, id=f"{i}-{m[0]}") for i, (e, f, m) in enumerate(BAD)])
def test_bad_input_raises_naming_the_op_and_records_nothing(exc, fn, match):
    raises_without_leak(exc, fn, *match)
