#!/usr/bin/env python3
"""Reading values in the middle of a training step on the lazy Lazuli device: torchvision's
resnet18 (batch 4, 64x64, random weights) runs forward and backward, then its 62 gradients are
read one by one (`[p.grad.cpu() for p in model.parameters()]`, what a logging or checking loop
does) before the step's `sync()`. Baseline in the same process, rounds alternating (MACHINE.md:
the machine is noisy): the same step with `lazuli.torch.sync()` before the reads, which computes
every gradient in one program. Both patterns end each step with a `sync()`, so both compute the
same values (batch norm's running statistics, updated in place, wait for it).

Each read is a value read (DESIGN.md section 4). Per pattern: milliseconds per step (median of
the rounds) and the programs run per step (`CachedCompile` + `UncachedCompile`).

    PYTHONPATH=python <torch venv>/bin/python bench/value_read_bench.py [--rounds 5] [--steps 3]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision

import lazuli as lz
import lazuli.torch as lzt


def programs():
    return lz.debug.counter_value("CachedCompile") + lz.debug.counter_value("UncachedCompile")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per round and pattern")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    dev = lzt.device()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).to(dev).train()
    x = torch.randn(4, 3, 64, 64).to(dev)
    target = torch.randint(0, 10, (4,)).to(dev)

    def step(sync_first):
        for p in model.parameters():
            p.grad = None
        F.cross_entropy(model(x), target).backward()
        if sync_first:
            lzt.sync()
        grads = [p.grad.cpu() for p in model.parameters()]
        lzt.sync()
        return grads

    patterns = {"sync(), 62 reads, sync()": True, "62 reads, sync()": False}
    for sync_first in patterns.values():  # warm-up: compiles, caches
        for _ in range(2):
            step(sync_first)
    times = {name: [] for name in patterns}
    progs = {}
    for _ in range(args.rounds):
        for name, sync_first in patterns.items():
            before = programs()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step(sync_first)
            times[name].append((time.perf_counter() - t0) / args.steps * 1e3)
            progs[name] = (programs() - before) / args.steps
    rows = []
    print("| pattern | ms per step (median of rounds) | programs per step |")
    print("|---|---|---|")
    for name in patterns:
        ms = statistics.median(times[name])
        rows.append({"pattern": name, "ms": ms, "rounds": times[name], "programs": progs[name]})
        print(f"| {name} | {ms:.1f} | {progs[name]:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
