"""Recording one elementwise op from Python: `c = a + b` on small tensors, no sync.

Baselines measured in the same run, alternating A and B rounds (MACHINE.md: the machine is
noisy): numpy doing the add eagerly, and, where Debian's python3-torch is installed, PyTorch eager
and PyTorch's own lazy tensor backend (torch._lazy, TorchScript backend). Prints the median time
per op of each and the ratios. Run: PYTHONPATH=python /usr/bin/python3 bench/python_record_bench.py
"""
import os
import statistics
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


if __name__ == "__main__":
    main()
