"""Run-time errors through torch.compile(backend=lazuli): an error Lazuli
finds when a program runs (an index out of range, known only from the data) reaches the user as
the exception type eager PyTorch raises for that input, naming the ATen op and the user's line,
with Lazuli's error as its cause; nothing is left behind, and the compiled function keeps working.
(Errors while tracing fall back to eager: test_compile.py.)"""
import gc

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import lazuli as lz
import lazuli.torch as lzt

counter = lz.debug.counter_value


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


_table = torch.randn(10, 4)


def embedding(ids):
    return F.embedding(ids, _table) * 2


def index_select(x, i):
    return torch.index_select(x, 0, i) - 1


def advanced_index(x, i):
    return x[i] * 3


def index_accumulate(x, i):
    # accumulate=True: the table leaves index_put with accumulate=False to eager.
    return x.index_put((i,), torch.ones(2, 4), accumulate=True) + 1


def gather(x, i):
    return torch.gather(x, 1, i) + 1


def scatter_add(x, i):
    return x.scatter_add(1, i, torch.ones_like(i, dtype=x.dtype)) * 2


x34 = torch.randn(3, 4)
CASES = [  # (function, good arguments, bad arguments, the ATen op the message names)
    (embedding, (torch.tensor([[1, 2]]),), (torch.tensor([[1, 12]]),), "aten.embedding.default"),
    (index_select, (x34, torch.tensor([0, 2])), (x34, torch.tensor([0, 5])),
     "aten.index_select.default"),
    (advanced_index, (x34, torch.tensor([0, 2])), (x34, torch.tensor([0, 5])), "aten.index.Tensor"),
    (index_accumulate, (x34, torch.tensor([0, 2])), (x34, torch.tensor([0, 5])),
     "aten.index_put.default"),
    (gather, (x34, torch.tensor([[0], [3], [1]])), (x34, torch.tensor([[0], [7], [1]])),
     "aten.gather.default"),
    (scatter_add, (x34, torch.tensor([[0], [3], [1]])), (x34, torch.tensor([[0], [7], [1]])),
     "aten.scatter_add.default"),
]


def _eager_error(fn, args):
    with pytest.raises(Exception) as info:
        fn(*args)
    return type(info.value)


@pytest.mark.parametrize("fn,good,bad,op", CASES, ids=[c[0].__name__ for c in CASES])
def test_index_out_of_range_raises_eagers_type_naming_the_op_and_line(fn, good, bad, op):
    compiled = torch.compile(fn, backend=lzt.backend, dynamic=False)
    torch.testing.assert_close(compiled(*good), fn(*good))
    traces = counter("TorchTrace")
    gc.collect()
    live = lz.debug.live_tensor_count()
    with pytest.raises(Exception) as info:
        compiled(*bad)
    assert type(info.value) is _eager_error(fn, bad)  # IndexError or RuntimeError, as eager
    assert not isinstance(info.value, lz.Error) and isinstance(info.value.__cause__, lz.Error)
    msg = str(info.value)
    assert op in msg and "out of range" in msg, msg
    assert "test_compile_errors.py" in msg and fn.__name__ in msg, msg  # the user's line
    assert not any(name.startswith("fallback::aten.") for name in lz.debug.counter_names()
                   if counter(name)), "the op ran in eager: the test checks nothing of Lazuli's"
    del info
    gc.collect()
    assert lz.debug.live_tensor_count() == live  # nothing left behind
    # The same program serves the next good call: no new trace, eager's values.
    torch.testing.assert_close(compiled(*good), fn(*good))
    assert counter("TorchTrace") == traces


def test_bad_target_in_a_training_step_is_an_index_error_and_changes_nothing():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    compiled = torch.compile(step, backend=lzt.backend)
    x = torch.randn(2, 4)
    compiled(x, torch.tensor([0, 2]))
    grad, weight = model.weight.grad.clone(), model.weight.detach().clone()
    with pytest.raises(IndexError) as info:  # eager: IndexError("Target 7 is out of bounds.")
        compiled(x, torch.tensor([0, 7]))
    msg = str(info.value)
    # The decomposition's gather failed; the message names the op the user's code called.
    assert "aten.nll_loss_forward.default" in msg and "gather" in msg, msg
    assert "loss = F.cross_entropy(model(x), y)" in msg, msg
    torch.testing.assert_close(model.weight.grad, grad)  # the backward never ran
    torch.testing.assert_close(model.weight.detach(), weight)
    model.weight.grad = None
    loss = compiled(x, torch.tensor([1, 2]))
    torch.testing.assert_close(loss, F.cross_entropy(model(x), torch.tensor([1, 2])))


@pytest.mark.parametrize("fn", [
    lambda x, i: x.index_select(0, i),
    lambda x, i: x.gather(0, i[:, None].expand(-1, 3)),
    lambda x, i: x.scatter_add(0, i[:, None].expand(-1, 3), torch.ones(2, 3)),
], ids=["index_select", "gather", "scatter_add"])
def test_a_float_index_raises_as_eager_instead_of_being_truncated(fn):
    # (embedding's float index is refused by dynamo's own fake-tensor run, before the backend)
    x, i = torch.randn(5, 3), torch.tensor([0.7, 3.9])
    with pytest.raises(RuntimeError) as eager:
        fn(x, i)
    with pytest.raises(RuntimeError) as compiled:
        torch.compile(fn, backend=lzt.backend)(x, i)
    assert str(eager.value).split("\n")[0] in str(compiled.value)


def test_a_graph_over_meta_tensors_runs_as_pytorch_runs_it():
    model = torch.nn.Linear(3, 2).to("meta")
    out = torch.compile(model, backend=lzt.backend)(torch.randn(4, 3, device="meta"))
    assert out.device.type == "meta" and out.shape == (4, 2)
    assert counter("TorchGraphNotCpu") >= 1
