"""How two whole-graph paths scale with size: one sync of N independent tensors, and backward()
over a chain N ops deep (then the sync of its gradient). Each size is timed in pieces (record,
sync or backward, sync of the grad) so a quadratic piece shows as a per-item time that grows
with N; a linear path keeps the per-item time flat across sizes.

Run: PYTHONPATH=python /usr/bin/python3 bench/scaling_bench.py [--sync 10000,20000,40000]
     [--backward 75000,150000,300000]
"""
import argparse
import gc
import os
import time

os.environ.setdefault("LAZULI_MAX_PENDING_NODES", "100000000")  # no automatic cut inside a run

import numpy as np  # noqa: E402

import lazuli as lz  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def sync_many(n):
    base = lz.tensor(np.ones((2,), np.float32))
    lz.sync(wait=True)
    ts, record = timed(lambda: [base * float(i + 2) for i in range(n)])
    _, sync = timed(lambda: lz.sync(wait=True))
    _, free = timed(lambda: ts.clear())
    return {"record": record, "sync": sync, "free": free}


def backward_deep(n):
    x = lz.tensor(np.ones((2,), np.float32))
    x.requires_grad_()
    def chain():
        y = x
        for _ in range(n):
            y = y * 1.0
        return y.sum()
    loss, record = timed(chain)
    _, back = timed(lambda: loss.backward())
    _, sync = timed(lambda: lz.sync(wait=True))
    del loss
    x.grad = None
    return {"record": record, "backward": back, "sync": sync}


def report(name, fn, sizes):
    print(f"== {name}")
    for n in sizes:
        gc.collect()
        parts = fn(n)
        cells = ", ".join(f"{k} {v:6.2f} s ({v / n * 1e6:5.1f} us/item)" for k, v in parts.items())
        print(f"N={n:7d}: {cells}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sync", default="10000,20000,40000")
    p.add_argument("--backward", default="75000,150000,300000")
    a = p.parse_args()
    sizes = lambda s: [int(v) for v in s.split(",") if v]  # noqa: E731
    print(f"backend {lz.backend()}")
    report("sync of N independent tensors", sync_many, sizes(a.sync))
    report("backward over a chain N ops deep", backward_deep, sizes(a.backward))


if __name__ == "__main__":
    main()
