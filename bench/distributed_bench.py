"""Data-parallel training across processes: a training step on 2 ranks against 1 process, all
measured in this run (docs/distributed.md), for

  lazuli     Lazuli's own API: lazuli.nn.parallel.DistributedDataParallel over MPI (mpirun);
             MLP only
  device     PyTorch's DistributedDataParallel over the "lazuli" c10d backend, the model on
             Lazuli's lazy PyTorch device (torchrun); 1 process: the same model on the device
  eager      PyTorch's DistributedDataParallel over gloo (torchrun)
  inductor   the same, the module compiled by inductor first (module.compile(), then DDP: PyTorch
             2.15's torch.compile(DDP(m)) captures no graph)

and, on 2 ranks, the share of the step the gradient exchange takes, two ways:
  all-reduce only   a program doing only the step's all-reduces, over tensors of the shapes
                    the step reduces (Lazuli: one per parameter; DDP: its buckets)
  no exchange       DDP's step with a comm hook that returns each bucket unreduced (PyTorch
                    routes); the difference to the step is the exchange's exposed cost

    PYTHONPATH=python python bench/distributed_bench.py [--model mlp|resnet18] [--steps 30]
        [--routes lazuli,device,eager,inductor] [--inductor] [--device-route] [--decompose]
        [--json out.json]

--decompose (PyTorch routes, 2 ranks) also times the step without DDP (each rank's model alone,
the ranks side by side), DDP with neither exchange nor buffer broadcast, DDP without the buffer
broadcast, and DDP again last (how far the process drifted).

Models: mlp (512-1024-1024-10, 1.59 M parameters, batch 256) and resnet18
(torchvision.models.resnet18(num_classes=10), 11.2 M parameters, batch 32 of 3x64x64 images,
train mode). SGD with momentum. Run it with the torch venv's Python (scripts/torch-venv.sh) for
the PyTorch rows; without torch only Lazuli's rows are measured. Every configuration uses the
machine's cores once: 1 process x N threads, or N ranks x 1 thread on 1/N of the batch (N = cores,
at most 2 here). Prints a markdown table.
"""
import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SIZES = [512, 1024, 1024, 10]  # an MLP of 1.59 M parameters (6.3 MB of float32 gradients)
BATCH = {"mlp": 256, "resnet18": 32}
IMAGE = (3, 64, 64)  # resnet18's input: small images, so that a step takes well under a second
WARMUP = 3  # Lazuli compiles in the first steps (DDP: 3, docs/distributed.md)


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
    rows = BATCH["mlp"] // ranks
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
        result["buckets"] = [g.numel() for g in grads]
    emit(args, rank, result)


