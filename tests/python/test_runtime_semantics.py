"""Runtime semantics seen from Python: compile caching across steps, value reads, step closures,
tensor states, syncs, debug calls that must run nothing, cut records, compile regions, eager mode
and buffer donation."""
import inspect
import os

import numpy as np
import pytest

import lazuli as lz
from conftest import counter, executions
from lazuli import _C

S = lz.debug.tensor_state


def _all_counters():
    return {name: counter(name) for name in lz.debug.counter_names()}


class LinearRegression:
    """y = x @ w_true; fits w with a hand-written gradient, in place: w -= lr * grad."""

    def __init__(self, n=64, d=8, seed=0):
        rng = np.random.default_rng(seed)
        self.n, self.d = n, d
        self.w_true = rng.normal(size=(d, 1)).astype(np.float32)
        self.x = rng.normal(size=(n, d)).astype(np.float32)
        self.w = lz.zeros(d, 1)

    def batch(self):
        """The same values every step (so gradient descent is monotone), in a new array."""
        x = self.x.copy()
        return x, x @ self.w_true

    def step(self, lr, read=None, closure=None):
        x_np, y_np = self.batch()
        x, y = lz.tensor(x_np), lz.tensor(y_np)
        err = x @ self.w - y
        loss = (err * err).mean()
        grad = x.T @ err * (2.0 / self.n)
        self.w -= lr * grad
        if read is not None:
            read(loss)
        if closure is not None:
            lz.add_step_closure(closure, args=(loss,))
        lz.sync()
        return loss


# ---- training loop --------------------------------------------------------------------------------

def test_training_loop_stops_compiling_after_warm_up_and_loss_decreases():
    model = LinearRegression()
    losses = [model.step(0.1) for _ in range(2)]
    compiled = counter("UncachedCompile")
    cached = counter("CachedCompile")
    marks = counter("MarkStep")
    for _ in range(10):
        losses.append(model.step(0.1))
        assert counter("UncachedCompile") == compiled
    # Exactly one program per step, found in the cache.
    assert counter("CachedCompile") == cached + 10
    assert counter("MarkStep") == marks + 10
    values = [loss.item() for loss in losses]
    assert values[-1] < values[0] * 0.05, values
    assert all(b < a for a, b in zip(values, values[1:])), values
    # The same 12 steps in numpy.
    w = np.zeros((model.d, 1))
    x, y = model.batch()
    x, y = x.astype(np.float64), y.astype(np.float64)
    for _ in range(12):
        w -= 0.1 * (x.T @ (x @ w - y) * (2.0 / model.n))
    np.testing.assert_allclose(model.w.numpy(), w, rtol=1e-4, atol=1e-5)


def test_changing_python_float_learning_rate_does_not_recompile():
    model = LinearRegression(seed=1)
    model.step(0.1)
    model.step(0.09)
    compiled = counter("UncachedCompile")
    for i in range(10):
        model.step(0.1 / (1.0 + 0.3 * i) + 1e-3 * i)  # a new value every step, never 0 or 1
    assert counter("UncachedCompile") == compiled


