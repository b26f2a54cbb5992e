"""What a new size costs under torch.compile(..., dynamic=True): Lazuli against inductor.

dynamo hands both backends one FX graph whose dynamic dims are SymInts. Inductor compiles it once
into size-generic code. Lazuli traces each partition's FX graph once, at its first size,
converting it to the ATen table's C++ form (src/aten/graph.h), whose sizes are values; each new
size is then one record of that form in C++ (the Lazuli graph for that size, with no Python per
node: `TorchRecord`) and one plan (hash, cache lookup and the executor's plan; the cpu kernels
take sizes as arguments, so no kernel compiles). This prints, per model and size, the first call
at that size and its parts: Lazuli's record (time in `_aten.interpret`: at the first size the
conversion and a checked record, later the record alone) and plan (the rest of the partition's
trace step: `program.compile`), the counters that moved, and the steady per-call time of eager,
inductor and Lazuli at that size.

Models: a tiny BertForMaskedLM (bench/model_sweep.py's config) over sequence lengths, inference,
and the MLP with layer norm of tests/python/torch_frontend/test_compile_dynamic.py over batch
sizes, a training step. Each backend runs in its own process with empty caches (kernel caches in
a temporary folder); sizes go in the same order for both.

The same models also run on the PyTorch device through `lazuli.torch.capture` (backend
"capture": the step function traced, then replayed with no Python): there a new size costs one
trace of the function (its Python sizes are integers) and a plan, and the size replays from its
second call when that trace's program is a settled size's program up to sizes (docs/capture.md,
"New sizes"). `--baseline-pythonpath DIR` runs the capture backend a second time with the lazuli
package found in DIR (an older build), in the same run.

Run: PYTHONPATH=python <torch venv>/bin/python bench/dynamic_sizes.py [--calls 20]
     [--baseline-pythonpath /tmp/base/python]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT = "DYNAMIC_SIZES_RESULT "
BERT_LENGTHS = (16, 24, 40, 57, 24)   # the repeat: a size seen before
MLP_BATCHES = (6, 6, 9, 14, 23, 9)    # two at 6: SGD's first step builds its momentum

WORKER = r"""
import copy, json, os, statistics, sys, time
import torch, torch.nn.functional as F
sys.path.insert(0, os.environ["BENCH_DIR"])
from dynamic_sizes import RESULT, BERT_LENGTHS, MLP_BATCHES
backend, calls = os.environ["BENCH_BACKEND"], int(os.environ["BENCH_CALLS"])
torch.manual_seed(0)