def build_torch_model(name):
    import torch
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10).train()
    layers = []
    for a, b in zip(SIZES, SIZES[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def torch_inputs(name, rows, rank):
    import torch
    g = torch.Generator().manual_seed(rank)
    shape = (rows,) + (IMAGE if name == "resnet18" else (SIZES[0],))
    return torch.randn(*shape, generator=g), torch.randint(0, 10, (rows,), generator=g)


def torch_worker(args):
    """Routes device, eager and inductor: PyTorch's own model and DDP."""
    import torch
    import torch.distributed as dist
    ranks, mode = args.ranks, args.mode
    if mode == "device":
        import lazuli.torch as lzt
        dev = lzt.device()  # before any backward (registers the device and the c10d backend)
        sync, wait = lzt.sync, lzt.wait
    else:
        dev = torch.device("cpu")
        sync, wait = (lambda: None), (lambda: None)
    if ranks > 1:
        dist.init_process_group("lazuli" if mode == "device" else "gloo")
    rank = dist.get_rank() if ranks > 1 else 0
    x, y = torch_inputs(args.model, BATCH[args.model] // ranks, rank)
    x, y = x.to(dev), y.to(dev)

    def make(noop=None, ddp=True, broadcast_buffers=True):
        model = build_torch_model(args.model).to(dev)
        if mode == "inductor":
            model.compile()  # compile the module, then wrap it (not torch.compile(DDP(m)))
        if ranks > 1 and ddp:
            kw = {} if broadcast_buffers else {"broadcast_buffers": False}  # (deprecated name: warns)
            model = torch.nn.parallel.DistributedDataParallel(model, **kw)
            if noop is not None:
                model.register_comm_hook(None, noop)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            sync()
        return step

    result = {"step_ms": timed(make(), wait, args.steps)}
    if mode == "inductor":  # that inductor compiled the module under DDP (not a silent eager run)
        from torch._dynamo.utils import counters
        result["graphs"] = counters["stats"]["unique_graphs"]
    if ranks > 1:
        # DDP's step with the exchange taken out: a comm hook returning each bucket unreduced.
        buckets = []

        def noop(state, bucket):
            buf = bucket.buffer()
            buckets.append(buf.numel())
            fut = torch.futures.Future()
            fut.set_result(buf)
            return fut

        step = make(noop)

        def step_noted():
            buckets.clear()  # keeps the last step's buckets (DDP rebuilds them after its first)
            step()

        result["noop_ms"] = timed(step_noted, wait, args.steps)
        result["buckets"] = list(buckets)
        # The all-reduces alone, over tensors of the buckets' sizes, as DDP's default hook does
        # them (divide, then sum): on the device, one program of them; on gloo, one call each.
        grads = [torch.ones(n, device=dev) for n in buckets]
        sync()
        wait()

        def reduce_only():
            for g in grads:
                g.div_(ranks)
                dist.all_reduce(g)
            sync()

        result["allreduce_ms"] = timed(reduce_only, wait, args.steps)
        if args.decompose:
            # The step's parts: each rank's model alone (no DDP, ranks side by side), DDP with
            # neither exchange nor buffer broadcast, and DDP without the buffer broadcast
            # (broadcast_buffers=False: batch norm's running statistics stay each rank's).
            result["plain_ms"] = timed(make(ddp=False), wait, args.steps)
            result["noop_nobb_ms"] = timed(make(noop, broadcast_buffers=False), wait, args.steps)
            result["nobb_ms"] = timed(make(broadcast_buffers=False), wait, args.steps)
            result["again_ms"] = timed(make(), wait, args.steps)  # DDP as first: the drift
        dist.destroy_process_group()
    emit(args, rank, result)


def timed(step, wait, steps):
    gc.collect()  # the models of earlier measurements
    for _ in range(WARMUP):  # warm-up: compiles
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


def failure_text(text):
    """The ranks' own error lines first (torchrun's summary only says which rank died), then the
    output's last lines."""
    lines = text.strip().splitlines()
    keys = ("Error", "error:", "terminate called", "what():", "Traceback", "Abort", "abort")
    errors = list(dict.fromkeys(l for l in lines if any(k in l for k in keys)))[:20]
    return "\n".join(errors + ["..."] + lines[-12:])


def launch(mode, model, ranks, cores, steps, out, decompose=False):
    """Runs one configuration; returns rank 0's result."""
    threads = str(max(1, cores // ranks))
    env = dict(os.environ, OMP_NUM_THREADS=threads, LAZULI_NUM_THREADS=threads,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if mode == "device":
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # MACHINE.md: torch's OpenMP beside our pool
    worker = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--model", model,
              "--ranks", str(ranks), "--steps", str(steps), "--out", out]
    worker += ["--decompose"] if decompose else []
    if ranks == 1:
        cmd = worker
    elif mode == "lazuli":
        cmd = [shutil.which("mpirun"), "-n", str(ranks), "--oversubscribe"] + worker
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(ranks)] + worker[1:]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} on {ranks} rank(s) failed (exit {proc.returncode}):\n"
                           + failure_text(proc.stdout + proc.stderr))
    with open(os.path.join(out, f"{mode}-{ranks}-rank0.json")) as f:
        result = json.load(f)
    result["wall_s"] = time.perf_counter() - start
    return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", choices=["lazuli", "device", "eager", "inductor"])
    p.add_argument("--model", choices=["mlp", "resnet18"], default="mlp")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out")
    p.add_argument("--routes", help="comma-separated, from lazuli,device,eager,inductor "
                   "(default: mlp lazuli,eager; resnet18 device,eager)")
    p.add_argument("--inductor", action="store_true", help="also PyTorch with inductor (slow to compile)")
    p.add_argument("--device-route", action="store_true", help="also DDP on the lazy device")
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--decompose", action="store_true",
                   help="PyTorch routes on 2 ranks: also the step without DDP, and DDP without the buffer broadcast")
    args = p.parse_args()
    if args.worker:
        args.mode = args.worker
        return lazuli_worker(args) if args.worker == "lazuli" else torch_worker(args)
    if args.routes:
        modes = args.routes.split(",")
    else:
        modes = ["lazuli", "eager"] if args.model == "mlp" else ["device", "eager"]
        modes += (["device"] if args.device_route and "device" not in modes else []) + \
            (["inductor"] if args.inductor else [])
    if args.model == "resnet18" and "lazuli" in modes:
        sys.exit("the lazuli route (Lazuli's own nn) has the MLP only; resnet18 runs on the device route")
    try:
        import torch  # noqa: F401
    except ImportError:
        modes = [m for m in modes if m == "lazuli"]
    cores = min(os.cpu_count() or 1, 2)
    out = tempfile.mkdtemp()
    what = f"MLP {SIZES}, batch {BATCH['mlp']}" if args.model == "mlp" else \
        f"resnet18(num_classes=10), batch {BATCH['resnet18']} of {'x'.join(map(str, IMAGE))}"
    print(f"{what}, SGD with momentum; {cores} cores; median of {args.steps} steps after {WARMUP}; "
          f"load {' '.join(open('/proc/loadavg').read().split()[:3])}\n")
    print(f"| route | 1 process x {cores} threads | {cores} ranks x 1 thread | 1 process over {cores} ranks "
          f"| all-reduce only (share) | step without exchange (exchange exposed) |")
    print("|---|---|---|---|---|---|")
    results = {}
    for mode in modes:
        try:
            one = launch(mode, args.model, 1, cores, args.steps, out)
            many = launch(mode, args.model, cores, cores, args.steps, out, args.decompose and mode != "lazuli")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"| {mode} | failed: see below | | | | |")
            print(f"\n{e}\n", file=sys.stderr)
            continue
        results[mode] = {"one": one, "many": many}
        s = many["step_ms"]
        share = f"{many['allreduce_ms']:.1f} ms ({many['allreduce_ms'] / s:.0%})" if "allreduce_ms" in many else "-"
        noop = f"{many['noop_ms']:.1f} ms ({(s - many['noop_ms']) / s:.0%})" if "noop_ms" in many else "-"
        print(f"| {mode} | {one['step_ms']:.1f} ms | {s:.1f} ms | {one['step_ms'] / s:.2f}x | {share} | {noop} |",
              flush=True)
    for mode, r in results.items():
        if "buckets" in r["many"]:
            b = r["many"]["buckets"]
            print(f"\n{mode}: {len(b)} all-reduce(s) per step, {sum(b) * 4 / 1e6:.1f} MB: "
                  f"{', '.join(f'{n * 4 / 1e6:.2f}' for n in b[:8])}{' ...' if len(b) > 8 else ''} MB; "
                  f"wall {r['one']['wall_s']:.0f} s + {r['many']['wall_s']:.0f} s"
                  + (f"; graphs compiled: {r['one']['graphs']} (1 process), {r['many']['graphs']} (rank 0)"
                     if "graphs" in r["one"] else ""))
    parts = [(m, r["many"]) for m, r in results.items() if "plain_ms" in r["many"]]
    if parts:
        print(f"\n{cores} ranks x 1 thread, the step's parts (median ms):\n")
        print("| route | each rank's model alone, no DDP | DDP, no exchange, no buffer broadcast | "
              "DDP, no exchange | DDP, no buffer broadcast | DDP | DDP again, last |")
        print("|---|---|---|---|---|---|---|")
        for mode, r in parts:
            print(f"| {mode} | {r['plain_ms']:.1f} | {r['noop_nobb_ms']:.1f} | {r['noop_ms']:.1f} | "
                  f"{r['nobb_ms']:.1f} | {r['step_ms']:.1f} | {r['again_ms']:.1f} |")
    print(f"\nload after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "cores": cores, "steps": args.steps, "results": results}, f, indent=1)
    shutil.rmtree(out)


if __name__ == "__main__":
    main()