def test_learning_rate_value_is_used_not_baked_in():
    """Two steps from the same w with different lr give different updates (lr is a parameter)."""
    w = lz.tensor([1.0, 2.0])
    g = lz.tensor([0.5, -1.0])
    for lr, expected in [(0.1, [0.95, 2.1]), (0.3, [0.8, 2.4]), (0.5, [0.55, 2.9])]:
        w -= lr * g
        lz.sync()
        np.testing.assert_allclose(w.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("read", [repr, str, print], ids=["repr", "str", "print"])
def test_printing_in_the_loop_compiles_nothing_and_runs_the_step_once(read, capsys):
    model = LinearRegression(seed=2)
    for _ in range(3):
        model.step(0.05, read=read)
    compiled, cached = counter("UncachedCompile"), counter("CachedCompile")
    for _ in range(5):
        model.step(0.05, read=read)
    assert counter("UncachedCompile") == compiled
    # The read computes the loss and, with it, w's small update in place (a sibling: it reads
    # the same error), so the barrier finds nothing left to run.
    assert counter("CachedCompile") - cached == 5
    if read is print:
        out = capsys.readouterr().out
        assert out.count("tensor(") == 8


def test_without_printing_one_execution_per_step():
    model = LinearRegression(seed=2)
    for _ in range(3):
        model.step(0.05)
    before = executions()
    for _ in range(5):
        model.step(0.05)
    assert executions() - before == 5


def test_step_closures_run_after_the_barrier_in_order_and_see_values():
    model = LinearRegression(seed=3)
    for _ in range(3):
        model.step(0.1)
    events = []
    x_np, y_np = model.batch()
    x, y = lz.tensor(x_np), lz.tensor(y_np)
    err = x @ model.w - y
    loss = (err * err).mean()
    expected_loss = float(np.mean((x_np @ model.w.numpy() - y_np) ** 2))
    compiled, cached = counter("UncachedCompile"), counter("CachedCompile")
    lz.add_step_closure(lambda: events.append(("first", lz.debug.tensor_state(loss))))
    lz.add_step_closure(lambda t: events.append(("second", t.item())), args=(loss,))
    lz.add_step_closure(lambda a, b: events.append(("third", a + b)), args=(1, 2))
    assert events == []  # nothing runs before the barrier
    assert S(loss) == "ir"
    lz.sync()
    lz.wait()
    assert [e[0] for e in events] == ["first", "second", "third"]
    assert events[0][1] == "device_data"
    assert events[1][1] == pytest.approx(expected_loss, rel=1e-4)
    assert events[2][1] == 3
    # The closures' reads reuse the barrier's execution.
    assert counter("UncachedCompile") + counter("CachedCompile") == compiled + cached + 1
    # A closure runs once: the next barrier does not run it again.
    lz.sync()
    assert len(events) == 3


def test_step_closure_reads_add_no_execution_in_the_training_loop():
    model = LinearRegression(seed=4)
    seen = []
    for _ in range(3):
        model.step(0.1, closure=lambda t: seen.append(t.item()))
    compiled, before = counter("UncachedCompile"), executions()
    for _ in range(5):
        model.step(0.1, closure=lambda t: seen.append(t.item()))
    lz.wait()
    assert counter("UncachedCompile") == compiled
    assert executions() - before == 5
    assert len(seen) == 8
    assert seen[-1] < seen[0]


def test_add_step_closure_rejects_non_callables():
    with pytest.raises(TypeError):
        lz.add_step_closure(42)


# ---- tensor states ------------------------------------------------------------------------------

def test_tensor_state_transitions():
    t = lz.tensor([1.0, 2.0, 3.0])
    assert S(t) == "host"
    u = t * 2.0
    assert S(u) == "ir"
    assert S(t) == "device_data"  # uploaded on first use in a graph
    lz.sync()
    assert S(u) == "device_data"
    u += 1.0
    assert S(u) == "ir"
    lz.sync(wait=True)
    assert S(u) == "device_data"
    np.testing.assert_array_equal(u.numpy(), [3.0, 5.0, 7.0])
    v = u[1:]
    assert S(v) == "view"
    assert S(u.T) == "view"
    assert S(u.reshape(3, 1)) == "view"
    assert S(u.unsqueeze(0)) == "view"
    assert S(u[0]) == "view"
    np.testing.assert_array_equal(v.numpy(), [5.0, 7.0])
    assert S(v) == "view"  # a view is never synced itself
    w = u + 0.5
    assert S(w) == "ir"
    w.numpy()
    assert S(w) == "device_data"  # a value read stores the result


def test_value_read_computes_once():
    t = lz.tensor([1.0, 2.0]) * 3.0
    before = executions()
    assert t.tolist() == [3.0, 6.0]
    assert t.tolist() == [3.0, 6.0]
    assert repr(t) == "tensor([3., 6.])"
    assert executions() == before + 1
    # A view is computed from its base when read, not stored: one small program.
    assert float(t[1]) == 6.0
    assert executions() == before + 2


def test_in_place_through_a_view_makes_the_base_ir():
    base = lz.tensor([[1.0, 2.0], [3.0, 4.0]])
    lz.sync()
    base[0].fill_(0.0)
    assert S(base) == "ir"
    lz.sync()
    assert S(base) == "device_data"
    np.testing.assert_array_equal(base.numpy(), [[0.0, 0.0], [3.0, 4.0]])


# ---- syncs ----------------------------------------------------------------------------------------

def test_sync_wait_and_wait():
    a = lz.tensor(np.arange(6, dtype=np.float32))
    b = (a + 1.0) * 2.0
    lz.sync(wait=True)
    assert S(b) == "device_data"
    before = executions()
    np.testing.assert_array_equal(b.numpy(), (np.arange(6) + 1.0) * 2.0)
    assert executions() == before  # already computed
    c = b - 1.0
    lz.sync()
    lz.wait()
    lz.wait()  # nothing left to wait for: returns at once
    np.testing.assert_array_equal(c.numpy(), (np.arange(6) + 1.0) * 2.0 - 1.0)


def test_sync_counts_a_mark_step_even_with_nothing_pending():
    lz.sync()
    lz.sync()
    assert counter("MarkStep") == 2
    assert executions() == 0


def test_sync_tensors_syncs_only_those_tensors():
    a = lz.tensor([1.0, 2.0])
    t = a * 3.0
    u = a + 5.0
    lz.sync_tensors([t])
    assert S(t) == "device_data"
    assert S(u) == "ir"
    assert executions() == 1
    lz.sync_tensors([u], wait=True)
    assert S(u) == "device_data"
    np.testing.assert_array_equal(t.numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(u.numpy(), [6.0, 7.0])
    assert executions() == 2


# ---- debug calls run nothing ----------------------------------------------------------------------

def test_graph_hash_and_dump_graph_run_nothing():
    a = lz.tensor([1.0, 2.0, 3.0])
    b = lz.exp(a) * 2.0 + a
    lz.sync(wait=True)  # a and b are device data; now record pending work
    c = (b * 3.0).sum()
    d = b - 1.0
    before_counters = _all_counters()
    before_cuts = len(lz.debug.recent_cuts())
    h = lz.debug.graph_hash([c, d])
    h2 = lz.debug.graph_hash([c, d])
    text = lz.debug.dump_graph([c, d])
    dot = lz.debug.dump_graph(c, fmt="dot")
    lz.debug.graph_hash(c)
    assert _all_counters() == before_counters
    assert len(lz.debug.recent_cuts()) == before_cuts
    assert S(c) == "ir" and S(d) == "ir"
    assert h == h2 and isinstance(h, str)
    int(h, 16)  # hex
    assert "sum" in text and "mul" in text
    assert "digraph" in dot
    # The hash is the one the sync of these tensors looks up.
    lz.sync_tensors([c, d])
    assert lz.debug.recent_cuts()[-1]["graph_hash"] == h


def test_graph_hash_ignores_buffers_and_scalar_values_but_not_shapes():
    x1 = lz.tensor([1.0, 2.0]) * 0.25
    x2 = lz.tensor([5.0, 6.0]) * 0.75
    x3 = lz.tensor([5.0, 6.0, 7.0]) * 0.75
    assert lz.debug.graph_hash([x1]) == lz.debug.graph_hash([x2])
    assert lz.debug.graph_hash([x1]) != lz.debug.graph_hash([x3])
    assert executions() == 0


def test_metrics_report_names_counters():
    (lz.tensor([1.0]) + 2.0).item()
    report = lz.debug.metrics_report()
    assert "UncachedCompile" in report
    assert "UncachedCompile" in lz.debug.short_metrics_report()
    assert lz.debug.counter_value("NoSuchCounterEver") == 0
    assert lz.debug.metric_data("NoSuchMetricEver") is None


# ---- cut records ----------------------------------------------------------------------------------

def test_recent_cut_names_the_user_frame_of_the_value_read():
    t = lz.tensor([1.0, 2.0]) * 4.0
    line = inspect.currentframe().f_lineno + 1
    value = t.tolist()
    assert value == [4.0, 8.0]
    cut = lz.debug.recent_cuts()[-1]
    assert cut["reason"] == "value-read"
    file, lineno, function = cut["frames"][0]
    assert os.path.abspath(file) == os.path.abspath(__file__)
    assert lineno == line
    assert function == "test_recent_cut_names_the_user_frame_of_the_value_read"


def test_recent_cut_of_a_read_inside_a_helper_names_the_helper_line():
    def helper(x):
        return x.item()  # the read

    t = lz.tensor([3.0]).sum() * 2.0
    assert helper(t) == 6.0
    file, lineno, function = lz.debug.recent_cuts()[-1]["frames"][0]
    src_line = inspect.getsource(helper).splitlines()[1]
    assert "the read" in src_line
    assert function == "helper"
    assert lineno == helper.__code__.co_firstlineno + 1
    assert os.path.abspath(file) == os.path.abspath(__file__)


def test_recent_cut_records_sync_reason_and_sizes():
    a = lz.tensor([1.0, 2.0])
    b = a * 3.0 + 1.5
    lz.sync()
    cut = lz.debug.recent_cuts()[-1]
    assert cut["reason"] == "user-sync" or "sync" in cut["reason"]
    assert cut["outputs"] >= 1 and cut["inputs"] >= 1 and cut["nodes"] >= 3
    assert cut["compiled"] is True
    assert b.tolist() == [4.5, 7.5]


# ---- compile regions ------------------------------------------------------------------------------

def test_compile_syncs_before_and_after_the_function():
    @lz.compile
    def double_plus(x):
        assert S(pending) == "device_data"  # the region-start sync ran before fn
        return x * 2.0 + 1.0

    a = lz.tensor([1.0, 2.0])
    pending = a - 1.0
    out = double_plus(a)
    assert S(out) == "device_data"
    reasons = [c["reason"] for c in lz.debug.recent_cuts()]
    assert reasons[-2:] == ["compile-region-start", "compile-region-end"]
    np.testing.assert_array_equal(out.numpy(), [3.0, 5.0])
    assert double_plus.__name__ == "double_plus"


def test_compile_with_arguments_and_repeated_calls_reuse_the_program():
    @lz.compile(name="affine")
    def affine(x, scale):
        return x * scale + 1.0

    x = lz.tensor([1.0, 2.0, 3.0])
    affine(x, 2.0)
    compiled = counter("UncachedCompile")
    for s in (3.0, 4.0, 5.0):
        out = affine(x, s)
        np.testing.assert_allclose(out.numpy(), np.array([1.0, 2.0, 3.0]) * s + 1.0)
    assert counter("UncachedCompile") == compiled


# ---- eager mode -----------------------------------------------------------------------------------

def test_eager_context_runs_each_op_at_once():
    a = lz.tensor([1.0, 4.0, 9.0])
    with lz.eager():
        b = lz.sqrt(a)
        assert S(b) == "device_data"
        c = b + 1.0
        assert S(c) == "device_data"
        assert counter("EagerOpExecute") == 2
    d = c * 2.0
    assert S(d) == "ir"  # eager mode is off again after the block
    assert counter("EagerOpExecute") == 2
    np.testing.assert_array_equal(d.numpy(), [4.0, 6.0, 8.0])


def test_eager_mode_switch_and_cached_eager_programs():
    a = lz.tensor([1.0, 2.0])
    lz.eager_mode(True)
    try:
        b = a * 3.0
        assert S(b) == "device_data"
        first_compiles = counter("EagerOpCompile")
        for s in (4.0, 5.0, 6.0):
            b = a * s
        assert counter("EagerOpExecute") == 4
        assert counter("EagerOpCompile") == first_compiles  # each op is its own cached program
    finally:
        lz.eager_mode(False)
    assert S(a * 2.0) == "ir"
    np.testing.assert_array_equal(b.numpy(), [6.0, 12.0])


def test_eager_context_restores_on_exception():
    with pytest.raises(ZeroDivisionError):
        with lz.eager():
            1 / 0
    assert S(lz.tensor([1.0]) + 1.0) == "ir"


# ---- device and backend -------------------------------------------------------------------------

def test_backend_and_device_count():
    assert lz.backend() in ("cpu", "interp")
    assert lz.device_count() == 1


# ---- donation -------------------------------------------------------------------------------------

def test_training_loop_donates_the_weight_buffer_at_barriers():
    model = LinearRegression(seed=5)
    for _ in range(2):
        model.step(0.1)
    aliased = counter("InputOutputAliasCount")
    for _ in range(4):
        model.step(0.1)
    # w's old buffer is reused for its new value at every barrier (only w is overwritten), no
    # matter whether the previous step's program is still running.
    assert counter("InputOutputAliasCount") == aliased + 4


def test_barrier_donates_even_while_the_producing_program_has_not_finished():
    # The executor is held, so the program writing w certainly has not run when the next barrier
    # decides: donation follows use counts, never the producer's progress.
    w = lz.zeros(64, 1)
    donated = []
    for _ in range(3):
        lz.wait()
        _C.debug._hold_executor()
        try:
            w -= 0.01 * (w - 1.0)
            lz.sync()
            before = counter("InputOutputAliasCount")
            w -= 0.01 * (w - 1.0)
            lz.sync()
            donated.append(counter("InputOutputAliasCount") - before)
        finally:
            _C.debug._release_executor()
    lz.wait()
    assert donated == [1, 1, 1]
    np.testing.assert_allclose(w.numpy(), 1.0 - 0.99**6, rtol=1e-5)


def test_value_read_never_donates():
    a = lz.tensor([1.0, 2.0])
    lz.sync()
    a += 1.0
    before = counter("InputOutputAliasCount")
    assert a.tolist() == [2.0, 3.0]
    assert a.tolist() == [2.0, 3.0]
    assert counter("InputOutputAliasCount") == before
