"""Training-step time: Lazuli against PyTorch eager, measured in the same run (alternating rounds,
medians), plus the step's matrix FLOPs against numpy's float32 matmul rate on the same sizes.
Lazuli runs the step two ways: traced every step and synced (plain lazy code), and as a captured
step (lz.capture: traced until two traces agree, then replayed without Python).

  MLP 784-1024-1024-10, batch 256, float32, SGD   (target: no slower than PyTorch eager,
                                                     matrix products at >= 90% of sgemm)
  MLP 64-64-10, batch 32, float32, SGD            (target: >= 3x as fast as PyTorch eager)

Run: PYTHONPATH=python /usr/bin/python3 bench/train_bench.py [--big-steps N] [--small-steps N]
PyTorch rows are skipped (not the benchmark) when Debian's python3-torch is absent.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # MACHINE.md: idle OpenMP threads spin
# Both runtimes get the same threads: LAZULI_NUM_THREADS (default: every core) for Lazuli, and the
# same count for PyTorch (which would otherwise use 1 here).
THREADS = int(os.environ.setdefault("LAZULI_NUM_THREADS", str(os.cpu_count() or 1)))

import numpy as np  # noqa: E402

import lazuli as lz  # noqa: E402
from lazuli import nn  # noqa: E402

try:
    import torch
    torch.set_num_threads(THREADS)
except ImportError:
    torch = None


def lazuli_trainer(sizes, batch, capture=False):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    opt = lz.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    x = lz.tensor(rng.standard_normal((batch, sizes[0]), dtype=np.float32))
    y = lz.tensor(rng.integers(0, sizes[-1], batch))

    def body(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if capture:
        captured = lz.capture(body)
        return (lambda: captured(x, y)), lz.wait

    def step():
        body(x, y)
        lz.sync()
    return step, lz.wait


def torch_trainer(sizes, batch):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, sizes[0])
    y = torch.randint(0, sizes[-1], (batch,))

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return step, lambda: None


def time_steps(step, finish, n):
    for _ in range(3):  # warm-up: compiles, and a captured step's traces
        step()
    finish()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    finish()
    return (time.perf_counter() - t0) / n


def matmul_flops(sizes, batch):
    # forward x@W, backward dX and dW: 3 products of 2*m*k*n flops per layer
    return sum(3 * 2 * batch * sizes[i] * sizes[i + 1] for i in range(len(sizes) - 1))


def sgemm_seconds(sizes, batch, reps=5):
    rng = np.random.default_rng(0)
    mats = []
    for i in range(len(sizes) - 1):
        a = rng.standard_normal((batch, sizes[i]), dtype=np.float32)
        w = rng.standard_normal((sizes[i], sizes[i + 1]), dtype=np.float32)
        g = rng.standard_normal((batch, sizes[i + 1]), dtype=np.float32)
        mats.append((a, w, g))
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for a, w, g in mats:
            a @ w
            g @ w.T
            a.T @ g
        best = min(best, time.perf_counter() - t0)
    return best


def compare(name, sizes, batch, steps, rounds):
    lz_step, lz_finish = lazuli_trainer(sizes, batch)
    cap_step, cap_finish = lazuli_trainer(sizes, batch, capture=True)
    cands = [("lazuli", lz_step, lz_finish), ("lazuli captured", cap_step, cap_finish)]
    if torch is not None:
        t_step, t_finish = torch_trainer(sizes, batch)
        cands.append(("torch eager", t_step, t_finish))
        # PyTorch on one thread too: for a small model it can beat its own threaded run, and the
        # comparison is against PyTorch's better configuration.
        cands.append(("torch eager 1t", t_step, t_finish))
    samples = {c[0]: [] for c in cands}
    for _ in range(rounds):
        for cname, step, finish in cands:
            if torch is not None:
                torch.set_num_threads(1 if cname.endswith("1t") else THREADS)
            samples[cname].append(time_steps(step, finish, steps))
    print(f"== {name}: batch {batch}, {steps} steps x {rounds} alternating rounds (median [min-max])")
    base = statistics.median(samples["lazuli"])
    ref = None
    if torch is not None:
        ref = min(statistics.median(samples["torch eager"]), statistics.median(samples["torch eager 1t"]))
    for cname, _, _ in cands:
        med = statistics.median(samples[cname])
        lo, hi = min(samples[cname]), max(samples[cname])
        vs = f"   {ref / med:5.2f}x as fast as PyTorch's better median" if ref else ""
        if ref and not cname.startswith("torch"):
            # Each round's ratio against the better PyTorch time of the same round: a noisy
            # period slows both sides of one round, so these medians move less than the times.
            per_round = [min(t, t1) / mine for t, t1, mine in
                         zip(samples["torch eager"], samples["torch eager 1t"], samples[cname])]
            vs += f"; per round {statistics.median(per_round):.2f}x [{min(per_round):.2f}-{max(per_round):.2f}]"
        print(f"   {cname:16s} {med * 1e3:8.3f} ms/step [{lo * 1e3:.3f}-{hi * 1e3:.3f}]{vs}")
    flops = matmul_flops(sizes, batch)
    sg = sgemm_seconds(sizes, batch)
    print(f"   matrix products: {flops / 1e9:.2f} GFLOP/step; numpy sgemm on the same sizes "
          f"{flops / sg / 1e9:.1f} GFLOP/s; lazuli's whole step {flops / base / 1e9:.2f} GFLOP/s "
          f"({sg / base * 100:.1f}% of sgemm)")
    print(f"   lazuli backend: {lz.backend()}; threads: {THREADS} for both")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big-steps", type=int, default=2)
    ap.add_argument("--small-steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    compare("MLP 784-1024-1024-10", [784, 1024, 1024, 10], 256, args.big_steps, args.rounds)
    compare("MLP 64-64-10", [64, 64, 10], 32, args.small_steps, args.rounds)


if __name__ == "__main__":
    main()
