"""A value read leaves the live tensors it computed on the way materialized (DESIGN.md section 4).

The sampling loop of a language model grows `idx = lz.cat([idx, nxt], 1)` and reads a value
computed from idx once per token; before this rule every read recomputed the whole chain of cats
(n * (n + 1) / 2 cat executions for n tokens). Counted through ExecutedNode::<op>, never timed.
"""
import gc

import numpy as np
import pytest

import lazuli as lz
import lazuli.nn.functional as F

from conftest import counter, executions

VOCAB, DIM = 11, 4


def _weights():
    rng = np.random.default_rng(7)
    return (rng.standard_normal((VOCAB, DIM)).astype(np.float32),
            rng.standard_normal((DIM, VOCAB)).astype(np.float32))


def _next_token_numpy(idx, emb, head):
    logits = emb[idx[0]].sum(0) @ head
    p = np.exp(logits - logits.max())
    return int(np.argmax(p / p.sum()))


def _sample(n, emb_np, head_np, start=(1, 2, 3)):
    """Greedy sampling as a GPT sampler writes it: probs read each token, idx grown by cat."""
    emb, head = lz.tensor(emb_np), lz.tensor(head_np)
    idx = lz.tensor([list(start)])
    for _ in range(n):
        x = F.embedding(idx, emb)              # [1, T, DIM]
        logits = x.sum(1) @ head               # [1, VOCAB]
        probs = F.softmax(logits, -1)
        nxt = int(np.argmax(probs.numpy()))    # the value read
        idx = lz.cat([idx, lz.tensor([[nxt]])], 1)
    return idx


def _reference(n, emb_np, head_np, start=(1, 2, 3)):
    idx = np.array([list(start)])
    for _ in range(n):
        idx = np.concatenate([idx, [[_next_token_numpy(idx, emb_np, head_np)]]], 1)
    return idx


@pytest.mark.parametrize("n", [5, 20])
def test_sampling_loop_runs_one_cat_per_token(backend, n):
    emb, head = _weights()
    idx = _sample(n, emb, head)
    # Token k's read computes the cat of token k-1 and stores idx; the last cat is computed by
    # the final read below. Quadratic growth would give n * (n + 1) / 2 at this point.
    assert counter("ExecutedNode::cat") == n - 1
    np.testing.assert_array_equal(idx.numpy(), _reference(n, emb, head))
    assert counter("ExecutedNode::cat") == n


def test_sampling_loop_executed_nodes_grow_linearly(backend):
    emb, head = _weights()
    _sample(8, emb, head)
    first = counter("ExecutedNodes")
    lz.debug.clear_counters()
    _sample(16, emb, head)
    # Each token's program has the same size, so twice the tokens run about twice the nodes (the
    # quadratic chain made it about four times).
    assert counter("ExecutedNodes") <= 2 * first + 16


def test_read_materializes_a_held_intermediate_not_a_dropped_one():
    a = lz.tensor([1.0, 2.0])
    held = a * 3.0
    dropped = held + 1.0
    out = (dropped * 2.0).sum()
    del dropped
    gc.collect()
    assert out.item() == 22.0
    assert lz.debug.tensor_state(held) == "device_data"  # held and in the read's graph
    assert counter("ValueReadMaterialized") == 1
    before = executions()
    assert held.tolist() == [3.0, 6.0]
    assert executions() == before  # nothing recomputed


def test_read_leaves_a_held_tensor_outside_its_graph_pending():
    a = lz.tensor([1.0, 2.0])
    other = a * 5.0  # held, but not a producer of what is read
    b = a + 1.0
    assert b.tolist() == [2.0, 3.0]
    assert lz.debug.tensor_state(other) == "ir"
    assert counter("ValueReadMaterialized") == 0


def test_reading_through_a_view_materializes_its_base():
    base = lz.tensor([[1.0, 2.0], [3.0, 4.0]]) * 2.0
    row = base[1]
    assert row.tolist() == [6.0, 8.0]
    assert lz.debug.tensor_state(base) == "device_data"
    assert lz.debug.tensor_state(row) == "view"
    before = executions()
    assert base.tolist() == [[2.0, 4.0], [6.0, 8.0]]
    assert executions() == before