timers = {"record": 0.0, "trace_step": 0.0}
if backend == "lazuli":
    import lazuli as lz, lazuli.torch as lzt
    from lazuli.torch import _aten, _bridge
    def timed(name, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                timers[name] += time.perf_counter() - t
        return run
    _aten.interpret = timed("record", _aten.interpret)
    _bridge.LazuliPartition._trace = timed("trace_step", _bridge.LazuliPartition._trace)
    MARKS = ("TorchGraphCompiled", "TorchTrace", "TorchRecord", "TorchGraphInPython",
             "UncachedCompile", "KernelCompile")
    marks = lambda: {k: lz.debug.counter_value(k) for k in MARKS}
    compile_ = lambda f: torch.compile(f, backend=lzt.backend, dynamic=True)
elif backend == "capture":
    import lazuli as lz, lazuli.torch as lzt
    DEV = lzt.device()
    MARKS = ("CaptureTrace", "CaptureReplay", "CaptureSettledAtNewSizes", "CaptureSinksAdopted",
             "UncachedCompile", "KernelCompile")
    marks = lambda: {k: lz.debug.counter_value(k) for k in MARKS}
    def compile_(f, module):
        module.to(DEV)
        cap = lzt.capture(f)
        return lambda *a: cap(*(t.to(DEV) for t in a)).cpu()
else:
    import torch._dynamo.utils as du
    marks = lambda: {"frames_compiled": du.counters["stats"]["unique_graphs"]}
    compile_ = (lambda f: torch.compile(f, dynamic=True)) if backend == "inductor" else (lambda f: f)

def measure(call, sizes, make):
    rows = []
    for n in sizes:
        args = make(n)
        for k in timers: timers[k] = 0.0
        before = marks()
        t = time.perf_counter(); call(*args); first = time.perf_counter() - t
        after = marks()
        t = time.perf_counter(); call(*args); second = time.perf_counter() - t
        second_moved = {k: v - after[k] for k, v in marks().items() if v != after[k]}
        times = []
        for _ in range(calls):
            t = time.perf_counter(); call(*args); times.append(time.perf_counter() - t)
        rows.append({"size": n, "first_ms": 1e3 * first, "second_ms": 1e3 * second,
                     "second_moved": second_moved, "steady_ms": 1e3 * statistics.median(times),
                     "record_ms": 1e3 * timers["record"],
                     "plan_ms": 1e3 * (timers["trace_step"] - timers["record"]),
                     "moved": {k: after[k] - before[k] for k in after if after[k] != before[k]}})
    return rows

from transformers import BertConfig, BertForMaskedLM
from model_sweep import _BERT, VOCAB
bert = BertForMaskedLM(BertConfig(**_BERT)).eval()
if backend == "capture":
    fb = compile_(lambda ids: bert(input_ids=ids).logits, bert)
    def bert_call(ids):
        with torch.no_grad():
            return fb(ids)
else:
    fb = compile_(bert)
    def bert_call(ids):
        with torch.no_grad():
            return fb(input_ids=ids).logits
out = {"bert": measure(bert_call, BERT_LENGTHS, lambda n: (torch.randint(0, VOCAB, (2, n)),))}

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.ln, self.fc2 = torch.nn.Linear(12, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)
    def forward(self, x):
        return self.fc2(torch.relu(self.ln(self.fc1(x.view(x.size(0), -1)))))
model = Net()
if backend == "capture":
    model.to(DEV)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
def step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss
fs = compile_(step, model) if backend == "capture" else compile_(step)
out["mlp_train"] = measure(fs, MLP_BATCHES, lambda n: (torch.randn(n, 3, 4), torch.randint(0, 4, (n,))))
print(RESULT + json.dumps(out))
"""


def run(backend, calls, pythonpath=None):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, BENCH_DIR=HERE, BENCH_BACKEND=backend, BENCH_CALLS=str(calls),
                   LAZULI_CACHE_DIR=os.path.join(cache, "lazuli"),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"))
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        p = subprocess.run([sys.executable, "-c", WORKER], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{backend} failed:\n{p.stderr[-3000:]}")
    line = next(s for s in p.stdout.splitlines() if s.startswith(RESULT))
    return json.loads(line[len(RESULT):])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20, help="steady calls per size (median)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--baseline-pythonpath", help="also run the capture backend with this PYTHONPATH")
    ap.add_argument("--only-capture", action="store_true", help="run the capture backend(s) only")
    a = ap.parse_args()
    print(f"load {' '.join(f'{v:.2f}' for v in os.getloadavg())}, {os.cpu_count()} cores")
    res = {} if a.only_capture else {b: run(b, a.calls) for b in ("eager", "inductor", "lazuli")}
    res["capture"] = run("capture", a.calls)
    if a.baseline_pythonpath:
        res["capture@baseline"] = run("capture", a.calls, a.baseline_pythonpath)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    for name in ("capture", "capture@baseline"):
        if name not in res:
            continue
        for model, what in (("bert", "sequence length"), ("mlp_train", "batch")):
            print(f"\n{name}: {model} ({what}) through lazuli.torch.capture, ms:\n")
            print("| size | first | first: counters | second | second: counters | steady |")
            print("|---|---|---|---|---|---|")
            for z in res[name][model]:
                moved = ", ".join(f"{k} +{v}" for k, v in z["moved"].items()) or "none"
                moved2 = ", ".join(f"{k} +{v}" for k, v in z["second_moved"].items()) or "none"
                print(f"| {z['size']} | {z['first_ms']:.1f} | {moved} | {z['second_ms']:.1f} | "
                      f"{moved2} | {z['steady_ms']:.3f} |")
    if a.only_capture:
        return
    for model, what in (("bert", "sequence length"), ("mlp_train", "batch")):
        print(f"\n{model} ({what}), ms:\n")
        print("| size | inductor first | inductor recompiled | lazuli first | record | plan "
              "| lazuli counters | eager | inductor | lazuli |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for e, i, z in zip(res["eager"][model], res["inductor"][model], res["lazuli"][model]):
            moved = ", ".join(f"{k} +{v}" for k, v in z["moved"].items()) or "none"
            print(f"| {z['size']} | {i['first_ms']:.1f} | {'yes' if i['moved'] else 'no'} "
                  f"| {z['first_ms']:.1f} | {z['record_ms']:.1f} | {z['plan_ms']:.1f} | {moved} "
                  f"| {e['steady_ms']:.3f} | {i['steady_ms']:.3f} | {z['steady_ms']:.3f} |")


if __name__ == "__main__":
    main()
