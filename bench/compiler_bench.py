"""The cpu backend's compiler, each target against a baseline measured in the same run
(alternating rounds, medians; MACHINE.md: the machine is shared and noisy).

  1. fused elementwise chain ((x*a+b).relu()*c-d)/e over 16M float32 (6 ops, one kernel),
     LAZULI_NUM_THREADS=2, time per sync: >= 80% of a plain 64 MB copy's speed (numpy
     np.copyto; a 2-thread copy is printed too), and >= 3x as fast as numpy on the expression as
     written (temporaries per op).
  2. a @ b, float32, n = 1024 and 2048: >= 90% of the fastest of oneDNN's dnnl_sgemm, OpenBLAS's
     cblas_sgemm (with the environment's OPENBLAS_CORETYPE) and BLIS's bli_sgemm, called directly
     (ctypes) in the same process with 2 threads.
  3. cold compile of a training step (2-layer MLP, forward + backward + SGD, 27 ops) in a
     fresh process with an empty LAZULI_CACHE_DIR: CompileTime < 150 ms; warm start (a second
     fresh process, same cache dir): CompileTime < 10 ms. The nn/optim version of the step
     (cross-entropy, 16 kernels) is printed too.

Run: PYTHONPATH=python /usr/bin/python3 bench/compiler_bench.py [--rounds N] [--only elementwise,matmul,compile]
"""
import argparse
import concurrent.futures
import ctypes
import ctypes.util
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

# --threads N (default 2, the targets' setting) is read before lazuli is imported: the runtime
# reads LAZULI_NUM_THREADS once.
THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
os.environ["LAZULI_NUM_THREADS"] = str(THREADS)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # MACHINE.md: idle OpenMP threads spin
if "LAZULI_CACHE_DIR" not in os.environ:  # a private kernel cache, removed at exit
    _cache = tempfile.TemporaryDirectory(prefix="lazuli-bench-cache-")
    os.environ["LAZULI_CACHE_DIR"] = _cache.name

import numpy as np  # noqa: E402

import lazuli as lz  # noqa: E402

# A library's idle threads spin for a while after a call (OpenBLAS, libgomp): each candidate's
# block starts after this pause and one untimed call, so no candidate runs next to another's
# spinning threads.
SETTLE_S = 0.3


def median(xs):
    return statistics.median(xs)


def timed_block(fn, iters):
    """Runs fn once untimed, then iters timed calls; returns the median seconds per call."""
    time.sleep(SETTLE_S)
    fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return median(ts)


def alternate(cands, rounds, iters):
    """cands: [(name, fn)]; every round measures every candidate (A/B alternation)."""
    samples = {name: [] for name, _ in cands}
    for r in range(rounds):
        order = cands if r % 2 == 0 else cands[::-1]
        for name, fn in order:
            samples[name].append(timed_block(fn, iters))
    return samples


# ---------------------------------------------------------------------------------------------
# 1. fused elementwise chain

N_ELEM = 16 * 1024 * 1024
A, B, C, D, E = 1.5, 0.25, 2.0, 0.5, 3.0


def lz_chain(x):
    return ((x * A + B).relu() * C - D) / E   # mul, add, relu, mul, sub, div


def np_chain(x):
    return (np.maximum(x * A + B, 0) * C - D) / E   # as written: a temporary per op


