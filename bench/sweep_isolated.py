"""bench/model_sweep.py's steady-state timings, with each candidate alone in its own process.

model_sweep.py times eager, inductor and Lazuli interleaved in one process, so that they share
the machine's noise. This script measures the same models and the same inputs (model_sweep.build)
with one process per candidate and model, one after another, and prints those steady times
beside each other: inference (no_grad) and the training step (model_sweep.train_step, compiled
whole). It is the cross-check that found the sweep's bias of RESULTS.md 21.9, whose cause was the
OMP_WAIT_POLICY=PASSIVE the sweep set for its workers, not the shared process (RESULTS.md 23):
this script leaves the policy as the caller has it, as the sweep does now.

Run: PYTHONPATH=python <torch venv>/bin/python bench/sweep_isolated.py --models a,b [--rounds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT = "SWEEP_ISOLATED_RESULT "

WORKER = r"""
import json, os, statistics, sys, time
import torch
sys.path.insert(0, os.environ["BENCH_DIR"])
import model_sweep as ms
name, cand, rounds = os.environ["BENCH_MODEL"], os.environ["BENCH_CAND"], int(os.environ["BENCH_ROUNDS"])
if cand == "lazuli":
    import lazuli.torch as lzt
    wrap = lambda f: torch.compile(f, backend=lzt.backend)
elif cand == "inductor":
    wrap = lambda f: torch.compile(f)
else:
    wrap = lambda f: f
model, x = ms.build(name)

def steady(call):
    call(); call()
    t = time.perf_counter(); call(); one = time.perf_counter() - t
    steps = max(1, min(50, int(0.3 / max(one, 1e-5))))
    per = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(steps):
            call()
        per.append((time.perf_counter() - t) / steps)
    return 1e3 * statistics.median(per)

model.eval()
infer = wrap(model)
def inference():
    with torch.no_grad():
        infer(x)
out = {"inference_ms": steady(inference)}
model.train()
with torch.no_grad():
    shape = model.eval()(x).shape
model.train()
target = ms.make_target(shape)
step = wrap(ms.train_step)
def training():
    model.zero_grad(set_to_none=True)
    step(model, x, target)
out["train_ms"] = steady(training)
print(os.environ["BENCH_RESULT"] + json.dumps(out))
"""


def run(name, cand, rounds):
    env = dict(os.environ, BENCH_DIR=HERE, BENCH_MODEL=name, BENCH_CAND=cand, BENCH_ROUNDS=str(rounds),
               BENCH_RESULT=RESULT)
    p = subprocess.run([sys.executable, "-c", WORKER], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr[-2000:]}
    line = next(s for s in p.stdout.splitlines() if s.startswith(RESULT))
    return json.loads(line[len(RESULT):])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="comma-separated model_sweep names")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    print(f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}, {os.cpu_count()} cores")
    res = {}
    print("| model | inference eager/inductor/lazuli ms | train step eager/inductor/lazuli ms "
          "| lazuli vs eager inf/train | lazuli vs inductor inf/train |")
    print("|---|---|---|---|---|")
    for name in a.models.split(","):
        r = res[name] = {c: run(name, c, a.rounds) for c in ("eager", "inductor", "lazuli")}
        if any("error" in v for v in r.values()):
            print(f"| {name} | failed | | | |", {c: v.get("error", "")[-300:] for c, v in r.items()})
            continue
        e, i, z = (r[c] for c in ("eager", "inductor", "lazuli"))
        print(f"| {name} | {e['inference_ms']:.1f}/{i['inference_ms']:.1f}/{z['inference_ms']:.1f} "
              f"| {e['train_ms']:.1f}/{i['train_ms']:.1f}/{z['train_ms']:.1f} "
              f"| {e['inference_ms'] / z['inference_ms']:.2f}x / {e['train_ms'] / z['train_ms']:.2f}x "
              f"| {i['inference_ms'] / z['inference_ms']:.2f}x / {i['train_ms'] / z['train_ms']:.2f}x |",
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
