"""lz.autocast: the region's casts (products and convolutions to bfloat16/float16, losses to
float32, other ops untouched), its scoping (nesting, decorator, exceptions, threads), bad
arguments, and a mixed-precision training step that tracks the float32 one on both backends."""
import threading

import numpy as np
import pytest

import lazuli as lz
import lazuli.nn.functional as F


def bf16(a):
    return lz.tensor(np.asarray(a, np.float32)).bfloat16().float().numpy()


def test_products_and_convolutions_return_the_regions_dtype(backend):
    x, w, b = lz.randn(4, 8), lz.randn(3, 8), lz.randn(3)
    img, k, kb = lz.randn(1, 2, 6, 6), lz.randn(4, 2, 3, 3), lz.randn(4)
    with lz.autocast("cpu", dtype=lz.bfloat16):
        assert lz.is_autocast_enabled() and lz.get_autocast_dtype() == lz.bfloat16
        assert (x @ w.T).dtype == lz.bfloat16
        assert F.linear(x, w, b).dtype == lz.bfloat16
        assert lz.nn.Linear(8, 3)(x).dtype == lz.bfloat16
        assert F.conv2d(img, k, kb).dtype == lz.bfloat16
        assert (x + 1).dtype == lz.float32 and lz.exp(x).dtype == lz.float32
        assert F.softmax(x, -1).dtype == lz.float32
    with lz.autocast(dtype=lz.float16):
        assert (x @ w.T).dtype == lz.float16
    assert not lz.is_autocast_enabled()
    assert (x @ w.T).dtype == lz.float32


def test_values_are_products_of_the_rounded_operands(rng, backend):
    a = rng.standard_normal((5, 16)).astype(np.float32)
    b = rng.standard_normal((16, 7)).astype(np.float32)
    with lz.autocast():
        got = (lz.tensor(a) @ lz.tensor(b)).float().numpy()
    np.testing.assert_allclose(got, bf16(bf16(a) @ bf16(b)), rtol=2.0**-7, atol=1e-2)


def test_float32_input_meets_bfloat16_weights():
    x, w = lz.randn(2, 4), lz.randn(4, 3).bfloat16()
    with pytest.raises(TypeError, match="matmul"):
        x @ w
    with lz.autocast():
        assert (x @ w).dtype == lz.bfloat16


def test_float64_is_never_cast():
    with lz.autocast():
        assert (lz.ones(2, 3, dtype=lz.float64) @ lz.ones(3, 2, dtype=lz.float64)).dtype == lz.float64


def test_losses_compute_in_float32():
    logits, target = lz.randn(6, 5), lz.randint(0, 5, (6,))
    with lz.autocast():
        h = logits @ lz.eye(5)
        assert h.dtype == lz.bfloat16
        assert F.cross_entropy(h, target).dtype == lz.float32
        assert F.nll_loss(F.log_softmax(h, 1), target).dtype == lz.float32
        assert F.mse_loss(h, logits).dtype == lz.float32


def test_nesting_decorator_exceptions_and_threads():
    with lz.autocast(dtype=lz.float16):
        with lz.autocast(enabled=False):
            assert not lz.is_autocast_enabled()
        assert lz.is_autocast_enabled() and lz.get_autocast_dtype() == lz.float16
        seen = []
        t = threading.Thread(target=lambda: seen.append(lz.is_autocast_enabled()))
        t.start()
        t.join()
        assert seen == [False]
    with pytest.raises(RuntimeError, match="boom"):
        with lz.autocast():
            raise RuntimeError("boom")
    assert not lz.is_autocast_enabled()

    @lz.autocast()
    def product(a, b):
        return a @ b

    assert product(lz.ones(2, 2), lz.ones(2, 2)).dtype == lz.bfloat16
    assert not lz.is_autocast_enabled()
    assert lz.amp.autocast is lz.autocast


@pytest.mark.parametrize("kwargs,match", [
    ({"dtype": lz.float64}, "bfloat16 or lazuli.float16"),
    ({"dtype": lz.int32}, "bfloat16 or lazuli.float16"),
    ({"device_type": "cuda"}, "device_type"),
])
def test_bad_arguments_raise_and_change_nothing(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lz.autocast(**kwargs)
    assert not lz.is_autocast_enabled()


def test_mixed_precision_training_tracks_float32_training(rng, backend):
    x = rng.standard_normal((32, 10)).astype(np.float32)
    y = (x[:, :3].sum(1) > 0).astype(np.int64)

    def train(amp):
        lz.manual_seed(0)
        model = lz.nn.Sequential(lz.nn.Linear(10, 16), lz.nn.ReLU(), lz.nn.Linear(16, 2))
        opt = lz.optim.SGD(model.parameters(), lr=0.5)
        xs, ys = lz.tensor(x), lz.tensor(y)
        losses = []
        for _ in range(15):
            with lz.autocast(enabled=amp):
                loss = F.cross_entropy(model(xs), ys)
            assert loss.dtype == lz.float32
            opt.zero_grad()
            loss.backward()
            assert all(p.grad.dtype == lz.float32 for p in model.parameters())
            opt.step()
            # The step's barrier (docs/training.md): without it, each item() reruns every step so far.
            lz.sync()
            losses.append(loss.item())
        return losses

    full, mixed = train(False), train(True)
    assert mixed[-1] < 0.7 * mixed[0]
    np.testing.assert_allclose(mixed, full, rtol=0.05, atol=0.02)
