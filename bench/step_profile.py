"""Where a sweep model's step spends its time inside Lazuli's programs (bench/RESULTS.md 27).

Runs one model of bench/model_sweep.py under torch.compile(backend=lazuli), warm, with the
program profile on (lazuli.debug.profile_programs): prints the step's wall time, the time in
programs, and the profile report (time by kind of step, the programs, the slowest steps, each
named by what it computes). --json writes the profile's rows, with the step time, for comparing
two builds or two settings (run each in its own process).

Run: PYTHONPATH=python <torch venv>/bin/python bench/step_profile.py --model DistillGPT2 [--infer]
     [--steps 200] [--top 25] [--json out.json]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a name of model_sweep.MODELS")
    ap.add_argument("--infer", action="store_true", help="profile inference (no_grad) instead of "
                    "a training step (model_sweep.train_step)")
    ap.add_argument("--steps", type=int, default=200, help="profiled calls, after 10 warm ones")
    ap.add_argument("--top", type=int, default=25, help="steps listed in the report")
    ap.add_argument("--json", help="write the rows and the step time here")
    a = ap.parse_args()

    import torch

    import lazuli as lz
    import lazuli.torch as lt
    import model_sweep as ms

    model, x = ms.build(a.model)
    if a.infer:
        model.eval()
        compiled = torch.compile(model, backend=lt.backend)

        def step():
            with torch.no_grad():
                compiled(x)
    else:
        target = ms.make_target(model(x).shape)
        compiled = torch.compile(ms.train_step, backend=lt.backend)

        def step():
            model.zero_grad(set_to_none=True)
            compiled(model, x, target)

    for _ in range(10):
        step()
    lz.wait()
    lz.debug.clear_program_profile()
    lz.debug.profile_programs()
    t = time.perf_counter()
    for _ in range(a.steps):
        step()
    lz.wait()
    step_ms = (time.perf_counter() - t) / a.steps * 1e3
    lz.debug.profile_programs(False)
    rows = lz.debug.program_profile()
    in_programs = sum(r["total_ns"] for r in rows if r["step"] == -1) / a.steps / 1e6
    what = "inference" if a.infer else "training step"
    print(f"{a.model} {what}: {step_ms:.3f} ms per call, {in_programs:.3f} ms of it in programs "
          f"(LAZULI_NUM_THREADS={os.environ.get('LAZULI_NUM_THREADS', 'unset')})")
    print(lz.debug.program_profile_report(a.top))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "mode": what, "steps": a.steps, "step_ms": step_ms,
                       "rows": rows}, f)


if __name__ == "__main__":
    main()
