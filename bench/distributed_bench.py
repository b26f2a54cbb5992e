"""Data-parallel training across processes: a step of an MLP on 2 ranks against 1 process, for
Lazuli (lazuli.nn.parallel.DistributedDataParallel on MPI) and PyTorch (DDP on gloo, eager and
inductor), all measured in this run; and the share of Lazuli's 2-rank step spent in the
gradient all-reduces (docs/distributed.md, issue 30).

    PYTHONPATH=python python bench/distributed_bench.py [--steps 30] [--inductor]

Run it with the torch venv's Python (scripts/torch-venv.sh) for the PyTorch rows; without torch
only Lazuli's rows are measured. Every configuration uses the machine's cores once: 1 process x
N threads, or N ranks x 1 thread (N = cores, at most 2 ranks here). Prints a markdown table.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SIZES = [512, 1024, 1024, 10]  # an MLP of 2.1 M parameters
BATCH = 256


def lazuli_worker(args):
    import numpy as np
    import lazuli as lz
    import lazuli.distributed as dist
    ranks = args.ranks
    if ranks > 1:
        dist.init_process_group("mpi")
    rank = dist.get_rank() if ranks > 1 else 0
    lz.manual_seed(0)
    layers = []
    for a, b in zip(SIZES, SIZES[1:]):
        layers += [lz.nn.Linear(a, b), lz.nn.ReLU()]
    model = lz.nn.Sequential(*layers[:-1])
    if ranks > 1:
        model = lz.nn.parallel.DistributedDataParallel(model)
    opt = lz.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rows = BATCH // ranks
    rng = np.random.default_rng(rank)
    x = lz.tensor(rng.standard_normal((rows, SIZES[0])).astype(np.float32))
    y = lz.tensor(rng.integers(0, SIZES[-1], rows))
    lz.sync(wait=True)

    def step():
        opt.zero_grad()
        lz.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        lz.sync()

    result = {"step_ms": timed(step, lz.wait, args.steps)}
    if ranks > 1:
        # The gradient all-reduces alone: a program of one all_reduce and division per parameter,
        # over tensors of the parameters' shapes.
        grads = [lz.zeros(*p.shape) + 1 for p in model.parameters()]
        lz.sync(wait=True)

        def reduce_only():
            for g in grads:
                dist.all_reduce(g, dist.ReduceOp.AVG)
            lz.sync()

        result["allreduce_ms"] = timed(reduce_only, lz.wait, args.steps)
    emit(args, rank, result)


def torch_worker(args):
    import torch
    import torch.distributed as dist
    ranks = args.ranks
    if ranks > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if ranks > 1 else 0
    torch.manual_seed(0)
    layers = []
    for a, b in zip(SIZES, SIZES[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    if ranks > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    fwd = torch.compile(model) if args.mode == "inductor" else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rows = BATCH // ranks
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(rows, SIZES[0], generator=g)
    y = torch.randint(0, SIZES[-1], (rows,), generator=g)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(fwd(x), y).backward()
        opt.step()

    emit(args, rank, {"step_ms": timed(step, lambda: None, args.steps)})
    if ranks > 1:
        dist.destroy_process_group()


def timed(step, wait, steps):
    for _ in range(3):  # warm-up: compiles
        step()
    wait()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        wait()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return times[len(times) // 2]


def emit(args, rank, result):
    with open(os.path.join(args.out, f"{args.mode}-{args.ranks}-rank{rank}.json"), "w") as f:
        json.dump(result, f)


def launch(mode, ranks, cores, steps, out):
    """Runs one configuration; returns rank 0's result."""
    threads = str(max(1, cores // ranks))
    env = dict(os.environ, OMP_NUM_THREADS=threads, LAZULI_NUM_THREADS=threads,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    worker = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--ranks", str(ranks),
              "--steps", str(steps), "--out", out]
    if ranks == 1:
        cmd = worker
    elif mode == "lazuli":
        cmd = [shutil.which("mpirun"), "-n", str(ranks), "--oversubscribe"] + worker
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(ranks)] + worker[1:]
    subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=900)
    with open(os.path.join(out, f"{mode}-{ranks}-rank0.json")) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", choices=["lazuli", "eager", "inductor"])
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out")
    p.add_argument("--inductor", action="store_true", help="also PyTorch with inductor (slow to compile)")
    args = p.parse_args()
    if args.worker:
        args.mode = args.worker
        return lazuli_worker(args) if args.worker == "lazuli" else torch_worker(args)
    cores = min(os.cpu_count() or 1, 2)
    modes = ["lazuli"]
    try:
        import torch  # noqa: F401
        modes += ["eager"] + (["inductor"] if args.inductor else [])
    except ImportError:
        pass
    out = tempfile.mkdtemp()
    print(f"MLP {SIZES}, batch {BATCH}, SGD with momentum; {cores} cores; median of {args.steps} steps\n")
    print("| runtime | 1 process x %d threads | %d ranks x 1 thread | ratio | all-reduce share |" % (cores, cores))
    print("|---|---|---|---|---|")
    for mode in modes:
        one = launch(mode, 1, cores, args.steps, out)
        many = launch(mode, cores, cores, args.steps, out)
        share = f"{many['allreduce_ms'] / many['step_ms']:.0%} ({many['allreduce_ms']:.2f} ms)" \
            if "allreduce_ms" in many else "-"
        print(f"| {mode} | {one['step_ms']:.2f} ms | {many['step_ms']:.2f} ms | "
              f"{one['step_ms'] / many['step_ms']:.2f}x | {share} |")
    shutil.rmtree(out)


if __name__ == "__main__":
    main()
