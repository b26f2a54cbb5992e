"""Seeing through the runtime: one test per cut reason (with the reported user frame), recompile
explanations, compile guards, eager mode, debug output and graph files."""
import inspect
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lazuli as lz

from conftest import counter

HERE = os.path.abspath(__file__)


def line_here():
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def last_cut():
    cuts = lz.debug.recent_cuts()
    assert cuts, "no execution was recorded"
    return cuts[-1]


def assert_cut(reason, line):
    cut = last_cut()
    assert cut["reason"] == reason, cut
    assert cut["frames"], cut
    file, got_line, _ = cut["frames"][0]
    assert os.path.abspath(file) == HERE
    assert got_line == line, cut


@pytest.fixture(autouse=True)
def fresh_history():
    lz.debug._clear_compile_cache()
    lz.debug.clear_recompile_history()
    yield
    lz.debug.explain_recompiles(False)


def pending():
    return lz.tensor([1.0, 2.0, 3.0]) * 2.5


# ---- one test per cut reason ----------------------------------------------------------------

def test_user_sync_is_reported_at_the_sync_line():
    y = pending()
    lz.sync(); line = line_here()  # noqa: E702
    assert_cut("user-sync", line)
    del y


def test_sync_tensors_is_reported_at_its_line():
    y = pending()
    lz.sync_tensors([y]); line = line_here()  # noqa: E702
    assert_cut("sync-tensors", line)


@pytest.mark.parametrize("read", ["item", "numpy", "tolist", "print", "bool", "float", "if"])
def test_value_read_is_reported_at_the_reading_line(read, capsys):
    y = pending().sum()
    if read == "item":
        y.item(); line = line_here()  # noqa: E702
    elif read == "numpy":
        y.numpy(); line = line_here()  # noqa: E702
    elif read == "tolist":
        y.tolist(); line = line_here()  # noqa: E702
    elif read == "print":
        print(y); line = line_here()  # noqa: E702
    elif read == "bool":
        bool(y); line = line_here()  # noqa: E702
    elif read == "float":
        float(y); line = line_here()  # noqa: E702
    else:
        line = line_here() + 1
        if y > 0:
            pass
    assert_cut("value-read", line)


def test_eager_op_is_reported_at_the_op_line():
    x = lz.tensor([1.0, 2.0])
    with lz.eager():
        y = x * 3.0; line = line_here()  # noqa: E702
    assert_cut("eager-op", line)
    assert lz.debug.tensor_state(y) == "device_data"


def test_compile_region_start_and_end_are_reported_at_the_call():
    leftover = pending()

    @lz.compile(name="double")
    def double(t):
        return t * 2.0

    out = double(lz.tensor([1.0])); line = line_here()  # noqa: E702
    cuts = lz.debug.recent_cuts()
    reasons = [c["reason"] for c in cuts]
    assert reasons[-2:] == ["compile-region-start", "compile-region-end"]
    assert cuts[-1]["name"] == "double"
    for cut in cuts[-2:]:
        assert cut["frames"][0][1] == line
    assert out.tolist() == [2.0]
    del leftover


def test_graph_too_large_is_reported_at_the_op_that_crossed_the_limit():
    old = lz.debug._get_config("max_pending_nodes")
    lz.debug._set_config("max_pending_nodes", 100)
    try:
        x = lz.tensor([0.0])
        for _ in range(150):
            x = x + 1.5; line = line_here()  # noqa: E702
        cut = [c for c in lz.debug.recent_cuts() if c["reason"] == "graph-too-large"]
        assert cut, lz.debug.recent_cuts()
        assert cut[-1]["frames"][0][1] == line
        assert x.item() == pytest.approx(225.0)
    finally:
        lz.debug._set_config("max_pending_nodes", old)


def test_bool_mask_is_reported_as_a_data_dependent_shape():
    x = lz.tensor([1.0, -2.0, 3.0])
    y = x[x > 0]; line = line_here()  # noqa: E702
    cut = [c for c in lz.debug.recent_cuts() if c["reason"] == "data-dependent-shape"][-1]
    assert cut["frames"][0][1] == line
    assert y.tolist() == [1.0, 3.0]


# ---- recompile explanations -----------------------------------------------------------------

def step(x, w):
    return (x @ w).relu().sum().item()


def test_changed_batch_size_is_explained_with_the_tensor_and_its_creation_line():
    lz.debug.explain_recompiles(True)
    w = lz.ones(4, 2)
    step(lz.tensor(np.ones((8, 4), np.float32)), w)
    x = lz.tensor(np.ones((3, 4), np.float32)); created = line_here()  # noqa: E702
    step(x, w)
    cut = last_cut()
    assert cut["cause"] == "input-shape", cut
    assert "float32[8, 4] to float32[3, 4]" in cut["explanation"] or "[3, 4]" in cut["explanation"], cut
    assert f"test_diagnostics.py:{created}" in cut["explanation"], cut
    assert counter("RecompileReason::input-shape") == 1


