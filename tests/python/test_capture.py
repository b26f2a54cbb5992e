"""lz.capture: capture and replay of a step function (docs/capture.md).

Replays are checked against the same code run without capture (same seed, same data): the values
must agree exactly, because a replay runs the very program a trace compiled. Cache behaviour is
checked through the capture's stats and the runtime's counters, never through timing."""
import math
import warnings

import numpy as np
import pytest

import lazuli as lz
from lazuli import nn


def counter(name):
    return lz.debug.counter_value(name)


def make_trainer(optimizer="sgd", seed=0, momentum=0.0, weight_decay=0.0, dropout=False):
    lz.manual_seed(seed)
    layers = [nn.Linear(8, 16), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(0.5))
    layers.append(nn.Linear(16, 3))
    model = nn.Sequential(*layers)
    params = list(model.parameters())
    if optimizer == "sgd":
        opt = lz.optim.SGD(params, lr=0.1, momentum=momentum, weight_decay=weight_decay)
    elif optimizer == "adam":
        opt = lz.optim.Adam(params, lr=1e-2, weight_decay=weight_decay)
    else:
        opt = lz.optim.AdamW(params, lr=1e-2, weight_decay=weight_decay)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, opt, step


def batches(n, seed=1, batch=32):
    rng = np.random.default_rng(seed)
    return [(lz.from_numpy(rng.standard_normal((batch, 8)).astype(np.float32)),
             lz.from_numpy(rng.integers(0, 3, batch))) for _ in range(n)]


def run(step, opt, data, lrs=None, sync=True):
    losses = []
    for i, (x, y) in enumerate(data):
        if lrs is not None:
            opt.param_groups[0]["lr"] = lrs[i]
        losses.append(step(x, y))
        if sync:
            lz.sync()
    return [float(v) for v in losses]