def test_steady_read_loop_compiles_nothing_after_warm_up():
    w = lz.tensor([1.0, -1.0, 0.5])
    for step in range(6):
        if step == 2:
            compiled = counter("UncachedCompile")
        h = w * 2.0           # held across the read: becomes an output each step
        loss = (h * h).sum()
        loss.item()
        w = h * 0.5 + 0.1
        lz.sync()
    assert counter("UncachedCompile") == compiled


def test_read_of_loss_keeps_backward_exact():
    w = lz.tensor([1.0, 2.0, 3.0]).requires_grad_()
    h = w * w          # held, requires grad: materialized with its tape kept
    loss = (h * 3.0).sum()
    assert loss.item() == 42.0
    assert lz.debug.tensor_state(h) == "device_data"
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), [6.0, 12.0, 18.0])


def test_recompile_explanation_of_a_growing_input_names_its_shape():
    lz.debug._clear_compile_cache()  # earlier tests compiled these very graphs
    lz.debug.clear_recompile_history()
    lz.debug.explain_recompiles(True)
    emb, head = _weights()
    _sample(4, emb, head)
    texts = [c["explanation"] for c in lz.debug.recent_cuts() if c["compiled"]]
    grown = [t for t in texts if "int64[1, 4] to int64[1, 5]" in t]
    assert grown, texts
    assert not any("device_data where it was" in t for t in texts), texts


def test_read_computes_a_held_sibling_that_shares_its_graph_and_leaves_no_recompute():
    # Two gradients of one backward: reading the first also stores the second, whose graph reads
    # the same interior (`shared`), so reading it later computes nothing (resnet18's 62 gradients
    # read one by one: one program, not 62 recomputing the backward).
    a = lz.tensor([1.0, 2.0])
    shared = (a * 3.0).exp()
    first = (shared * 2.0).sum()
    second = shared + 1.0
    del shared
    gc.collect()
    np.testing.assert_allclose(first.item(), 2 * (np.exp(3.0) + np.exp(6.0)), rtol=1e-6)
    assert lz.debug.tensor_state(second) == "device_data"
    assert counter("ValueReadMaterialized") == 1
    before = executions()
    np.testing.assert_allclose(second.tolist(), [np.exp(3.0) + 1, np.exp(6.0) + 1], rtol=1e-6)
    assert executions() == before


def test_read_leaves_a_large_sibling_updated_in_place_to_the_barrier():
    # `w -= lr * err` reads w's own old buffer, which the barrier donates to the new w; a read
    # never donates, so computing w there would cost a second copy of it (here 80 KB, over the
    # 64 KiB a read takes on): it stays pending.
    w = lz.tensor(np.ones(20000, np.float32))
    err = w * 2.0 - 1.0
    loss = (err * err).sum()
    w -= 0.1 * err
    assert loss.item() == 20000.0
    assert lz.debug.tensor_state(w) == "ir"
    assert lz.debug.tensor_state(err) == "device_data"  # held, and interior to the read's graph
    assert counter("ValueReadMaterialized") == 1
    lz.sync()
    np.testing.assert_allclose(w.numpy(), np.full(20000, 0.9, np.float32), rtol=1e-6)


def test_read_computes_a_small_sibling_updated_in_place():
    # Batch norm's running mean: updated in place from the batch's mean, which the read computes
    # on the way; left to the barrier, that mean (most of a forward) would be computed again.
    x = lz.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    running = lz.tensor(np.zeros(3, np.float32))  # device data, owned by `running`
    mean = x.mean(0)
    out = ((x - mean) ** 2).sum()
    running.mul_(0.9).add_(0.1 * mean)
    del mean
    gc.collect()
    assert out.item() == 135.0
    assert lz.debug.tensor_state(running) == "device_data"
    before = executions()
    np.testing.assert_allclose(running.tolist(), [0.45, 0.55, 0.65], rtol=1e-6)
    lz.sync()
    assert executions() == before
