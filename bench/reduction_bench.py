"""Float32 reductions and index ops on the cpu backend (and the float32 sum accuracy fix):
time per synced program for each workload, and the accuracy of float32 sums against float64.

Workloads (float32, LAZULI_NUM_THREADS=2 unless --threads):
  sum_full         sum of 16M values (one row reduction)
  sum_0_2_3        sum over dims (0, 2, 3) of (16, 4, 256, 256): the accuracy reproducer
  sum_cols         sum over dim 0 of (4096, 4096) (a column reduction)
  softmax          softmax over the rows of (4096, 1024)
  layer_norm       (x - mean) / sqrt(var + 1e-5) over the rows of (4096, 1024)
  log_softmax      log_softmax over the rows of (4096, 1024)
  ln_affine        lz.nn.functional.layer_norm with weight and bias, (512 x 768): GPT-2-small's
  attn_softmax     softmax over the rows of (6144, 128): GPT-2-small's attention probabilities
  cross_entropy    cross-entropy loss and its gradient, logits (4096, 1000)
  embedding        embedding (8192, 256) of 8192 tokens, forward and the weight's gradient
  max_pool         max_pool2d 3x3, stride 2, padding 1 over (8, 64, 56, 56): resnet18's, batch 8
  avg_pool         avg_pool2d with the same window over the same input
  avg_pool_grad    avg_pool2d's input gradient there

`--against DIR` runs the same workloads with the lazuli package found in DIR (e.g. a copy of an
earlier build's python/ folder) in alternating subprocesses (MACHINE.md: the machine is noisy)
and prints both medians and their ratio. `--baseline-env NAME=VALUE` adds a baseline that runs
this same package with that environment variable set (e.g. LAZULI_FUSE_ROWS=0: softmax and
layer_norm without fusion rule 5b).

Run: PYTHONPATH=python /usr/bin/python3 bench/reduction_bench.py [--rounds N] [--against DIR |
     --baseline-env NAME=VALUE] [--only w1,w2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
os.environ["LAZULI_NUM_THREADS"] = str(THREADS)
if "LAZULI_CACHE_DIR" not in os.environ:
    _cache = tempfile.TemporaryDirectory(prefix="lazuli-bench-cache-")
    os.environ["LAZULI_CACHE_DIR"] = _cache.name


def workloads(lz, np):
    rng = np.random.default_rng(0)
    F = lz.nn.functional

    def dev(a):
        t = lz.tensor(a)
        lz.sync_tensors([t], wait=True)
        return t

    big = dev((rng.random(16 << 20) + 0.1).astype(np.float32))
    repro = dev((rng.random((16, 4, 256, 256)) + 0.1).astype(np.float32))
    cols = dev(rng.standard_normal((4096, 4096)).astype(np.float32))
    rows = dev(rng.standard_normal((4096, 1024)).astype(np.float32))
    hidden = dev(rng.standard_normal((512, 768)).astype(np.float32))
    ln_w = dev(rng.standard_normal(768).astype(np.float32))
    ln_b = dev(rng.standard_normal(768).astype(np.float32))
    scores = dev(rng.standard_normal((6144, 128)).astype(np.float32))
    # Leaves made from host data (detach() of a synced tensor does not take requires_grad here).
    logits = lz.tensor(rng.standard_normal((4096, 1000)).astype(np.float32)).requires_grad_()
    target = dev(rng.integers(0, 1000, 4096))
    table = lz.tensor(rng.standard_normal((8192, 256)).astype(np.float32)).requires_grad_()
    tokens = dev(rng.integers(0, 8192, 8192))
    images = dev(rng.standard_normal((8, 64, 56, 56)).astype(np.float32))
    pooled = dev(rng.standard_normal((8, 64, 28, 28)).astype(np.float32))

    def layer_norm(x):
        mean = x.mean(1, keepdim=True)
        d = x - mean
        return d / lz.sqrt((d * d).mean(1, keepdim=True) + 1e-5)

    def cross_entropy():
        logits.grad = None
        loss = F.cross_entropy(logits, target)
        loss.backward()
        return [loss, logits.grad]

    def embedding():
        table.grad = None
        y = F.embedding(tokens, table)
        (y * y).sum().backward()
        return [y, table.grad]

    return {
        "sum_full": lambda: [lz.sum(big)],
        "sum_0_2_3": lambda: [lz.sum(repro, (0, 2, 3))],
        "sum_cols": lambda: [lz.sum(cols, 0)],
        "softmax": lambda: [F.softmax(rows, 1)],
        "layer_norm": lambda: [layer_norm(rows)],
        "log_softmax": lambda: [F.log_softmax(rows, 1)],
        "ln_affine": lambda: [F.layer_norm(hidden, (768,), ln_w, ln_b)],
        "attn_softmax": lambda: [F.softmax(scores, -1)],
        "cross_entropy": cross_entropy,
        "embedding": embedding,
        "max_pool": lambda: [F.max_pool2d(images, 3, 2, 1)],
        "avg_pool": lambda: [F.avg_pool2d(images, 3, 2, 1)],
        "avg_pool_grad": lambda: [lz._C._nn.avg_pool_input_grad(pooled, (8, 64, 56, 56), (3, 3),
                                                                 (2, 2), (1, 1))],
    }


def accuracy(lz, np):
    rng = np.random.default_rng(0)
    a = (rng.random((16, 4, 256, 256)) + 0.1).astype(np.float32)
    got = lz.sum(lz.tensor(a), (0, 2, 3)).numpy().astype(np.float64)
    exact = a.astype(np.float64).sum(axis=(0, 2, 3))
    v = (rng.random(10_000_000) + 0.1).astype(np.float32)
    var = float(lz.var(lz.tensor(v)).item())
    vexact = v.astype(np.float64).var(ddof=1)
    c = (rng.random((1 << 20, 8)) + 0.1).astype(np.float32)
    cs = lz.sum(lz.tensor(c), 0).numpy().astype(np.float64)
    cexact = c.astype(np.float64).sum(axis=0)
    return {"sum_0_2_3_rel_err": float(np.max(np.abs(got - exact) / exact)),
            "var_10M_rel_err": abs(var - vexact) / vexact,
            "col_sum_1M_rows_rel_err": float(np.max(np.abs(cs - cexact) / cexact))}


def worker(iters, only):
    import numpy as np
    import lazuli as lz
    out = {"accuracy": {} if only else accuracy(lz, np), "ms": {}}
    for name, fn in workloads(lz, np).items():
        if only and name not in only:
            continue
        for _ in range(2):  # compile, then warm
            lz.sync_tensors(fn(), wait=True)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            lz.sync_tensors(fn(), wait=True)
            ts.append(time.perf_counter() - t0)
        out["ms"][name] = statistics.median(ts) * 1e3
        out.setdefault("fallbacks", {}).update(
            {k: v for k, v in lz.debug.counters().items() if k.startswith("fallback::")}
            if hasattr(lz.debug, "counters") else {})
    return out


def run_worker(pythonpath, iters, only, extra_env=None):
    env = dict(os.environ, PYTHONPATH=pythonpath, **(extra_env or {}))
    cmd = [sys.executable, __file__, "--worker", "--iters", str(iters), "--threads", str(THREADS),
           "--only", only]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--against", help="a folder holding another lazuli package (the baseline)")
    p.add_argument("--baseline-env", help="NAME=VALUE: the baseline is this package with it set")
    p.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(a.iters, [w for w in a.only.split(",") if w])))
        return
    here = os.environ.get("PYTHONPATH", "python")
    candidates = [("this build", here, {})]
    if a.against:
        candidates.append(("baseline", a.against, {}))
    if a.baseline_env:
        name, _, value = a.baseline_env.partition("=")
        candidates.append((a.baseline_env, here, {name: value}))
    runs = {label: [] for label, _, _ in candidates}
    for r in range(a.rounds):
        order = candidates[r % len(candidates):] + candidates[:r % len(candidates)]
        for label, path, env in order:
            runs[label].append(run_worker(path, a.iters, a.only, env))
    print(f"threads {THREADS}, {a.rounds} rounds x {a.iters} timed syncs, medians (ms)")
    header = f"{'workload':<15}" + "".join(f"{label:>14}" for label, _, _ in candidates)
    print(header + ("   this/baseline, per baseline" if len(candidates) > 1 else ""))
    for name in runs[candidates[0][0]][0]["ms"]:
        meds = [statistics.median(r["ms"][name] for r in runs[label]) for label, _, _ in candidates]
        line = f"{name:<15}" + "".join(f"{m:>14.3f}" for m in meds)
        line += "   " + " ".join(f"{meds[0] / m:.2f}" for m in meds[1:])
        print(line)
    for label, _, _ in candidates:
        if not runs[label][0]["accuracy"]:
            continue
        print(f"accuracy ({label}): " + ", ".join(f"{k} {v:.2e}" for k, v in runs[label][0]["accuracy"].items()))


if __name__ == "__main__":
    main()