def state_of(model):
    return {k: v.numpy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("optimizer,momentum,weight_decay", [
    ("sgd", 0.0, 0.0), ("sgd", 0.9, 1e-3), ("adam", 0.0, 0.0), ("adam", 0.0, 1e-2), ("adamw", 0.0, 1e-2)])
def test_replayed_training_matches_traced_training_exactly(optimizer, momentum, weight_decay):
    data = batches(8)
    m1, o1, plain = make_trainer(optimizer, momentum=momentum, weight_decay=weight_decay)
    want = run(plain, o1, data)
    m2, o2, step = make_trainer(optimizer, momentum=momentum, weight_decay=weight_decay)
    captured = lz.capture(step)
    got = run(captured, o2, data, sync=False)
    stats = captured.capture_stats()
    assert stats["replays"] >= 8 - 3, stats
    assert got == want
    for k, v in state_of(m1).items():
        np.testing.assert_array_equal(state_of(m2)[k], v, err_msg=k)


def test_replays_start_once_two_traces_agree_and_compile_nothing_new():
    @lz.capture
    def f(x, w):
        return (x @ w).relu().sum()

    w = lz.tensor(np.ones((4, 2), np.float32))
    f(lz.ones(3, 4), w)
    f(lz.ones(3, 4), w)
    assert f.capture_stats()["traces"] == 2
    compiles, replays = counter("UncachedCompile"), counter("CaptureReplay")
    for i in range(6):
        assert f(lz.tensor(np.full((3, 4), float(i), np.float32)), w).item() == 24.0 * i
    assert f.capture_stats() == {"traces": 2, "replays": 6, "last_reason": ""}
    assert counter("UncachedCompile") == compiles
    assert counter("CaptureReplay") == replays + 6


def test_first_step_that_creates_optimizer_state_is_not_replayed():
    # SGD with momentum builds its buffer as a copy of the first gradient: trace 1 differs from
    # trace 2, so replays start only after traces 2 and 3 agree, and values match plain training.
    data = batches(6)
    m1, o1, plain = make_trainer("sgd", momentum=0.9)
    want = run(plain, o1, data)
    m2, o2, step = make_trainer("sgd", momentum=0.9)
    captured = lz.capture(step)
    assert run(captured, o2, data) == want
    assert captured.capture_stats()["traces"] == 3


def test_learning_rate_schedule_is_read_on_every_replay_without_recompiling():
    data = batches(10)
    lrs = [0.1 * math.cos(i / 3) for i in range(10)]
    m1, o1, plain = make_trainer("adam")
    want = run(plain, o1, data, lrs=lrs)
    m2, o2, step = make_trainer("adam")
    captured = lz.capture(step)
    compiles = None
    got = []
    for i, (x, y) in enumerate(data):
        o2.param_groups[0]["lr"] = lrs[i]
        got.append(float(captured(x, y)))
        if i == 2:
            compiles = counter("UncachedCompile")
    assert got == want
    assert counter("UncachedCompile") == compiles
    assert captured.capture_stats() == {"traces": 3, "replays": 7, "last_reason": ""}


def test_optimizer_change_of_update_structure_is_traced_again():
    data = batches(8)
    m1, o1, plain = make_trainer("sgd")
    m2, o2, step = make_trainer("sgd")
    captured = lz.capture(step)
    want, got = [], []
    for i, (x, y) in enumerate(data):
        if i == 4:  # weight decay adds ops to the update: the traced program no longer applies
            o1.param_groups[0]["weight_decay"] = 0.01
            o2.param_groups[0]["weight_decay"] = 0.01
        want.append(float(plain(x, y)))
        if i == 4:
            with pytest.warns(RuntimeWarning, match="guard"):
                got.append(float(captured(x, y)))
        else:
            got.append(float(captured(x, y)))
    assert got == want
    assert captured.capture_stats()["traces"] >= 4


def test_each_replay_reads_its_own_arguments_and_returns_new_tensors():
    @lz.capture
    def f(a, b):
        return a * 2 + b, (a - b).sum()

    outs = []
    for i in range(6):
        a = lz.tensor(np.full((2, 3), float(i), np.float32))
        b = lz.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        outs.append(f(a, b))
    assert f.capture_stats()["replays"] == 4
    for i, (s, d) in enumerate(outs):  # earlier results keep their values
        np.testing.assert_array_equal(s.numpy(), 2 * i + np.arange(6).reshape(2, 3))
        assert d.item() == 6 * i - 15


def test_new_shape_dtype_or_python_argument_is_a_new_signature():
    @lz.capture
    def f(x, scale):
        return x * scale

    for _ in range(3):
        np.testing.assert_allclose(f(lz.ones(2, 3), 2.0).numpy(), np.full((2, 3), 2.0))
        np.testing.assert_allclose(f(lz.ones(4), 3.0).numpy(), np.full(4, 3.0))
        np.testing.assert_array_equal(f(lz.ones(4, dtype=lz.int64), 3).numpy(), np.full(4, 3))
        np.testing.assert_allclose(f(lz.ones(4), 5.0).numpy(), np.full(4, 5.0))
    assert f.capture_stats()["traces"] == 8  # two per signature
    assert f.capture_stats()["replays"] == 4


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_new_batch_size_of_a_settled_step_is_traced_once_and_matches_plain_python(optimizer):
    # The last batch of an epoch is smaller: after the first size settled, each new size costs one
    # trace (its program is the settled one at other sizes), and replays from its second call.
    sizes = [32, 32, 32, 32, 17, 17, 17, 9, 9, 32]
    data = [b for i, n in enumerate(sizes) for b in batches(1, seed=100 + i, batch=n)]
    m1, o1, plain = make_trainer(optimizer, momentum=0.9 if optimizer == "sgd" else 0.0)
    want = run(plain, o1, data)
    m2, o2, step = make_trainer(optimizer, momentum=0.9 if optimizer == "sgd" else 0.0)
    captured = lz.capture(step)
    settled = counter("CaptureSettledAtNewSizes")
    compiles = None
    got = []
    kernels = None
    for i, (x, y) in enumerate(data):
        if i == 4:  # the first size settled: its kernels serve the new sizes
            kernels = counter("KernelCompile")
        got.append(captured(x, y))
    got = [float(v) for v in got]
    assert captured.capture_stats()["traces"] == 3 + 1 + 1  # the first size: state made on step 1
    assert counter("CaptureSettledAtNewSizes") - settled == 2
    assert counter("KernelCompile") == kernels
    assert got == want
    for k, v in state_of(m1).items():
        np.testing.assert_array_equal(state_of(m2)[k], v, err_msg=k)


def test_state_the_function_makes_at_each_size_keeps_that_sizes_shape_and_values():
    # The function keeps a batch-sized tensor it makes: a trace at another size replaces it, so
    # a size's record cannot write its own tensor again; it must not write one of another shape.
    state = {}

    def plain(x):
        y = x * 2
        state["last"] = y
        return y.sum()

    captured = lz.capture(plain)
    for i, n in enumerate([3, 3, 3, 3, 5, 5, 3, 5, 3]):
        x = lz.tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2) + i)
        got = captured(x).item()
        assert got == float((2 * (np.arange(n * 2) + i)).sum())
        assert state["last"].shape == (n, 2)
        np.testing.assert_array_equal(state["last"].numpy(), 2 * x.numpy())


