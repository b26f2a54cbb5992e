"""Shared fixtures for the lazuli Python tests.

Every test starts from a quiet runtime: no pending or in-flight work, eager mode off, and zeroed
counters, metrics and cut log, so that counter assertions can be exact.
"""
import gc
import importlib.util

import numpy as np
import pytest

import lazuli as lz

# The PyTorch front ends' tests (tests/python/torch_frontend) need PyTorch 2, which scripts/test.sh
# installs; without it they are not collected and the core suite still runs. (One conftest for the
# whole tree: a second one in a subfolder would shadow this module's helpers for `from conftest
# import ...`.)
if importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["torch_frontend/*"]


@pytest.fixture
def fresh_dynamo():
    """For torch.compile tests (`pytestmark = pytest.mark.usefixtures("fresh_dynamo")`): dynamo's
    caches, guards and compiled frames emptied before and after each test."""
    import torch._dynamo
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def counter(name):
    """The current value of a lazuli debug counter (0 when never bumped)."""
    return lz.debug.counter_value(name)


def on_backend(name, fn):
    """fn() with backend `name` active (its work finished before the previous one comes back)."""
    original = lz.backend()
    lz._C._set_backend(name)
    try:
        return fn()
    finally:
        lz.wait()
        lz._C._set_backend(original)


def fallback_counts(ops=None):
    """The nonzero `fallback::<op>` counters (reference kernels the cpu backend ran), of `ops`
    or of every op."""
    names = (["fallback::" + op for op in ops] if ops is not None else
             [k for k in lz.debug.counter_names() if k.startswith("fallback::")])
    return {k.split("::", 1)[1] if ops is not None else k: counter(k)
            for k in names if counter(k)}


def train_steps(make_model, make_batch, opt_cls, steps=3, seed=0, lr=0.05):
    """Losses and final weights (numpy) of `steps` training steps (cross entropy, a sync each):
    the model from make_model() after lz.manual_seed(seed), batch s from make_batch(s)."""
    from lazuli.nn import functional as F
    lz.manual_seed(seed)
    model = make_model()
    opt = opt_cls(model.parameters(), lr=lr)
    losses = []
    for s in range(steps):
        x, y = make_batch(s)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        lz.sync()
        losses.append(loss.item())
    return losses, {k: v.numpy().copy() for k, v in model.state_dict().items()}


def raises_without_leak(exc, fn, *match):
    """fn() raises exc, its message holds every string of `match`, and no tensor was left alive."""
    gc.collect()
    before = lz.debug.live_tensor_count()
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for m in match:
        assert m in msg, f"{m!r} not in {msg!r}"
    del info
    gc.collect()
    assert lz.debug.live_tensor_count() == before
    return msg


def executions():
    """Programs scheduled so far: every execution does exactly one compile-cache lookup."""
    return counter("CachedCompile") + counter("UncachedCompile")


def _drain():
    """Finishes whatever an earlier test left behind; an async error left over is dropped."""
    for _ in range(2):
        try:
            lz.sync(wait=True)
            lz.wait()
            return
        except lz.Error:
            continue


def pytest_collection_finish(session):
    # fresh_runtime's gc.collect() before every test walks every object the collector tracks.
    # Those alive once the tests are collected (the modules imported: torch alone is ~190,000
    # objects, test_opinfo's cases with op_db ~300,000 more; the core suite's ~70,000) are not
    # garbage a test leaves behind, yet walking them made each collection cost 0.2-0.6 s in the
    # torch suite. Frozen (moved to the permanent generation), they are skipped: a collection
    # walks only what was allocated since, which is where a test's leftovers are.
    gc.collect()
    gc.freeze()


_frozen_at = [None]  # the test file whose first test last froze the collector's objects


@pytest.fixture(autouse=True)
def fresh_runtime(request):
    lz.eager_mode(False)
    gc.collect()
    # The same at each test file's first test: what the files before it imported or built to last
    # (transformers' and torchvision's modules, dynamo's state: 400,000 objects after the
    # transformers tests) survives this collection, and walking it made every later test's
    # collection cost 0.35 s. Frozen objects are still freed by reference counting; only a cycle
    # among them is never collected.
    if request.node.fspath != _frozen_at[0]:
        gc.freeze()
        _frozen_at[0] = request.node.fspath
    _drain()
    lz.debug.explain_recompiles(False)
    lz.debug.clear_counters()
    lz.debug.clear_metrics()
    lz.debug.clear_recent_cuts()
    yield
    lz.eager_mode(False)


@pytest.fixture(params=["cpu", "interp"])
def backend(request):
    """Runs the test once on each backend (the compiled one and the reference)."""
    original = lz.backend()
    lz._C._set_backend(request.param)
    yield request.param
    _drain()
    lz._C._set_backend(original)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
