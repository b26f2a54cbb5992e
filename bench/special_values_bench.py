"""Elementwise math on the inputs that send libmvec to its slow path (bench/RESULTS.md 27, 28).

libmvec's vector exp and log leave their fast path for a whole vector when one lane is special
(exp outside about +-87.3, log of 0), and that path is 10-20x slower. The generated code selects
the exact result for those lanes instead of calling libmvec (jit/emit_expr.cpp, Emitter::exp and
Emitter::log). Per function, this times one kernel over N elements of ordinary inputs (the
baseline, measured in the same process) and of special ones: all special, and one lane in eight.
The kernel's time is the program profile's (lz.debug.profile_programs), median over rounds, in
us, on one thread (LAZULI_NUM_THREADS=1 unless set).

Run: PYTHONPATH=python <torch venv>/bin/python bench/special_values_bench.py [--n 64000] [--json out.json]
"""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("LAZULI_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import lazuli as lz  # noqa: E402


def kernel_us(fn, x, calls=200, rounds=5):
    """The median over rounds of the mean time of fn(x)'s kernels per call, in us."""
    for _ in range(10):
        fn(x).numpy()
    times = []
    for _ in range(rounds):
        lz.debug.clear_program_profile()
        lz.debug.profile_programs()
        for _ in range(calls):
            fn(x).numpy()
        lz.debug.profile_programs(False)
        rows = [r for r in lz.debug.program_profile() if r["kind"] == "kernel"]
        times.append(sum(r["total_ns"] for r in rows) / calls / 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64000, help="elements per call")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    ordinary = rng.uniform(0.5, 2.0, a.n).astype(np.float32)

    def with_special(value, every):
        v = ordinary.copy()
        v[::every] = value
        return v

    cases = [
        ("exp", lz.exp, ordinary, "-3.4e38", np.float32(-3.4e38)),
        ("log", lz.log, ordinary, "0", np.float32(0.0)),
        ("sigmoid", lambda t: t.sigmoid(), ordinary, "-3.4e38", np.float32(-3.4e38)),
    ]
    rows = []
    print(f"{a.n} float32 elements, LAZULI_NUM_THREADS={os.environ['LAZULI_NUM_THREADS']}; "
          "kernel time per call, us")
    print(f"{'function':<8} {'ordinary':>9} {'all special':>12} {'1 in 8':>8}  special input")
    for name, fn, base, label, value in cases:
        t0 = time.perf_counter()
        got = {"ordinary": kernel_us(fn, lz.tensor(base))}
        got["all"] = kernel_us(fn, lz.tensor(with_special(value, 1)))
        got["1_in_8"] = kernel_us(fn, lz.tensor(with_special(value, 8)))
        print(f"{name:<8} {got['ordinary']:>9.1f} {got['all']:>12.1f} {got['1_in_8']:>8.1f}  "
              f"{label}   ({time.perf_counter() - t0:.1f} s)")
        rows.append({"function": name, "special": label, "n": a.n, **got})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
