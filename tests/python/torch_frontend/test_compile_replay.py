"""A partition's replay in one C++ call (WarmProgram.replay_torch, through the torch glue
_torch_glue.so): it reads each argument's address, dtype, sizes and layout, runs the program,
makes a torch tensor over each output's buffer and checks the in-place writes, with no Python
object per argument (an input of another layout, strided or expanded, through a contiguous copy).
The Python route (run_over and numpy views) stays where the glue is not built. Both routes must give the same values, gradients and
in-place updates; a tensor that does not match the program's input is refused, never read."""
import pytest
import torch
import torch._dynamo

import lazuli as lz
import lazuli.torch as lzt
from conftest import counter
from lazuli import _C
from lazuli.torch import _bridge

pytestmark = pytest.mark.skipif(not _bridge._GLUE, reason="the torch glue is not built")


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(6, 8)
        self.b = torch.nn.Linear(8, 3)
        self.drop = torch.nn.Dropout(0.25)

    def forward(self, x):
        return self.b(self.drop(torch.tanh(self.a(x))))


def _train(in_cpp, monkeypatch, steps=3):
    """A few SGD-with-momentum steps of _Net through the bridge, on the route asked for: the
    losses, the parameters and the momentum buffers."""
    torch._dynamo.reset()
    monkeypatch.setattr(_bridge, "_GLUE", in_cpp)
    routes = set()
    real = _bridge.LazuliPartition._run_program

    def spy(self, traced, args):
        if traced.program is not None:
            routes.add(traced.in_cpp)
        return real(self, traced, args)

    monkeypatch.setattr(_bridge.LazuliPartition, "_run_program", spy)
    torch.manual_seed(0)
    net = _Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(5, 6), torch.randn(5, 3)

    @torch.compile(backend=lzt.backend)
    def step(x, y):
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        return loss.detach()

    @torch.compile(backend=lzt.backend)
    def update():
        opt.step()

    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        losses.append(step(x, y))
        update()
    state = [opt.state[p]["momentum_buffer"].clone() for p in net.parameters()]
    assert routes == {in_cpp}
    return losses, [p.detach().clone() for p in net.parameters()], state


def test_a_training_step_replays_alike_in_cpp_and_in_python(monkeypatch):
    """Dropout (a random key each call), a backward reading transposed weights (permuted
    inputs), an optimizer updating parameters and momentum in place (donations): the same
    losses, parameters and momentum either way, and each route taken as asked."""
    got = _train(True, monkeypatch)
    in_place = counter("TorchWriteBackInPlace")
    want = _train(False, monkeypatch)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert in_place > 0, "the optimizer's updates were not written in place"
    assert counter("TorchWriteBackInPlace") == 2 * in_place
    assert counter("TorchInputCopy") == 0


def _traced(compiled_call, *args):
    """The _Traced entries the bridge made for one compiled function's call."""
    seen = []
    real = _bridge.LazuliPartition._run_program

    def spy(self, traced, a):
        seen.append(traced)
        return real(self, traced, a)

    _bridge.LazuliPartition._run_program = spy
    try:
        out = compiled_call(*args)
    finally:
        _bridge.LazuliPartition._run_program = real
    return out, seen


def test_the_replay_takes_the_cpp_route_and_returns_a_flat_tuple_as_it_is():
    torch._dynamo.reset()

    def f(x, w):
        return torch.relu(x @ w + 1), (x * 2).sum()

    compiled = torch.compile(f, backend=lzt.backend)
    x, w = torch.randn(4, 3), torch.randn(5, 3).t()
    compiled(x, w)
    out, seen = _traced(compiled, x, w)
    torch.testing.assert_close(out, f(x, w))
    assert seen and all(t.in_cpp for t in seen if t.program is not None)


def test_a_bfloat16_output_leaves_as_bfloat16_over_the_programs_buffer():
    torch._dynamo.reset()

    def f(x):
        return (x * 3).to(torch.bfloat16), x + 1

    compiled = torch.compile(f, backend=lzt.backend)
    x = torch.randn(7, 5)
    for _ in range(2):
        got = compiled(x)
        want = f(x)
        assert got[0].dtype == torch.bfloat16
        torch.testing.assert_close(got, want)


