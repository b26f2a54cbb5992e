"""torch.compile(..., dynamic=True): dynamo hands over one FX graph for every size
of a dynamic dimension, with the sizes as SymInt inputs; the bridge keys each partition's calls by
its inputs' shapes and the SymInts' values (as PyTorch/XLA's bridge keys its graphs by the SymInt
arguments). The first size traces the FX graph once, converting it to the table's C++ form
(src/aten/graph.h), whose sizes are values; a new size is one record of that form in C++ and one
plan, never a trace, and its kernels are the ones compiled for the first size (the cpu backend's
kernels are shape-generic)."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch._dynamo

import lazuli as lz
import lazuli.torch as lzt

counter = lz.debug.counter_value


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/python/conftest.py


def test_symint_argument_keys_the_calls_a_repeated_value_replays():
    def f(x, n):
        return (x * n).sum(1) + n  # n reaches the partition as a SymInt (a Python int at run time)

    compiled = torch.compile(f, backend=lzt.backend, dynamic=True)
    x = torch.randn(3, 4)
    for n in (2, 3, 2, 5, 3):
        torch.testing.assert_close(compiled(x, n), f(x, n))
    assert counter("TorchGraphCompiled") == 1  # one FX graph for every n
    # One trace; each new value is recorded from the partition's C++ form; a repeat replays.
    assert counter("TorchTrace") == 1 and counter("TorchRecord") == 2
    assert counter("TorchReplay") == 2 and counter("TorchGraphInPython") == 0


def test_automatic_dynamic_shapes_trace_the_dynamic_graph_once_then_record_new_sizes():
    # Without dynamic=True, dynamo's second size compiles the graph again with the batch dim
    # dynamic (its automatic dynamic shapes): that graph is traced once, and later sizes record.
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).eval()
    compiled = torch.compile(model, backend=lzt.backend)
    with torch.no_grad():
        for n in (3, 5, 7, 9, 5):
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)
    assert counter("TorchGraphCompiled") == 2  # static for 3, dynamic from 5 on
    assert counter("TorchTrace") == 2 and counter("TorchRecord") == 2  # 7 and 9 record
    assert counter("TorchReplay") == 1 and counter("TorchGraphInPython") == 0


# A child process, so that its kernel cache starts empty (LAZULI_CACHE_DIR is read once per
# process): the first batch size must compile kernels, and the later sizes must compile none.
CHILD = textwrap.dedent("""
    import copy, json
    import torch, torch.nn.functional as F
    import lazuli as lz, lazuli.torch as lzt

    counter = lz.debug.counter_value
    MARKS = ("TorchGraphCompiled", "TorchTrace", "TorchRecord", "TorchReplay", "UncachedCompile",
             "KernelCompile", "TorchGraphInPython")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.ln = torch.nn.Linear(12, 16), torch.nn.LayerNorm(16)
            self.fc2 = torch.nn.Linear(16, 4)

        def forward(self, x):
            h = x.view(x.size(0), -1)  # the batch size as a SymInt inside the graph
            return self.fc2(torch.relu(self.ln(self.fc1(h))))

    def step(m, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    torch.manual_seed(0)
    model = Net()
    eager = copy.deepcopy(model)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, eager)]
    result = {"inference": [], "training": []}
    infer = torch.compile(model, backend=lzt.backend, dynamic=True)
    with torch.no_grad():
        for n in (5, 7, 11, 7):  # sizes >= 2: a dim of size 1 is a different kernel structure
            x = torch.randn(n, 3, 4)
            torch.testing.assert_close(infer(x), model(x), rtol=1e-5, atol=1e-6)
            result["inference"].append({k: counter(k) for k in MARKS})
    lz.debug.clear_counters()
    train = torch.compile(step, backend=lzt.backend, dynamic=True)
    for n in (6, 6, 9, 14, 9):  # two steps at 6: SGD's first step makes its momentum buffers
        x, y = torch.randn(n, 3, 4), torch.randint(0, 4, (n,))
        torch.testing.assert_close(train(model, opts[0], x, y), step(eager, opts[1], x, y),
                                   rtol=1e-5, atol=1e-6)
        result["training"].append({k: counter(k) for k in MARKS})
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    result["fallbacks"] = sorted(n for n in lz.debug.counter_names()
                                 if n.startswith("fallback::") and counter(n))
    print("RESULT " + json.dumps(result))
""")


@pytest.fixture(scope="module")
def child_marks(tmp_path_factory):
    import json
    cache = tmp_path_factory.mktemp("lazuli-dynamic-cache")
    pkg = os.path.dirname(os.path.dirname(lz.__file__))
    env = dict(os.environ, LAZULI_CACHE_DIR=str(cache), LAZULI_BACKEND="cpu",
               PYTHONPATH=os.pathsep.join([pkg] + sys.path))
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    line = next(s for s in p.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_new_batch_size_under_dynamic_true_costs_a_plan_not_a_kernel_compile(child_marks):
    first, *later = child_marks["inference"]
    assert first["TorchGraphCompiled"] == 1 and first["KernelCompile"] > 0
    for marks in later:
        assert marks["TorchGraphCompiled"] == 1  # dynamo's one graph serves every size
        assert marks["KernelCompile"] == first["KernelCompile"]  # no kernel compiled for 7 or 11
    # One trace, for the first size; a new size is one record of the partition's C++ form and
    # one plan, never a trace; the repeated size replays.
    assert [m["TorchTrace"] for m in child_marks["inference"]] == [1, 1, 1, 1]
    assert [m["TorchRecord"] for m in child_marks["inference"]] == [0, 1, 2, 2]
    assert [m["UncachedCompile"] for m in child_marks["inference"]] == [1, 2, 3, 3]
    assert child_marks["inference"][-1]["TorchReplay"] == 1
    assert child_marks["inference"][-1]["TorchGraphInPython"] == 0


def test_training_step_under_dynamic_true_matches_eager_and_reuses_kernels(child_marks):
    # Values and parameters were compared with eager in the child, every step. The first step
    # is SGD's own first graph (it creates the momentum buffers); steady state from the second.
    first, *later = child_marks["training"][1:]
    assert first["KernelCompile"] > 0
    assert all(m["KernelCompile"] == first["KernelCompile"] for m in later), child_marks
    assert all(m["TorchGraphCompiled"] == first["TorchGraphCompiled"] for m in later), child_marks
    # Sizes 9, 14, 9 trace nothing: each new one is a record and a plan per partition.
    assert all(m["TorchTrace"] == first["TorchTrace"] for m in later), child_marks
    assert later[1]["TorchRecord"] > first["TorchRecord"]
    assert later[-1]["TorchRecord"] == later[-2]["TorchRecord"]  # the repeated size only replays
    assert later[-1]["TorchGraphInPython"] == 0
    # Under dynamic=True the learning rate reaches the optimizer's graph as a 0-d float64 input,
    # cast by prims.convert_element_type: lowered, so the parameter updates stay in Lazuli.
    assert child_marks["fallbacks"] == []
