"""A training step on a busy machine: Lazuli against PyTorch eager while another process keeps one
core busy, and on the quiet machine, in the same run.

An outside user measured a mid-sized MLP step 1.29x faster than eager on a quiet machine and
0.72x with the second core busy. This measures an MLP SGD step of bench/train_bench.py (default
784-1024-1024-10, batch 256, float32; --sizes, --batch) for Lazuli (its pool, LAZULI_NUM_THREADS)
and PyTorch eager (same thread count, its own BLAS and OpenMP).

Each candidate runs in its own process (the pool is sized once per process); conditions and
candidates alternate within every round, and the busy condition starts one spinning process
pinned to the last core. Reported: per-step median [min-max] over rounds, eager's time over each
candidate's, and for Lazuli the pool's split parallel_for jobs that its caller ran alone because
no worker arrived in time (PoolSplitJobsRunAlone of PoolSplitJobs, over all rounds). "lazuli, 1
thread" (LAZULI_NUM_THREADS=1) is the floor a busy machine leaves: the pool loses nothing beyond
the taken core when busy Lazuli matches it.

Run: PYTHONPATH=python <torch venv>/bin/python bench/busy_bench.py [--rounds 5] [--steps 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = r"""
import json, os, sys, time
sys.path.insert(0, os.environ["BENCH_DIR"])
import train_bench as tb
steps = int(os.environ["BENCH_STEPS"])
sizes = [int(v) for v in os.environ["BENCH_SIZES"].split(",")]
batch = int(os.environ["BENCH_BATCH"])
if os.environ["BENCH_CAND"] == "torch":
    step, finish = tb.torch_trainer(sizes, batch)
else:
    step, finish = tb.lazuli_trainer(sizes, batch)
out = {"s": tb.time_steps(step, finish, steps)}
if os.environ["BENCH_CAND"] == "lazuli":
    import lazuli as lz
    out.update(jobs=lz.debug.counter_value("PoolSplitJobs"),
               alone=lz.debug.counter_value("PoolSplitJobsRunAlone"))
print(json.dumps(out))
"""

CANDIDATES = {
    "lazuli": {"BENCH_CAND": "lazuli"},
    "lazuli, 1 thread": {"BENCH_CAND": "lazuli", "LAZULI_NUM_THREADS": "1"},
    "torch eager": {"BENCH_CAND": "torch"},
}


def run(cand, steps, omp_policy, sizes, batch):
    env = dict(os.environ, BENCH_DIR=HERE, BENCH_STEPS=str(steps), BENCH_SIZES=sizes,
               BENCH_BATCH=str(batch), **CANDIDATES[cand])
    env.pop("OMP_WAIT_POLICY", None)
    if omp_policy:
        env["OMP_WAIT_POLICY"] = omp_policy
    out = subprocess.run([sys.executable, "-c", WORKER], env=env, capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{cand}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def start_hog(pinned):
    """One process spinning (as another user's job would): on the last core, or wherever the OS
    puts it."""
    pin = "os.sched_setaffinity(0, {%d})\n" % (os.cpu_count() - 1) if pinned else ""
    code = "import os\n" + pin + "while True:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--omp-wait-policy", default="PASSIVE",
                    help="OMP_WAIT_POLICY for the workers ('' leaves it unset: OpenMP's default)")
    ap.add_argument("--unpinned", action="store_true", help="the busy process is not pinned to a core")
    ap.add_argument("--sizes", default="784,1024,1024,10", help="the MLP's layer widths")
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    print(f"busy_bench: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} "
          f"cores, LAZULI_NUM_THREADS={os.environ.get('LAZULI_NUM_THREADS', 'all')}, load "
          f"{os.getloadavg()[0]:.2f}, OMP_WAIT_POLICY={args.omp_wait_policy or 'unset'}, busy process "
          f"{'unpinned' if args.unpinned else 'pinned'}, MLP {args.sizes} batch {args.batch}", flush=True)
    samples = {(c, cand): [] for c in ("quiet", "busy") for cand in CANDIDATES}
    split = {(c, cand): [0, 0] for c in ("quiet", "busy") for cand in CANDIDATES}  # [alone, jobs]
    for r in range(args.rounds):
        for cond in (("quiet", "busy") if r % 2 == 0 else ("busy", "quiet")):
            hog = start_hog(not args.unpinned) if cond == "busy" else None
            try:
                names = list(CANDIDATES)
                for cand in names[r % len(names):] + names[:r % len(names)]:
                    res = run(cand, args.steps, args.omp_wait_policy, args.sizes, args.batch)
                    samples[(cond, cand)].append(res["s"])
                    split[(cond, cand)][0] += res.get("alone", 0)
                    split[(cond, cand)][1] += res.get("jobs", 0)
            finally:
                if hog:
                    hog.kill()
                    hog.wait()
        print(f"  round {r}: " + ", ".join(f"{c}/{k} {v[-1] * 1e3:.1f} ms" for (c, k), v in samples.items()),
              flush=True)
    print("\n| condition | candidate | step, median [min-max] | eager's time over this | split jobs run alone |")
    print("|---|---|---|---|---|")
    for cond in ("quiet", "busy"):
        eager = statistics.median(samples[(cond, "torch eager")])
        for cand in CANDIDATES:
            v = samples[(cond, cand)]
            m = statistics.median(v)
            alone, jobs = split[(cond, cand)]
            print(f"| {cond} | {cand} | {m * 1e3:.2f} ms [{min(v) * 1e3:.2f}-{max(v) * 1e3:.2f}] | "
                  f"{eager / m:.2f}x | {f'{alone} of {jobs}' if jobs else '-'} |")
    print(f"\nbusy_bench: done {time.strftime('%H:%M:%S UTC', time.gmtime())}, load "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
