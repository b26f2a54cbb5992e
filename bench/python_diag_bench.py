"""What diagnostics cost: a cache-hit step (record 21 ops, then sync) with
LAZULI_EXPLAIN_RECOMPILES off and on, alternating rounds in one run; recording and the sync are
timed apart. The target: on, a cache-hit sync costs at most 5% more (explanations are computed
only on a miss). Recording does cost more when on: every tensor records its creation line.

Run: PYTHONPATH=python /usr/bin/python3 bench/python_diag_bench.py
"""
import statistics
import time

import numpy as np

import lazuli as lz

STEPS = 300
ROUNDS = 7


def step(w, x):
    h = x
    for _ in range(10):
        h = (h * 0.5 + w).relu()
    return h.sum()


def run_round(explain):
    lz.debug.explain_recompiles(explain)
    w = lz.tensor(np.ones((16,), np.float32))
    x = lz.tensor(np.ones((64, 16), np.float32))
    loss = step(w, x)
    lz.sync(wait=True)  # warm: the program is compiled once per setting
    record = sync = 0.0
    for _ in range(STEPS):
        t0 = time.perf_counter()
        loss = step(w, x)
        t1 = time.perf_counter()
        lz.sync()
        t2 = time.perf_counter()
        record += t1 - t0
        sync += t2 - t1
    lz.wait()
    del loss
    return record / STEPS, sync / STEPS


def main():
    times = {False: [], True: []}
    for _ in range(ROUNDS):
        for explain in (False, True):
            times[explain].append(run_round(explain))
    for i, part in enumerate(("recording 21 ops", "cache-hit sync")):
        off = statistics.median(t[i] for t in times[False])
        on = statistics.median(t[i] for t in times[True])
        print(f"{part:18s} explanations off {off * 1e6:7.1f} us, on {on * 1e6:7.1f} us ({(on / off - 1) * 100:+.1f}%)")
    print(f"(medians of {ROUNDS} alternating rounds of {STEPS} steps; 21 ops recorded per step)")


if __name__ == "__main__":
    main()
