"""Torch inputs of a compiled partition that are not contiguous: a permutation of a dense block
(a transpose; what aot_autograd hands a backward graph for a weight's `t()` saved by the forward)
is shared as that block and read through the permutation, with no copy; any other layout (a
strided slice) is copied once per call, counted TorchInputCopy. The layout is part of the input
signature, so the same shapes in another layout trace again instead of reading wrong memory."""
import torch
import torch._dynamo

import lazuli.torch as lzt
from conftest import counter


def _reset():
    torch._dynamo.reset()


def test_a_transposed_input_crosses_without_a_copy_and_replays():
    _reset()

    def f(x, w):
        return torch.relu(x @ w + 1)

    compiled = torch.compile(f, backend=lzt.backend)
    x = torch.randn(5, 3)
    for _ in range(3):
        w = torch.randn(4, 3).t()  # [3, 4], strides (1, 3)
        torch.testing.assert_close(compiled(x, w), f(x, w))
    assert counter("TorchInputCopy") == 0
    assert counter("TorchTrace") == 1 and counter("TorchReplay") == 2


def test_the_same_shape_in_another_layout_is_traced_again():
    _reset()

    def f(a):
        return a * torch.arange(4.0) + 1

    compiled = torch.compile(f, backend=lzt.backend)
    base = torch.randn(4, 4)
    torch.testing.assert_close(compiled(base.t()), f(base.t()))
    torch.testing.assert_close(compiled(base), f(base))  # contiguous: another signature
    torch.testing.assert_close(compiled(base.t()), f(base.t()))
    assert counter("TorchTrace") == 2
    assert counter("TorchInputCopy") == 0


def test_a_permuted_three_dim_input_is_read_through_its_permutation():
    _reset()

    def f(a):
        return a.sum(-1) + a[:, 0, :].mean()

    compiled = torch.compile(f, backend=lzt.backend)
    a = torch.randn(2, 3, 5).permute(2, 0, 1)  # [5, 2, 3]
    torch.testing.assert_close(compiled(a), f(a))
    assert counter("TorchInputCopy") == 0


def test_a_strided_slice_is_copied_and_counted():
    _reset()

    def f(a):
        return a * 2

    compiled = torch.compile(f, backend=lzt.backend)
    base = torch.randn(3, 8)
    torch.testing.assert_close(compiled(base[:, ::2]), base[:, ::2] * 2)
    first = counter("TorchInputCopy")  # the trace's stand-in and the first run's input
    assert first >= 1
    torch.testing.assert_close(compiled(base[:, ::2]), base[:, ::2] * 2)
    assert counter("TorchInputCopy") == first + 1  # a replay copies once


def test_a_transposed_input_updated_in_place_gets_the_new_values_in_its_own_memory():
    _reset()

    def f(a):
        a.mul_(2)
        return a + 1

    base = torch.arange(12.0).reshape(3, 4)
    a = base.t()
    want = base.clone().t() * 2
    out = torch.compile(f, backend=lzt.backend)(a)
    torch.testing.assert_close(a, want)
    torch.testing.assert_close(base, want.t())
    torch.testing.assert_close(out, want + 1)
    assert counter("TorchInputCopy") == 0


def test_a_linear_training_step_passes_no_input_through_a_copy():
    _reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = torch.compile(step, backend=lzt.backend)
    for _ in range(3):
        compiled(torch.randn(6, 8), torch.randn(6, 4))
    assert counter("TorchInputCopy") == 0
