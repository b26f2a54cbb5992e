"""The cpu backend's compiler from Python: fused programs against numpy, and what
lz.debug.dump_kernels and LAZULI_DEBUG=3 show of the fusion plan.

Kernels compiled in this process go to a temporary persistent cache, not ~/.cache/lazuli: the
runtime reads LAZULI_CACHE_DIR once, at its first use, which comes after test collection."""
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

_CACHE = tempfile.mkdtemp(prefix="lazuli-test-cpu-compiler-")
os.environ["LAZULI_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import lazuli as lz  # noqa: E402
from lazuli import nn  # noqa: E402

from conftest import counter  # noqa: E402

pytestmark = pytest.mark.skipif(lz.backend() != "cpu",
                                reason="tests the cpu backend (LAZULI_BACKEND=cpu, the default)")

PLAN_LINE = re.compile(r"^plan: (\d+) steps \((\d+) kernel launches of (\d+) kernels, (\d+) library calls, "
                       r"(\d+) fallbacks\)")


def plan_counts(tensors):
    """(steps, kernel launches, kernels, library calls, fallbacks) of the pending graph's plan."""
    text = lz.debug.dump_kernels(tensors)
    m = PLAN_LINE.match(text)
    assert m, text
    return tuple(int(g) for g in m.groups()), text


def softmax_np(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---- values against numpy ---------------------------------------------------------------------

@pytest.mark.parametrize("axis", [1, 0])
def test_softmax_matches_numpy(rng, axis):
    x = (rng.standard_normal((64, 100)) * 4).astype(np.float32)
    y = nn.functional.softmax(lz.tensor(x), axis)
    (steps, launches, _, library, fallbacks), text = plan_counts(y)
    assert launches <= 3 and library == 0 and fallbacks == 0, text
    np.testing.assert_allclose(y.numpy(), softmax_np(x, axis), rtol=1e-5, atol=1e-7)


def test_log_softmax_of_large_logits_stays_finite(rng):
    x = (rng.standard_normal((8, 1000)) * 50).astype(np.float32)
    y = nn.functional.log_softmax(lz.tensor(x), 1).numpy()
    xs = x.astype(np.float64)
    ref = xs - xs.max(1, keepdims=True)
    ref = ref - np.log(np.exp(ref).sum(1, keepdims=True))
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-4)


def test_layer_norm_matches_numpy(rng):
    x = (rng.standard_normal((32, 48)) * 3 + 1).astype(np.float32)
    w = rng.standard_normal(48).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    y = nn.functional.layer_norm(lz.tensor(x), 48, lz.tensor(w), lz.tensor(b))
    (_, _, _, library, fallbacks), text = plan_counts(y)
    assert library == 0 and fallbacks == 0, text
    xs = x.astype(np.float64)
    mu = xs.mean(1, keepdims=True)
    var = ((xs - mu) ** 2).mean(1, keepdims=True)
    ref = (xs - mu) / np.sqrt(var + 1e-5) * w + b
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_a_layer_norm_over_the_last_two_dims_matches_numpy(rng):
    x = rng.standard_normal((4, 6, 10)).astype(np.float32)
    y = nn.functional.layer_norm(lz.tensor(x), (6, 10)).numpy()
    xs = x.astype(np.float64)
    mu = xs.mean((1, 2), keepdims=True)
    var = ((xs - mu) ** 2).mean((1, 2), keepdims=True)
    np.testing.assert_allclose(y, (xs - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)


def test_an_mlp_training_step_matches_numpy(rng):
    n, d, h, c, lr = 16, 20, 32, 5, 0.1
    x = rng.standard_normal((n, d)).astype(np.float32)
    t = rng.integers(0, c, n)
    w1 = (rng.standard_normal((h, d)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(h) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((c, h)) * 0.3).astype(np.float32)
    b2 = (rng.standard_normal(c) * 0.1).astype(np.float32)
    params = [lz.tensor(p) for p in (w1, b1, w2, b2)]
    for p in params:
        p.requires_grad_()
    lz.sync()

    hid = nn.functional.relu(nn.functional.linear(lz.tensor(x), params[0], params[1]))
    logits = nn.functional.linear(hid, params[2], params[3])
    loss = nn.functional.cross_entropy(logits, lz.tensor(t))
    loss.backward()
    with lz.no_grad():
        for p in params:
            p -= lr * p.grad
    lz.sync()

    # The same step in float64 numpy.
    xs = x.astype(np.float64)
    z1 = xs @ w1.T + b1
    a1 = np.maximum(z1, 0)
    z2 = a1 @ w2.T + b2
    sm = softmax_np(z2, 1)
    ref_loss = -np.log(sm[np.arange(n), t]).mean()
    g2 = sm.copy()
    g2[np.arange(n), t] -= 1
    g2 /= n
    gw2, gb2 = g2.T @ a1, g2.sum(0)
    g1 = (g2 @ w2) * (z1 > 0)
    gw1, gb1 = g1.T @ xs, g1.sum(0)
    assert loss.item() == pytest.approx(ref_loss, rel=1e-5)
    for p, ref in zip(params, (w1 - lr * gw1, b1 - lr * gb1, w2 - lr * gw2, b2 - lr * gb2)):
        np.testing.assert_allclose(p.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_strided_and_broadcast_operands_match_numpy(rng):
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((9, 1)).astype(np.float32)
    c = rng.standard_normal(33).astype(np.float32)
    y = (lz.tensor(a).transpose(0, 1)[::2, 3:] * lz.tensor(b) + lz.tensor(c)[3:]).exp().sum(0)
    ref = np.exp(a.T[::2, 3:] * b + c[3:]).sum(0)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5)


def test_large_tensors_split_over_the_thread_pool_match_numpy(rng):
    # Far over one parallel chunk (32768 elements), with rows that chunks cut in the middle.
    x = rng.standard_normal((301, 1001)).astype(np.float32)
    t = lz.tensor(x)
    col, row, ew = lz.sum(t * 2, 0), lz.amax(t.exp(), 1), (t.transpose(0, 1) + 1).relu()
    lz.sync()
    np.testing.assert_allclose(col.numpy(), (x * 2).sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(row.numpy(), np.exp(x).max(1), rtol=1e-6)
    np.testing.assert_array_equal(ew.numpy(), np.maximum(x.T + 1, 0))


def test_integer_and_bool_programs_match_numpy(rng):
    a = rng.integers(-1000, 1000, (40, 7)).astype(np.int32)
    b = rng.integers(-5, 5, 7).astype(np.int64)
    ta, tb = lz.tensor(a), lz.tensor(b)
    y = lz.where(ta > 0, ta * tb, -ta).sum(1)
    z = ((ta & 15) ^ 3) | (ta < -500).to(lz.int32)
    np.testing.assert_array_equal(y.numpy(), np.where(a > 0, a * b, -a).sum(1))
    np.testing.assert_array_equal(z.numpy(), ((a & 15) ^ 3) | (a < -500).astype(np.int32))


# ---- dump_kernels: the plan in words -------------------------------------------------------------

def test_dump_kernels_fuses_an_elementwise_chain_into_one_kernel():
    x = lz.tensor(np.linspace(-2, 2, 600, dtype=np.float32).reshape(20, 30))
    y = ((x * 2.5 + 1).tanh() - x).relu().sigmoid() * 3
    (steps, launches, kernels, library, fallbacks), text = plan_counts(y)
    assert (steps, launches, kernels, library, fallbacks) == (1, 1, 1, 0, 0), text
    assert "elementwise" in text
    for op in ("tanh(", "relu(", "sigmoid("):
        assert op in text, text  # one loop body computes every op


def test_dump_kernels_shows_decisions_and_pseudo_c_and_runs_nothing():
    x = lz.tensor(np.ones((16, 40), np.float32))
    y = nn.functional.softmax(x, 1)
    before = counter("KernelCompile"), counter("UncachedCompile"), counter("CachedCompile")
    text = lz.debug.dump_kernels(y)
    assert text.startswith("plan: "), text
    assert "  decision: " in text
    assert "rows with reductions" in text and "(rule 5b)" in text  # one kernel reading x once
    assert "kernels:\n" in text and "void lzk_" in text and "for (int64_t" in text
    assert lz.debug.tensor_state(y) == "ir"
    assert (counter("KernelCompile"), counter("UncachedCompile"), counter("CachedCompile")) == before


def test_dump_kernels_accepts_a_list_of_outputs():
    x = lz.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    (steps, launches, _, _, _), text = plan_counts([x.exp(), x.sum(1)])
    assert launches == 2, text


def test_dump_kernels_shows_a_transposed_operand_read_in_place():
    x = lz.tensor(np.ones((8, 6), np.float32))
    y = lz.tensor(np.ones((6, 8), np.float32))
    (steps, launches, kernels, library, fallbacks), text = plan_counts(x.transpose(0, 1) + y)
    assert (steps, launches) == (1, 1), text
    assert "scratch arena 0 bytes" in text, text


def test_dump_kernels_shows_matmul_as_a_library_call_and_unsupported_ops_as_fallbacks():
    a = lz.tensor(np.ones((4, 8), np.float32))
    w = lz.tensor(np.ones((8, 3), np.float32))
    (_, _, _, library, _), text = plan_counts(lz.relu(a @ w))
    assert library == 1, text
    assert "library call matmul" in text
    i = lz.tensor(np.arange(10))
    (_, _, _, _, fallbacks), text = plan_counts(lz.floor_divide(i, 3) + 1)
    assert fallbacks == 1, text
    assert "fallback" in text


def test_dump_kernels_with_llvm_ir_contains_the_functions():
    x = lz.tensor(np.ones((4, 5), np.float32))
    y = (x.exp() + 1).sum(1)
    before = counter("KernelCompile")
    text = lz.debug.dump_kernels(y, llvm_ir=True)
    assert "define" in text
    names = set(re.findall(r"void (lzk_[0-9a-f]+)\(", text))
    assert names, text
    for name in names:
        assert f"define void @{name}(" in text, name
    assert counter("KernelCompile") == before, "dump_kernels compiled into the caches"
    assert lz.debug.tensor_state(y) == "ir"
    np.testing.assert_allclose(y.numpy(), np.full(4, 5 * (np.e + 1), np.float32), rtol=1e-6)


def test_lazuli_debug_3_prints_the_fusion_plan(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, lazuli as lz
        x = lz.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
        y = (x * 2 + 1).exp().sum(1)
        print(y.numpy().tolist())
        """)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(lz.__file__)))
    env = dict(os.environ, LAZULI_DEBUG="3", LAZULI_CACHE_DIR=str(tmp_path), LAZULI_BACKEND="cpu",
               PYTHONPATH=pkg)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "fusion plan" in out.stderr, out.stderr
    assert "plan: 1 steps (1 kernel launches" in out.stderr, out.stderr
    ref = np.exp(np.arange(12, dtype=np.float32).reshape(3, 4) * 2 + 1).sum(1)
    np.testing.assert_allclose(eval(out.stdout), ref, rtol=1e-5)
