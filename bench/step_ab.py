"""Steady-state time of the sweep's models under torch.compile(backend=lazuli), for comparing two
builds of Lazuli (bench/RESULTS.md 25).

One process measures one build: the model's inference call (no_grad) and its training step
(model_sweep.train_step: forward, loss, backward), each as the median over 5 rounds of --steps
calls after 20 warm-up calls, in ms. Run it once per build, alternating the builds, and compare
within pairs: the machine's noise between processes is larger than most effects worth measuring.

Run: PYTHONPATH=<build>/python <torch venv>/bin/python bench/step_ab.py --models BertForMaskedLM,lcnet_050
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def timed(fn, steps, rounds=5, warm=20, finish=lambda: None):
    for _ in range(warm):
        fn()
    finish()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(steps):
            fn()
        finish()
        times.append((time.perf_counter() - t) / steps * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, help="comma-separated names of model_sweep.MODELS")
    ap.add_argument("--steps", type=int, default=100, help="calls per round")
    a = ap.parse_args()
    import torch
    import lazuli as lz
    import lazuli.torch as lzt
    import model_sweep as ms
    for name in a.models.split(","):
        model, x = ms.build(name)
        with torch.no_grad():
            target = ms.make_target(model.eval()(x).shape)
        inference = torch.compile(model, backend=lzt.backend)
        with torch.no_grad():
            inf_ms = timed(lambda: inference(x), a.steps)
        model.train()
        train_step = torch.compile(ms.train_step, backend=lzt.backend)

        def step():
            model.zero_grad(set_to_none=True)
            return train_step(model, x, target)
        train_ms = timed(step, a.steps, finish=lz.wait)
        print(json.dumps({"model": name, "inference_ms": round(inf_ms, 4),
                          "train_step_ms": round(train_ms, 4),
                          "run_on_waiter": lz.debug.counter_value("RunOnWaiter"),
                          "warm_program_runs": lz.debug.counter_value("WarmProgramRun")}),
              flush=True)
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
