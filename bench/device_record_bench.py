#!/usr/bin/env python3
"""Recording one ATen op from Python on the lazy Lazuli device: `a + b` and a few more on small
tensors, no barrier (the goal: at most 2 us an op; PyTorch/XLA took 4.6 us for `a + b`
here, bench/RESULTS.md section 9).

Baselines in the same process, rounds alternating (MACHINE.md: the machine is noisy): Lazuli's
native API recording the same op, and PyTorch eager computing it on the CPU. With --xla, the
same statements on PyTorch/XLA's lazy device (PJRT_DEVICE=CPU), in its own environment
(bench/setup_torch_xla.sh), one child process per round between ours.

    PYTHONPATH=python <torch venv>/bin/python bench/device_record_bench.py [--xla] [--rounds 7]
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

N = 50_000
STATEMENTS = {
    "a + b": "a + b",
    "a * 2.0 (a Python number)": "a * 2.0",
    "a.relu()": "a.relu()",
    "F.linear(x, w, bias) (t + addmm)": "F.linear(x, w, bias)",
    "x.add_(1.0) (in place)": "x.add_(1.0)",
}


def per_op_ns(stmt, env, sync=None):
    timer = timeit.Timer(stmt, globals=env)
    total = 0.0
    for _ in range(5):  # a barrier between chunks drops the dead recordings
        total += timer.timeit(number=N // 5)
        if sync:
            sync()
    return total / N * 1e9


def torch_env(torch, device):
    torch.manual_seed(0)
    env = {"F": torch.nn.functional}
    for name, shape in (("a", (16, 16)), ("b", (16, 16)), ("x", (8, 16)), ("w", (32, 16)),
                        ("bias", (32,))):
        env[name] = torch.randn(*shape).to(device)
    return env


def ours():
    import torch

    import lazuli as lz
    import lazuli.torch as lzt
    torch.set_num_threads(1)
    dev = lzt.device()
    device_env = torch_env(torch, dev)
    lzt.sync(wait=True)
    eager_env = torch_env(torch, "cpu")
    a, b, x = lz.randn(16, 16), lz.randn(16, 16), lz.randn(8, 16)
    native_env = {"a": a, "b": b, "x": x, "F": lz.nn.functional, "w": lz.randn(32, 16),
                  "bias": lz.randn(32)}
    lz.sync(wait=True)
    rows = {}
    for label, stmt in STATEMENTS.items():
        rows[f"lazuli device: {label}"] = per_op_ns(stmt, device_env, lzt.sync)
        rows[f"lazuli native API: {label}"] = per_op_ns(stmt, native_env, lz.sync)
        rows[f"torch {torch.__version__} eager CPU (computes): {label}"] = per_op_ns(stmt, eager_env)
    return rows


def xla_child():
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    dev = torch_xla.device()
    env = torch_env(torch, dev)
    xm.mark_step()
    rows = {}
    for label, stmt in STATEMENTS.items():
        rows[f"PyTorch/XLA {torch_xla.__version__} lazy device: {label}"] = per_op_ns(
            stmt, env, xm.mark_step)
    print("RESULT " + json.dumps(rows))


def xla_round():
    here = os.path.dirname(os.path.abspath(__file__))
    python = subprocess.run(["bash", os.path.join(here, "setup_torch_xla.sh")], check=True,
                            capture_output=True, text=True).stdout.strip()
    out = subprocess.run([python, os.path.abspath(__file__), "--xla-child"], capture_output=True,
                         text=True, check=True, env=dict(os.environ, PJRT_DEVICE="CPU"))
    return json.loads(out.stdout.split("RESULT ", 1)[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--xla", action="store_true")
    ap.add_argument("--xla-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.xla_child:
        xla_child()
        return
    samples = {}
    for _ in range(args.rounds):
        rounds = [ours()] + ([xla_round()] if args.xla else [])
        for rows in rounds:
            for k, v in rows.items():
                samples.setdefault(k, []).append(v)
    print("| statement | ns per op (median of rounds) | [min-max] |")
    print("|---|---|---|")
    for label in STATEMENTS:
        for k, v in samples.items():
            if k.endswith(": " + label):
                print(f"| {k} | {statistics.median(v):.0f} | [{min(v):.0f}-{max(v):.0f}] |")


if __name__ == "__main__":
    main()