def test_a_strided_or_expanded_input_is_read_from_a_copy_in_cpp_and_counted():
    torch._dynamo.reset()

    def f(a, b):
        return a * 2 + b

    compiled = torch.compile(f, backend=lzt.backend)
    a = torch.randn(6, 8)[:, ::2]  # strided: no dense block to share
    b = torch.arange(4.0).expand(6, 4)  # expanded (aot_autograd saves expanded position ids)
    compiled(a, b)
    copies = counter("TorchInputCopy")
    out, seen = _traced(compiled, a, b)
    torch.testing.assert_close(out, f(a, b))
    assert seen and all(t.in_cpp for t in seen)
    assert counter("TorchInputCopy") == copies + 2


def test_an_input_updated_in_place_through_a_copy_gets_the_new_values():
    torch._dynamo.reset()

    def f(a):
        a.mul_(2).add_(1)
        return a.sum()

    compiled = torch.compile(f, backend=lzt.backend)
    base = torch.arange(24.0).reshape(4, 6)
    want = base.clone()
    for _ in range(3):
        got = compiled(base[:, ::2])
        expect = f(want[:, ::2])
        torch.testing.assert_close(got, expect)
        torch.testing.assert_close(base, want)


def _program():
    """A warm program of two float32 [2, 3] inputs: x * y + 1."""
    x, y = lzt.to_lazuli(torch.ones(2, 3)), lzt.to_lazuli(torch.ones(2, 3))
    program = _C._WarmProgram([x, y], "replay-test", "torch-compile")
    program.compile([x * y + 1])
    return program


def test_replay_torch_computes_over_the_torch_tensors_memory():
    program = _program()
    a, b = torch.arange(6.0).reshape(2, 3), torch.full((2, 3), 2.0)
    (out,), copies = program.replay_torch((a, b), None, None, [], 1, [])
    assert copies == []
    torch.testing.assert_close(out, a * b + 1)
    # A transposed [2, 3] view crosses as its dense [3, 2] block: not this program's input.
    t = torch.arange(6.0).reshape(3, 2).t()
    with pytest.raises(ValueError, match=r"tensor 0 is not a float32\[2, 3\] tensor"):
        program.replay_torch((t, b), None, None, [], 1, [])


@pytest.mark.parametrize("bad, why", [
    (torch.zeros(2, 4), "another shape"),
    (torch.zeros(2, 3, dtype=torch.float64), "another dtype"),
    (torch.zeros(4, 8)[::2, ::2], "a strided slice of another shape"),
    (torch.zeros(2).expand(3, 2), "an expanded tensor of another shape"),
    ("not a tensor", "not a tensor"),
])
def test_replay_torch_refuses_a_tensor_unlike_the_programs_input(bad, why):
    program = _program()
    good = torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"tensor 1 is not a float32\[2, 3\] tensor"):
        program.replay_torch((good, bad), None, None, [], 1, [])
    # Nothing was run or left half done: the program still replays.
    (out,), _ = program.replay_torch((good, good), None, None, [], 1, [])
    torch.testing.assert_close(out, torch.full((2, 3), 2.0))


def test_the_signature_tells_dtypes_sizes_layouts_and_scalars_apart():
    base = torch.zeros(4, 6)
    sig = _C._torch_signature
    keys = [sig((base,)), sig((base.t(),)), sig((base.double(),)), sig((torch.zeros(6, 4),)),
            sig((base[:, ::2],)), sig((base, 3)), sig((base, True)), sig((base, 3.0)),
            sig((base, None)), sig((base, 4))]
    assert all(isinstance(k, bytes) for k in keys)
    assert len(set(keys)) == len(keys)
    assert sig((torch.ones(4, 6),)) == keys[0]  # the values are not part of it
    # Anything else is left to the bridge's tuple key.
    assert sig((base, "a string")) is None
    assert sig((base, 2 ** 70)) is None


def test_an_argument_only_python_can_key_replays_through_python():
    """A tensor of more dims than the glue reads (16): the signature is Python's tuple, and the
    replay takes the Python route instead of refusing the call."""
    torch._dynamo.reset()

    def f(a):
        return a * 2 + 1

    compiled = torch.compile(f, backend=lzt.backend)
    a = torch.randn([2] * 17)
    compiled(a)
    out, seen = _traced(compiled, a)
    torch.testing.assert_close(out, f(a))
    assert seen and not any(t.in_cpp for t in seen)
