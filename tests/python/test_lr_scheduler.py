"""LR schedulers (StepLR, CosineAnnealingLR, OneCycleLR, LambdaLR) against their closed forms
computed here by hand (PyTorch's own schedulers: torch_frontend/test_lr_scheduler_torch.py), their
state_dict round trip through lz.save / lz.load, and a schedule that never recompiles."""
import math

import numpy as np
import pytest

import lazuli as lz
from lazuli.optim import lr_scheduler as S


def sgd(lr=0.1, momentum=0.0, groups=1):
    ps = [lz.ones(2).requires_grad_() for _ in range(groups)]
    return lz.optim.SGD([{"params": [p]} for p in ps], lr=lr, momentum=momentum)


def lrs(sched, n, group=0):
    out = [sched.optimizer.param_groups[group]["lr"]]
    for _ in range(n):
        sched.step()
        out.append(sched.get_last_lr()[group])
    return out


def test_step_lr_decays_every_step_size_steps():
    got = lrs(S.StepLR(sgd(0.5), step_size=3, gamma=0.5), 10)
    want = [0.5 * 0.5 ** (e // 3) for e in range(11)]
    assert got == pytest.approx(want, rel=1e-14)


def test_cosine_annealing_follows_the_closed_form_and_rises_after_t_max():
    opt = sgd(0.2)
    got = lrs(S.CosineAnnealingLR(opt, T_max=5, eta_min=0.01), 14)
    want = [0.01 + (0.2 - 0.01) * (1 + math.cos(math.pi * e / 5)) / 2 for e in range(15)]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert got[5] == pytest.approx(0.01) and got[10] == pytest.approx(0.2)


def one_cycle_closed_form(step, total, max_lr, pct, div, final_div, three_phase, cos=True):
    """Learning rate and momentum of the 1cycle policy at `step`, from its description."""
    lo, hi = max_lr / div, max_lr
    floor = lo / final_div
    up = pct * total - 1

    def anneal(a, b, frac):
        return b + (a - b) / 2 * (math.cos(math.pi * frac) + 1) if cos else a + (b - a) * frac
    if step <= up:
        f = step / up
        return anneal(lo, hi, f), anneal(0.95, 0.85, f)
    if three_phase:
        down = 2 * pct * total - 2
        if step <= down:
            f = (step - up) / (down - up)
            return anneal(hi, lo, f), anneal(0.85, 0.95, f)
        f = (step - down) / (total - 1 - down)
        return anneal(lo, floor, f), 0.95
    f = (step - up) / (total - 1 - up)
    return anneal(hi, floor, f), anneal(0.85, 0.95, f)


@pytest.mark.parametrize("three_phase,strategy", [(False, "cos"), (True, "cos"), (False, "linear")])
def test_one_cycle_lr_and_momentum_follow_the_policy(three_phase, strategy):
    opt = sgd(momentum=0.9)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=20, pct_start=0.25,
                         three_phase=three_phase, anneal_strategy=strategy)
    for step in range(20):
        lr, mom = one_cycle_closed_form(step, 20, 1.0, 0.25, 25.0, 1e4, three_phase,
                                        strategy == "cos")
        assert opt.param_groups[0]["lr"] == pytest.approx(lr, rel=1e-12, abs=1e-15), step
        assert opt.param_groups[0]["momentum"] == pytest.approx(mom, rel=1e-12), step
        if step < 19:
            sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0 / 25 / 1e4)


def test_one_cycle_cycles_adams_beta1_and_refuses_too_many_steps():
    w = lz.ones(2).requires_grad_()
    opt = lz.optim.Adam([w], lr=1e-3, betas=(0.9, 0.98))
    sched = S.OneCycleLR(opt, max_lr=0.1, epochs=2, steps_per_epoch=3)
    assert opt.param_groups[0]["betas"] == (0.95, 0.98)
    for _ in range(5):
        sched.step()
    assert opt.param_groups[0]["betas"][1] == 0.98
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.95)
    sched.step()  # step 6 == total_steps is allowed (PyTorch's bound), step 7 is not
    with pytest.raises(ValueError, match="Tried to step 7 times"):
        sched.step()


