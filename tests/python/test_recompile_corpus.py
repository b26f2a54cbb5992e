"""The recompile corpus: twelve classic reasons a lazy training loop compiles again, one test each,
asserting the explanation names the true cause; and the negative, a steady loop explains nothing.
"""
import numpy as np
import pytest

import lazuli as lz

from conftest import counter


@pytest.fixture(autouse=True)
def explain():
    lz.debug._clear_compile_cache()
    lz.debug.clear_recompile_history()
    lz.debug.explain_recompiles(True)
    yield
    lz.debug.explain_recompiles(False)


def compiles():
    return [c for c in lz.debug.recent_cuts() if c["compiled"]]


def last_compile():
    c = compiles()
    assert c, lz.debug.recent_cuts()
    return c[-1]


def batch(n, width=4, dtype=np.float32):
    return lz.tensor(np.ones((n, width), dtype))


W = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)


def loss_of(x, w):
    return (x @ w).relu().sum()


def train_steps(batches, w):
    for x in batches:
        loss = loss_of(x, w)
        lz.sync()
        del loss


def test_changed_batch_size():
    w = lz.tensor(W)
    train_steps([batch(32), batch(32), batch(16)], w)
    c = last_compile()
    assert c["cause"] == "input-shape" and "[32, 4] to float32[16, 4]" in c["explanation"], c


def test_ragged_last_batch():
    data = np.ones((70, 4), np.float32)
    w = lz.tensor(W)
    train_steps([lz.tensor(data[i:i + 32]) for i in range(0, 70, 32)], w)  # 32, 32, 6
    c = last_compile()
    assert c["cause"] == "input-shape" and "[6, 4]" in c["explanation"], c


def test_sequence_length_that_changes():
    emb = lz.tensor(np.ones((10, 3), np.float32))
    for length in (5, 5, 7):
        ids = lz.tensor(np.arange(length) % 10)
        out = emb.index_select(0, ids).sum()
        lz.sync()
        del out
    c = last_compile()
    assert c["cause"] == "input-shape" and "int64[5] to int64[7]" in c["explanation"], c


def test_tensor_kept_alive_in_a_list_across_steps():
    w = lz.tensor(W)
    x = batch(8)
    history = []
    for step in range(4):
        loss = loss_of(x, w)
        if step >= 2:
            history.append(loss * 1.0)  # pending work kept alive across the barrier
        lz.sync()
    c = last_compile()
    assert c["cause"] == "new-live-tensor", c
    assert "more tensor(s) alive" in c["explanation"], c


def test_print_inside_the_step(capsys):
    w = lz.tensor(W)
    x = batch(8)
    for step in range(3):
        h = (x @ w).relu()
        if step == 2:
            print(h.sum())  # a read in the middle of the step
        loss = h.sum() * 2.0
        lz.sync()
    reads = [c for c in lz.debug.recent_cuts() if c["reason"] == "value-read"]
    assert reads and reads[-1]["compiled"], lz.debug.recent_cuts()
    assert reads[-1]["cause"] == "new-call-site", reads[-1]  # the print line compiles its own graph
    assert "first compile at this call site" in reads[-1]["explanation"]
    del loss


def test_item_used_in_python_control_flow():
    w = lz.tensor(W)
    x = batch(8)
    for step in range(3):
        loss = loss_of(x, w)
        if loss.item() > 1e9:  # Python control flow on a value: a read every step
            break
        lz.sync()
    reads = [c for c in lz.debug.recent_cuts() if c["reason"] == "value-read"]
    assert len(reads) == 3
    assert reads[0]["cause"] == "new-call-site"
    assert not any(r["compiled"] for r in reads[1:])  # the same read graph is reused


def test_new_dtype():
    w = lz.tensor(W.astype(np.float64))
    for dt in (np.float64, np.float64, np.float32):
        x = lz.tensor(np.ones((4, 4), dt)).double()
        out = (x @ w).sum()
        lz.sync()
        del out, x
    w32 = lz.tensor(W)
    for dt in (np.float32, np.float64):
        x = lz.tensor(np.ones((4, 4), dt))
        out = (x.float() @ w32).sum()
        lz.sync()
    c = last_compile()
    assert c["cause"] == "input-dtype" and "float32[4, 4] to float64[4, 4]" in c["explanation"], c


def test_different_parameter_aliasing():
    a, b = lz.tensor([1.0, 2.0]), lz.tensor([3.0, 4.0])

    def f(p, q):
        return (p * q).sum().item()

    f(a, b)
    f(a, a)
    c = last_compile()
    assert c["cause"] == "aliasing", c


def sgd_step(w, g):
    w -= 0.1 * g
    lz.sync()  # one call site for every step


def test_changed_donation_set():
    w = lz.tensor(W)
    g = lz.tensor(np.full((4, 2), 0.5, np.float32))
    for _ in range(3):
        sgd_step(w, g)
    view = w[0:2]
    view.tolist()  # the view keeps the old buffer's node: w's buffer cannot be donated next step
    sgd_step(w, g)
    c = last_compile()
    assert c["cause"] == "donation", c
    assert "donated buffers changed" in c["explanation"]


def test_learning_rate_baked_as_a_constant_by_mistake():
    w = lz.tensor(W)
    g = lz.tensor(np.full((4, 2), 0.5, np.float32))
    for lr in (0.1, 0.1, 0.05):
        w -= lz.constant(lr, lz.float32) * g  # should have been: w -= lr * g
        lz.sync()
    c = last_compile()
    assert c["cause"] == "baked-constant", c
    assert "0.1" in c["explanation"] and "0.05" in c["explanation"], c