def elementwise(rounds, iters):
    rng = np.random.default_rng(0)
    xn = rng.standard_normal(N_ELEM, dtype=np.float32)
    x = lz.from_numpy(xn)
    lz.sync(wait=True)
    plan = lz.debug.dump_kernels([lz_chain(x)])
    first = plan.splitlines()[0]
    m = re.match(r"plan: (\d+) steps \((\d+) kernel launches of (\d+) kernels, (\d+) library calls, (\d+) fallbacks\)", first)
    one_kernel = m is not None and m.group(1, 2, 3, 4, 5) == ("1", "1", "1", "0", "0")
    y = lz_chain(x)
    lz.sync(wait=True)
    ok = np.allclose(y.numpy(), np_chain(xn), rtol=1e-5, atol=1e-6)
    del y

    holder = [None]

    def lazuli_step():
        holder[0] = None          # the previous result's buffer goes back before the new sync
        holder[0] = lz_chain(x)   # records 6 ops (+ 5 scalar constants) on the same input
        lz.sync(wait=True)        # one kernel, recomputed every call

    src = rng.standard_normal(N_ELEM, dtype=np.float32)
    dst = np.empty_like(src)
    dst[:] = 0
    half = N_ELEM // 2
    pool = concurrent.futures.ThreadPoolExecutor(THREADS)  # np.copyto releases the GIL

    def copy_1t():
        np.copyto(dst, src)

    def copy_2t():
        fs = [pool.submit(np.copyto, dst[i * half:(i + 1) * half], src[i * half:(i + 1) * half])
              for i in range(THREADS)]
        for f in fs:
            f.result()

    def numpy_expr():
        np_chain(xn)

    cands = [("lazuli fused chain", lazuli_step), ("numpy copyto (1 thread)", copy_1t),
             ("copy, 2 threads (numpy halves)", copy_2t), ("numpy expression as written", numpy_expr)]
    lz.debug.clear_counters()
    s = alternate(cands, rounds, iters)
    pool.shutdown()
    compiles = lz.debug.counter_value("UncachedCompile")
    return {"samples": s, "one_kernel": one_kernel, "plan_line": first, "correct": ok,
            "compiles_during_timing": compiles}


# ---------------------------------------------------------------------------------------------
# 2. matrix products

def _lib(path):
    return ctypes.CDLL(path, mode=os.RTLD_LOCAL)


def blas_candidates(n, an, bn):
    """Direct calls of each library into a preallocated C; returns [(name, fn, c_array)]."""
    fp = ctypes.POINTER(ctypes.c_float)
    pa, pb = an.ctypes.data_as(fp), bn.ctypes.data_as(fp)
    out = []

    gomp = _lib(ctypes.util.find_library("gomp") or "libgomp.so.1")
    gomp.omp_set_num_threads(THREADS)   # this (main) thread's OpenMP team: oneDNN and BLIS
    dnnl = _lib("libdnnl.so.2")
    dnnl.dnnl_sgemm.argtypes = [ctypes.c_char, ctypes.c_char, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_float, fp, ctypes.c_int64, fp, ctypes.c_int64, ctypes.c_float,
                                fp, ctypes.c_int64]
    c1 = np.zeros((n, n), np.float32)
    p1 = c1.ctypes.data_as(fp)
    out.append(("oneDNN dnnl_sgemm", lambda: dnnl.dnnl_sgemm(b"N", b"N", n, n, n, 1.0, pa, n, pb, n, 0.0, p1, n), c1))

    ob = _lib("libopenblas.so.0")
    ob.openblas_set_num_threads(THREADS)
    ob.openblas_get_corename.restype = ctypes.c_char_p
    core = ob.openblas_get_corename().decode()
    ob.cblas_sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.c_float, fp, ctypes.c_int, fp, ctypes.c_int,
                               ctypes.c_float, fp, ctypes.c_int]
    c2 = np.zeros((n, n), np.float32)
    p2 = c2.ctypes.data_as(fp)
    out.append((f"OpenBLAS cblas_sgemm ({core})",
                lambda: ob.cblas_sgemm(101, 111, 111, n, n, n, 1.0, pa, n, pb, n, 0.0, p2, n), c2))

    blis = _lib("libblis.so.4")
    blis.bli_thread_set_num_threads(ctypes.c_int64(THREADS))
    blis.bli_arch_query_id.restype = ctypes.c_int
    blis.bli_arch_string.restype = ctypes.c_char_p
    arch = blis.bli_arch_string(blis.bli_arch_query_id()).decode()
    i64 = ctypes.c_int64
    blis.bli_sgemm.argtypes = [ctypes.c_int, ctypes.c_int, i64, i64, i64, fp, fp, i64, i64, fp, i64, i64,
                               fp, fp, i64, i64]
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
    c3 = np.zeros((n, n), np.float32)
    p3 = c3.ctypes.data_as(fp)
    # row-major: row stride n, column stride 1
    out.append((f"BLIS bli_sgemm ({arch})",
                lambda: blis.bli_sgemm(0, 0, n, n, n, ctypes.byref(one), pa, n, 1, pb, n, 1,
                                       ctypes.byref(zero), p3, n, 1), c3))
    return out


