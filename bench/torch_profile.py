"""Where torch.compile(backend="lazuli")'s first call spends its time (bench/torch_bench.py's
`profile` figure; one process per run, started by the driver with fresh or warm cache dirs).

Phases are timed by wrapping the bridge's functions and dynamo's `_compile` (low overhead):
  dynamo (all frames)          dynamo's trace of every frame, the backend calls inside it
    backend call               aot_autograd (joint-graph trace, partition into forward/backward)
                               plus compile_aten_graph of the forward / inference graph
  compile_aten_graph           the bridge's partitioning (per kind; backward runs at backward())
  partition trace              first call of each Lazuli partition: _aten.interpret records,
                               the program compiles without running (CompileTime: plan + LLVM)
  partition runs / fallbacks   the programs' runs and the ATen ops left to PyTorch eager
dynamo's own compile_times() (its sub-phases, e.g. aot_trace_joint_graph) and, with --cprofile,
cProfile's top functions complete the picture.

Run alone: PYTHONPATH=python <torch venv python> bench/torch_profile.py --workload mlp [--cprofile]
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT = "TORCH_BENCH_RESULT "


def _cpu():
    return time.process_time()


class Phases:
    def __init__(self):
        self.wall, self.cpu, self.calls = {}, {}, {}

    def wrap(self, name, fn):
        def wrapper(*a, **k):
            t, c = time.perf_counter(), _cpu()
            try:
                return fn(*a, **k)
            finally:
                self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - t
                self.cpu[name] = self.cpu.get(name, 0.0) + _cpu() - c
                self.calls[name] = self.calls.get(name, 0) + 1
        wrapper.__wrapped__ = fn
        return wrapper


def instrument(ph):
    """Wrap the bridge's phases and dynamo's per-frame compile. Nested phases are reported
    nested (their times are included in the enclosing one)."""
    import torch._dynamo.convert_frame as cf
    import torch._dynamo.backends.common as common
    from lazuli.torch import _aten, _bridge

    cf._compile = ph.wrap("dynamo: all frames (includes the backend calls)", cf._compile)
    real_aot = common.aot_autograd

    def aot_autograd(**kw):
        return ph.wrap("  backend call: aot_autograd + forward partitioning", real_aot(**kw))
    common.aot_autograd = aot_autograd
    real_cag = _bridge.compile_aten_graph

    def compile_aten_graph(gm, example_inputs, kind="forward"):
        return ph.wrap(f"  compile_aten_graph ({kind})", real_cag)(gm, example_inputs, kind)
    _bridge.compile_aten_graph = compile_aten_graph
    _bridge.LazuliPartition._trace = ph.wrap("partition traces (record + compile)",
                                             _bridge.LazuliPartition._trace)
    _aten.interpret = ph.wrap("  _aten.interpret (recording)", _aten.interpret)
    _bridge.LazuliPartition._run_program = ph.wrap("partition runs (programs)",
                                                   _bridge.LazuliPartition._run_program)
    real_fallback = _bridge._fallback_runner

    def fallback_runner(target):
        return ph.wrap("eager fallback ops", real_fallback(target))
    _bridge._fallback_runner = fallback_runner


def _dynamo_times():
    """dynamo's compile_times(): {phase: total seconds over its calls}."""
    import torch._dynamo.utils as du
    try:
        names, values = du.compile_times(repr="csv")
    except Exception:  # noqa: BLE001  (a detail, not the figure)
        return {}
    out = {}
    for n, v in zip(names, values):
        out[n] = sum(float(x) for x in str(v).split(",") if x.strip())
    return out


_CPROFILE_KEYS = [
    ("convert_frame.py", "_compile", "dynamo _compile (all frames)"),
    ("symbolic_convert.py", "run", "dynamo bytecode tracing (InstructionTranslator.run)"),
    ("output_graph.py", "call_user_compiler", "dynamo -> backend calls"),
    ("aot_autograd.py", "create_aot_dispatcher_function", "aot_autograd create_aot_dispatcher_function"),
    ("_bridge.py", "compile_aten_graph", "lazuli compile_aten_graph (partitioning)"),
    ("_bridge.py", "_trace", "lazuli partition traces"),
    ("_aten.py", "interpret", "lazuli _aten.interpret"),
    ("~", "<built-in method lazuli._C.compile>", "lazuli _WarmProgram.compile (C++)"),
    ("_bridge.py", "_run_program", "lazuli partition runs"),
    ("<frozen importlib._bootstrap>", "_find_and_load", "imports during the call"),
    ("optimizer.py", "_init_group", "dynamo optimizer _init_group"),
]


def _cprofile_summary(prof):
    import pstats
    st = pstats.Stats(prof)
    rows = {}
    for (file, line, func), (cc, nc, tt, ct, callers) in st.stats.items():
        for fpat, fn, label in _CPROFILE_KEYS:
            hit = (func == fn and file.endswith(fpat)) or (fpat == "~" and fn in func) or \
                  (fpat == "~" and func == fn)
            if hit:
                rows[label] = max(rows.get(label, 0.0), ct)
    top = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:15]
    tottime = [(f"{os.path.basename(k[0])}:{k[1]}({k[2]})", v[2], v[1]) for k, v in top]
    return rows, tottime