def test_a_python_number_that_changes_with_the_size_still_needs_two_traces_at_a_new_size():
    @lz.capture
    def mean_by_hand(x):
        return x.sum() * (1.0 / x.shape[0])  # an uploaded number that depends on the size

    for _ in range(3):
        assert mean_by_hand(lz.full((4,), 2.0)).item() == 2.0
    before = mean_by_hand.capture_stats()["traces"]
    for _ in range(3):
        assert mean_by_hand(lz.full((5,), 3.0)).item() == pytest.approx(3.0)
    assert mean_by_hand.capture_stats()["traces"] == before + 2


def test_int_and_float_python_arguments_do_not_share_a_signature():
    @lz.capture
    def f(x, k):
        return x + k

    x = lz.tensor([1, 2], dtype=lz.int64)
    for _ in range(3):
        assert f(x, 1).dtype == lz.int64
    assert f(x, 1.0).dtype == lz.float32


def test_argument_updated_in_place_is_written_on_every_replay():
    @lz.capture
    def bump(counter_t, by):
        counter_t.add_(by)

    c = lz.zeros(3)
    for _ in range(6):
        bump(c, lz.ones(3))
    np.testing.assert_array_equal(c.numpy(), np.full(3, 6.0))
    assert bump.capture_stats()["replays"] == 4


def test_view_arguments_are_read_by_value():
    data = lz.tensor(np.arange(24, dtype=np.float32).reshape(6, 4))

    @lz.capture
    def total(rows):
        return rows.sum()

    got = [total(data[i:i + 2]).item() for i in range(5)]
    assert got == [float(np.arange(24).reshape(6, 4)[i:i + 2].sum()) for i in range(5)]
    assert total.capture_stats()["replays"] == 3


def test_value_read_inside_is_never_replayed_and_warns_with_the_line():
    seen = []

    @lz.capture
    def f(x):
        y = x * 2
        seen.append(y.sum().item())  # a value read inside: executes mid-function
        return y + 1

    with pytest.warns(RuntimeWarning, match="value-read"):
        for i in range(4):
            f(lz.full((3,), float(i)))
    assert seen == [0.0, 6.0, 12.0, 18.0]
    assert f.capture_stats()["replays"] == 0
    assert "test_capture.py" in f.capture_stats()["last_reason"]


def test_full_graph_raises_on_a_value_read_inside():
    @lz.capture(full_graph=True)
    def f(x):
        return float(x.sum())

    with pytest.raises(lz.UnexpectedExecutionError, match="capture"):
        f(lz.ones(3))
    assert float(lz.ones(2).sum()) == 2.0  # the runtime keeps working


def test_python_value_baked_into_the_graph_is_never_replayed():
    calls = [0]

    @lz.capture
    def f(x):
        calls[0] += 1
        return x * float(calls[0])  # a Python number that changes: a new graph constant

    with pytest.warns(RuntimeWarning, match="consecutive traces differ"):
        got = [f(lz.ones(2)).numpy()[0] for _ in range(6)]
    assert got == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert f.capture_stats()["replays"] == 0


