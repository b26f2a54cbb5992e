"""torchvision models, randomly initialised, at small sizes: outputs, and a
training step's loss and gradients, equal to eager; steady state compiles nothing (the checks are
in model_checks.py). Convolutions and pooling still run in PyTorch eager between Lazuli
partitions; the ops each model leaves to eager are pinned here and listed in docs/torch.md."""
import copy

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import lazuli as lz
import lazuli.torch as lzt
from model_checks import check_inference, check_training, fallback_ops

torchvision = pytest.importorskip("torchvision")
counter = lz.debug.counter_value


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


def test_resnet18_inference_matches_eager_and_second_call_traces_nothing():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    compiled = torch.compile(model, backend=lzt.backend)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        traces, compiles = counter("TorchTrace"), counter("UncachedCompile")
        x = torch.randn(2, 3, 32, 32)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert traces > 0 and counter("TorchTrace") == traces
    assert counter("UncachedCompile") == compiles
    assert fallback_ops() == set()  # convolution and max pooling run in Lazuli


def _loss_step(m, x, y):
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    return loss


def _assert_gradients_close(model, eager, rel):
    # Gradients range over orders of magnitude between layers: each is compared to its own scale.
    for (n, p), q in zip(model.named_parameters(), eager.parameters()):
        scale = q.grad.abs().max().item()
        err = (p.grad - q.grad).abs().max().item()
        assert err <= rel * scale + 1e-12, f"{n}: {err:.3g} off, scale {scale:.3g}"


# 2x3x48x48 so that layer4's batch norms normalize 8 values per channel (2x2 maps). At 2x3x32x32
# (1x1 maps) they normalize 2, and their backward becomes a catastrophic cancellation (the exact
# gradient is scaled by eps / (var + eps)): there eager float32 itself differs from eager float64
# by 1-30% of a gradient's scale, and so did Lazuli from eager; this test was a strict xfail for
# it. The float64 test below runs that very case and finds the lowering exact.
def test_resnet18_training_step_loss_and_gradients_match_eager():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    eager = copy.deepcopy(model)
    compiled = torch.compile(_loss_step, backend=lzt.backend)
    torch.manual_seed(1)
    for i in range(2):
        x, y = torch.randn(2, 3, 48, 48), torch.randint(0, 10, (2,))
        for m in (model, eager):
            m.zero_grad()
        loss_c, loss_e = compiled(model, x, y), _loss_step(eager, x, y)
        torch.testing.assert_close(loss_c, loss_e, rtol=1e-5, atol=1e-6)
        _assert_gradients_close(model, eager, rel=1e-4)
        if i == 0:
            traces = counter("TorchTrace")
    assert counter("TorchTrace") == traces  # the second step only replays
    assert fallback_ops() == set()  # forward and backward wholly in Lazuli programs
    # BatchNorm's running statistics, updated in the forward graph, end with eager's values.
    torch.testing.assert_close(model.bn1.running_mean, eager.bn1.running_mean)
    torch.testing.assert_close(model.layer4[1].bn2.running_var, eager.layer4[1].bn2.running_var)


def test_resnet18_float64_training_step_is_exact_where_float32_is_ill_conditioned():
    # Batch 2 at 32x32: layer4's batch norms see 2 values per channel (see above). In float64 the
    # rounding noise that this cancellation magnifies is 1e-16, so what remains is the lowering:
    # every gradient equal to eager's within 1e-8 of its scale.
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).double()
    eager = copy.deepcopy(model)
    compiled = torch.compile(_loss_step, backend=lzt.backend)
    x, y = torch.randn(2, 3, 32, 32, dtype=torch.float64), torch.randint(0, 10, (2,))
    loss_c, loss_e = compiled(model, x, y), _loss_step(eager, x, y)
    torch.testing.assert_close(loss_c, loss_e, rtol=1e-12, atol=1e-12)
    _assert_gradients_close(model, eager, rel=1e-8)


def _small_vit():
    # vit_b_16's architecture (patch 16, class token, pre-norm encoder, GELU MLP) at 32x32 with
    # small dims; torchvision initialises the head to zeros, so it gets random weights here.
    torch.manual_seed(0)
    model = torchvision.models.VisionTransformer(image_size=32, patch_size=16, num_layers=2,
                                                 num_heads=2, hidden_dim=32, mlp_dim=64,
                                                 num_classes=10)
    torch.nn.init.normal_(model.heads.head.weight, std=0.1)
    return model


def _images(n, size, classes=10, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(2, 3, size, size, generator=g),
             torch.randint(0, classes, (2,), generator=g)) for _ in range(n)]


def test_vit_inference_matches_eager_and_later_calls_compile_nothing():
    check_inference(_small_vit(), [(x,) for x, _ in _images(3, 32)])
    assert fallback_ops() == set()  # the patch embedding's convolution included


def test_vit_training_step_matches_eager_and_later_steps_compile_nothing():
    batches = [((x,), y) for x, y in _images(3, 32)]
    check_training(_small_vit(), batches, F.cross_entropy)
    # Attention and the patch embedding's convolution, forward and backward, are lowered.
    assert fallback_ops() == set()


def _mobilenet():
    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(num_classes=10)
    # Freshly initialised running statistics make eval-mode outputs vanish (~1e-9): one batch in
    # training mode with momentum 1 gives them a batch's statistics first.
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.momentum = 1.0
    with torch.no_grad():
        model.train()(torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(9)))
    for m in bns:
        m.momentum = 0.1
    return model


def test_mobilenet_v3_small_inference_matches_eager_and_later_calls_compile_nothing():
    check_inference(_mobilenet(), [(x,) for x, _ in _images(3, 64)], rtol=1e-4, atol=1e-5)
    assert fallback_ops() == set()