def test_a_buffer_passed_twice_at_a_new_line_is_explained_against_the_closest_graph():
    lz.debug.explain_recompiles(True)
    c = lz.tensor(np.ones(7, np.float32)); created = line_here()  # noqa: E702
    d = lz.tensor(np.full(7, 2.0, np.float32))
    (c * d).sum().item(); first = line_here()  # noqa: E702
    (c * c).sum().item()  # one buffer where two were: a new line, explained against `first`
    cut = last_cut()
    assert cut["cause"] == "new-call-site", cut
    assert f"compiled at {__file__}:{first}" in cut["explanation"], cut
    assert "alias" in cut["explanation"], cut
    assert f"test_diagnostics.py:{created}" in cut["explanation"], cut
    assert "structure" not in cut["explanation"], cut  # the inputs changed, not the ops


def test_a_tensor_kept_beside_the_step_at_a_new_line_is_named_not_called_a_chain():
    lz.debug.explain_recompiles(True)
    w = lz.tensor(np.ones(9, np.float32))
    lz.sync()
    loss = (w * 3.0).sum()
    lz.sync()
    debug_copy = w * 10.0; created = line_here()  # noqa: E702
    loss = (w * 3.0).sum()
    lz.sync()
    cut = last_cut()
    assert "more tensor(s) alive" in cut["explanation"], cut
    assert f"test_diagnostics.py:{created}" in cut["explanation"], cut
    assert "chain" not in cut["explanation"], cut
    assert debug_copy.shape == (9,) and loss.shape == ()


def test_per_step_losses_kept_alive_are_explained_as_newly_alive_tensors():
    w = lz.tensor([1.0, 2.0])
    lz.sync()
    losses = []
    for i in range(4):
        loss = (w * 3.0).sum()
        if i >= 2:
            losses.append(loss * 1.0)  # a tensor with pending work kept across the barrier
        lz.sync()
    causes = [c["cause"] for c in lz.debug.recent_cuts() if c["compiled"]]
    assert "new-live-tensor" in causes, lz.debug.recent_cuts()


def test_steady_state_loop_explains_nothing_after_warm_up():
    w = lz.tensor([1.0, 2.0])
    lz.sync()
    for _ in range(5):
        w -= 0.1 * (w * 2.0)
        lz.sync()
    before = counter("UncachedCompile")
    for _ in range(5):
        w -= 0.1 * (w * 2.0)
        lz.sync()
    assert counter("UncachedCompile") == before


# ---- guards ---------------------------------------------------------------------------------

def test_full_graph_raises_naming_the_cause_and_the_line_then_the_runtime_works():
    @lz.compile(full_graph=True, name="train_step")
    def train_step(t):
        loss = (t * 2.0).sum()
        print(loss)  # a stray read inside the step
        return loss

    line = inspect.getsourcelines(train_step.__wrapped__)[1] + 3  # the decorator line + 3: print
    with pytest.raises(lz.UnexpectedExecutionError) as e:
        train_step(lz.tensor([1.0, 2.0]))
    assert "value-read" in str(e.value)
    assert f"test_diagnostics.py:{line}" in str(e.value)
    assert "train_step" in str(e.value)
    assert isinstance(e.value, lz.Error)
    assert (lz.tensor([1.0]) + 1.0).item() == 2.0


def test_max_different_graphs_names_the_divergent_node_and_line():
    @lz.compile(max_different_graphs=1)
    def f(t):
        if t.shape[0] > 2:
            return t.exp()
        return t * 3.0

    branch_line = inspect.getsourcelines(f.__wrapped__)[1] + 3
    f(lz.ones(2))
    f(lz.ones(2))
    with pytest.raises(lz.TooManyGraphsError) as e:
        f(lz.ones(4))
    msg = str(e.value)
    assert "diverges at node" in msg
    assert f"test_diagnostics.py:{branch_line}" in msg, msg
    assert (lz.ones(2) * 2.0).tolist() == [2.0, 2.0]


def test_max_different_graphs_allows_up_to_n_graphs():
    @lz.compile(max_different_graphs=2)
    def f(t):
        return t * 2.0

    f(lz.ones(2))
    f(lz.ones(3))
    f(lz.ones(2))
    with pytest.raises(lz.TooManyGraphsError):
        f(lz.ones(5))


# ---- eager mode -------------------------------------------------------------------------------

def test_eager_loop_compiles_each_distinct_op_once():
    x = lz.tensor([1.0, 2.0])
    with lz.eager():
        for _ in range(5):
            y = (x * 2.0).exp()
    assert counter("EagerOpExecute") == 10
    assert counter("EagerOpCompile") == 2
    assert y.tolist() == pytest.approx(np.exp([2.0, 4.0]).tolist(), rel=1e-6)