def test_host_data_uploaded_inside_that_changes_is_never_replayed():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(4).astype(np.float32) for _ in range(5)]
    it = iter(arrays)

    @lz.capture
    def f(x):
        return x + lz.tensor(next(it))

    with pytest.warns(RuntimeWarning, match="uploads itself"):
        got = [f(lz.zeros(4)).numpy() for _ in range(5)]
    for g, a in zip(got, arrays):
        np.testing.assert_array_equal(g, a)
    assert f.capture_stats()["replays"] == 0


def test_constant_uploaded_inside_is_replayed():
    @lz.capture
    def f(x):
        return x + lz.tensor([1.0, 2.0])

    got = [f(lz.full((2,), float(i))).numpy() for i in range(5)]
    assert [g.tolist() for g in got] == [[i + 1.0, i + 2.0] for i in range(5)]
    assert f.capture_stats()["replays"] == 3


def test_state_replaced_outside_the_function_is_traced_again():
    state = {"w": lz.ones(3)}

    @lz.capture
    def f(x):
        return x * state["w"]

    for _ in range(3):
        f(lz.ones(3))
    state["w"] = lz.full((3,), 5.0)  # a new tensor object: the traced one is gone
    with pytest.warns(RuntimeWarning, match="no longer exists"):
        np.testing.assert_array_equal(f(lz.ones(3)).numpy(), np.full(3, 5.0))
    assert "no longer exists" in f.capture_stats()["last_reason"]
    for _ in range(3):
        np.testing.assert_array_equal(f(lz.ones(3)).numpy(), np.full(3, 5.0))
    assert f.capture_stats()["replays"] >= 2


def test_state_updated_in_place_outside_the_function_is_read_by_the_replay():
    w = lz.ones(3)

    @lz.capture
    def f(x):
        return x * w

    for _ in range(3):
        f(lz.ones(3))
    w.mul_(4)  # pending IR: computed before the replay reads it
    np.testing.assert_array_equal(f(lz.ones(3)).numpy(), np.full(3, 4.0))
    assert f.capture_stats()["replays"] == 2


def test_grad_dropped_outside_the_step_is_traced_again_and_set():
    model, opt, step_fn = make_trainer("sgd")

    def step(x, y):
        loss = nn.CrossEntropyLoss()(model(x), y)
        loss.backward()
        opt.step()
        return loss

    captured = lz.capture(step)
    m_ref, o_ref, _ = make_trainer("sgd")

    def ref(x, y):
        loss = nn.CrossEntropyLoss()(m_ref(x), y)
        loss.backward()
        o_ref.step()
        return loss

    for x, y in batches(6):
        opt.zero_grad()   # outside the function: .grad becomes None every step
        o_ref.zero_grad()
        assert float(captured(x, y)) == float(ref(x, y))
        assert all(p.grad is not None for p in model.parameters())
    for k, v in state_of(m_ref).items():
        np.testing.assert_array_equal(state_of(model)[k], v)


def test_dropout_masks_advance_between_replays_and_follow_manual_seed():
    def losses_with(seed_again):
        _, opt, step = make_trainer("sgd", dropout=True)
        captured = lz.capture(step)
        data = batches(6)
        out = run(captured, opt, data[:3])
        if seed_again:
            lz.manual_seed(123)
        return out + run(captured, opt, data[3:])

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reseeding keeps the key tensor: replays go on
        a = losses_with(True)
        b = losses_with(True)
    assert a == b  # deterministic, the reseed included
    _, opt, plain = make_trainer("sgd", dropout=True)
    data = batches(6)
    want = run(plain, opt, data[:3])
    lz.manual_seed(123)
    want += run(plain, opt, data[3:])
    assert a == want


def test_grad_mode_is_part_of_the_signature_and_results_carry_no_history():
    w = lz.ones(3).requires_grad_()

    @lz.capture
    def f(x):
        y = (x * w).sum()
        if y.requires_grad:
            y.backward()
        return y

    for i in range(4):
        out = f(lz.ones(3))
        np.testing.assert_array_equal(w.grad.numpy(), np.full(3, i + 1.0))  # accumulates
        assert not out.requires_grad  # traced or replayed alike: backward belongs inside
        with lz.no_grad():
            f(lz.ones(3))
        np.testing.assert_array_equal(w.grad.numpy(), np.full(3, i + 1.0))
    assert f.capture_stats()["replays"] >= 3


