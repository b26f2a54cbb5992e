"""The ATen lowering table (C++, src/aten/) against PyTorch's OpInfo database (material nobody here
wrote).

For every OpInfo that exercises an overload the table claims, each picked sample input (per dtype
Lazuli has) is traced with make_fx (functionalized, with _aten.decompositions()); when every
node lowers, the graph is recorded on Lazuli tensors through _aten.interpret, run, and compared
with eager PyTorch. Backward likewise, through make_fx of a torch.func.vjp function, where the
OpInfo supports autograd. A sample with a node that does not lower is a fallback (skipped, with
the node and the reason); a node that claims to lower and gives another answer fails, naming op,
dtype and sample.

The OpInfos are picked by name (_opinfo_names), not by tracing all ~700 of them, so the whole
module runs in about a minute; test_every_entry_is_exercised checks that the pick still reaches
every entry. The harness is lazuli.torch._opinfo; tools/gen_torch_support.py runs the same
checks to write docs/torch-support.md.
"""
import numpy as np
import pytest
import torch

import lazuli as lz
from lazuli import _C
from lazuli.torch import _opinfo as harness

CASES = harness.cases()
FORWARD = [c for c in CASES if not c.backward]
BACKWARD = [c for c in CASES if c.backward]
_EXERCISED = set()
_RAN = {"forward": 0, "backward": 0}


@pytest.fixture(autouse=True)
def fresh_runtime():
    # Replaces the suite's per-test fixture: its gc.collect() over op_db's object graph would
    # cost more than the case itself, 2000 times. Nothing here counts compiles or cuts.
    yield


@pytest.fixture(autouse=True, scope="module")
def reference_backend():
    # The reference backend is the ground truth for the values an entry records; the cpu
    # backend is checked against it by the core suite (and here, on a few samples, below).
    original = lz.backend()
    lz._C._set_backend("interp")
    yield
    lz._C._set_backend(original)


def _run(case):
    result = harness.check(case)
    _EXERCISED.update(result.lowered_ops)
    if result.fallback:
        pytest.skip(f"fallback: {result.fallback}")
    if result.error:
        pytest.fail(result.error, pytrace=False)


@pytest.mark.parametrize("case", FORWARD, ids=[c.id for c in FORWARD])
def test_forward(case):
    _RAN["forward"] += 1
    _run(case)


@pytest.mark.parametrize("case", BACKWARD, ids=[c.id for c in BACKWARD])
def test_backward(case):
    _RAN["backward"] += 1
    _run(case)


@pytest.mark.parametrize("case", FORWARD[::20], ids=[c.id for c in FORWARD[::20]])
def test_forward_on_cpu_backend(case):
    lz._C._set_backend("cpu")
    try:
        _run(case)
    finally:
        lz._C._set_backend("interp")


def test_every_entry_is_exercised():
    if _RAN["forward"] != len(FORWARD) or _RAN["backward"] != len(BACKWARD):
        pytest.skip("needs every forward and backward case in this process (not split by -n)")
    missing = sorted(e.name for e in _C._aten.entries()
                     if e.name not in _EXERCISED and e.name not in harness.NOT_IN_OPINFO)
    assert not missing, f"entries no OpInfo sample reached: {missing}"


def test_case_ids_name_op_dtype_and_sample():
    assert FORWARD and all(c.id.count("-") >= 2 for c in CASES)
    assert any(c.dtype == torch.int64 for c in FORWARD) and any(c.dtype == torch.bool for c in FORWARD)
    assert any(c.dtype == torch.bfloat16 for c in BACKWARD) and any(c.dtype == torch.float16 for c in FORWARD)
    np.testing.assert_equal(len({c.id for c in CASES}), len(CASES))