def test_views_are_not_synced_eagerly():
    x = lz.tensor([[1.0, 2.0], [3.0, 4.0]])
    with lz.eager():
        v = x[0]
    assert lz.debug.tensor_state(v) == "view"


# ---- debug output and graph files (fresh processes: the environment is read at start) --------

def run_script(body, **env):
    script = textwrap.dedent(body)
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", script], env=full_env, capture_output=True,
                          text=True, timeout=120, check=True)


def test_lazuli_debug_1_prints_a_block_per_compile_with_the_user_frame(tmp_path):
    out = run_script("""
        import lazuli as lz
        x = lz.tensor([1.0, 2.0])
        for n in (1, 1):
            y = (x * 3.0).sum()
            y.item()
        """, LAZULI_DEBUG="1")
    assert out.stderr.count("[lazuli] compile") == 1, out.stderr
    assert "cause value-read" in out.stderr
    assert "why it compiled: first compile" in out.stderr
    assert "<string>:6" in out.stderr


def test_lazuli_debug_warns_when_compiles_continue_after_warm_up(tmp_path):
    log = tmp_path / "debug.txt"
    run_script("""
        import lazuli as lz
        for n in range(1, 20):
            x = lz.ones(n)
            (x * 2.0).sum()
            lz.sync()
        """, LAZULI_DEBUG="1", LAZULI_DEBUG_FILE=str(log))
    text = log.read_text()
    assert "warning" in text and "compiles in the" in text, text
    assert "why it compiled: an attribute" in text or "why it compiled: input" in text, text


def test_save_graphs_file_gets_every_cut(tmp_path):
    path = tmp_path / "graphs.txt"
    run_script("""
        import lazuli as lz
        y = lz.tensor([1.0, 2.0]).exp()
        print(lz.debug.graph_hash(y))
        lz.sync()
        """, LAZULI_SAVE_GRAPHS_FILE=str(path))
    text = path.read_text()
    assert "cause user-sync" in text
    assert "exp(" in text
    assert "graph hash:" in text


def test_library_frames_are_recognized_when_the_package_is_reached_through_dotdot(tmp_path):
    # An example that puts "examples/../python" on sys.path: the package's own frames must not be
    # taken for the user's call site.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(lz.__file__)))
    via_dotdot = os.path.join(pkg_parent, "..", os.path.basename(pkg_parent))
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {via_dotdot!r})
        import lazuli as lz
        assert "/../" in lz.__file__, lz.__file__

        @lz.capture
        def f(x):
            return x + 1

        f(lz.ones(2))
        print(lz.debug.recent_cuts()[0]["frames"][0][0])
    """))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("user_script.py"), out.stdout


# ---- the program profile -------------------------------------------------------------------------

def test_program_profile_names_each_program_by_its_line_and_each_step_by_what_it_computes():
    x = lz.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    w = lz.tensor(np.ones((3, 4), np.float32))
    lz.debug.clear_program_profile()
    lz.debug.profile_programs()
    try:
        for _ in range(2):
            lz.tanh(lz.matmul(x, w) + 1.0).numpy(); line = line_here()  # noqa: E702
    finally:
        lz.debug.profile_programs(False)
    rows = lz.debug.program_profile()
    programs = [r for r in rows if r["step"] == -1]
    assert len(programs) == 1, rows
    assert programs[0]["kind"] == "program" and programs[0]["runs"] == 2
    file, _, got_line = programs[0]["label"].rpartition(":")
    assert os.path.abspath(file) == HERE and int(got_line) == line, programs[0]
    steps = {r["kind"]: r for r in rows if r["step"] >= 0}
    assert steps["matmul"]["what"] == "matmul float32[2, 3] x [3, 4] -> float32[2, 4]"
    assert steps["kernel"]["what"].endswith("elementwise: add, tanh -> float32[2, 4]"), steps
    assert all(r["runs"] == 2 for r in rows), rows
    report = lz.debug.program_profile_report()
    assert "1 program(s), 2 run(s)" in report and steps["matmul"]["what"] in report, report
    lz.debug.clear_program_profile()
    assert lz.debug.program_profile() == []


def test_lazuli_profile_programs_writes_the_report_at_exit(tmp_path):
    log = tmp_path / "profile.txt"
    run_script("""
        import lazuli as lz
        x = lz.ones(8)
        for _ in range(3):
            (x * 2.0).exp().sum().item()
        """, LAZULI_PROFILE_PROGRAMS="1", LAZULI_DEBUG_FILE=str(log))
    text = log.read_text()
    assert "[lazuli] program profile: 1 program(s), 3 run(s)" in text, text
    assert "<string>:5" in text and "reduce_sum" in text, text
