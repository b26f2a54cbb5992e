"""float16 and bfloat16 models through torch.compile(backend=lazuli.torch.backend): lowered (no
eager fallbacks), and equal to eager PyTorch, which computes them the same way (float32 inside
each op, rounded once)."""
import pytest
import torch
import torch._dynamo

import lazuli as lz
import lazuli.torch as lzt

counter = lz.debug.counter_value


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


def fallbacks():
    return {name: counter(name) for name in lz.debug.counter_names()
            if name.startswith("fallback::aten.") and counter(name) > 0}


def model(dtype, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4), torch.nn.Softmax(-1)).to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
def test_a_16_bit_model_lowers_and_matches_eager(dtype):
    m = model(dtype)
    compiled = torch.compile(m, backend=lzt.backend)
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    with torch.no_grad():
        for seed in range(3):
            x = torch.randn(5, 8, generator=torch.Generator().manual_seed(seed)).to(dtype)
            got, want = compiled(x), m(x)
            assert got.dtype == dtype
            # Same formulas, float32 inside each op: at most a few 16-bit ulps apart (sums in
            # another order, another float32 exp).
            torch.testing.assert_close(got.float(), want.float(), rtol=4 * ulp, atol=4 * ulp)
    assert fallbacks() == {}
    assert counter("TorchTrace") == 1


def test_a_float32_leaf_cast_to_bfloat16_trains_with_gradients():
    torch.manual_seed(0)
    w = torch.randn(6, 3, requires_grad=True)
    x = torch.randn(4, 6)

    def step(w, x):
        return (x.bfloat16() @ w.bfloat16()).float().square().sum()

    compiled = torch.compile(step, backend=lzt.backend)
    loss = compiled(w, x)
    loss.backward()
    got = w.grad.clone()
    w.grad = None
    want_loss = step(w, x)
    want_loss.backward()
    torch.testing.assert_close(loss, want_loss, rtol=2.0**-6, atol=1e-3)
    torch.testing.assert_close(got, w.grad, rtol=2.0**-6, atol=1e-2)
    assert got.dtype == torch.float32
    assert fallbacks() == {}


def test_torch_autocast_inside_a_compiled_training_step_matches_eager():
    # Dynamo and aot_autograd trace torch.autocast into explicit casts; the bf16 products reach
    # Lazuli as bf16 matmuls (oneDNN's bf16 path on the cpu backend).
    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))

    def step(m, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(x)
            loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        return out, loss

    x = torch.randn(16, 12, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 3, (16,), generator=torch.Generator().manual_seed(2))
    eager, lazy = make(), make()
    compiled = torch.compile(lambda x, y: step(lazy, x, y), backend=lzt.backend)
    out_e, loss_e = step(eager, x, y)
    out_l, loss_l = compiled(x, y)
    assert out_l.dtype == out_e.dtype == torch.bfloat16
    assert loss_l.dtype == loss_e.dtype == torch.float32
    torch.testing.assert_close(loss_l, loss_e, rtol=2e-2, atol=2e-2)
    for pe, pl in zip(eager.parameters(), lazy.parameters()):
        assert pl.grad.dtype == torch.float32
        torch.testing.assert_close(pl.grad, pe.grad, rtol=5e-2, atol=5e-2)
    assert fallbacks() == {}