def matmul(n, rounds, iters):
    rng = np.random.default_rng(n)
    an = rng.standard_normal((n, n), dtype=np.float32)
    bn = rng.standard_normal((n, n), dtype=np.float32)
    a, b = lz.from_numpy(an), lz.from_numpy(bn)
    lz.sync(wait=True)
    first = lz.debug.dump_kernels([a @ b]).splitlines()[0]
    holder = [None]

    def lazuli_step():
        holder[0] = None
        holder[0] = a @ b
        lz.sync(wait=True)

    lazuli_step()
    ref = holder[0].numpy()
    libs = blas_candidates(n, an, bn)
    correct = {}
    for name, fn, c in libs:
        fn()
        correct[name] = bool(np.allclose(c, ref, rtol=1e-3, atol=1e-2 * np.sqrt(n)))
    cands = [("lazuli a @ b", lazuli_step)] + [(name, fn) for name, fn, _ in libs]
    s = alternate(cands, rounds, iters)
    return {"samples": s, "plan_line": first, "correct": correct}


# ---------------------------------------------------------------------------------------------
# 3. cold and warm compile of a training step (child processes)

def mlp_manual(batch=64, din=784, dh=256, dout=10, lr=0.01):
    """2-layer MLP, MSE loss, backward written by hand, SGD in place: 27 recorded ops (plus the
    scalar constants they create)."""
    rng = np.random.default_rng(0)
    t = lambda *s: lz.from_numpy((rng.standard_normal(s, dtype=np.float32) * 0.05))  # noqa: E731
    x, y = t(batch, din), t(batch, dout)
    w1, b1, w2, b2 = t(din, dh), t(dh), t(dh, dout), t(dout)
    lz.sync(wait=True)

    def step():
        hp = x @ w1 + b1                                   # 2
        h = hp.relu()                                      # 1
        o = h @ w2 + b2                                    # 2
        diff = o - y                                       # 1
        loss = (diff * diff).mean()                        # 2
        g = diff * (2.0 / (batch * dout))                  # 1 (+ constant)
        gw2 = lz.transpose(h, 0, 1) @ g                    # 2
        gb2 = g.sum(0)                                     # 1
        gh = lz.where(hp > 0, g @ lz.transpose(w2, 0, 1), 0.0)   # 4 (gt, transpose, matmul, where)
        gw1 = lz.transpose(x, 0, 1) @ gh                   # 2
        gb1 = gh.sum(0)                                    # 1
        for p, gp in ((w1, gw1), (b1, gb1), (w2, gw2), (b2, gb2)):
            p.sub_(gp * lr)                                # 2 each: 8
        return [loss, w1, b1, w2, b2]
    return step


def mlp_nn(batch=64, din=784, dh=256, dout=10):
    from lazuli import nn
    lz.manual_seed(0)
    model = nn.Sequential(nn.Linear(din, dh), nn.ReLU(), nn.Linear(dh, dout))
    opt = lz.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    x = lz.tensor(rng.standard_normal((batch, din), dtype=np.float32))
    y = lz.tensor(rng.integers(0, dout, batch))
    lz.sync(wait=True)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return [loss] + list(model.parameters())
    return step


