"""Optimizer.state_dict() / load_state_dict(): PyTorch's structure, a round trip through
lz.save / lz.load, and resuming: a run saved after k steps and resumed in fresh objects ends with
exactly the parameters (bit for bit) of the same run left uninterrupted."""
import numpy as np
import pytest

import lazuli as lz
from lazuli import nn


def batches(n, seed=3):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((16, 6)).astype(np.float32), rng.integers(0, 3, 16))
            for _ in range(n)]


def make(kind, seed):
    lz.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 3))
    first, second = model[0], model[2]
    # Two groups with different hyper-parameters, so indices and groups both matter.
    groups = [{"params": [first.weight, first.bias]},
              {"params": [second.weight, second.bias], "lr": 0.05}]
    if kind == "sgd":
        opt = lz.optim.SGD(groups, lr=0.1, momentum=0.9, weight_decay=1e-3)
    elif kind == "nesterov":
        opt = lz.optim.SGD(groups, lr=0.1, momentum=0.8, nesterov=True)
    elif kind == "adam":
        opt = lz.optim.Adam(groups, lr=1e-2, weight_decay=1e-3)
    else:
        opt = lz.optim.AdamW(groups, lr=1e-2, betas=(0.8, 0.99), weight_decay=5e-2)
    return model, opt


def train(model, opt, data):
    loss_fn = nn.CrossEntropyLoss()
    for x, y in data:
        opt.zero_grad()
        loss_fn(model(lz.from_numpy(x)), lz.from_numpy(y)).backward()
        opt.step()
        lz.sync()


def params_of(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("kind", ["sgd", "nesterov", "adam", "adamw"])
def test_resuming_from_a_saved_state_matches_uninterrupted_training_exactly(kind, tmp_path):
    data = batches(7)
    model, opt = make(kind, seed=0)
    train(model, opt, data)
    want = params_of(model)

    model, opt = make(kind, seed=0)
    train(model, opt, data[:3])
    lz.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 3},
            tmp_path / "ckpt.safetensors")
    del model, opt

    model, opt = make(kind, seed=5)  # different initial weights: everything must come from the file
    ckpt = lz.load(tmp_path / "ckpt.safetensors")
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    assert ckpt["step"] == 3
    train(model, opt, data[3:])
    got = params_of(model)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_state_dict_has_pytorchs_structure():
    model, opt = make("adamw", seed=0)
    train(model, opt, batches(1))
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2, 3]]
    assert sd["param_groups"][0]["lr"] == 1e-2 and sd["param_groups"][1]["lr"] == 0.05
    assert sd["param_groups"][0]["betas"] == (0.8, 0.99)
    assert sd["param_groups"][0]["weight_decay"] == 5e-2
    assert list(sd["state"]) == [0, 1, 2, 3]
    for i, p in enumerate(model.parameters()):
        st = sd["state"][i]
        assert sorted(st) == ["exp_avg", "exp_avg_sq", "step"]
        assert tuple(st["exp_avg"].shape) == tuple(p.shape)
        assert st["step"].item() == 1.0
    sgd_model, sgd = make("sgd", seed=0)
    assert sgd.state_dict()["state"] == {}  # no momentum buffer before the first step
    train(sgd_model, sgd, batches(1))
    assert sorted(sgd.state_dict()["state"][3]) == ["momentum_buffer"]
    plain = lz.optim.SGD([lz.ones(2).requires_grad_()], lr=0.1)
    plain.param_groups[0]["params"][0].grad = lz.ones(2)
    plain.step()
    assert plain.state_dict()["state"] == {}  # momentum 0 keeps no state, as PyTorch


def test_loaded_state_is_copied_not_aliased():
    model, opt = make("sgd", seed=0)
    train(model, opt, batches(2))
    sd = opt.state_dict()
    saved = {i: s["momentum_buffer"].numpy().copy() for i, s in sd["state"].items()}
    model2, opt2 = make("sgd", seed=1)
    opt2.load_state_dict(sd)
    train(model2, opt2, batches(2, seed=9))
    for i, s in sd["state"].items():  # opt's own buffers, untouched by opt2's steps
        np.testing.assert_array_equal(s["momentum_buffer"].numpy(), saved[i])


def test_loading_into_an_optimizer_with_state_updates_its_tensors_in_place():
    model, opt = make("adam", seed=0)
    train(model, opt, batches(2))
    own = [dict(opt.state[p._id]) for p in model.parameters()]
    other_model, other = make("adam", seed=1)
    train(other_model, other, batches(3, seed=4))
    opt.load_state_dict(other.state_dict())
    for p, before in zip(model.parameters(), own):
        for k, t in opt.state[p._id].items():
            assert t is before[k], k  # same tensor objects: a captured step keeps replaying
    assert opt.state_dict()["state"][0]["step"].item() == 3.0
    np.testing.assert_array_equal(opt.state_dict()["state"][2]["exp_avg"].numpy(),
                                  other.state_dict()["state"][2]["exp_avg"].numpy())


