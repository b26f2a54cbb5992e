"""A program that fails at run time destroys nothing (DESIGN.md section 7).

Index values are data: a bad one is found when the program runs. Then every tensor the program
would have updated keeps its value from before (donated buffers included), outputs the failure did
not reach get their values, only the others are poisoned, and the error is raised once, at the
first wait on that program, naming the op the user called and the user's line.
"""
import numpy as np
import pytest

import lazuli as lz
from lazuli.nn import functional as F

from conftest import counter



def device_index(values):
    """An int64 index tensor whose values are only known when a program runs."""
    t = lz.tensor(values) + 0
    lz.sync_tensors([t], wait=True)
    assert lz.debug.tensor_state(t) == "device_data"
    return t


def state_of(model, opt=None):
    out = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    if opt is not None:
        for i, st in enumerate(opt.state.values()):
            for k, v in st.items():
                if isinstance(v, lz.Tensor):
                    out[f"opt{i}.{k}"] = v.numpy().copy()
    return out


def make_trainer(optimizer):
    lz.manual_seed(0)
    model = lz.nn.Sequential(lz.nn.Linear(6, 8), lz.nn.ReLU(), lz.nn.Linear(8, 4))
    if optimizer == "sgd":
        opt = lz.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = getattr(lz.optim, {"adam": "Adam", "adamw": "AdamW"}[optimizer])(model.parameters(), lr=0.01)
    x = lz.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))

    def step(y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


GOOD = [0, 1, 2, 3, 1]
BAD = [0, 1, 9, 3, 1]


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_failed_training_step_keeps_weights_and_optimizer_state(backend, optimizer):
    model, opt, step = make_trainer(optimizer)
    step(device_index(GOOD))
    lz.sync(wait=True)
    before = state_of(model, opt)
    loss = step(device_index(BAD))
    lz.sync()
    with pytest.raises(lz.Error, match="cross_entropy at .*test_failed_programs.py:.*index 9"):
        loss.item()
    after = state_of(model, opt)
    assert after.keys() == before.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)
    # The error was raised once: the next good step runs and changes the weights.
    good = step(device_index(GOOD))
    lz.sync()
    assert np.isfinite(good.item())
    changed = state_of(model, opt)
    assert any(not np.array_equal(changed[k], before[k]) for k in before)


def test_failed_step_with_donation_keeps_donated_buffers(backend):
    model, opt, step = make_trainer("adam")
    for _ in range(2):
        step(device_index(GOOD))
        lz.sync()
    lz.wait()
    before = state_of(model, opt)
    donated = counter("InputOutputAliasCount")
    step(device_index(BAD))
    lz.sync()
    assert counter("InputOutputAliasCount") > donated, "the failing step should have donated"
    with pytest.raises(lz.Error, match="index 9"):
        lz.wait()
    for k, v in state_of(model, opt).items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)


def test_failed_captured_step_keeps_state_and_replays_again(backend):
    model, opt, step = make_trainer("adam")
    captured = lz.capture(step)
    for _ in range(4):
        captured(device_index(GOOD))
    lz.wait()
    assert captured.capture_stats()["replays"] >= 1
    before = state_of(model, opt)
    loss = captured(device_index(BAD))
    with pytest.raises(lz.Error, match="index 9"):
        loss.item()
    for k, v in state_of(model, opt).items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    replays = captured.capture_stats()["replays"]
    assert np.isfinite(captured(device_index(GOOD)).item())
    assert captured.capture_stats()["replays"] == replays + 1


def test_failed_index_assignment_keeps_the_tensor(backend):
    x = lz.zeros(4)
    lz.sync()
    x[device_index([9])] = 1.0
    with pytest.raises(lz.Error, match=r"x\[index\] = value at .*test_failed_programs.py:\d+.*index 9"):
        x.numpy()
    np.testing.assert_array_equal(x.numpy(), np.zeros(4, np.float32))
    x[device_index([2])] = 1.0
    np.testing.assert_array_equal(x.numpy(), [0, 0, 1, 0])


def test_host_index_out_of_range_raises_at_the_line_and_records_nothing():
    x = lz.zeros(4)  # never materialized: nothing to restore, so the check must come first
    with pytest.raises(IndexError, match=r"x\[index\] = value: index 9 is out of range for size 4"):
        x[lz.tensor([9])] = 1.0
    with pytest.raises(IndexError, match="index -5 is out of range"):
        x[lz.tensor([-5])]
    with pytest.raises(IndexError, match="cross_entropy: index 7 is out of range for size 4"):
        F.cross_entropy(lz.zeros(2, 4), lz.tensor([1, 7]))
    with pytest.raises(IndexError, match="gather: index 4"):
        lz.gather(lz.zeros(2, 4), 1, lz.tensor([[0], [4]]))
    np.testing.assert_array_equal(x.numpy(), np.zeros(4, np.float32))
    assert counter("UncachedCompile") + counter("CachedCompile") == 1  # only the read above


def test_outputs_the_failure_did_not_reach_keep_their_values(backend):
    a = lz.tensor([1.0, 2.0, 3.0])
    bad = lz.tensor([0.0, 1.0]).index_select(0, device_index([5]))
    good = a * 2
    lz.sync()
    with pytest.raises(lz.Error, match="index 5"):
        good.numpy()  # the first wait on the failed program raises its error, once
    np.testing.assert_array_equal(good.numpy(), [2, 4, 6])  # not reached by the failure
    with pytest.raises(lz.Error, match="index 5"):
        bad.numpy()  # it has no value
    lz.wait()  # already raised: not again


def test_failure_is_raised_once_then_a_later_barrier_is_clean(backend):
    x = lz.zeros(3).index_select(0, device_index([7]))
    with pytest.raises(lz.Error, match="index 7"):
        lz.sync(wait=True)
    lz.sync(wait=True)
    lz.wait()
    y = lz.ones(2) + 1
    lz.sync()
    lz.wait()
    np.testing.assert_array_equal(y.numpy(), [2, 2])
    del x


def test_step_after_an_unread_failure_runs_and_the_error_is_raised_once(backend):
    w = lz.ones(3)
    lz.sync()
    w.add_(lz.zeros(3).index_select(0, device_index([0, 1, 8])))
    lz.sync()  # fails on the executor; nobody waits
    w.add_(1.0)
    raised = []
    for wait_point in (lz.sync, lz.wait, lz.wait):  # the next barrier, or the wait after it
        try:
            wait_point()
        except lz.Error as e:
            raised.append(str(e))
    assert len(raised) == 1 and "index 8" in raised[0], raised
    np.testing.assert_array_equal(w.numpy(), [2, 2, 2])  # the first update failed, the second ran


def test_eager_mode_raises_at_the_op_line(backend):
    idx = device_index([4])
    with lz.eager():
        with pytest.raises(lz.Error, match=r"index_select at .*test_failed_programs.py:\d+"):
            lz.ones(3).index_select(0, idx)
        assert lz.ones(2).sum().item() == 2.0


def test_embedding_error_names_embedding(backend):
    weight = lz.ones(3, 2)
    out = F.embedding(device_index([[0, 5]]), weight)
    with pytest.raises(lz.Error, match="embedding at .*test_failed_programs.py"):
        out.numpy()