_STEADY_KEYS = [
    ("eval_frame.py", "_fn", "dynamo: compiled frames (guards + the compiled code)"),
    ("runtime_wrappers.py", "runtime_wrapper", "aot_autograd runtime wrapper (forward)"),
    ("_bridge.py", "run", "bridge graph run (partitions + eager nodes)"),
    ("_bridge.py", "_run_program", "lazuli partition runs"),
    ("~", "<method 'run' of 'lazuli._C._WarmProgram' objects>", "  _WarmProgram.run (schedule)"),
    ("_boundary.py", "to_torch", "  to_torch (waits for the program)"),
    ("_boundary.py", "to_lazuli", "  to_lazuli"),
    ("~", "<method 'copy_' of 'torch._C.TensorBase' objects>", "  copy_ (write-backs of updated inputs)"),
    ("torch_profile.py", "eager_fallback_op", "eager fallback ops"),
    ("~", "<built-in method run_backward>", "autograd engine (backward)"),
    ("optimizer.py", "wrapper", "optimizer.step wrapper"),
]


def steady(args):
    """Where a steady-state lazuli step spends its time: cProfile over N steps, plus Lazuli's
    ExecuteTime (the executor thread running the programs)."""
    import cProfile
    import pstats
    import lazuli as lz
    from lazuli.torch import _bridge
    from torch_workloads import BATCH, Candidate
    real_fallback = _bridge._fallback_runner

    def fallback_runner(target):  # a name of its own, so cProfile tells it from the graph's run
        run = real_fallback(target)

        def eager_fallback_op(*a, **k):
            return run(*a, **k)
        return eager_fallback_op
    _bridge._fallback_runner = fallback_runner
    c = Candidate("lazuli", args.workload)
    b = BATCH[args.workload]
    for _ in range(3):
        c.call(b)
    lz.debug.clear_metrics()
    t = time.perf_counter()
    for _ in range(args.steady):
        c.call(b)
    plain = (time.perf_counter() - t) / args.steady
    md = lz.debug.metric_data("ExecuteTime")
    execute = (md[1] / 1e9 / args.steady) if md else None
    programs = (md[0] / args.steady) if md else None
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    for _ in range(args.steady):
        c.call(b)
    prof.disable()
    profiled = (time.perf_counter() - t) / args.steady
    st = pstats.Stats(prof)
    rows = {}
    for (file, line, func), (cc, nc, tt, ct, callers) in st.stats.items():
        for fpat, fn, label in _STEADY_KEYS:
            if (fpat == "~" and func == fn) or (func == fn and file.endswith(fpat)):
                rows[label] = max(rows.get(label, 0.0), ct / args.steady)
    top = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:12]
    tottime = [(f"{os.path.basename(k[0])}:{k[1]}({k[2]})", v[2] / args.steady, v[1] // args.steady)
               for k, v in top]
    out = {"step_s": plain, "execute_s_per_step": execute, "programs_per_step": programs,
           "profiled_step_s": profiled, "cumulative_per_step": rows, "tottime_per_step": tottime}
    print(RESULT + json.dumps(out, default=str), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", required=True)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steady", type=int, default=0,
                    help="instead: cProfile N steady-state steps after 3 warm-up calls")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    sys.path.insert(0, HERE)
    import lazuli as lz
    import lazuli.torch  # noqa: F401
    from torch_workloads import BATCH, Candidate
    import torch._dynamo  # noqa: F401  (imported before the call, as torch.compile does)

    if args.steady:
        return steady(args)
    ph = Phases()
    if not args.cprofile:
        instrument(ph)
    c = Candidate("lazuli", args.workload)
    b = BATCH[args.workload]
    c.inputs(b)
    prof = None
    if args.cprofile:
        import cProfile
        prof = cProfile.Profile()
        prof.enable()
    t, cpu = time.perf_counter(), _cpu()
    c.call(b)
    first, first_cpu = time.perf_counter() - t, _cpu() - cpu
    if prof is not None:
        prof.disable()
    t = time.perf_counter()
    c.call(b)
    second = time.perf_counter() - t
    cnt = {n: lz.debug.counter_value(n) for n in
           ("KernelCompile", "UncachedCompile", "CachedCompile", "PersistentCacheHit",
            "PersistentCacheMiss", "TorchGraphCompiled", "TorchPartition", "TorchTrace")}
    md = lz.debug.metric_data("CompileTime")
    out = {"first_s": first, "first_cpu_s": first_cpu, "second_s": second, "counters": cnt,
           "CompileTime_s": (md[1] / 1e9) if md else 0.0, "CompileTime_count": md[0] if md else 0,
           "dynamo_compile_times": _dynamo_times()}
    if prof is not None:
        out["cprofile_cumulative"], out["cprofile_tottime"] = _cprofile_summary(prof)
    else:
        out["phases_wall"], out["phases_cpu"], out["phases_calls"] = ph.wall, ph.cpu, ph.calls
    print(RESULT + json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    main()
