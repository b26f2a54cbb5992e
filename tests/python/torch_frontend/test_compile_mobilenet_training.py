"""mobilenet_v3_small's training step through torch.compile(backend="lazuli") equals eager's:
the loss, every parameter's gradient and batch norm's running statistics, with every
ATen op lowered (no fallback::aten.* counter moves) and nothing traced or compiled after the first
step. Since convolution lowers, the step is 2 ATen graphs in 2 partitions (it was 105 partitions
around eager convolutions), and its first call costs about 9 s of CPU here, most of it dynamo's
and aot_autograd's tracing (docs/torch.md)."""
import copy

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import lazuli as lz
import lazuli.torch as lzt
from model_checks import STRUCTURAL_ZERO, compile_marks, fallback_ops

torchvision = pytest.importorskip("torchvision")


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


def _mobilenet():
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(num_classes=10)
    # Dropout's masks cannot match eager's (different generators): off, as in the other tests.
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model.train()


def _loss_step(m, x, y):
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    return loss


def test_mobilenet_v3_small_training_step_matches_eager_and_lowers_every_op():
    model = _mobilenet()
    eager = copy.deepcopy(model)
    compiled = torch.compile(_loss_step, backend=lzt.backend)
    g = torch.Generator().manual_seed(1)
    marks = []
    for _ in range(2):
        x, y = torch.randn(2, 3, 64, 64, generator=g), torch.randint(0, 10, (2,), generator=g)
        for m in (model, eager):
            m.zero_grad()
        loss_c, loss_e = compiled(model, x, y), _loss_step(eager, x, y)
        torch.testing.assert_close(loss_c, loss_e, rtol=1e-5, atol=1e-6)
        # Each gradient against its own scale. Gradients zero in exact arithmetic (a bias feeding
        # a training-mode batch norm) are rounding noise on both sides: they only have to stay
        # noise (below STRUCTURAL_ZERO of the step's largest gradient).
        top = max(q.grad.abs().max().item() for q in eager.parameters())
        for (name, p), q in zip(model.named_parameters(), eager.parameters()):
            scale = q.grad.abs().max().item()
            err = (p.grad - q.grad).abs().max().item()
            assert err <= 1e-4 * scale + STRUCTURAL_ZERO * top, \
                f"{name}: {err:.3g} off, scale {scale:.3g} (largest gradient {top:.3g})"
        marks.append(compile_marks())
    assert marks[1] == marks[0]  # the second step traces and compiles nothing
    assert fallback_ops() == set()  # forward and backward wholly in Lazuli programs
    assert lz.debug.counter_value("TorchPartition") == 2  # one per ATen graph
    for (name, b), c in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(b, c, rtol=1e-5, atol=1e-6, msg=name)