def test_lambda_lr_scales_each_group_by_its_lambda():
    opt = sgd(1.0, groups=2)
    sched = S.LambdaLR(opt, [lambda e: 0.5 ** e, lambda e: 1.0 / (e + 1)])
    for e in range(1, 4):
        sched.step()
        assert sched.get_last_lr() == [0.5 ** e, 1.0 / (e + 1)]


@pytest.mark.parametrize("make", [
    lambda o: S.StepLR(o, 2, gamma=0.3),
    lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=1e-3),
    lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=12),
    lambda o: S.LambdaLR(o, lambda e: 0.9 ** e),
])
def test_scheduler_state_round_trips_through_save_and_load(make, tmp_path):
    opt = sgd(0.1, momentum=0.9)
    sched = make(opt)
    for _ in range(5):
        sched.step()
    lz.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, tmp_path / "s.safetensors")
    want = lrs(sched, 5)

    opt2 = sgd(0.7, momentum=0.9)
    sched2 = make(opt2)
    ckpt = lz.load(tmp_path / "s.safetensors")
    opt2.load_state_dict(ckpt["opt"])
    sched2.load_state_dict(ckpt["sched"])
    assert lrs(sched2, 5) == want
    assert opt2.param_groups[0]["momentum"] == opt.param_groups[0]["momentum"]


def test_resuming_with_last_epoch_needs_initial_lr():
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(sgd(), step_size=2, last_epoch=3)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="step_size"):
        S.StepLR(sgd(), step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        S.CosineAnnealingLR(sgd(), T_max=0)
    with pytest.raises(ValueError, match="total_steps OR"):
        S.OneCycleLR(sgd(), max_lr=0.1)
    with pytest.raises(ValueError, match="pct_start"):
        S.OneCycleLR(sgd(), max_lr=0.1, total_steps=10, pct_start=2.0)
    with pytest.raises(ValueError, match="anneal_strategy"):
        S.OneCycleLR(sgd(), max_lr=0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(TypeError, match="not an Optimizer"):
        S.StepLR(object(), step_size=1)


@pytest.mark.parametrize("make", [
    lambda o: S.CosineAnnealingLR(o, T_max=3),
    lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=10),
])
def test_a_schedule_changes_the_rate_every_step_without_recompiling(make):
    w = lz.tensor([1.0, -2.0]).requires_grad_()
    opt = lz.optim.SGD([w], lr=0.1, momentum=0.9)
    sched = make(opt)
    ref, buf = np.array([1.0, -2.0]), None
    compiles = []
    for _ in range(8):
        lr, mom = opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        lz.sync()
        g = 2 * ref
        buf = g if buf is None else mom * buf + g
        ref = ref - lr * buf
        sched.step()
        compiles.append(lz.debug.counter_value("UncachedCompile"))
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5)
    assert compiles[2:] == [compiles[2]] * 6, compiles


def test_one_cycle_stepped_outside_a_captured_step_replays_and_matches_plain_training():
    from lazuli import nn

    def run(captured):
        lz.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        opt = lz.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = S.OneCycleLR(opt, max_lr=0.5, total_steps=12)
        loss_fn = nn.MSELoss()

        def step(x, y):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss
        fn = lz.capture(step) if captured else step
        rng = np.random.default_rng(2)
        for _ in range(12):
            x = lz.from_numpy(rng.standard_normal((16, 4)).astype(np.float32))
            y = lz.from_numpy(rng.standard_normal((16, 2)).astype(np.float32))
            fn(x, y)
            lz.sync()
            sched.step()
        return [p.numpy() for p in model.parameters()], fn

    want, _ = run(False)
    got, fn = run(True)
    assert fn.capture_stats()["replays"] >= 8, fn.capture_stats()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
