"""What gradient buckets buy Lazuli's own DistributedDataParallel (bench/RESULTS.md
section 20.4): the gradient exchange of a resnet18-sized model (torchvision's resnet18, 62
parameters, 44.7 MB of float32 gradients) on 2 ranks x 1 thread, with one all_reduce per
parameter (bucket_cap_mb=0) and with buckets of 1, 4 and 25 MB, over

  mpi    lazuli.distributed over MPI (mpirun)
  gloo   lazuli.distributed.init_process_group("gloo") under torchrun: the same programs, their
         collectives on torch.distributed's gloo

The step measured is the exchange's part of a real backward: every parameter is a leaf whose
gradient backward() averages (lz.distributed.average_gradients, what DDP sets), the loss a sum
of one cheap term per parameter, so the program is the gradients (ones), the buckets'
concatenation, their all_reduces and the accumulation. "local" is the same backward with no
averaging: what the exchange adds is the difference.

    PYTHONPATH=python python bench/ddp_bucket_bench.py [--routes mpi,gloo] [--steps 15]

Run it with the torch venv's Python (scripts/torch-venv.sh): torchvision gives the parameter
sizes, torchrun starts the gloo route.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

from ring_allreduce_model import launch, timed

CAPS_MB = [0, 1, 4, 25]


def worker(args):
    import lazuli as lz
    import lazuli.distributed as dist
    from lazuli._C import _distributed as _d
    dist.init_process_group(args.worker)
    with open(os.path.join(args.out, "sizes.json")) as f:
        sizes = json.load(f)
    params = [lz.zeros(n).requires_grad_() for n in sizes]
    lz.sync(wait=True)

    def once():
        for p in params:
            p.grad = None
        loss = params[0].sum()
        for p in params[1:]:
            loss = loss + p.sum()
        loss.backward()
        lz.sync()
        lz.wait()

    def median_ms():  # after 3 warm-up calls: each configuration compiles its program once
        return timed(once, args.steps, dist.barrier) * 1e3

    result = {"local": median_ms()}
    for cap in CAPS_MB:
        for p in params:
            _d.average_gradients(p, int(cap * 2**20))
        result[str(cap)] = median_ms()
    counter = "ExecutedNode::all_reduce"
    for cap in CAPS_MB:  # how many all_reduces each cap makes, one step each
        for p in params:
            _d.average_gradients(p, int(cap * 2**20))
        once()
        before = lz.debug.counter_value(counter)
        once()
        result[f"{cap}_reduces"] = lz.debug.counter_value(counter) - before
    if dist.get_rank() == 0:
        with open(os.path.join(args.out, f"{args.worker}.json"), "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", choices=["gloo", "mpi"])
    p.add_argument("--out")
    p.add_argument("--routes", default="mpi,gloo")
    p.add_argument("--steps", type=int, default=15)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    import torchvision
    sizes = [q.numel() for q in torchvision.models.resnet18(num_classes=10).parameters()]
    out = tempfile.mkdtemp()
    with open(os.path.join(out, "sizes.json"), "w") as f:
        json.dump(sizes, f)
    load = lambda: " ".join(open("/proc/loadavg").read().split()[:3])  # noqa: E731
    print(f"resnet18's gradients ({len(sizes)} parameters, {sum(sizes) * 4 / 2**20:.1f} MiB), "
          f"2 ranks x 1 thread, median of {args.steps} steps after 3; load {load()}\n")
    print("| route | local (no exchange) | " + " | ".join(
        "one all_reduce per parameter" if c == 0 else f"{c} MB buckets" for c in CAPS_MB) + " |")
    print("|---" * (len(CAPS_MB) + 2) + "|")
    for route in args.routes.split(","):
        r = launch(route, out, script=__file__)
        cells = [f"{r[str(c)]:.1f} ms ({r[f'{c}_reduces']} all_reduces)" for c in CAPS_MB]
        print(f"| {route} | {r['local']:.1f} ms | " + " | ".join(cells) + " |")
    shutil.rmtree(out)
    print(f"\nload after: {load()}")


if __name__ == "__main__":
    sys.exit(main())
