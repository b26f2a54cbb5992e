"""Recording one elementwise op from Python: `c = a + b` on small tensors, no sync.

Baselines measured in the same run, alternating A and B rounds (MACHINE.md: the machine is
noisy): numpy doing the add eagerly, and, where Debian's python3-torch is installed, PyTorch eager
and PyTorch's own lazy tensor backend (torch._lazy, TorchScript backend). Prints the median time
per op of each and the ratios. Run: PYTHONPATH=python /usr/bin/python3 bench/python_record_bench.py

With --indexing, records `x[i]`, `x[:, 1:3]` and `x[idx]` (idx: an int64 tensor holding device
data) instead; --baseline DIR measures the same statements, in alternating rounds, with the
`lazuli` package found in DIR (an older build, e.g. a checkout's python/ before a change), in a
child process per round.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit

os.environ.setdefault("LAZULI_MAX_PENDING_NODES", str(1 << 40))  # no automatic cut mid-run
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # MACHINE.md: idle OpenMP threads spin

import numpy as np  # noqa: E402

import lazuli as lz  # noqa: E402

N = 200_000
ROUNDS = 7


def per_op_ns(stmt, env):
    return timeit.timeit(stmt, globals=env, number=N) / N * 1e9


def candidates():
    a, b = lz.rand(16), lz.rand(16)
    lz.sync(wait=True)
    yield "lazuli (record a + b)", {"a": a, "b": b}
    yield "numpy (compute a + b)", {"a": np.random.rand(16).astype(np.float32),
                                    "b": np.random.rand(16).astype(np.float32)}
    try:
        import torch
    except ImportError:
        print("python3-torch is not installed: PyTorch rows skipped", file=sys.stderr)
        return
    torch.set_num_threads(1)
    yield f"torch {torch.__version__} eager (compute a + b)", {"a": torch.rand(16), "b": torch.rand(16)}
    try:
        import torch._lazy
        import torch._lazy.ts_backend
        torch._lazy.ts_backend.init()
        la, lb = torch.rand(16, device="lazy"), torch.rand(16, device="lazy")
        torch._lazy.mark_step()
        yield "torch._lazy (record a + b)", {"a": la, "b": lb}
    except Exception as e:  # noqa: BLE001 - the peer may be missing or broken; the run goes on
        print(f"torch._lazy unavailable: {e}", file=sys.stderr)


def main():
    envs = list(candidates())
    samples = {name: [] for name, _ in envs}
    for _ in range(ROUNDS):
        for name, env in envs:  # alternate: every round measures every candidate
            samples[name].append(per_op_ns("c = a + b", env))
    base = statistics.median(samples[envs[0][0]])
    print(f"{'candidate':40s} {'median ns/op':>12s} {'vs lazuli':>10s}")
    for name, _ in envs:
        med = statistics.median(samples[name])
        print(f"{name:40s} {med:12.0f} {med / base:9.2f}x")
    print(f"(medians of {ROUNDS} rounds of {N} ops; target for lazuli: under 1500 ns)")


INDEXING = ["x[1]", "x[:, 1:3]", "x[idx]"]
INDEXING_N = 20_000


def indexing_ns():
    """ns per op of each INDEXING statement, recorded by the lazuli this process imported."""
    x = lz.rand(16, 16)
    idx = lz.arange(3) * 1
    lz.sync(wait=True)
    env = {"x": x, "idx": idx}
    return {stmt: timeit.timeit(stmt, globals=env, number=INDEXING_N) / INDEXING_N * 1e9
            for stmt in INDEXING}


def indexing_main(baseline):
    samples = {stmt: [] for stmt in INDEXING}
    base = {stmt: [] for stmt in INDEXING}
    for _ in range(ROUNDS):
        for stmt, ns in indexing_ns().items():
            samples[stmt].append(ns)
        if baseline:
            env = dict(os.environ, PYTHONPATH=baseline)
            out = subprocess.run([sys.executable, __file__, "--indexing-child"], env=env,
                                 capture_output=True, text=True, check=True).stdout
            for stmt, ns in json.loads(out.splitlines()[-1]).items():
                base[stmt].append(ns)
    print(f"{'statement':12s} {'median ns/op':>12s}" + (f" {'baseline':>12s} {'ratio':>7s}" if baseline else ""))
    for stmt in INDEXING:
        med = statistics.median(samples[stmt])
        line = f"{stmt:12s} {med:12.0f}"
        if baseline:
            b = statistics.median(base[stmt])
            line += f" {b:12.0f} {med / b:6.2f}x"
        print(line)
    print(f"(medians of {ROUNDS} rounds of {INDEXING_N} ops" +
          (f"; baseline: lazuli from {baseline}, a child process per round)" if baseline else ")"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--indexing", action="store_true", help="record x[i], x[:, 1:3], x[idx]")
    ap.add_argument("--baseline", metavar="DIR", help="with --indexing: also measure the lazuli in DIR")
    ap.add_argument("--indexing-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.indexing_child:
        print(json.dumps(indexing_ns()))
    elif args.indexing:
        indexing_main(os.path.abspath(args.baseline) if args.baseline else None)
    else:
        main()
