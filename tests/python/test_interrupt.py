"""Ctrl-C during a long compile arrives at the next kernel boundary as KeyboardInterrupt, not after
the compile; the interrupted compile records nothing half-made, and the same graph compiles and
runs afterwards; other Python threads run while a value read compiles. Each case runs in a fresh
interpreter with a fresh kernel cache."""
import os
import subprocess
import sys
import textwrap

import pytest

import lazuli as lz

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(lz.__file__)))

# A graph of many kernels with distinct structures: one root per chain of unary ops, each chain a
# different sequence, so no two kernels share a compiled function.
PROGRAM = textwrap.dedent("""
    import os, signal, threading, time, itertools
    import numpy as np
    import lazuli as lz

    OPS = [("sin", np.sin), ("exp", lambda v: np.exp(np.minimum(v, 5))), ("tanh", np.tanh),
           ("cos", np.cos)]

    def build(x):
        outs, refs = [], []
        xs = np.asarray(x.numpy(), np.float64)
        for n in (2, 3):
            for seq in itertools.product(range(len(OPS)), repeat=n):
                y, r = x, xs
                for i in seq:
                    name, ref = OPS[i]
                    y = lz.minimum(y, 5.0) if name == "exp" else y
                    y = getattr(lz, name)(y)
                    r = ref(r)
                outs.append(y)
                refs.append(r)
        return outs, refs

    # Ctrl-C as in an interactive session, whatever this process inherited (a shell running
    # the tests in the background starts it with SIGINT ignored, and Python then keeps that).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    x = lz.rand(64)
    x.numpy()
    lz.sync(wait=True)  # the RNG key's advance (a compiled kernel) too, before counting
    N = len(build(x)[0])
    MODE = os.environ["MODE"]

    def counter():
        return lz.debug.counter_value("KernelCompile")

    def interrupt_after_first_kernel(start):
        while counter() < start + 1:
            time.sleep(0.001)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    calls = []
    if MODE == "graceful":  # a handler that only takes note, as a graceful shutdown does
        signal.signal(signal.SIGINT, lambda *_: calls.append(1))
    start = counter()
    outs, refs = build(x)
    if MODE == "ticker":  # another Python thread, while a value read compiles every kernel
        seen, stop = [], threading.Event()

        def tick():
            while not stop.is_set():
                seen.append(counter())
                time.sleep(0.001)

        total = outs[0].sum()
        for o in outs[1:]:
            total = total + o.sum()
        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        value = total.item()
        end = counter()
        stop.set()
        ticker.join()
        during = [v for v in seen if start < v < end]  # seen while kernels were being compiled
        print("TICKER", end - start, len(during), flush=True)
        assert abs(value - sum(float(r.sum()) for r in refs)) < 1e-2 * len(refs)
    if MODE in ("interrupt", "graceful"):
        threading.Thread(target=interrupt_after_first_kernel, args=(start,), daemon=True).start()
    try:
        lz.sync(wait=True)
        print("FINISHED", counter() - start, N, len(calls),
              lz.debug.counter_value("CompileInterrupted"), flush=True)
    except KeyboardInterrupt:
        print("INTERRUPTED", counter() - start, N, flush=True)
        # The runtime works: the same graph compiles (the kernels left) and runs.
        lz.sync(wait=True)
        print("AGAIN", counter() - start, N, flush=True)
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o.numpy(), r, rtol=1e-4, atol=1e-4)
    print("VALUES_OK", flush=True)
""")


def run(mode, tmp_path):
    env = dict(os.environ, MODE=mode, LAZULI_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = {line.split()[0]: line.split()[1:] for line in p.stdout.splitlines() if line}
    return lines, p.stdout


@pytest.mark.skipif(lz.backend() != "cpu", reason="only the cpu backend compiles kernels")
def test_sigint_during_compile_raises_keyboard_interrupt_between_kernels(tmp_path):
    lines, out = run("interrupt", tmp_path)
    assert "INTERRUPTED" in lines, out
    compiled, n = map(int, lines["INTERRUPTED"])
    assert n >= 80
    # The interrupt arrived kernels before the end, not after the compile (a few may be in
    # flight on the pool's threads when it arrives).
    assert 1 <= compiled < n // 2, out
    # Compiling again finished the rest, and compiled no kernel twice: those finished before the
    # interrupt were kept whole.
    again, _ = map(int, lines["AGAIN"])
    assert again == n, out
    assert "VALUES_OK" in lines, out


@pytest.mark.skipif(lz.backend() != "cpu", reason="only the cpu backend compiles kernels")
def test_compile_without_interrupt_compiles_every_kernel_once(tmp_path):
    """The baseline the interrupt test compares with: the graph has N distinct kernels."""
    lines, out = run("plain", tmp_path)
    compiled, n, _, stopped = map(int, lines["FINISHED"])
    assert compiled == n and stopped == 0, out
    assert "VALUES_OK" in lines, out


@pytest.mark.skipif(lz.backend() != "cpu", reason="only the cpu backend compiles kernels")
def test_sigint_handler_that_returns_lets_the_compile_finish(tmp_path):
    """A SIGINT handler that does not raise is called once, and the sync completes: the stopped
    compile resumes, compiling no kernel twice."""
    lines, out = run("graceful", tmp_path)
    assert "INTERRUPTED" not in lines, out
    compiled, n, calls, stopped = map(int, lines["FINISHED"])
    assert stopped == 1, out  # the compile did stop at the signal, and then resumed
    assert compiled == n and calls == 1, out
    assert "VALUES_OK" in lines, out


@pytest.mark.skipif(lz.backend() != "cpu", reason="only the cpu backend compiles kernels")
def test_other_python_threads_run_while_a_value_read_compiles(tmp_path):
    """A first value read compiles without the GIL: a thread that counts kernels as they are
    compiled sees counts between the read's first and last (with the GIL held it could not run
    until the read returned)."""
    lines, out = run("ticker", tmp_path)
    compiled, during = map(int, lines["TICKER"])
    assert compiled >= 80, out
    assert during >= 1, out
    assert "VALUES_OK" in lines, out


def test_sigint_still_raises_keyboard_interrupt_after_a_compile():
    """The C handler that counts SIGINT during a compile leaves Python's handling intact."""
    import signal
    # Python's own handler, whatever this process inherited (see PROGRAM).
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        a = lz.rand(8)
        (lz.sin(a) * 3 + lz.cos(a)).numpy()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, inherited)
