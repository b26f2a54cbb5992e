"""lz.optim against numpy reference implementations, and the steady state of a training loop:
compiles stay flat after step 2 (with and without a learning-rate schedule), every parameter and
optimizer-state buffer is donated each step, live tensors do not grow, and the classic traps
(printing the loss every step, keeping a list of losses) behave as docs/training.md says."""
import math

import numpy as np
import pytest

import lazuli as lz
from lazuli import nn
from conftest import counter, executions

C = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def run_lz(make_opt, steps, lrs=None):
    """loss = sum(w * C) + sum(w^3) / 3: the gradient is C + w^2."""
    w = lz.tensor(np.array([[0.1, 0.2, -0.3], [0.4, -0.5, 0.6]])).requires_grad_()
    opt = make_opt([w])
    for i in range(steps):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[i]
        opt.zero_grad()
        ((w * lz.tensor(C)).sum() + (w * w * w).sum() / 3).backward()
        opt.step()
        lz.sync()
    return w.numpy()


def grad_np(w):
    return C + w * w


def sgd_np(steps, lr, momentum=0.0, wd=0.0, nesterov=False, lrs=None):
    w = np.array([[0.1, 0.2, -0.3], [0.4, -0.5, 0.6]])
    buf = None
    for i in range(steps):
        lr_i = lrs[i] if lrs else lr
        g = grad_np(w) + wd * w
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + g
            g = g + momentum * buf if nesterov else buf
        w = w - lr_i * g
    return w


def adam_np(steps, lr, betas=(0.9, 0.999), eps=1e-8, wd=0.0, decoupled=False):
    w = np.array([[0.1, 0.2, -0.3], [0.4, -0.5, 0.6]])
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t in range(1, steps + 1):
        g = grad_np(w)
        if decoupled:
            w = w * (1 - lr * wd)
        else:
            g = g + wd * w
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        mhat, vhat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
        w = w - lr * mhat / (np.sqrt(vhat) + eps)
    return w


@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.9, weight_decay=0.1),
                                dict(momentum=0.5, nesterov=True)])
def test_sgd_matches_numpy(kw):
    got = run_lz(lambda p: lz.optim.SGD(p, lr=0.1, **kw), 4)
    exp = sgd_np(4, 0.1, kw.get("momentum", 0.0), kw.get("weight_decay", 0.0), kw.get("nesterov", False))
    np.testing.assert_allclose(got, exp, rtol=1e-12)


def test_sgd_with_a_schedule_matches_numpy():
    lrs = [0.1, 0.05, 1.0, 0.0]  # 0 and 1 too: hyper-parameters are device scalars
    got = run_lz(lambda p: lz.optim.SGD(p, lr=0.1, momentum=0.9), 4, lrs)
    np.testing.assert_allclose(got, sgd_np(4, 0.1, 0.9, lrs=lrs), rtol=1e-12)


@pytest.mark.parametrize("cls,wd,decoupled", [(lz.optim.Adam, 0.0, False), (lz.optim.Adam, 0.1, False),
                                              (lz.optim.AdamW, 0.1, True)])
def test_adam_matches_numpy(cls, wd, decoupled):
    got = run_lz(lambda p: cls(p, lr=0.01, weight_decay=wd), 5)
    np.testing.assert_allclose(got, adam_np(5, 0.01, wd=wd, decoupled=decoupled), rtol=1e-10)


def test_param_groups_hold_their_own_hyper_parameters():
    a = lz.tensor([1.0]).requires_grad_()
    b = lz.tensor([1.0]).requires_grad_()
    opt = lz.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    (a + b).sum().backward()
    opt.step()
    np.testing.assert_allclose([a.item(), b.item()], [0.9, 0.5])


# ---- steady state of a training loop ----

PARAMS = 4  # two Linear layers, weight and bias each


def training_loop(optimizer, steps=6, schedule=False, on_forward=None, keep_losses=None):
    """Per step after the barrier: (UncachedCompile, InputOutputAliasCount, executions,
    live tensors, graph hash of the step)."""
    lz.debug._clear_compile_cache()
    lz.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    params = list(model.parameters())
    opt = (lz.optim.SGD(params, lr=0.1, momentum=0.9) if optimizer == "sgd"
           else lz.optim.Adam(params, lr=1e-2))
    lz.sync_tensors(params)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((32, 8)).astype(np.float32)
    y_np = rng.integers(0, 3, 32)
    loss_fn = nn.CrossEntropyLoss()
    records = []
    for step in range(steps):
        if schedule:
            opt.param_groups[0]["lr"] = 0.1 * math.cos(step / 10)
        x, y = lz.from_numpy(x_np), lz.from_numpy(y_np)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        if on_forward:
            on_forward(loss)
        loss.backward()
        opt.step()
        if keep_losses is not None:
            keep_losses.append(loss)
        lz.sync()
        lz.wait()
        records.append((counter("UncachedCompile"), counter("InputOutputAliasCount"), executions(),
                        lz.debug.live_tensor_count(), lz.debug.recent_cuts()[-1]["graph_hash"]))
    return records


# SGD with momentum: one buffer per parameter; Adam: two moments and the step count.
@pytest.mark.parametrize("optimizer,states", [("sgd", PARAMS), ("adam", 3 * PARAMS)])
@pytest.mark.parametrize("schedule", [False, True])
def test_steady_state_compiles_once_and_donates_every_buffer(optimizer, states, schedule):
    r = training_loop(optimizer, schedule=schedule)
    compiles = [c for c, *_ in r]
    assert compiles[2:] == [compiles[1]] * (len(r) - 2), compiles
    donated = [b - a for (_, a, *_), (_, b, *_) in zip(r, r[1:])]
    assert donated[1:] == [PARAMS + states] * (len(r) - 2), donated
    live = [n for *_, n, _ in r]
    assert live[2:] == [live[1]] * (len(r) - 2), live
    assert len({h for *_, h in r[1:]}) == 1


def test_printing_the_loss_every_step_costs_one_execution_and_no_compiles():
    plain = training_loop("sgd")
    printed = training_loop("sgd", on_forward=lambda loss: print(f"loss {loss.item():.4f}"))
    per_step = lambda r: [b[2] - a[2] for a, b in zip(r, r[1:])]  # noqa: E731
    assert per_step(plain)[1:] == [1] * 4
    assert per_step(printed)[1:] == [2] * 4
    compiles = [c for c, *_ in printed]
    assert compiles[2:] == [compiles[1]] * 4


def test_keeping_a_list_of_losses_does_not_change_the_step_graph():
    losses = []
    r = training_loop("adam", keep_losses=losses)
    assert len({h for *_, h in r[1:]}) == 1
    compiles = [c for c, *_ in r]
    assert compiles[2:] == [compiles[1]] * 4
    assert [lz.debug.tensor_state(l) for l in losses] == ["device_data"] * 6
    assert losses[-1].item() < losses[0].item()


def test_zero_grad_keeps_or_drops_grads():
    w = lz.tensor([1.0, 2.0]).requires_grad_()
    opt = lz.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert w.grad is None
