"""What the gradient exchange of data parallelism costs at 8, 64 and 512 ranks, on paper, from an
all-reduce measured here between 2 ranks (bench/RESULTS.md section 20).

1. Measures a 2-rank all-reduce of float32 tensors of 4 KB .. 64 MB (2 ranks x 1 thread) on
     gloo     torch.distributed's gloo on CPU tensors, one blocking call (torchrun): the transport
     mpi      Lazuli's own API, lazuli.distributed over MPI (mpirun): a program of one all_reduce
              per size, synced and waited for
     device   torch.distributed's "lazuli" backend on tensors of the lazy device (torchrun): the
              same program, its collective on the backend's own gloo group
   and fits t(n) = a + n/B (least squares on relative error).
2. Tabulates the ring all-reduce model t(p, n) = 2(p-1) alpha + 2(p-1)/p * n/B, where a 2-rank
   ring is 2 steps of alpha + (n/2)/B, so alpha = a/2 and B is the fitted B, for the gradients of
   the MLP and resnet18 of bench/distributed_bench.py, against their measured step time: with the
   fitted alpha and B (shared memory inside this machine: an upper bound for any network), and with
   assumed links of 10 Gb/s and 100 Gb/s.

    PYTHONPATH=python python bench/ring_allreduce_model.py [--routes gloo,mpi,device]
        [--compute mlp=13.6,resnet18=177] [--use mpi,gloo]

--compute: the models' measured step times in ms (1 process over the whole batch), from
bench/distributed_bench.py; --use: the routes whose fits the model uses (default mpi,gloo; the
device route's fit is printed, not modelled: its program adds a fixed cost per step, not per ring
step).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]  # bytes
# Gradient bytes (float32) of bench/distributed_bench.py's models.
MLP_PARAMS = 512 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10  # 512-1024-1024-10
RESNET18_PARAMS = 11_181_642  # torchvision.models.resnet18(num_classes=10)
MODELS = {"mlp": MLP_PARAMS * 4, "resnet18": RESNET18_PARAMS * 4}
RANKS = [2, 8, 64, 512]
# Assumed network links (not measured here): line rate, and a per-message latency typical of
# TCP on 10 Gb/s Ethernet and of RDMA-class 100 Gb/s fabrics.
LINKS = [("10 Gb/s link (assumed)", 25e-6, 10e9 / 8), ("100 Gb/s link (assumed)", 5e-6, 100e9 / 8)]


def reps_for(nbytes):
    return max(10, min(200, int(64e6 / nbytes)))


def worker(args):
    route = args.worker
    times = {}
    if route == "mpi":
        import numpy as np
        import lazuli as lz
        import lazuli.distributed as dist
        dist.init_process_group("mpi")
        rank = dist.get_rank()
        for nbytes in SIZES:
            x = lz.tensor(np.zeros(nbytes // 4, np.float32))
            lz.sync(wait=True)

            def once():
                dist.all_reduce(x)
                lz.sync()
                lz.wait()
            times[nbytes] = timed(once, reps_for(nbytes), dist.barrier)
    else:
        import torch
        import torch.distributed as dist
        if route == "device":
            import lazuli.torch as lzt
            dev = lzt.device()
            dist.init_process_group("lazuli")
        else:
            dev = torch.device("cpu")
            dist.init_process_group("gloo")
        rank = dist.get_rank()
        for nbytes in SIZES:
            x = torch.zeros(nbytes // 4, device=dev)
            if route == "device":
                lzt.sync(wait=True)

                def once():
                    dist.all_reduce(x)
                    lzt.sync()
                    lzt.wait()
            else:
                def once():
                    dist.all_reduce(x)
            times[nbytes] = timed(once, reps_for(nbytes), dist.barrier)
        dist.destroy_process_group()
    if rank == 0:
        with open(os.path.join(args.out, f"{route}.json"), "w") as f:
            json.dump(times, f)


def timed(once, reps, barrier):
    for _ in range(3):  # warm-up: Lazuli compiles the program of each size once
        once()
    barrier()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        once()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2]


def launch(route, out, script=__file__):
    """Runs `script --worker route --out out` on 2 ranks x 1 thread (mpirun for "mpi", torchrun
    otherwise) and returns what rank 0 wrote to out/<route>.json."""
    env = dict(os.environ, OMP_NUM_THREADS="1", LAZULI_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    me = [os.path.abspath(script), "--worker", route, "--out", out]
    if route == "mpi":
        cmd = [shutil.which("mpirun"), "-n", "2", "--oversubscribe", sys.executable] + me
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"] + me
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        keys = ("Error", "error:", "terminate called", "what():", "Traceback", "Abort", "abort")
        errors = list(dict.fromkeys(line for line in lines if any(k in line for k in keys)))[:20]
        raise RuntimeError(f"{route} failed (exit {proc.returncode}):\n" + "\n".join(errors + ["..."] + lines[-12:]))
    with open(os.path.join(out, f"{route}.json")) as f:
        return {int(k): v for k, v in json.load(f).items()} if script == __file__ else json.load(f)


def fit(times):
    """t = a + n/B, least squares on the relative error (every size counts alike)."""
    import numpy as np
    n = np.array(sorted(times), float)
    t = np.array([times[int(k)] for k in n])
    A = np.stack([np.ones_like(n), n], 1) / t[:, None]
    (a, inv_b), *_ = np.linalg.lstsq(A, np.ones_like(n), rcond=None)
    worst = max(abs(a + k * inv_b - v) / v for k, v in zip(n, t))
    return a, 1 / inv_b, worst


def ring(p, nbytes, alpha, bw):
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes / bw


def fmt_t(s):
    return f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms" if s < 0.1 else f"{s * 1e3:.0f} ms"


def table(title, alpha, bw, compute):
    print(f"\n{title}: alpha {alpha * 1e6:.1f} us per ring step, B {bw / 1e9:.2f} GB/s\n")
    print("| gradients | " + " | ".join(f"p = {p}" for p in RANKS) + " | step compute (1 process) |")
    print("|---" * (len(RANKS) + 2) + "|")
    for name, nbytes in MODELS.items():
        step = compute.get(name)
        cells = []
        for p in RANKS:
            t = ring(p, nbytes, alpha, bw)
            cell = fmt_t(t)
            if step:
                eff = step / (step + t * 1e3)
                cell += f" ({eff:.0%})"
                if t * 1e3 > step:
                    cell = f"**{cell}**"
            cells.append(cell)
        print(f"| {name} {nbytes / 1e6:.1f} MB | " + " | ".join(cells) + f" | {f'{step:.1f} ms' if step else '-'} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", choices=["gloo", "mpi", "device"])
    p.add_argument("--out")
    p.add_argument("--routes", default="gloo,mpi,device")
    p.add_argument("--use", default="mpi,gloo", help="the routes whose fits the model tables use")
    p.add_argument("--compute", default="", help="measured step times, e.g. mlp=13.2,resnet18=170 (ms)")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    compute = {k: float(v) for k, v in (kv.split("=") for kv in args.compute.split(",") if kv)}
    load = lambda: " ".join(open("/proc/loadavg").read().split()[:3])  # noqa: E731
    print(f"2-rank all-reduce of float32, 2 ranks x 1 thread, median after 3 warm-up calls; load {load()}\n")
    out = tempfile.mkdtemp()
    routes = args.routes.split(",")
    measured, fits = {}, {}
    for route in routes:
        try:
            measured[route] = launch(route, out)
            fits[route] = fit(measured[route])
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"{route}: {e}\n", file=sys.stderr)
    shutil.rmtree(out)
    print("| size | " + " | ".join(measured) + " |")
    print("|---" * (len(measured) + 1) + "|")
    for nbytes in SIZES:
        cells = [f"{fmt_t(measured[r][nbytes])} ({nbytes / measured[r][nbytes] / 1e9:.2f} GB/s)" for r in measured]
        size = f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KB"
        print(f"| {size} | " + " | ".join(cells) + " |")
    print("| fit a + n/B | " + " | ".join(
        f"a {a * 1e6:.0f} us, B {bw / 1e9:.2f} GB/s (worst {w:.0%})" for a, bw, w in fits.values()) + " |")
    print(f"\nload after the measurements: {load()}")
    for route in args.use.split(","):
        if route in fits:
            a, bw, _ = fits[route]
            table(f"Ring model with the {route} fit (shared memory inside this machine, measured)",
                  a / 2, bw, compute)
    for title, alpha, link_bw in LINKS:
        table(f"Ring model on a {title}", alpha, link_bw, compute)
    if compute:
        print("\nEach cell: the all-reduce of all the gradients once per step, and in parentheses the "
              "efficiency step / (step + all-reduce) with no overlap and each rank's batch as measured; "
              "bold: the all-reduce takes longer than the step.")


if __name__ == "__main__":
    main()
