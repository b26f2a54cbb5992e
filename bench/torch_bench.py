"""PyTorch models on Lazuli against PyTorch's own compilers and PyTorch/XLA.

Candidates: PyTorch eager; torch.compile with inductor; torch.compile with backend lazuli; and
PyTorch/XLA 2.9 on the CPU (PJRT_DEVICE=CPU): its lazy device (step barrier: mark_step) and its
`openxla` dynamo backend. Workloads (bench/torch_workloads.py): resnet18 inference (batch 8;
`resnet18-b1` batch 1) and a resnet18 training step (`resnet18-train`), mobilenet_v3_small
inference, a GPT-2 training step (reduced config by default; `gpt2-small` is the default
GPT2Config), the MLP training steps of bench/train_bench.py.

Figures, each from fresh processes where process state matters:
  cold    first call (dynamo trace + compile + run) in a fresh process with empty disk caches
          (LAZULI_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, the XLA persistent cache: fresh temp dirs)
  warm    the same in a second process over the caches the cold process left
  steady  per-step time after warm-up: candidates of one environment alternate in one process,
          rounds repeated over several processes; median and [min-max] of the per-round times,
          and per-round ratios against inductor (both measured in the same round)
  batch   after two calls at the workload's batch, the first call at half that batch: its time
          and what it compiled (lazuli: KernelCompile, UncachedCompile; inductor: generated
          kernels; XLA: compiles)
  profile (lazuli) where the cold first call spends its time: phases and cProfile's top functions

Run (the project's pinned torch; --xla installs PyTorch/XLA once, bench/setup_torch_xla.sh):
  PYTHONPATH=python /root/.cache/lazuli/torch-venv-<hash>/bin/python bench/torch_bench.py \
      [--workloads resnet18,gpt2,mlp,mlp-small] [--figures cold,warm,steady,batch,profile] \
      [--xla] [--repeats 3] [--rounds 5] [--threads 2] [--json out.json]
Workers (run by the driver, one figure per process): --worker {first,steady,batch};
the profile figure runs bench/torch_profile.py. --report a.json[,b.json] prints the tables again.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULT = "TORCH_BENCH_RESULT "
# Steps timed per round in the steady figure (about 0.1-1 s of work per candidate and round).
STEPS = {"resnet18": 5, "resnet18-b1": 20, "resnet18-train": 2, "mobilenet_v3_small": 10,
         "gpt2": 3, "gpt2-small": 1, "mlp": 10, "mlp-small": 200}


# ---- worker side ----------------------------------------------------------------------------------

def _setup_worker(threads):
    import torch
    torch.set_num_threads(threads)
    sys.path.insert(0, HERE)


def _lazuli_counters():
    import lazuli as lz
    c = lz.debug.counter_value
    names = ["KernelCompile", "UncachedCompile", "CachedCompile", "PersistentCacheHit",
             "PersistentCacheMiss", "TorchGraphCompiled", "TorchPartition", "TorchTrace",
             "TorchTraceFailed", "TorchReplay", "WarmProgramRun", "ConvWeightReorder",
             "ConvWeightReuse", "TorchWriteBackInPlace", "TorchWriteBackCopy", "CaptureTrace",
             "CaptureReplay"]
    out = {n: c(n) for n in names}
    fb = {n[len("fallback::"):]: c(n) for n in lz.debug.counter_names() if n.startswith("fallback::")}
    out["fallback_runs"] = sum(fb.values())
    out["fallback_ops"] = fb
    md = lz.debug.metric_data("CompileTime")
    out["CompileTime_s"] = (md[1] / 1e9) if md else 0.0
    return out


def _inductor_counters():
    out = {}
    try:
        from torch._inductor import metrics
        out["generated_kernels"] = metrics.generated_kernel_count
        out["generated_cpp_kernels"] = getattr(metrics, "generated_cpp_vec_kernel_count", None)
    except Exception:  # noqa: BLE001  (a figure, not the benchmark)
        pass
    try:
        from torch._dynamo.utils import counters
        out["dynamo_unique_graphs"] = counters["stats"]["unique_graphs"]
        out["fxgraph_cache_hit"] = counters["inductor"]["fxgraph_cache_hit"]
        out["fxgraph_cache_miss"] = counters["inductor"]["fxgraph_cache_miss"]
        out["aotautograd_cache_hit"] = counters["aot_autograd"]["autograd_cache_hit"]
        out["aotautograd_cache_miss"] = counters["aot_autograd"]["autograd_cache_miss"]
    except Exception:  # noqa: BLE001
        pass
    return out


def _xla_counters():
    import torch_xla.debug.metrics as met
    out = {}
    md = met.metric_data("CompileTime")
    out["xla_compiles"] = md[0] if md else 0
    out["xla_compile_s"] = (md[1] / 1e9) if md else 0.0
    md = met.metric_data("ExecuteTime")
    out["xla_executes"] = md[0] if md else 0
    for name in ("PersistentCacheHit", "PersistentCacheMiss", "CachedCompile", "UncachedCompile"):
        v = met.counter_value(name)
        if v is not None:
            out[name] = v
    fb = {n: met.counter_value(n) for n in met.counter_names() if n.startswith("aten::")}
    out["xla_fallback_ops"] = fb
    return out


def counters(cand):
    if cand.startswith("lazuli"):
        return _lazuli_counters()
    if cand == "inductor":
        return _inductor_counters()
    if cand.startswith("xla"):
        return _xla_counters()
    return {}


def _new_candidate(args, cand):
    if cand.startswith("xla"):
        import torch_xla.runtime as xr
        cache = os.environ.get("TORCH_BENCH_XLA_CACHE")
        if cache:
            try:  # must precede any XLA computation
                xr.initialize_cache(cache, readonly=False)
            except Exception as e:  # noqa: BLE001  (reported, not fatal)
                print(f"xla persistent cache unavailable: {e}", file=sys.stderr)
    from torch_workloads import Candidate
    return Candidate(cand, args.workload)


def _cpu_s():
    """CPU seconds of this process (all threads) and of its reaped children (a compiler run as a
    subprocess): on this shared machine a wall time can be several times the work done."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def worker_first(args):
    """Cold or warm first call, depending on the cache dirs the driver passed."""
    t0 = time.perf_counter()
    _setup_worker(args.threads)
    from torch_workloads import BATCH
    if args.candidate.startswith("lazuli"):
        import lazuli.torch  # noqa: F401  (the backend's import: timed apart from the first call)
    t_import = time.perf_counter() - t0
    t1 = time.perf_counter()
    c = _new_candidate(args, args.candidate)
    b = BATCH[args.workload]
    c.inputs(b)
    t_setup = time.perf_counter() - t1
    calls, cpu = [], []
    cpu_before_first = _cpu_s()
    for _ in range(3):
        t, c0 = time.perf_counter(), _cpu_s()
        c.call(b)
        calls.append(time.perf_counter() - t)
        cpu.append(_cpu_s() - c0)
    return {"first_s": calls[0], "second_s": calls[1], "third_s": calls[2], "first_cpu_s": cpu[0],
            "cpu_before_first_s": cpu_before_first, "cpu_after_first_s": cpu_before_first + cpu[0],
            "cpu_end_s": _cpu_s(),
            "import_s": t_import, "setup_s": t_setup, "counters": counters(args.candidate)}


