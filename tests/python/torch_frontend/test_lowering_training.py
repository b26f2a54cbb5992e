"""A whole training step (forward, backward, SGD/Adam/AdamW update) goes through the ATen lowering
table (C++, src/aten/) with nothing left to fall back: torch.compile with aot_autograd and
_aten.decompositions(), every graph recorded on Lazuli tensors by _aten.interpret, against eager
PyTorch."""
import numpy as np
import pytest
import torch
import torch.utils._pytree as pytree
from torch._dynamo.backends.common import aot_autograd

import lazuli as lz
from lazuli.torch import _aten


def _to_lz(t):
    return lz.from_numpy(np.array(t.detach().numpy(), order="C"))


def _to_torch(t):
    return torch.from_numpy(np.array(t.numpy()))


class TableOnlyBackend:
    """A test backend: refuses any graph with a node the table does not lower; runs the rest on
    Lazuli (copies at the boundary, which the real bridge avoids)."""

    def __init__(self):
        self.graphs = []
        self.backend = aot_autograd(fw_compiler=self.compile, bw_compiler=self.compile,
                                    decompositions=_aten.decompositions())

    def compile(self, gm, example_inputs):
        refused = {str(n.target): _aten.why_not_lowered(n) for n in gm.graph.nodes
                   if _aten.why_not_lowered(n) is not None}
        assert not refused, f"nodes that do not lower: {refused}"
        self.graphs.append(gm)

        def run(*args):
            out = _aten.interpret(gm, *[_to_lz(a) if isinstance(a, torch.Tensor) else a
                                           for a in args])
            leaves, spec = pytree.tree_flatten(out)
            lz.sync_tensors([x for x in leaves if isinstance(x, lz.Tensor)], wait=True)
            return pytree.tree_unflatten(
                [_to_torch(x) if isinstance(x, lz.Tensor) else x for x in leaves], spec)

        return run


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


OPTIMIZERS = {
    "sgd": lambda p, fe: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-2, foreach=fe),
    "adam": lambda p, fe: torch.optim.Adam(p, lr=1e-2, foreach=fe),
    "adamw": lambda p, fe: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=fe),
}


@pytest.mark.parametrize("foreach", [None, True], ids=["default", "foreach"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_step_lowers_completely_and_matches_eager(name, foreach):
    torch._dynamo.reset()
    eager_model, model = _model(), _model()
    eager_opt = OPTIMIZERS[name](eager_model.parameters(), foreach)
    opt = OPTIMIZERS[name](model.parameters(), foreach)

    def step(m, o, x, y):
        o.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        o.step()
        return loss

    backend = TableOnlyBackend()
    compiled = torch.compile(step, backend=backend.backend)
    torch.manual_seed(1)
    for _ in range(3):
        x, y = torch.randn(5, 8), torch.randint(0, 4, (5,))
        want = step(eager_model, eager_opt, x, y)
        got = compiled(model, opt, x, y)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert len(backend.graphs) >= 2  # the forward/backward pair and the optimizer's update
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_backward_keeps_nll_loss_backward_whole_and_matches_eager(reduction, weighted):
    # Its decomposition filled a zero mask of the logits' size and scattered into it; the entry
    # compares each class with the target, which fuses into the log-softmax backward.
    torch.manual_seed(0)
    x = torch.randn(6, 5, requires_grad=True)
    target = torch.tensor([0, 4, -100, 2, 2, 1])  # one ignored sample
    weight = torch.rand(5) + 0.5 if weighted else None

    def loss(x, target):
        out = torch.nn.functional.cross_entropy(x, target, weight=weight, ignore_index=-100,
                                                reduction=reduction)
        return out.sum() if reduction == "none" else out

    backend = TableOnlyBackend()
    got = torch.compile(loss, backend=backend.backend)(x, target)
    (g,) = torch.autograd.grad(got, x)
    want = loss(x, target)
    (w,) = torch.autograd.grad(want, x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(g, w)
    backward_ops = {str(n.target) for n in backend.graphs[-1].graph.nodes}
    assert "aten.nll_loss_backward.default" in backward_ops, backward_ops
    assert "aten.scatter.value" not in backward_ops, backward_ops