def test_structured_arguments_and_results():
    @lz.capture
    def f(batch, *, scale=1.0):
        return {"sum": (batch["x"] + batch["y"]) * scale, "count": 2, "parts": (batch["x"], None)}

    for i in range(4):
        x = lz.full((2,), float(i))
        out = f({"x": x, "y": lz.ones(2)}, scale=2.0)
        assert out["count"] == 2 and out["parts"][1] is None
        assert out["parts"][0]._id == x._id  # an argument returned is the caller's own tensor
        np.testing.assert_array_equal(out["sum"].numpy(), np.full(2, 2 * (i + 1.0)))
    assert f.capture_stats()["replays"] == 2


def test_unhashable_python_argument_is_a_clear_type_error():
    @lz.capture
    def f(x, opts):
        return x

    with pytest.raises(TypeError, match="hashable"):
        f(lz.ones(2), {1, 2} and [1, 2]) if False else f(lz.ones(2), np.array([1, 2]))


def test_replay_survives_a_cleared_compile_cache():
    @lz.capture
    def f(x):
        return x.exp()

    x = lz.tensor(np.zeros(2, np.float32))
    for _ in range(3):
        f(x)
    lz.debug._clear_compile_cache()
    compiles = counter("UncachedCompile")
    np.testing.assert_array_equal(f(x).numpy(), np.ones(2))
    assert counter("UncachedCompile") == compiles


def test_steady_state_replays_donate_every_buffer_and_hold_memory_flat():
    model, opt, step = make_trainer("adam")
    captured = lz.capture(step)
    x, y = batches(1)[0]
    for _ in range(4):
        captured(x, y)
    lz.wait()
    live = lz.debug.live_tensor_count()
    donated = counter("InputOutputAliasCount")
    for _ in range(10):
        captured(x, y)
    lz.wait()
    assert lz.debug.live_tensor_count() == live
    # 4 parameters, and per parameter two moments and the step count
    assert counter("InputOutputAliasCount") - donated == 10 * (4 + 3 * 4)


def test_keeping_every_loss_keeps_each_value():
    _, opt, step = make_trainer("sgd")
    captured = lz.capture(step)
    kept = [captured(x, y) for x, y in batches(8)]
    values = [float(v) for v in kept]
    assert len(set(values)) == len(values)


def test_step_closures_run_after_each_replay():
    @lz.capture
    def f(x):
        return x + 1

    ran = []
    for i in range(5):
        out = f(lz.full((1,), float(i)))
        lz.add_step_closure(lambda o=out: ran.append(o.item()))
        lz.sync()
    assert ran == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_error_in_the_function_propagates_and_capture_still_works():
    fail = [True]

    @lz.capture
    def f(x):
        if fail[0]:
            raise KeyError("boom")
        return x * 3

    with pytest.raises(KeyError):
        f(lz.ones(2))
    fail[0] = False
    for _ in range(4):
        np.testing.assert_array_equal(f(lz.ones(2)).numpy(), np.full(2, 3.0))
    assert f.capture_stats()["replays"] == 2


def test_eager_mode_never_replays():
    @lz.capture
    def f(x):
        return x + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with lz.eager():
            for _ in range(3):
                np.testing.assert_array_equal(f(lz.zeros(2)).numpy(), np.ones(2))
    assert f.capture_stats()["replays"] == 0


# ---- found in review: each pins a case that once gave wrong values or never replayed ----

def test_argument_that_is_also_state_is_never_mixed_up():
    w = lz.ones(3)

    @lz.capture
    def f(x):
        return x + w

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            np.testing.assert_array_equal(f(w).numpy(), np.full(3, 2.0))  # traced: both are w
        np.testing.assert_array_equal(f(lz.zeros(3)).numpy(), np.ones(3))
        for _ in range(3):
            np.testing.assert_array_equal(f(lz.zeros(3)).numpy(), np.ones(3))
        # replaying with the state itself as the argument refuses and traces
        np.testing.assert_array_equal(f(w).numpy(), np.full(3, 2.0))