def child(kind, preload_jit):
    t_start = time.perf_counter()
    if preload_jit:
        # Diagnostic: the code generator library (libLLVM-14 behind it) loaded before the timed
        # step, so its load time is outside CompileTime (the backend's dlopen finds it loaded).
        ctypes.CDLL(os.path.join(os.path.dirname(lz.__file__), "liblazuli_jit.so"),
                    mode=os.RTLD_NOW | os.RTLD_LOCAL)
    t_load = time.perf_counter()
    step = {"manual": mlp_manual, "nn": mlp_nn}[kind]()
    lz.debug.clear_counters()
    lz.debug.clear_metrics()
    c0 = time.process_time()
    t0 = time.perf_counter()
    roots = step()   # kept: the loss is an output of the step's program
    t1 = time.perf_counter()
    lz.sync(wait=True)
    t2 = time.perf_counter()
    c2 = time.process_time()
    ct = lz.debug.metric_data("CompileTime")
    counters = {k: lz.debug.counter_value(k) for k in
                ("KernelCompile", "PersistentCacheHit", "PersistentCacheMiss", "UncachedCompile")}
    roots = step()   # the same step again (a cache hit), to describe its plan
    graph_nodes = lz.debug.dump_graph(roots).count("\n")
    plan = lz.debug.dump_kernels(roots).splitlines()[0]
    t3 = time.perf_counter()
    lz.sync(wait=True)
    t4 = time.perf_counter()
    print(json.dumps({"compile_ms": ct[1] / 1e6 if ct else 0.0, "first_step_ms": (t2 - t0) * 1e3,
                      "record_ms": (t1 - t0) * 1e3,
                      "first_step_cpu_ms": (c2 - c0) * 1e3, "second_sync_ms": (t4 - t3) * 1e3,
                      "setup_ms": (t0 - t_start) * 1e3,
                      "jit_preload_ms": (t_load - t_start) * 1e3, "counters": counters, "plan": plan,
                      "graph_lines": graph_nodes}))


def run_child(kind, cache_dir, preload_jit=False):
    env = dict(os.environ, LAZULI_CACHE_DIR=cache_dir, LAZULI_NUM_THREADS=str(THREADS))
    t0 = time.perf_counter()
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--threads", str(THREADS)]
    cmd += ["--preload-jit"] if preload_jit else []
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["process_ms"] = (time.perf_counter() - t0) * 1e3
    return r


def compile_bench(rounds):
    """Per round and kind: cold then warm (same fresh cache dir), then the same pair with the
    code generator library preloaded (diagnostic: what CompileTime is without libLLVM's load)."""
    res = {}
    for kind in ("manual", "nn"):
        runs = {"cold": [], "warm": [], "cold, JIT preloaded": [], "warm, JIT preloaded": []}
        for _ in range(rounds):
            for pre, suffix in ((False, ""), (True, ", JIT preloaded")):
                with tempfile.TemporaryDirectory(prefix="lazuli-cold-") as d:
                    time.sleep(SETTLE_S)
                    runs["cold" + suffix].append(run_child(kind, d, pre))
                    time.sleep(SETTLE_S)
                    runs["warm" + suffix].append(run_child(kind, d, pre))
        res[kind] = runs
    return res


# ---------------------------------------------------------------------------------------------