def test_changed_environment_setting():
    x = batch(4)
    w = lz.tensor(W)
    other = "interp" if lz.backend() == "cpu" else "cpu"
    original = lz.backend()
    try:
        for name in (original, original, other):
            lz._C._set_backend(name)
            loss_of(x, w).item()
    finally:
        lz._C._set_backend(original)
    c = last_compile()
    assert c["cause"] == "environment", c


def test_function_redefined_every_call_is_a_new_call_site():
    x = lz.tensor([1.0, 2.0])
    for k in range(3):
        # A step function generated per call (as some frameworks do): new code, new call site.
        source = f"def step(t):\n    return (t{'.exp()' * (k + 1)}).sum().item()\n"
        namespace = {}
        exec(compile(source, f"<generated step {k}>", "exec"), namespace)
        namespace["step"](x)
    causes = [c["cause"] for c in compiles()]
    assert causes == ["new-call-site"] * 3, lz.debug.recent_cuts()
    assert counter("RecompileReason::new-call-site") == 3


def test_a_loop_that_does_not_recompile_explains_nothing(capfd):
    w = lz.tensor(W)
    g = lz.tensor(np.full((4, 2), 0.5, np.float32))
    for _ in range(3):
        w -= 0.1 * g
        lz.sync()
    capfd.readouterr()
    lz.debug.clear_recent_cuts()
    before = {n: counter(n) for n in lz.debug.counter_names() if n.startswith("RecompileReason::")}
    for _ in range(10):
        w -= 0.1 * g
        lz.sync()
    lz.wait()
    assert not compiles()
    assert all(c["explanation"] == "" for c in lz.debug.recent_cuts())
    after = {n: counter(n) for n in lz.debug.counter_names() if n.startswith("RecompileReason::")}
    assert before == after
    assert "[lazuli] compile" not in capfd.readouterr().err


def test_eager_20_op_loop_compiles_once_per_distinct_op_then_never():
    x = lz.tensor(np.linspace(0.1, 1.0, 8, dtype=np.float32))
    ops = [lambda t: t * 2.0, lambda t: t + 1.0, lambda t: t.exp(), lambda t: t.sqrt(),
           lambda t: t - 0.5]
    with lz.eager():
        for _ in range(4):  # 4 x 5 = 20 ops
            y = x
            for op in ops:
                y = op(y)
        first = counter("EagerOpCompile")
        for _ in range(4):
            y = x
            for op in ops:
                y = op(y)
    assert first <= len(ops)
    assert counter("EagerOpCompile") == first  # the repeat compiles nothing
    assert counter("EagerOpExecute") == 40


def test_eval_after_training_is_explained_against_the_training_graph_and_its_line():
    w = lz.tensor(W)
    train_steps([batch(32), batch(32)], w)  # compiled at train_steps' sync line
    train_line = [c for c in compiles()][-1]["frames"][0][1]
    out = loss_of(batch(33), w).item()  # an evaluation read at a new line
    c = last_compile()
    assert c["cause"] == "new-call-site", c
    assert "first compile at this call site" in c["explanation"], c
    assert f"compiled at {__file__}:{train_line}" in c["explanation"], c
    assert "float32[32, 4] to float32[33, 4]" in c["explanation"], c
    del out


def test_context_growing_one_token_per_step_is_explained_against_the_step_before():
    emb = lz.tensor(np.linspace(0, 1, 80, dtype=np.float32).reshape(10, 8))
    idx = lz.tensor(np.zeros((1, 1), np.int64))
    explanations = {}
    for _ in range(40):
        h = emb.index_select(0, idx.reshape(-1))
        nxt = (h @ emb.transpose(0, 1))[-1:].argmax(-1).reshape(1, 1)
        idx = lz.cat([idx, nxt], 1)
        lz.sync()
        explanations[idx.shape[1]] = last_compile()["explanation"]
    assert "int64[1, 2] to int64[1, 3]" in explanations[4], explanations[4]
    assert "int64[1, 38] to int64[1, 39]" in explanations[40], explanations[40]


def test_growing_cat_read_each_step_stays_short_and_names_the_growing_input():
    # Reading nxt also materializes idx, whose pending graph reads nxt's interior (the previous
    # idx): a value read computes such siblings once (DESIGN.md section 4), so idx's graph never
    # spans more than two steps, and each new length recompiles for its input's shape.
    emb = lz.tensor(np.linspace(0, 1, 80, dtype=np.float32).reshape(10, 8))
    idx = lz.tensor(np.zeros((1, 1), np.int64))
    states = []
    for _ in range(6):
        h = emb.index_select(0, idx.reshape(-1))
        nxt = (h @ emb.transpose(0, 1))[-1:].argmax(-1).reshape(1, 1)
        idx = lz.cat([idx, nxt], 1)
        nxt.item()
        states.append(lz.debug.tensor_state(idx))
    assert states[1::2] == ["device_data"] * 3, states
    c = last_compile()
    assert c["cause"] == "input-shape", c
    assert "changed from int64[1, 3] to int64[1, 5]" in c["explanation"], c


def test_every_changed_ingredient_is_named():
    w = lz.tensor(W)
    for n, lr in ((8, 0.1), (8, 0.1), (5, 0.05)):
        x = batch(n)
        out = (x @ w * lz.constant(lr, lz.float32)).sum()
        lz.sync()
        del out
    c = last_compile()
    assert "[8, 4] to float32[5, 4]" in c["explanation"], c
    assert "baked constant changed from 0.1 to 0.05" in c["explanation"], c
