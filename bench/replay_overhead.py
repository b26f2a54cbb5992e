"""What one replay of a torch.compile partition costs outside its kernels (bench/RESULTS.md 23.3).

A warm program over N float32 inputs of 64 elements computing N outputs (x * 2 each: its kernels
take microseconds), replayed the way lazuli.torch's bridge replays a partition:
  bridge     run_over (inputs read from the torch tensors in one C++ call) and _numpy_views
             (one wait, then a view per output) plus torch.from_numpy: the bridge since 8ba98cd
  python     to_lazuli per input, run, to_torch per output: the bridge before it (the baseline,
             timed in the same process, alternating rounds)
and the parts of the first: run_over alone (then lz.wait()), _numpy_views of outputs already
computed, and the program's own ExecuteTime. Per call, median of rounds.

Run: PYTHONPATH=python <torch venv>/bin/python bench/replay_overhead.py [--inputs 66] [--rounds 7]
"""
import argparse
import statistics
import time

import torch

import lazuli as lz
from lazuli import _C
from lazuli.torch._boundary import to_lazuli, to_torch


def per_call(f, n):
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=66, help="inputs and outputs of the program")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=1000, help="calls per round")
    a = ap.parse_args()
    ts = [torch.randn(64) for _ in range(a.inputs)]
    stand_ins = [to_lazuli(t) for t in ts]
    program = _C._WarmProgram(stand_ins, "replay_overhead", "torch-compile")
    program.compile([x * 2 for x in stand_ins])
    del stand_ins

    def bridge():
        return [torch.from_numpy(v) for v in _C._numpy_views(program.run_over(ts, ()))]

    def python():
        return [to_torch(r) for r in program.run([to_lazuli(t) for t in ts])]

    ready = program.run_over(ts, ())
    _C._numpy_views(ready)

    def run_only():
        program.run_over(ts, ())
        lz.wait()

    cands = {"bridge": bridge, "python": python, "run_over + wait": run_only,
             "_numpy_views (ready)": lambda: _C._numpy_views(ready)}
    for f in cands.values():
        for _ in range(100):
            f()
    samples = {k: [] for k in cands}
    lz.debug.clear_metrics()
    for _ in range(a.rounds):
        for k, f in cands.items():
            samples[k].append(per_call(f, a.calls))
    d = lz.debug.metric_data("ExecuteTime")
    print(f"replay_overhead: {a.inputs} inputs and outputs, {a.rounds} rounds of {a.calls} calls, "
          f"torch threads {torch.get_num_threads()}")
    print("| per call | us |\n|---|---|")
    for k, v in samples.items():
        print(f"| {k} | {statistics.median(v):.1f} |")
    print(f"| the program's ExecuteTime (mean over its runs) | {d[1] / d[0] / 1e3:.1f} |")


if __name__ == "__main__":
    main()
