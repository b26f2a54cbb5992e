"""cumsum/cumprod and indexing with several index tensors through torch.compile(backend=lazuli):
lowered (no ATen op left to eager), equal to eager forward and backward, an index
out of range reported as eager reports it."""
import pytest
import torch
import torch._dynamo

import lazuli.torch as lzt
from model_checks import fallback_ops


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


def _agree(fn, *args):
    """fn compiled and eager: the same results and the same gradients of every float input."""
    for a in args:
        a.grad = None
    eager_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    got = torch.compile(fn, backend=lzt.backend)(*args)
    want = fn(*eager_args)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    if want.requires_grad:
        w = torch.randn(want.shape, dtype=want.dtype, generator=torch.Generator().manual_seed(0))
        (got * w).sum().backward()
        (want * w).sum().backward()
        for a, e in zip(args, eager_args):
            if a.requires_grad:
                torch.testing.assert_close(a.grad, e.grad, rtol=1e-6, atol=1e-7)
    assert fallback_ops() == set()


def test_cumsum_and_cumprod_lower_with_their_gradients():
    x = (torch.rand(3, 6, dtype=torch.float64) + 0.5)
    x[1, 2] = 0.0
    x.requires_grad_()
    _agree(lambda x: torch.cumsum(x, 1) + torch.cumprod(x, 1) * 2, x)
    _agree(lambda m: m.cumsum(-1), torch.tensor([[True, False, True]]))  # bool: int64


def test_position_ids_from_an_attention_mask():
    # transformers' idiom for left-padded batches: positions = cumsum(mask) - 1
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    _agree(lambda m: (m.cumsum(-1) - 1).masked_fill(m == 0, 1), mask)


def test_several_index_tensors_lower_forward_and_backward():
    x = torch.randn(4, 5, 6, dtype=torch.float64, requires_grad=True)
    i, j = torch.tensor([[0, 3], [-1, 2]]), torch.tensor([1, 0])
    _agree(lambda x, i, j: x[i, :, j] * 2, x, i, j)   # separated: result dims first
    _agree(lambda x, i, j: x[:, i, j].sin(), x, i, j)  # adjacent: in place


def test_index_put_accumulate_with_several_indices_lowers():
    x = torch.zeros(3, 4, dtype=torch.float64)
    v = torch.randn(5, dtype=torch.float64, requires_grad=True)
    i, j = torch.tensor([0, 2, 0, 0, 1]), torch.tensor([1, 3, 1, 1, 1])
    _agree(lambda x, v: x.index_put((i, j), v, accumulate=True), x, v)


def test_an_index_out_of_range_raises_index_error_naming_the_op():
    f = torch.compile(lambda x, i, j: x[i, j], backend=lzt.backend)
    x = torch.randn(3, 4)
    f(x, torch.tensor([0, 1]), torch.tensor([2, 3]))
    with pytest.raises(IndexError, match="aten.index"):
        f(x, torch.tensor([0, 1]), torch.tensor([2, 7]))