def test_replay_never_donates_a_buffer_an_argument_still_reads():
    w = lz.tensor(np.arange(16, dtype=np.float32).reshape(4, 4))

    @lz.capture
    def f(x):
        w.add_(x.T)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            f(lz.tensor(np.eye(4, dtype=np.float32)))
        f(w)  # the state as the argument: w += w.T, symmetric
    got = w.numpy()
    np.testing.assert_array_equal(got, got.T)


def test_python_arguments_with_equal_hashes_are_different_signatures():
    @lz.capture
    def f(x, k):
        return x * k

    for _ in range(3):
        f(lz.ones(2), -1)
    assert hash(-1) == hash(-2)
    np.testing.assert_array_equal(f(lz.ones(2), -2).numpy(), [-2, -2])


def test_returned_state_that_was_replaced_is_traced_again():
    st = {"w": lz.ones(3)}

    @lz.capture
    def f(x):
        return x * st["w"], st["w"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            f(lz.ones(3))
        st["w"] = lz.full((3,), 5.0)
        prod, w = f(lz.ones(3))
    np.testing.assert_array_equal(prod.numpy(), np.full(3, 5.0))
    np.testing.assert_array_equal(w.numpy(), np.full(3, 5.0))


def test_returned_tensor_the_function_also_keeps_is_never_replayed():
    keep = {}

    @lz.capture
    def f(x):
        y = x * 2
        keep["last"] = y
        return y

    with pytest.warns(RuntimeWarning, match="also keeps"):
        for i in range(4):
            f(lz.full((2,), float(i)))
            np.testing.assert_array_equal(keep["last"].numpy(), np.full(2, 2.0 * i))
    assert f.capture_stats()["replays"] == 0


def test_adam_with_two_param_groups():
    lz.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    opt = lz.optim.Adam([{"params": weights, "weight_decay": 0.01}, {"params": biases}], lr=1e-2)

    @lz.capture
    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    losses = [float(step(lz.ones(3, 4))) for _ in range(6)]
    assert losses == sorted(losses, reverse=True)
    assert step.capture_stats()["replays"] >= 2


def test_freezing_a_parameter_is_noticed_by_the_replay():
    model, opt, step = make_trainer("sgd")
    captured = lz.capture(step)
    data = batches(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x, y in data[:3]:
            captured(x, y)
        w = model[0].weight
        w.requires_grad_(False)
        before = w.numpy().copy()
        for x, y in data[3:]:
            captured(x, y)
    np.testing.assert_array_equal(w.numpy(), before)


def test_lr_scheduler_stepped_inside_is_never_replayed():
    data = batches(6)
    results = []
    for capture in (False, True):
        model, opt, step = make_trainer("sgd")
        sched = lz.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)

        def step_and_schedule(x, y):
            loss = step(x, y)
            sched.step()
            return loss

        fn = lz.capture(step_and_schedule) if capture else step_and_schedule
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results.append(run(fn, opt, data))
        if capture:
            assert fn.capture_stats()["replays"] == 0
            assert any("scheduler" in str(c.message) for c in caught)
    assert results[0] == results[1]


def test_zero_grad_outside_the_step_still_replays():
    model, opt, _ = make_trainer("sgd")
    loss_fn = nn.CrossEntropyLoss()

    @lz.capture
    def step(x, y):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    m_ref, o_ref, _ = make_trainer("sgd")
    for x, y in batches(6):
        opt.zero_grad()
        o_ref.zero_grad()
        got = float(step(x, y))
        ref = loss_fn(m_ref(x), y)
        ref.backward()
        o_ref.step()
        lz.sync()
        assert got == float(ref)
        assert all(p.grad is not None for p in model.parameters())
    assert step.capture_stats()["replays"] >= 3
    # Forgetting zero_grad now: the function would accumulate into .grad, so the call is traced.
    x, y = batches(1)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step(x, y)
    assert "accumulate" in step.capture_stats()["last_reason"]


def test_write_into_a_view_argument_reaches_its_base():
    base = lz.zeros(4)

    @lz.capture
    def f(x):
        x.add_(1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            f(base[0:2])
    np.testing.assert_array_equal(base.numpy(), [3, 3, 0, 0])


def test_many_signatures_warn_once():
    @lz.capture
    def f(x, k):
        return x + k

    with pytest.warns(RuntimeWarning, match="different signatures"):
        for k in range(20):
            f(lz.ones(1), k)


def test_argument_overwritten_without_being_read_is_written_back():
    @lz.capture
    def reset(x, v):
        x.fill_(v)
        return x

    for i in range(5):
        t = lz.tensor(np.arange(3, dtype=np.float32))
        out = reset(t, 7.0)
        np.testing.assert_array_equal(t.numpy(), np.full(3, 7.0))
        assert out._id == t._id
    assert reset.capture_stats()["replays"] == 3


# ---- found in the second review ----

def test_manual_seed_inside_the_function_is_never_replayed():
    def draws(capture):
        def f(x):
            lz.manual_seed(7)
            return x + lz.rand(3)
        g = lz.capture(f) if capture else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = []
            for _ in range(5):
                out.append(g(lz.zeros(3)).numpy().tolist())
                lz.sync()
        return out, (g.capture_stats() if capture else None)

    plain, _ = draws(False)
    captured, stats = draws(True)
    assert captured == plain
    assert stats["replays"] == 0 and "manual_seed" in stats["last_reason"]


@pytest.mark.parametrize("zero_inside", [True, False])
def test_returned_and_kept_grads_match_plain_python(zero_inside):
    def run_it(capture):
        w = lz.zeros(2).requires_grad_()

        def f(x):
            if zero_inside:
                w.grad = None
            (w * x).sum().backward()
            return w.grad

        g = lz.capture(f) if capture else f
        returned, history = [], []
        for i in range(5):
            if not zero_inside:
                w.grad = None
            returned.append(g(lz.full((2,), float(i))))
            history.append(w.grad)
            lz.sync()
        return [r.numpy().tolist() for r in returned], [h.numpy().tolist() for h in history], g

    plain_r, plain_h, _ = run_it(False)
    cap_r, cap_h, g = run_it(True)
    assert cap_r == plain_r
    assert cap_h == plain_h
    assert g.capture_stats()["replays"] >= 2


def test_returned_tensor_with_a_kept_view_is_never_replayed():
    kept = {}

    @lz.capture
    def f(x):
        y = x * 2
        kept["head"] = y[0:1]
        return y

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(4):
            f(lz.full((3,), float(i)))
            assert kept["head"].numpy().tolist() == [2.0 * i]
    assert f.capture_stats()["replays"] == 0


def test_requires_grad_set_on_an_argument_reaches_the_callers_tensor():
    w = lz.tensor([1.0, -2.0, 3.0])

    @lz.capture
    def input_grad(x):
        x.requires_grad_()
        (x * w).sum().backward()
        return x.grad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            x = lz.ones(3)
            g = input_grad(x)
            assert x.requires_grad
            assert x.grad.numpy().tolist() == [1.0, -2.0, 3.0]
            assert g.numpy().tolist() == [1.0, -2.0, 3.0]
    assert input_grad.capture_stats()["replays"] == 0


def test_negative_zero_argument_is_its_own_signature():
    @lz.capture
    def f(x, z):
        return x / z

    for _ in range(3):
        assert f(lz.ones(1), 0.0).numpy()[0] == np.inf
    assert f(lz.ones(1), -0.0).numpy()[0] == -np.inf


def test_failed_argument_raises_once_at_the_call():
    @lz.capture
    def f(x):
        return x * 2

    bad = lz.arange(3).index_select(0, lz.tensor([10]) + 0)  # fails when it runs
    lz.sync()
    with pytest.raises(lz.ExecutionError):
        f(bad)
    lz.sync()  # the error was reported at the call: not again here
    np.testing.assert_array_equal(f(lz.ones(2)).numpy(), [2, 2])