def test_loaded_hyper_parameters_take_effect_without_recompiling():
    w = lz.tensor([1.0, 2.0]).requires_grad_()
    opt = lz.optim.SGD([w], lr=0.1)

    def step():
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        lz.sync()
    step(), step()
    compiles = lz.debug.counter_value("UncachedCompile")
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.5
    before = w.numpy().copy()
    opt.load_state_dict(sd)
    step()
    np.testing.assert_allclose(w.numpy(), before - 0.5 * 2 * before, rtol=1e-6)
    assert lz.debug.counter_value("UncachedCompile") == compiles


def test_captured_step_keeps_replaying_after_a_state_load():
    model, opt = make("adam", seed=0)
    loss_fn = nn.CrossEntropyLoss()

    @lz.capture
    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    data = [(lz.from_numpy(x), lz.from_numpy(y)) for x, y in batches(8)]
    for x, y in data[:5]:
        step(x, y)
    sd = opt.state_dict()
    snapshot = {i: {k: v.numpy().copy() for k, v in s.items()} for i, s in sd["state"].items()}
    traces = step.capture_stats()["traces"]
    opt.load_state_dict({"state": {i: {k: lz.tensor(v) for k, v in s.items()}
                                   for i, s in snapshot.items()},
                         "param_groups": sd["param_groups"]})
    for x, y in data[5:]:
        step(x, y)
    assert step.capture_stats()["traces"] == traces


def test_bad_state_dicts_raise_naming_the_problem():
    model, opt = make("adam", seed=0)
    train(model, opt, batches(1))
    sd = opt.state_dict()
    _, fresh = make("adam", seed=1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        fresh.load_state_dict({"state": {}, "param_groups": sd["param_groups"][:1]})
    groups = [dict(sd["param_groups"][0], params=[0]), sd["param_groups"][1]]
    with pytest.raises(ValueError, match=r"param_groups\[0\] has 1 parameters"):
        fresh.load_state_dict({"state": {}, "param_groups": groups})
    bad = {"state": {0: dict(sd["state"][0], exp_avg=lz.zeros(3))},
           "param_groups": sd["param_groups"]}
    with pytest.raises(ValueError, match=r"state\[0\]\['exp_avg'\] has shape \(3,\)"):
        fresh.load_state_dict(bad)
    bad = {"state": {0: dict(sd["state"][0], max_exp_avg_sq=lz.zeros(10, 6))},
           "param_groups": sd["param_groups"]}
    with pytest.raises(ValueError, match="max_exp_avg_sq"):
        fresh.load_state_dict(bad)
    bad = {"state": {9: sd["state"][0]}, "param_groups": sd["param_groups"]}
    with pytest.raises(ValueError, match="parameter index 9"):
        fresh.load_state_dict(bad)
    groups = [dict(g, maximize=True) for g in sd["param_groups"]]
    with pytest.raises(ValueError, match="maximize=True"):
        fresh.load_state_dict({"state": {}, "param_groups": groups})
    with pytest.raises(TypeError, match="'state' and 'param_groups'"):
        fresh.load_state_dict([1, 2])
    assert fresh.state == {}  # nothing was loaded by the failed calls
    assert fresh.param_groups[0]["lr"] == 1e-2


def test_a_parameter_in_two_groups_is_refused():
    w = lz.ones(2).requires_grad_()
    with pytest.raises(ValueError, match="more than one parameter group"):
        lz.optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)


def test_a_missing_momentum_buffer_loads_as_no_state():
    w = lz.tensor([1.0, 2.0]).requires_grad_()
    opt = lz.optim.SGD([w], lr=0.1, momentum=0.9)
    sd = {"state": {0: {"momentum_buffer": None}},
          "param_groups": [dict(lr=0.2, momentum=0.9, dampening=0, weight_decay=0, nesterov=False,
                                maximize=False, foreach=None, differentiable=False, fused=None,
                                params=[0])]}
    opt.load_state_dict(sd)
    assert opt.state_dict()["state"] == {}
    w.grad = lz.tensor([1.0, 1.0])
    opt.step()  # first step after the load: buf = grad, as on a fresh optimizer
    np.testing.assert_allclose(w.numpy(), [0.8, 1.8], rtol=1e-6)
