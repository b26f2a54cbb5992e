"""Dropout through torch.compile(backend=lazuli): aten.native_dropout and bernoulli are
lowered to Lazuli's counter-based RNG, with a fresh key per call from torch's generator
(lowering_random.py). Lazuli cannot reproduce torch's random stream, so these tests check what
can be compared: the mask's statistics, that kept elements are scaled by 1/(1-p), that the
backward applies the forward's mask, p=0 and eval mode equal to eager exactly, new masks every
step, torch.manual_seed repeating them, and no trace or compile after the first step."""
import pytest
import torch
import torch._dynamo

import lazuli as lz
import lazuli.torch as lzt
from model_checks import compile_marks, fallback_ops

counter = lz.debug.counter_value


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


def _step(model):
    def step(x):
        y = model(x * 1.0)  # not the leaf itself: an in-place dropout may write into it
        y.sum().backward()
        return y
    return torch.compile(step, backend=lzt.backend)


@pytest.mark.parametrize("inplace", [False, True])  # native_dropout; bernoulli.p (inplace)
def test_dropout_mask_statistics_scaling_and_backward(inplace):
    p = 0.3
    model = torch.nn.Sequential(torch.nn.Dropout(p, inplace=inplace))
    x = (torch.rand(64, 128) + 0.5).requires_grad_()  # no zeros: a zero output is a dropped one
    step = _step(model)
    outs, grads = [], []
    for _ in range(3):
        x.grad = None
        y = step(x)
        outs.append(y.detach().clone())
        grads.append(x.grad.clone())
        if len(outs) == 2:
            marks = compile_marks()
    assert compile_marks() == marks  # the third step traced and compiled nothing
    assert fallback_ops() == set()
    for y, g in zip(outs, grads):
        kept = y != 0
        frac = kept.float().mean().item()
        assert abs(frac - (1 - p)) < 0.02  # 8192 draws: 0.02 is 3.9 standard deviations
        torch.testing.assert_close(y[kept], x.detach()[kept] / (1 - p), rtol=1e-6, atol=0)
        # The backward applies the forward's mask: zero exactly where the output is.
        assert torch.equal(g == 0, ~kept)
        torch.testing.assert_close(g[kept], torch.full_like(g[kept], 1 / (1 - p)))
    assert not torch.equal(outs[0] != 0, outs[1] != 0)  # a new mask every step
    assert not torch.equal(outs[1] != 0, outs[2] != 0)


def test_torch_manual_seed_repeats_the_masks():
    model = torch.nn.Dropout(0.5)
    step = torch.compile(lambda x: model(x), backend=lzt.backend)
    x = torch.ones(16, 16)
    torch.manual_seed(3)
    a = step(x)
    torch.manual_seed(3)
    b = step(x)
    c = step(x)
    assert torch.equal(a, b)
    assert not torch.equal(b, c)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_p_zero_and_one_equal_eager(p):
    model = torch.nn.Dropout(p)
    x = torch.randn(8, 9, requires_grad=True)
    y = _step(model)(x)
    x_eager = x.detach().clone().requires_grad_()
    y_eager = model(x_eager)
    y_eager.sum().backward()
    assert torch.equal(y, y_eager)
    assert torch.equal(x.grad, x_eager.grad)
    assert fallback_ops() == set()


def test_eval_mode_equals_eager_exactly():
    model = torch.nn.Sequential(torch.nn.Dropout(0.4), torch.nn.ReLU(), torch.nn.Dropout(0.2))
    model.eval()
    compiled = torch.compile(model, backend=lzt.backend)
    x = torch.randn(5, 6)
    assert torch.equal(compiled(x), model(x))
    assert fallback_ops() == set()


def test_native_dropout_called_directly_with_train_false_is_the_identity():
    f = torch.compile(lambda x: torch.ops.aten.native_dropout(x, 0.5, False), backend=lzt.backend)
    x = torch.randn(4, 5)
    out, mask = f(x)
    assert torch.equal(out, x) and mask.dtype == torch.bool and bool(mask.all())
    assert fallback_ops() == set()


def test_stochastic_depth_lowers_bernoulli():
    torchvision = pytest.importorskip("torchvision")
    sd = torchvision.ops.StochasticDepth(0.25, "row")
    f = torch.compile(lambda x: sd(x), backend=lzt.backend)
    x = torch.ones(4000, 3)
    y = f(x)
    rows_kept = (y[:, 0] != 0).float().mean().item()
    assert abs(rows_kept - 0.75) < 0.03  # 4000 rows: 4.4 standard deviations
    assert torch.equal(y[y != 0], torch.full_like(y[y != 0], 1 / 0.75))
    assert bool(((y == 0).all(1) | (y != 0).all(1)).all())  # whole rows
    assert fallback_ops() == set()
