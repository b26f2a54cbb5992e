"""Kernels that call math functions (exp, tanh), timed alone in the program profile: the fold of
a row sum over exp, and how the pool cuts an elementwise kernel that calls one (RESULTS.md 33).

Each case is a torch function compiled with torch.compile(backend=lazuli) on float32 inputs of a
small model's sizes (a [64, 1000] log-softmax, a [2, 32, 256] GELU); its program's steps are
timed with lazuli.debug.profile_programs over --calls calls (best of 5 rounds of the whole
program; each step's mean over the calls of that round). One process measures one build: run it
per build, alternating, and compare within a pair. LAZULI_NUM_THREADS sets the pool's threads.

Run: PYTHONPATH=<build>/python <torch venv>/bin/python bench/math_kernels_bench.py [--json out.json]
"""
import argparse
import json
import os
import time


def cases(torch):
    x = torch.randn(64, 1000)
    h = torch.randn(2, 32, 256)
    return {
        "exp [64, 1000]": (lambda x: torch.exp(x), x),
        "row sum of exp [64, 1000]": (lambda x: torch.exp(x).sum(1, keepdim=True), x),
        "log_softmax [64, 1000]": (lambda x: torch.log_softmax(x, 1), x),
        "gelu tanh [2, 32, 256]": (lambda h: torch.nn.functional.gelu(h, approximate="tanh"), h),
        "add [64, 1000]": (lambda x: x + 1, x),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    import lazuli as lz
    import lazuli.torch as lzt
    out = []
    for name, (fn, x) in cases(torch).items():
        c = torch.compile(fn, backend=lzt.backend)
        for _ in range(20):
            c(x)
        best = None
        for _ in range(5):
            lz.debug.clear_program_profile()
            lz.debug.profile_programs()
            t = time.perf_counter()
            for _ in range(a.calls):
                c(x)
            call_us = (time.perf_counter() - t) / a.calls * 1e6
            lz.debug.profile_programs(False)
            rows = lz.debug.program_profile()
            prog = sum(r["total_ns"] for r in rows if r["step"] == -1) / a.calls / 1e3
            steps = [(r["what"], r["total_ns"] / r["runs"] / 1e3) for r in rows
                     if r["step"] >= 0 and r["kind"] != "copies"]
            if best is None or prog < best["program_us"]:
                best = {"case": name, "program_us": round(prog, 2), "call_us": round(call_us, 2),
                        "steps": [[w, round(t, 2)] for w, t in steps]}
        out.append(best)
        print(f"{name:28s} program {best['program_us']:7.2f} us  call {best['call_us']:7.2f} us  "
              + "; ".join(f"{w.split(': ', 1)[-1][:50]} {t:.2f}" for w, t in best["steps"]), flush=True)
        torch._dynamo.reset()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": os.environ.get("LAZULI_NUM_THREADS", "cores"), "cases": out}, f)


if __name__ == "__main__":
    main()