def _time_steps(c, batch, n):
    t = time.perf_counter()
    for _ in range(n):
        c.call(batch)
    return (time.perf_counter() - t) / n


def worker_steady(args):
    from torch_workloads import BATCH
    _setup_worker(args.threads)
    b = BATCH[args.workload]
    if any(c.startswith("lazuli_device") for c in args.candidates.split(",")):
        # Before any candidate's backward: PyTorch's autograd engine sizes its device queues at
        # the process's first backward pass.
        import lazuli.torch
        lazuli.torch.device()
    cands = {}
    for name in args.candidates.split(","):
        cands[name] = _new_candidate(args, name)
        for _ in range(3):  # compiles and warm-up
            cands[name].call(b)
    samples = {name: [] for name in cands}
    names = list(cands)
    for r in range(args.rounds):
        # Rotate the order each round, so no candidate always runs right after the same other.
        for name in names[r % len(names):] + names[:r % len(names)]:
            cands[name].call(b)  # one untimed call: the previous candidate's threads settle
            samples[name].append(_time_steps(cands[name], b, args.steps))
    return {"samples": samples, "counters": {n: counters(n) for n in cands}}


def worker_batch(args):
    from torch_workloads import BATCH
    _setup_worker(args.threads)
    b = BATCH[args.workload]
    b2 = max(1, b // 2)
    c = _new_candidate(args, args.candidate)
    c.call(b)
    c.call(b)
    before = counters(args.candidate)
    t = time.perf_counter()
    c.call(b2)
    first = time.perf_counter() - t
    after = counters(args.candidate)
    t = time.perf_counter()
    c.call(b2)
    second = time.perf_counter() - t
    delta = {k: after[k] - before.get(k, 0) for k in after
             if isinstance(after[k], (int, float)) and after[k] is not None and before.get(k) is not None}
    return {"batch": b, "new_batch": b2, "first_s": first, "second_s": second, "delta": delta}


def run_worker(args):
    fn = {"first": worker_first, "steady": worker_steady, "batch": worker_batch}[args.worker]
    out = fn(args)
    print(RESULT + json.dumps(out, default=str), flush=True)


# ---- driver side ----------------------------------------------------------------------------------

class Driver:
    def __init__(self, args):
        self.args = args
        self.xla_python = None
        if args.xla:
            self.xla_python = subprocess.run(["bash", os.path.join(HERE, "setup_torch_xla.sh")],
                                             check=True, capture_output=True, text=True).stdout.strip()
        self.log = []

    def env(self, cache_root=None):
        e = dict(os.environ)
        # OMP_WAIT_POLICY stays as the caller has it (OpenMP's default when unset): PASSIVE makes
        # PyTorch's small ops wake its OpenMP team from sleep every time (RESULTS.md 23).
        e["LAZULI_NUM_THREADS"] = str(self.args.threads)
        e["PJRT_DEVICE"] = "CPU"
        e["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + e.get("PYTHONPATH", "")
        if cache_root:
            e["LAZULI_CACHE_DIR"] = os.path.join(cache_root, "lazuli")
            e["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_root, "inductor")
            e["TRITON_CACHE_DIR"] = os.path.join(cache_root, "triton")
            e["TORCH_BENCH_XLA_CACHE"] = os.path.join(cache_root, "xla")
        return e

    def worker(self, candidate_env, argv, cache_root=None, timeout=3600, script=None):
        py = self.xla_python if candidate_env == "xla" else sys.executable
        cmd = [py, script or os.path.abspath(__file__), "--threads", str(self.args.threads)] + argv
        t, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(cmd, env=self.env(cache_root), capture_output=True, text=True, timeout=timeout)
        wall = time.perf_counter() - t
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # The whole worker's CPU, its compile subprocesses (inductor's pool, g++) included.
        cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        for line in p.stdout.splitlines():
            if line.startswith(RESULT):
                out = json.loads(line[len(RESULT):])
                out["process_wall_s"] = wall
                out["process_cpu_s"] = cpu
                if "cpu_before_first_s" in out:
                    # The first call's CPU with the compile processes a worker never reaped itself
                    # (inductor's pool): all the tree's CPU less what came before and after it.
                    out["first_cpu_all_s"] = cpu - out["cpu_before_first_s"] - (
                        out["cpu_end_s"] - out["cpu_after_first_s"])
                return out
        tail = (p.stderr or "")[-3000:]
        print(f"  worker failed ({' '.join(argv)}): rc {p.returncode}\n{tail}", file=sys.stderr)
        return {"error": f"rc {p.returncode}: {tail[-600:]}"}

    def candidates(self):
        cands = [c for c in self.args.candidates.split(",") if c]
        if not self.args.xla:
            cands = [c for c in cands if not c.startswith("xla")]
        return cands


def _env_of(cand):
    return "xla" if cand.startswith("xla") else "torch"


def fig_first(d, workload, results):
    """cold and warm: `repeats` pairs per candidate, candidates alternating within a repeat."""
    cands = d.candidates()
    for rep in range(d.args.repeats):
        for cand in cands:
            root = tempfile.mkdtemp(prefix="torch_bench_")
            try:
                for kind in ("cold", "warm"):
                    if kind not in d.args.figures:
                        continue
                    out = d.worker(_env_of(cand), ["--worker", "first", "--workload", workload,
                                                   "--candidate", cand], cache_root=root)
                    results.setdefault(kind, {}).setdefault(cand, []).append(out)
                    s = out.get("first_s")
                    print(f"  {workload} {kind:4s} {cand:12s} rep {rep}: first call "
                          f"{s if s is None else round(s, 3)} s", flush=True)
            finally:
                shutil.rmtree(root, ignore_errors=True)


def fig_steady(d, workload, results):
    torch_c = [c for c in d.candidates() if _env_of(c) == "torch"]
    xla_c = [c for c in d.candidates() if _env_of(c) == "xla"]
    root = tempfile.mkdtemp(prefix="torch_bench_")
    try:
        for rep in range(d.args.repeats):
            for env, cs in (("torch", torch_c), ("xla", xla_c)):
                if not cs:
                    continue
                out = d.worker(env, ["--worker", "steady", "--workload", workload, "--candidates",
                                     ",".join(cs), "--rounds", str(d.args.rounds), "--steps",
                                     str(d.args.steps or STEPS[workload])], cache_root=root)
                results.setdefault("steady", []).append(out)
                if "samples" in out:
                    print(f"  {workload} steady rep {rep}: " + ", ".join(
                        f"{k} {statistics.median(v) * 1e3:.2f} ms" for k, v in out["samples"].items()),
                        flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fig_batch(d, workload, results):
    for cand in d.candidates():
        if cand in ("eager", "xla_lazy") and not d.args.batch_all:
            pass  # still measured: a lazy device recompiles on a new shape, eager is the reference
        root = tempfile.mkdtemp(prefix="torch_bench_")
        try:
            out = d.worker(_env_of(cand), ["--worker", "batch", "--workload", workload,
                                           "--candidate", cand], cache_root=root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        results.setdefault("batch", {})[cand] = out
        print(f"  {workload} batch {cand:12s}: {json.dumps(out.get('delta', out.get('error')))[:300]} "
              f"first {out.get('first_s')}", flush=True)


def fig_profile(d, workload, results):
    """lazuli's first call taken apart (bench/torch_profile.py): phases cold, phases in a second
    process over the caches the first left (warm), and cProfile's view of a cold call."""
    script = os.path.join(HERE, "torch_profile.py")
    root = tempfile.mkdtemp(prefix="torch_bench_")
    try:
        for kind, extra in (("cold", []), ("warm", [])):
            out = d.worker("torch", ["--workload", workload] + extra, cache_root=root, script=script)
            out["kind"] = kind
            results.setdefault("profile", []).append(out)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    root = tempfile.mkdtemp(prefix="torch_bench_")
    try:
        out = d.worker("torch", ["--workload", workload, "--cprofile"], cache_root=root, script=script)
        out["kind"] = "cold, cProfile"
        results.setdefault("profile", []).append(out)
        out = d.worker("torch", ["--workload", workload, "--steady", str(d.args.steps or STEPS[workload])],
                       cache_root=root, script=script)
        out["kind"] = "steady, cProfile"
        results.setdefault("profile", []).append(out)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- report ---------------------------------------------------------------------------------------

def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _fmt_s(x):
    if x is None:
        return "n/a"
    return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"


def _spread(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return ""
    return f" [{_fmt_s(min(xs))}-{_fmt_s(max(xs))}]" if len(xs) > 1 else ""


def _first_cpu(o):
    return o.get("first_cpu_all_s", o.get("first_cpu_s"))


def _first_cell(outs):
    if not outs:
        return "-"
    if any("error" in o for o in outs):
        return "failed: " + next(o["error"] for o in outs if "error" in o).strip().splitlines()[-1][:80]
    w = [o["first_s"] for o in outs]
    c = [_first_cpu(o) for o in outs]
    return f"{_fmt_s(_med(w))}{_spread(w)} (CPU {_fmt_s(_med(c))})"


def _steady(res):
    merged, per_round = {}, {}
    for out in res.get("steady", []):
        s = out.get("samples", {})
        for k, v in s.items():
            merged.setdefault(k, []).extend(v)
        if "inductor" in s:
            for k, v in s.items():
                per_round.setdefault(k, []).extend(i / x for i, x in zip(s["inductor"], v))
    return merged, per_round


def _fallbacks(res):
    """lazuli's fallbacks per call, from the cold first-call workers (3 calls each): ATen ops left
    to PyTorch eager, and ops inside Lazuli programs that ran on the reference kernels."""
    outs = [o for o in res.get("cold", {}).get("lazuli", []) if "counters" in o]
    if not outs:
        return None
    fb = outs[0]["counters"].get("fallback_ops", {})
    aten = {k[len("aten."):]: v // 3 for k, v in fb.items() if k.startswith("aten.")}
    ref = {k: v // 3 for k, v in fb.items() if not k.startswith("aten.")}
    return aten, ref


def report(workload, res, cands):
    """The workload's results as a markdown table, then the details."""
    from torch_workloads import WORKLOADS
    merged, per_round = _steady(res)
    ind_cold = _med([o.get("first_s") for o in res.get("cold", {}).get("inductor", []) if "error" not in o])
    ind_warm = _med([o.get("first_s") for o in res.get("warm", {}).get("inductor", []) if "error" not in o])
    lines = [f"### {workload}: {WORKLOADS[workload]}", "",
             "| candidate | first call, cold (wall, [range], CPU) | first call, warm | steady step "
             "(median [range]) | steady vs inductor (per round) | batch change: first call; compiles |",
             "|---|---|---|---|---|---|"]
    for cand in cands:
        cold = res.get("cold", {}).get(cand, [])
        warm = res.get("warm", {}).get(cand, [])
        cold_c, warm_c = _first_cell(cold), _first_cell(warm)
        if cand != "inductor" and cand != "eager":
            mc = _med([o.get("first_s") for o in cold if "error" not in o])
            mw = _med([o.get("first_s") for o in warm if "error" not in o])
            if ind_cold and mc:
                cold_c += f", **{ind_cold / mc:.1f}x** faster than inductor"
            if ind_warm and mw:
                warm_c += f", **{ind_warm / mw:.1f}x**"
        st = merged.get(cand)
        st_c = f"{_fmt_s(statistics.median(st))}{_spread(st)}" if st else "-"
        pr = per_round.get(cand)
        pr_c = (f"{statistics.median(pr):.2f}x [{min(pr):.2f}-{max(pr):.2f}]"
                if pr and cand != "inductor" else ("1x" if pr else "-"))
        if not pr and st and merged.get("inductor"):
            # Another environment, so another process: only the medians compare.
            pr_c = f"{statistics.median(merged['inductor']) / statistics.median(st):.2f}x (medians)"
        bo = res.get("batch", {}).get(cand)
        if not bo:
            b_c = "-"
        elif "error" in bo:
            b_c = "failed"
        else:
            dl = bo.get("delta", {})
            if cand.startswith("lazuli"):
                what = (f"KernelCompile {dl.get('KernelCompile')}, programs {dl.get('UncachedCompile')}, "
                        f"traces {dl.get('TorchTrace')}")
            elif cand == "inductor":
                what = f"{dl.get('generated_kernels')} kernels generated, {dl.get('fxgraph_cache_miss')} graphs compiled"
            elif cand.startswith("xla"):
                what = f"{dl.get('xla_compiles')} XLA compiles ({_fmt_s(dl.get('xla_compile_s'))})"
            else:
                what = "nothing to compile"
            b_c = f"{_fmt_s(bo.get('first_s'))} ({bo.get('batch')} -> {bo.get('new_batch')}); {what}"
        lines.append(f"| {cand} | {cold_c} | {warm_c} | {st_c} | {pr_c} | {b_c} |")
    lines.append("")
    # Per repeat (cold and warm processes of a repeat ran back to back): lazuli against inductor.
    for kind in ("cold", "warm"):
        li = res.get(kind, {}).get("lazuli", [])
        ii = res.get(kind, {}).get("inductor", [])
        ratios = [i["first_s"] / x["first_s"] for i, x in zip(ii, li) if "first_s" in i and "first_s" in x]
        cr = [_first_cpu(i) / _first_cpu(x) for i, x in zip(ii, li) if "first_s" in i and "first_s" in x]
        if ratios:
            lines.append(f"- {kind}: inductor's first call / lazuli's, per repeat: wall "
                         + ", ".join(f"{r:.1f}x" for r in ratios) + "; CPU " + ", ".join(f"{r:.1f}x" for r in cr))
    fb = _fallbacks(res)
    if fb:
        aten, ref = fb
        lines.append(f"- lazuli per call: ATen ops run in PyTorch eager {sum(aten.values())} "
                     f"({', '.join(f'{k} {v}' for k, v in sorted(aten.items())) or 'none'}); ops on Lazuli's "
                     f"reference kernels {sum(ref.values())} ({', '.join(f'{k} {v}' for k, v in sorted(ref.items())) or 'none'})")
        c0 = next(o["counters"] for o in res["cold"]["lazuli"] if "counters" in o)
        lines.append(f"- lazuli cold: {c0.get('TorchGraphCompiled')} ATen graphs, {c0.get('TorchPartition')} partitions, "
                     f"{c0.get('UncachedCompile')} programs, KernelCompile {c0.get('KernelCompile')}, "
                     f"CompileTime {_fmt_s(c0.get('CompileTime_s'))}")
    for cand in cands:
        if cand.startswith("xla"):
            outs = [o for o in res.get("warm", {}).get(cand, []) if "counters" in o]
            if outs:
                c = outs[0]["counters"]
                lines.append(f"- {cand} warm process: {c.get('xla_compiles')} compiles "
                             f"({_fmt_s(c.get('xla_compile_s'))}), persistent cache hits "
                             f"{c.get('PersistentCacheHit')}, misses {c.get('PersistentCacheMiss')}")
    for out in res.get("profile", []):
        if "error" in out:
            lines.append(f"- profile {out.get('kind')}: failed")
        elif "phases_wall" in out:
            lines.append(f"- lazuli first call, {out['kind']}: {_fmt_s(out['first_s'])} wall, "
                         f"{_fmt_s(out['first_cpu_s'])} CPU; CompileTime {_fmt_s(out['CompileTime_s'])} "
                         f"over {out['CompileTime_count']} programs, KernelCompile "
                         f"{out['counters'].get('KernelCompile')}; phases (wall / CPU):")
            for k, v in out["phases_wall"].items():
                lines.append(f"    - {k.strip()}: {_fmt_s(v)} / {_fmt_s(out['phases_cpu'].get(k))}"
                             f" ({out['phases_calls'].get(k)} calls)")
            dyn = out.get("dynamo_compile_times", {})
            keys = ["bytecode_tracing", "OutputGraph.call_user_compiler", "create_aot_dispatcher_function",
                    "aot_trace_joint_graph", "build_guards"]
            lines.append("    - dynamo's compile_times (wall): " + ", ".join(
                f"{k} {_fmt_s(dyn[k])}" for k in keys if k in dyn))
        elif "cprofile_cumulative" in out:
            lines.append(f"- lazuli first call under cProfile ({_fmt_s(out['first_s'])}), cumulative: " + ", ".join(
                f"{k} {_fmt_s(v)}" for k, v in sorted(out["cprofile_cumulative"].items(), key=lambda kv: -kv[1])))
            lines.append("    - top own time: " + ", ".join(
                f"{n} {_fmt_s(t)}" for n, t, _ in out["cprofile_tottime"][:8]))
        elif "cumulative_per_step" in out:
            lines.append(f"- lazuli steady step {_fmt_s(out['step_s'])} ({_fmt_s(out['profiled_step_s'])} under "
                         f"cProfile); ExecuteTime {_fmt_s(out['execute_s_per_step'])} per step over "
                         f"{out['programs_per_step']} programs; per step, cumulative: " + ", ".join(
                             f"{k.strip()} {_fmt_s(v)}" for k, v in
                             sorted(out["cumulative_per_step"].items(), key=lambda kv: -kv[1])))
            lines.append("    - top own time per step: " + ", ".join(
                f"{n} {_fmt_s(t)} ({k} calls)" for n, t, k in out["tottime_per_step"][:6]))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", choices=["first", "steady", "batch"])
    ap.add_argument("--workload")
    ap.add_argument("--candidate")
    ap.add_argument("--workloads", default="resnet18,gpt2,mlp,mlp-small")
    ap.add_argument("--candidates", default="eager,inductor,lazuli,xla_lazy,xla_openxla")
    ap.add_argument("--figures", default="cold,warm,steady,batch,profile")
    ap.add_argument("--xla", action="store_true", help="also PyTorch/XLA (installs it once)")
    ap.add_argument("--repeats", type=int, default=3, help="fresh-process repeats per figure")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per steady process")
    ap.add_argument("--steps", type=int, default=0, help="steps per round (default: per workload)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads, LAZULI_NUM_THREADS")
    ap.add_argument("--batch-all", action="store_true")
    ap.add_argument("--json", help="write every worker's raw result here")
    ap.add_argument("--report", help="print the tables of an earlier --json file (several: a,b)")
    args = ap.parse_args()
    if args.worker:
        return run_worker(args)
    if args.report:
        sys.path.insert(0, HERE)
        everything = {}
        for path in args.report.split(","):
            with open(path) as f:
                for w, r in json.load(f).items():
                    everything.setdefault(w, {}).update(r)
        for w, r in everything.items():
            print(report(w, r, [c for c in args.candidates.split(",") if c]) + "\n")
        return

    d = Driver(args)
    import torch
    print(f"torch_bench: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, torch {torch.__version__}, "
          f"threads {args.threads}, load average {os.getloadavg()[0]:.2f}, xla python {d.xla_python}", flush=True)
    everything = {}
    for workload in args.workloads.split(","):
        res = everything.setdefault(workload, {})
        if "cold" in args.figures or "warm" in args.figures:
            fig_first(d, workload, res)
        if "steady" in args.figures:
            fig_steady(d, workload, res)
        if "batch" in args.figures:
            fig_batch(d, workload, res)
        if "profile" in args.figures and "lazuli" in d.candidates():
            fig_profile(d, workload, res)
        sys.path.insert(0, HERE)
        print(report(workload, res, d.candidates()), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(everything, f, indent=1, default=str)
    print(f"torch_bench: done {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
