"""torch.compile(..., options={"keep_weight_layouts": True}): parameters cross the boundary with
a content id lent per torch version, so the cpu backend keeps a convolution's blocked weights
across calls (ConvWeightReorder once, then ConvWeightReuse), and sees every write torch counts:
an in-place update between calls, a compiled update or optimizer step, a load_state_dict. Without the option each call reorders the weights again."""
import copy
import gc

import pytest
import torch

import lazuli.torch as lzt
from lazuli.torch import _bridge
from conftest import counter


def _model():
    torch.manual_seed(0)
    # 2 x 8 x 8 output positions per call: enough for oneDNN's blocked layouts (conv_dnnl.cpp).
    return torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(32, 32, 3, padding=1))


def _reorders():
    return counter("ConvWeightReorder")


def _infer(compiled, model, x):
    with torch.no_grad():
        got = compiled(x)
        want = model(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("keep", [True, False])
def test_steady_inference_reorders_weights_once_only_when_asked(keep):
    model = _model().eval()
    options = {"keep_weight_layouts": True} if keep else None
    compiled = torch.compile(model, backend=lzt.backend, options=options)
    x = torch.randn(2, 16, 8, 8)
    _infer(compiled, model, x)  # trace, compile, first copies
    r0 = _reorders()
    for _ in range(3):
        _infer(compiled, model, x)
    # Two convolutions: without the option each call copies both weights again.
    assert _reorders() - r0 == (0 if keep else 6)


def test_in_place_updates_between_calls_are_seen():
    model = _model().eval()
    compiled = torch.compile(model, backend=lzt.backend, options={"keep_weight_layouts": True})
    x = torch.randn(2, 16, 8, 8)
    _infer(compiled, model, x)
    r0 = _reorders()
    with torch.no_grad():
        model[0].weight.mul_(-0.5)          # an in-place torch op: a new version
    _infer(compiled, model, x)
    assert _reorders() - r0 == 1, "the updated weights need a new copy, the others not"
    model.load_state_dict(_model().state_dict())  # copy_ into every parameter
    _infer(compiled, model, x)


def _scale_weights(model):
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5)


def test_a_compiled_update_of_the_parameters_is_seen_by_the_next_call():
    model = _model().eval()
    compiled = torch.compile(model, backend=lzt.backend, options={"keep_weight_layouts": True})
    scale = torch.compile(_scale_weights, backend=lzt.backend)
    x = torch.randn(2, 16, 8, 8)
    _infer(compiled, model, x)
    for _ in range(2):
        scale(model)
        _infer(compiled, model, x)


def _step(model, opt, x):
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss


def test_compiled_training_steps_match_eager():
    model = _model()
    eager = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    compiled = torch.compile(_step, backend=lzt.backend, options={"keep_weight_layouts": True})
    addresses = [p.data_ptr() for p in model.parameters()]
    versions = [p._version for p in model.parameters()]
    for i in range(3):
        x = torch.randn(2, 16, 8, 8)
        torch.testing.assert_close(compiled(model, opt, x), _step(eager, opt_e, x),
                                   rtol=1e-4, atol=1e-5, msg=f"step {i}")
    for p, q, a, v in zip(model.parameters(), eager.parameters(), addresses, versions):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
        assert p.data_ptr() == a
        assert p._version > v
    with torch.no_grad():
        torch.testing.assert_close(model(x), eager(x), rtol=1e-4, atol=1e-5)


def test_lent_ids_go_with_their_parameters():
    model = _model().eval()
    compiled = torch.compile(model, backend=lzt.backend, options={"keep_weight_layouts": True})
    _infer(compiled, model, torch.randn(2, 16, 8, 8))
    before = len(_bridge._LENT_IDS)
    assert before >= 4  # two weights, two biases
    del compiled, model
    torch._dynamo.reset()
    gc.collect()
    assert len(_bridge._LENT_IDS) <= before - 4


def test_parameters_made_in_inference_mode_cross_without_an_id():
    with torch.inference_mode():
        model = _model().eval()  # inference tensors: torch keeps no version for them
        compiled = torch.compile(model, backend=lzt.backend,
                                 options={"keep_weight_layouts": True})
        x = torch.randn(2, 16, 8, 8)
        for _ in range(2):
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("options, message", [
    ({"keep_weight_layout": True}, "unknown option 'keep_weight_layout'"),
    ({"keep_weight_layouts": 1}, "takes a bool"),
])
def test_bad_options_are_refused_by_name(options, message):
    compiled = torch.compile(_model(), backend=lzt.backend, options=options)
    with pytest.raises(Exception, match=message):
        compiled(torch.randn(2, 16, 8, 8))
