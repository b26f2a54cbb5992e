#!/usr/bin/env python3
"""The ATen lowering table where the torch.compile bridge pays for it: recording each partition's
ATen graph on Lazuli tensors at its first call (the trace), and what that recording is (the
programs' hashes), for this checkout's bridge against another checkout's.

    git worktree add /tmp/lz-base <commit>      # the baseline's python/ folder
    ln -s $PWD/python/lazuli/_C*.so $PWD/python/lazuli/liblazuli_jit.so /tmp/lz-base/python/lazuli/
    PYTHONPATH=python <torch venv>/bin/python bench/aten_table_bench.py \\
        --baseline /tmp/lz-base/python --rounds 3

Both trees run on this build's extension (the baseline's Python over today's C++ core), so a
difference is the table's and the bridge's, not the compiler's. Each (workload, tree) is a fresh
process, the trees alternating process by process (the machine is shared and noisy); the kernel
cache is shared and warmed by a first unmeasured round, so compiles are disk hits for both.
Figures: `record` is the time inside the bridge's interpret (every node of every partition
looked up, converted and recorded), `first call` the whole first step (dynamo and aot_autograd
included); `hashes` says whether every partition's program hash is the same in both trees.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKLOADS = {
    "resnet18": "torchvision resnet18, eval, inference, batch 8, 3x112x112",
    "mobilenet_v3_small": "torchvision mobilenet_v3_small, eval, inference, batch 8, 3x112x112",
    "resnet18-train": "resnet18 training step, batch norm in train mode, SGD with momentum, batch 8",
    "gpt2-eval": "transformers GPT-2 (2 layers, 256 wide, vocab 8192), eval, inference, batch 4",
    "mlp": "MLP 784-1024-1024-10 training step, cross entropy, SGD, batch 256",
}


def worker(tree, workload):
    """One compile and first call of `workload` with the bridge of `tree` (a python/ folder)."""
    sys.path.insert(0, tree)
    sys.path.insert(0, HERE)
    import torch

    import lazuli.torch
    from lazuli.torch import _bridge
    import torch_workloads as tw

    table = sys.modules.get("lazuli.torch._aten")
    if table is None or not hasattr(table, "interpret"):
        from lazuli.torch import lowering as table  # the Python table of older checkouts
    record = {"seconds": 0.0, "calls": 0}
    real_interpret = table.interpret

    def interpret(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real_interpret(*args, **kwargs)
        finally:
            record["seconds"] += time.perf_counter() - start
            record["calls"] += 1

    table.interpret = interpret
    hashes = {}
    real_trace = _bridge.LazuliPartition._trace

    def trace(self, args):
        traced = real_trace(self, args)
        program = getattr(traced, "program", None)
        hashes[self.name] = program.hash if program is not None else None
        record["nodes"] = record.get("nodes", 0) + sum(
            1 for n in self.gm.graph.nodes if n.op == "call_function")
        return traced

    _bridge.LazuliPartition._trace = trace

    if workload == "gpt2-eval":
        model = tw.build_model("gpt2").eval()
        ids = torch.randint(0, 8192, (4, tw.SEQ), generator=torch.Generator().manual_seed(1))
        inputs = (ids,)

        def fn(ids):
            return model(input_ids=ids).logits
    else:
        model = tw.build_model(workload)
        inputs = tw.make_inputs(workload, 8 if workload != "mlp" else 256)
        fn = tw._step_fn(workload, model)
    compiled = torch.compile(fn, backend=lazuli.torch.backend)
    start = time.perf_counter()
    with torch.no_grad() if workload in ("resnet18", "mobilenet_v3_small", "gpt2-eval") else \
            _nullcontext():
        compiled(*inputs)
    first = time.perf_counter() - start
    print(json.dumps({"record": record["seconds"], "partitions": record["calls"], "first": first,
                      "hashes": hashes, "nodes": record.get("nodes", 0)}))


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def run(tree, workload, env):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", tree, workload],
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{workload} on {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="the baseline checkout's python/ folder (required)")
    parser.add_argument("--tree", default=os.path.join(ROOT, "python"))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    if not args.baseline:
        parser.error("--baseline is required")
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # MACHINE.md: torch's OpenMP beside our pool
    trees = {"baseline": args.baseline, "this": args.tree}
    workloads = args.workloads.split(",")
    results = {(w, t): [] for w in workloads for t in trees}
    for w in workloads:  # warm the kernel cache: compiles become disk hits for both trees
        run(args.tree, w, env)
    for r in range(args.rounds):
        for w in workloads:
            for t in (("baseline", "this") if r % 2 == 0 else ("this", "baseline")):
                results[(w, t)].append(run(trees[t], w, env))
    print(f"| workload | nodes | partitions | record, baseline (ms) | record, this (ms) | this / "
          f"baseline | first call, baseline (s) | first call, this (s) | same hashes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w in workloads:
        base, this = results[(w, "baseline")], results[(w, "this")]
        rb = statistics.median(x["record"] for x in base) * 1e3
        rt = statistics.median(x["record"] for x in this) * 1e3
        fb = statistics.median(x["first"] for x in base)
        ft = statistics.median(x["first"] for x in this)
        same = all(x["hashes"] == base[0]["hashes"] for x in base + this)
        print(f"| {w} | {this[0]['nodes']} | {this[0]['partitions']} | {rb:.1f} | {rt:.1f} | "
              f"{rt / rb:.2f} | {fb:.2f} | {ft:.2f} | {'yes' if same else 'NO'} |")
        if not same:
            for name, h in sorted(this[0]["hashes"].items()):
                if base[0]["hashes"].get(name) != h:
                    print(f"    {name}: {base[0]['hashes'].get(name)} -> {h}")


if __name__ == "__main__":
    main()