def verdict(ok):
    return "MET" if ok else "MISSED"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--only", default="elementwise,matmul,compile")
    ap.add_argument("--child")
    ap.add_argument("--preload-jit", action="store_true")
    ap.add_argument("--threads", type=int, default=2, help="LAZULI_NUM_THREADS and the libraries' threads")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.preload_jit)
        return
    parts = args.only.split(",")
    print(f"machine: {os.cpu_count()} cpus; LAZULI_NUM_THREADS={THREADS}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; backend {lz.backend()}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
          f"{os.getloadavg()[0]:.2f}; {args.rounds} alternating rounds x {args.iters} timed calls, medians")
    pkg = os.path.dirname(lz.__file__)
    built = {f: time.strftime("%H:%M:%S", time.gmtime(os.path.getmtime(os.path.join(pkg, f))))
             for f in sorted(os.listdir(pkg)) if f.endswith(".so")}
    print("extension built (UTC): " + ", ".join(f"{k} {v}" for k, v in built.items()))

    if "elementwise" in parts:
        r = elementwise(args.rounds, args.iters)
        s = r["samples"]
        mb = N_ELEM * 4 / 1e6
        lzt = median(s["lazuli fused chain"])
        print(f"\n== 1. fused chain ((x*{A}+{B}).relu()*{C}-{D})/{E} over 16M float32 "
              f"(reads 64 MiB, writes 64 MiB; GB/s counts both)")
        print(f"   plan: {r['plan_line']}  (one kernel: {r['one_kernel']}; matches numpy: {r['correct']}; "
              f"compiles during timing: {r['compiles_during_timing']})")
        print(f"   {'candidate':34s} {'median ms':>9s} {'GB/s (r+w)':>10s} {'lazuli speed vs it':>19s}  per-round ms")
        for name in s:
            t = median(s[name])
            print(f"   {name:34s} {t * 1e3:9.2f} {2 * mb / 1e3 / t:10.1f} {t / lzt:18.2f}x  "
                  + " ".join(f"{v * 1e3:.2f}" for v in s[name]))
        c1 = median(s["numpy copyto (1 thread)"]) / lzt
        c2 = median(s["copy, 2 threads (numpy halves)"]) / lzt
        npx = median(s["numpy expression as written"]) / lzt
        print(f"   target >= 80% of copy speed: {c1 * 100:.0f}% of the 1-thread copyto "
              f"({verdict(c1 >= 0.8)}), {c2 * 100:.0f}% of the 2-thread copy ({verdict(c2 >= 0.8)})")
        print(f"   target >= 3x numpy as written: {npx:.2f}x ({verdict(npx >= 3)})")

    if "matmul" in parts:
        for n in (1024, 2048):
            iters = args.iters if n == 1024 else max(3, args.iters // 2)
            r = matmul(n, args.rounds, iters)
            s = r["samples"]
            flop = 2.0 * n ** 3
            lzt = median(s["lazuli a @ b"])
            libs = [k for k in s if k != "lazuli a @ b"]
            best = min(libs, key=lambda k: median(s[k]))
            print(f"\n== 2. matmul n={n} float32, {THREADS} threads   (lazuli plan: {r['plan_line']})")
            print(f"   {'candidate':34s} {'median ms':>9s} {'GFLOP/s':>8s} {'lazuli/it':>9s} correct  per-round ms")
            for name in s:
                t = median(s[name])
                print(f"   {name:34s} {t * 1e3:9.2f} {flop / t / 1e9:8.1f} {median(s[name]) / lzt * 100:8.0f}% "
                      f"{str(r['correct'].get(name, True)):7s}  " + " ".join(f"{v * 1e3:.2f}" for v in s[name]))
            frac = median(s[best]) / lzt
            print(f"   target >= 90% of the fastest ({best}): {frac * 100:.0f}% ({verdict(frac >= 0.9)})")

    if "compile" in parts:
        res = compile_bench(max(3, args.rounds // 2 + 1))
        for kind, label in (("manual", "2-layer MLP 784-256-10 b64, MSE, hand-written backward, SGD"),
                            ("nn", "same MLP via lazuli.nn (CrossEntropyLoss, autograd) + optim.SGD")):
            runs = res[kind]
            print(f"\n== 3. cold/warm compile: {label}")
            print(f"   plan: {runs['cold'][0]['plan']}; dump_graph lines: {runs['cold'][0]['graph_lines']}")
            print(f"   {'fresh process':20s} {'CompileTime':>11s} {'1st step':>8s} {'its CPU':>8s} {'record':>6s} "
                  f"{'2nd sync':>8s} {'setup':>6s} {'process':>7s}  (ms, medians)  counters of the 1st run")
            for tag, rs in runs.items():
                med = lambda k: median([x[k] for x in rs])  # noqa: E731
                cnt = ", ".join(f"{k}={v}" for k, v in rs[0]["counters"].items() if k != "UncachedCompile")
                print(f"   {tag:20s} {med('compile_ms'):11.1f} {med('first_step_ms'):8.1f} "
                      f"{med('first_step_cpu_ms'):8.1f} {med('record_ms'):6.2f} {med('second_sync_ms'):8.2f} "
                      f"{med('setup_ms'):6.1f} {med('process_ms'):7.0f}  {cnt}")
                print(f"   {'':20s} CompileTime per run: " + " ".join(f"{x['compile_ms']:.1f}" for x in rs)
                      + ("; preloading the JIT library took " + " ".join(f"{x['jit_preload_ms']:.0f}" for x in rs)
                         if "preloaded" in tag else ""))
            c = median([x["compile_ms"] for x in runs["cold"]])
            w = median([x["compile_ms"] for x in runs["warm"]])
            print(f"   target cold CompileTime < 150 ms: {c:.1f} ms ({verdict(c < 150)}); "
                  f"warm < 10 ms: {w:.1f} ms ({verdict(w < 10)})")


if __name__ == "__main__":
    main()
