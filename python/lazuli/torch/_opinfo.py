"""Checks the ATen lowering table (C++, src/aten/) against PyTorch's OpInfo database (op_db), the
sample inputs PyTorch's own test suite runs every op on. Used by
tests/python/torch_frontend/test_opinfo.py and tools/gen_torch_support.py;
`python -m lazuli.torch._opinfo` prints a summary.

A case is one sample input of one OpInfo at one dtype, forward or backward. `check(case)` traces
the op with make_fx (functionalized, decomposed with _aten.decompositions()), asks the table
whether every node lowers (a node that does not is a fallback, not a failure), records the graph
on Lazuli tensors with _aten.interpret, runs it, and compares the values with eager PyTorch
(torch.testing.assert_close at its default tolerances for the dtype; float16 and bfloat16 within
a few 16-bit units, SIXTEEN_BIT_TOLERANCE says why). Backward is make_fx of a
torch.func.vjp function, compared with the same function run eagerly.

`check_on_device(case)` runs the same cases on the lazy lazuli device instead (no trace: op by op
through the device's kernel, fallbacks to the CPU counted); tests/python/torch_frontend/
test_device_opinfo.py uses it, `python -m lazuli.torch._opinfo --device` prints its summary.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any, List, Optional, Set

import numpy as np
import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx

import lazuli as lz
from lazuli import _C

from . import _aten

DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64, torch.bool, torch.float16,
          torch.bfloat16)

# OpInfos whose names do not match an entry's op but that reach entries through decompositions
# (the models' ops: linear, softmax, layer_norm, cross_entropy, the optimizers' lerp/addcdiv...).
EXTRA_OPINFOS = (
    "nn.functional.linear", "nn.functional.relu", "softmax", "log_softmax", "nn.functional.softmax",
    "nn.functional.log_softmax", "nn.functional.layer_norm", "nn.functional.gelu",
    "nn.functional.embedding", "nn.functional.cross_entropy", "nn.functional.nll_loss",
    "nn.functional.mse_loss", "nn.functional.silu", "nn.functional.hardtanh",
    "nn.functional.leaky_relu", "nn.functional.elu", "nn.functional.pad", "matmul", "stack",
    "chunk", "std", "lerp", "addcmul", "addcdiv", "square", "true_divide", "masked_fill",
    "zeros_like", "ones_like", "triu", "tril", "unbind", "narrow", "expand_as", "view_as",
    "flatten", "unflatten", "movedim", "T", "mT", "sgn", "frac", "xlogy", "logaddexp",
    "nn.functional.softplus", "nn.functional.hardswish", "nn.functional.hardsigmoid",
    "nn.functional.mish", "nn.functional.relu6", "nn.functional.threshold", "nn.functional.glu",
    "nn.functional.binary_cross_entropy", "nn.functional.batch_norm", "nn.functional.group_norm",
    "linalg.vector_norm", "norm", "roll", "hstack", "vstack", "dstack", "column_stack",
    "split_with_sizes", "tensor_split", "hsplit", "vsplit", "new_zeros", "new_ones", "new_full",
    "zeros", "ones", "logit", "float", "double", "long", "int", "bool", "std_mean", "var_mean",
    "addmv", "addbmm", "baddbmm", "nn.functional.softsign", "nn.functional.tanhshrink",
    "nn.functional.celu", "nn.functional.selu", "nn.functional.logsigmoid", "heaviside",
    "nan_to_num", "clamp_min", "clamp_max", "positive", "select_scatter", "slice_scatter",
    "index_add", "index_copy", "take_along_dim", "outer", "inner", "broadcast_to",
    "nn.functional.cosine_similarity", "nn.functional.normalize", "diag_embed", "rot90",
    "nn.functional.scaled_dot_product_attention", "nn.functional.conv1d", "nn.functional.conv2d",
    "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d", "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d", "torch.ops.aten._safe_softmax.default",
)
# OpInfos also traced whole whose names do not match the entry they reach.
WHOLE_EXTRA = ("nn.functional.relu", "nn.functional.threshold", "nn.functional.linear", "matmul",
               "clamp", "split", "squeeze", "full_like", "zeros_like",
               # their backward graphs reach the backward ops eager's autograd calls
               "log_softmax", "torch.ops.aten._safe_softmax.default", "nn.functional.embedding",
               "nn.functional.gelu", "nn.functional.hardtanh",
               "native_layer_norm", "nn.functional.nll_loss", "select", "slice", "sigmoid", "tanh")
# Random or uninitialized results: compared by shape and dtype only.
UNORDERED_VALUES = frozenset({"empty", "empty_like", "new_empty", "empty_strided",
                              "new_empty_strided", "empty_permuted"})
# Ops whose index output is implementation-defined among equal values (eager's CPU sort is not
# stable for every dtype and size): an index output is checked by the values it selects, and a
# sort's by being a permutation as well.
# Each: (the output that holds indices, the dim's position in args, its keyword, its default).
TIED_INDICES = {"sort": (1, 0, "dim", -1), "argsort": (0, 0, "dim", -1),
                "topk": (1, 1, "dim", -1)}
SKIP_OPINFOS = frozenset({"nn.functional.dropout", "bernoulli", "normal", "rand_like",
                          "randn_like", "randint_like", "multinomial", "uniform",
                          "nn.functional.feature_alpha_dropout", "nn.functional.alpha_dropout",
                          "nn.functional.dropout2d", "nn.functional.dropout3d"})

# Tolerances wider than assert_close's defaults, with why.
TOLERANCES = {
    # Normalizing a single element: eager's x - mean is rounding noise (~1e-8) times rsqrt(eps);
    # Lazuli's is exactly 0, and the weight gradient shows the difference.
    "nn.functional.layer_norm": dict(rtol=1.3e-6, atol=1e-4),
    # The samples' entries reach 9, so scores reach 9*9*8/sqrt(8) ~ 230: float32 rounds them by
    # ~1e-5 and the softmax's gradient magnifies that; eager float32 itself is up to 5.5e-5 from
    # float64 on these samples (gradients of scale 20). In float64 the entries agree to 1e-15.
    "nn.functional.scaled_dot_product_attention": dict(rtol=1.3e-6, atol=3e-4),
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu": dict(rtol=1.3e-6, atol=3e-4),
}

# float16/bfloat16 results: within a few units in the last place (eps: 2^-10 and 2^-7) of eager's.
# Both compute each ATen op in float32 and round once (aten::lower, src/aten/table.h), but the float32
# inside differs as it does for float32 ops (exp, log, the order of sums), and a 16-bit rounding
# turns a float32 difference at a rounding boundary into a whole unit; where values cancel
# (logit near 0.5, gradients), that unit is of the operands' scale, hence the absolute term.
# PyTorch's own OpInfo tests widen 16-bit tolerances per op the same way (toleranceOverride).
SIXTEEN_BIT_TOLERANCE = {torch.float16: dict(rtol=4 * 2.0**-10, atol=2 * 2.0**-10),
                         torch.bfloat16: dict(rtol=4 * 2.0**-7, atol=2 * 2.0**-7)}


# Ops whose eager 16-bit CPU kernels are less accurate than Lazuli's float32-inside computation,
# so their 16-bit results are compared with eager float64 rounded to the dtype instead (measured
# on the failing sample: eager float16 conv_transpose2d is 0.10 from float64 on outputs of
# magnitude ~2; Lazuli is within the tolerance below).
FLOAT64_REFERENCE = frozenset({"nn.functional.conv_transpose2d"})
# 16-bit absolute tolerances scaled by the magnitude of the values inside the op. Attention: the
# samples' gradients have scale ~20 (see TOLERANCES) and its backward rounds the 16-bit
# intermediates of many ATen ops; the float16 gradient differs from eager's by up to 0.017.
SIXTEEN_BIT_SCALE = {"nn.functional.scaled_dot_product_attention": 16,
                     "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu": 16}


def _in_float64(fn, inputs, dtype):
    """fn's results computed in float64 from the same inputs, then rounded to `dtype`."""
    wide = [t.double() if t.dtype == dtype else t for t in inputs]
    return pytree.tree_map(
        lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.dtype == torch.float64 else t,
        fn(*wide))


def _tolerance(case, expected):
    if expected.dtype in SIXTEEN_BIT_TOLERANCE:
        tol = dict(SIXTEEN_BIT_TOLERANCE[expected.dtype])
        tol["atol"] *= SIXTEEN_BIT_SCALE.get(case.op.name, 1)
        return tol
    return TOLERANCES.get(case.op.name, {})


# Entries no OpInfo sample reaches (with why); test_every_entry_is_exercised allows these.
NOT_IN_OPINFO = {
    "aten.sym_size.int": "shapes under dynamic=True only",
    "aten.alias.default": "functionalized views of graph inputs only",
    "aten.lift_fresh_copy.default": "tensor constants in traced code only",
    "aten._unsafe_view.default": "aot_autograd's graphs only",
    "prims.fma.default": "inductor's decompositions of lerp and softmax_backward only; checked by "
                         "test_lowering_training's optimizer steps",
    "prims.convert_element_type.default": "decompositions over a 0-d float64 graph input only (an "
                                          "optimizer's learning rate under dynamic=True); checked "
                                          "by test_compile_dynamic and the C++ rows",
}
# No sample's graph reaches these: PyTorch rewrites most into other overloads before any graph
# exists (a Python scalar becomes the .Tensor overload, composites decompose at dispatch), and
# lerp's first samples take a scalar weight; the lazy device may still see them.
for _name in ("all.dim", "all.dims", "arange.default", "arange.start", "bitwise_and.Scalar",
              "bitwise_or.Scalar", "bitwise_xor.Scalar", "clamp_max.default", "clamp_min.default",
              "copy.default", "div.Scalar_mode", "fill.Scalar", "fill.Tensor",
              "floor_divide.Scalar", "isfinite.default", "pow.Scalar", "remainder.Scalar_Tensor",
              "reshape.default", "rsub.Scalar", "rsub.Tensor", "lerp.Tensor"):
    NOT_IN_OPINFO["aten." + _name] = "no sample's graph has it; checked directly in test_aten_table"
# Backward ops eager's autograd calls (the lazy device sees them) that torch.func.vjp decomposes.
for _name in ("aten.silu_backward.default", "aten.native_batch_norm_backward.default"):
    NOT_IN_OPINFO[_name] = "torch.func.vjp decomposes it; checked by the C++ rows (aten_*_test.cpp)"
NOT_IN_OPINFO["aten.as_strided_scatter.default"] = (
    "its OpInfo's samples scatter into a graph input, whose memory layout a graph does not know "
    "(refused); as_strided's gradient over a computed value reaches it (test_compile's "
    "test_memory_views_and_strided_factories_lower_without_eager, the C++ rows)")
NOT_IN_OPINFO["aten._native_batch_norm_legit.default"] = (
    "the in-place form (no functionalized graph has it): the C++ rows and "
    "AtenBatchNorm.LegitUpdatesTheRunningStatisticsAndFunctionalReturnsThem")
NOT_IN_OPINFO["aten._native_batch_norm_legit.no_stats"] = (
    "the batch norm OpInfos pass running statistics; F.batch_norm without them: test_compile's "
    "test_batch_norm_in_each_functional_form_lowers_without_eager")
NOT_IN_OPINFO["aten._native_batch_norm_legit_no_training.default"] = (
    "inference graphs of BatchNorm modules: test_compile's "
    "test_batch_norm_in_each_functional_form_lowers_without_eager, the C++ rows")
# Complex values stay inside a partition, and every FFT OpInfo returns (or takes) one.
for _name in ("aten.view_as_real.default", "aten.view_as_complex.default",
              "aten._fft_c2c.default", "aten._fft_r2c.default"):
    NOT_IN_OPINFO[_name] = ("the FFT OpInfos return complex values, which never leave a "
                            "partition: test_compile's test_fft_layers_lower_inside_one_partition, "
                            "the C++ rows (aten_complex_test.cpp)")
NOT_IN_OPINFO["aten.zero.default"] = ("zero_'s functional form: the lazy device's x.zero_(); "
                                      "checked by test_device_opinfo and the C++ rows")
NOT_IN_OPINFO["aten.masked_fill.Tensor"] = ("the masked_fill OpInfo's first sample fills a number; "
                                            "checked by the C++ rows (aten_pointwise_test.cpp)")
# Random ops: their values are Lazuli's stream, not eager's (SKIP_OPINFOS skips their OpInfos;
# a sample of another OpInfo whose graph draws from one, attention with dropout_p > 0, is skipped).
RANDOM_ENTRIES = frozenset(e.name for e in _C._aten.entries() if e.random)
for _name in RANDOM_ENTRIES:
    NOT_IN_OPINFO[_name] = ("random: Lazuli's stream, not eager's; checked by statistics in "
                            "test_compile_dropout")
# The foreach ops' OpInfos live outside op_db; the optimizers' steps exercise them.
for _e in _C._aten.entries():
    if _e.name.startswith("aten._foreach_"):
        NOT_IN_OPINFO[_e.name] = "not in op_db; checked by test_lowering_training's optimizer steps"


@dataclasses.dataclass
class Case:
    op: Any  # an OpInfo
    dtype: torch.dtype
    index: int
    backward: bool
    sample: Any
    decompose: bool = True

    @property
    def name(self) -> str:
        return self.op.name + ("." + self.op.variant_test_name if self.op.variant_test_name else "")

    @property
    def id(self) -> str:
        dt = _aten.dtype_name(self.dtype)
        return (f"{self.name}-{dt}-{self.index}" + ("-grad" if self.backward else "") +
                ("" if self.decompose else "-whole"))


@dataclasses.dataclass
class Result:
    lowered_ops: Set[Any]
    fallback: Optional[str] = None
    error: Optional[str] = None

    @property
    def passed(self) -> bool:
        return self.fallback is None and self.error is None


def _base(name):
    """"aten._softmax.default" -> "_softmax"."""
    return name.split(".")[1]


def _table_bases():
    bases = set()
    for e in _C._aten.entries():
        bases.add(_base(e.name))
        bases.add(_base(e.name).lstrip("_"))
    return bases


@functools.lru_cache(maxsize=None)
def opinfos():
    """The OpInfos that exercise the table: picked by name (scanning all of op_db by tracing takes
    minutes), sorted by name."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    bases = _table_bases()
    picked = []
    for op in op_db:
        names = {op.name, op.name.split(".")[-1], op.aten_name}
        if op.name in SKIP_OPINFOS:
            continue
        if names & bases or op.name in EXTRA_OPINFOS:
            picked.append(op)
    return sorted(picked, key=lambda o: (o.name, o.variant_test_name))


# Samples per dtype (forward; backward takes the same samples, floats only): float32 gets the most,
# the others enough to pin promotion, integer and 16-bit semantics, so the module runs in about
# two minutes.
SAMPLES = {torch.float32: 3, torch.float64: 1, torch.int32: 1, torch.int64: 2, torch.bool: 1,
           torch.float16: 1, torch.bfloat16: 1}


def cases(samples=None) -> List[Case]:
    """Every (OpInfo, dtype Lazuli has, sample) case, forward and, for floats where the OpInfo
    supports autograd, backward. Samples come from a fixed seed, so a case id names one input."""
    samples = samples or SAMPLES
    whole_ops = _whole_opinfos()
    out = []
    for op in opinfos():
        supported = op.supported_dtypes("cpu")
        for dt in DTYPES:
            if dt not in supported:
                continue
            grad = bool(op.supports_autograd and dt.is_floating_point and
                        dt in op.supported_backward_dtypes("cpu"))
            torch.manual_seed(0)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    picked = []
                    # sample_inputs_func, not sample_inputs: the latter walks the caller's
                    # stack with inspect (looking for a unittest case), seconds per call under
                    # pytest.
                    for s in op.sample_inputs_func(op, "cpu", dt, grad):
                        if len(picked) >= samples[dt]:
                            break
                        picked.append(s)
            except Exception:  # noqa: BLE001 (an OpInfo that cannot make samples here)
                continue
            whole = id(op) in whole_ops
            for i, s in enumerate(picked):
                out.append(Case(op, dt, i, False, s))
                if grad:
                    out.append(Case(op, dt, i, True, s))
                if whole and i == 0:
                    out.append(Case(op, dt, i, False, s, decompose=False))
                    if grad:
                        out.append(Case(op, dt, i, True, s, decompose=False))
    return out


def _whole_opinfos():
    """OpInfos named after an entry that decompositions() takes apart (sum.default, t,
    threshold_backward...): their first sample per dtype is also traced without decompositions,
    so those entries, which a front end without aot_autograd sees, are checked too."""
    table = _aten.decompositions()
    bases = set()
    for e in _C._aten.entries():
        if _aten._overload(e.name) in table:
            bases.update({_base(e.name), _base(e.name).lstrip("_")})
    return {id(op) for op in opinfos()
            if {op.name, op.name.split(".")[-1], op.aten_name} & bases or op.name in WHOLE_EXTRA}


def _to_lz(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: through float32, exactly
        return lz.from_numpy(np.array(t.float().numpy(), order="C")).to(lz.bfloat16)
    return lz.from_numpy(np.array(t.numpy(), order="C"))


def _to_torch(t):
    if t.dtype == lz.bfloat16:
        return torch.from_numpy(np.array(t.float().numpy())).to(torch.bfloat16)
    return torch.from_numpy(np.array(t.numpy()))


def _describe(case):
    def d(x):
        if isinstance(x, torch.Tensor):
            return f"{_aten.dtype_name(x.dtype)}{list(x.shape)}"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(d(v) for v in x) + "]"
        return repr(x)
    s = case.sample
    kw = ", ".join(f"{k}={d(v)}" for k, v in s.kwargs.items())
    return f"{case.name}({d(s.input)}, {', '.join(d(a) for a in s.args)}{', ' if kw else ''}{kw})"


def _flat_function(case):
    """(tensor leaves of the sample, a function of them that calls the op)."""
    s = case.sample
    leaves, spec = pytree.tree_flatten((s.input, s.args, s.kwargs))
    idx = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def call(*ts):
        ls = list(leaves)
        for i, t in zip(idx, ts):
            ls[i] = t
        a, args, kwargs = pytree.tree_unflatten(ls, spec)
        return case.op.op(a, *args, **kwargs)

    return [leaves[i] for i in idx], call


def _float_leaves(out):
    return tuple(o for o in pytree.tree_leaves(out)
                 if isinstance(o, torch.Tensor) and o.dtype.is_floating_point)


def _backward_function(case, tensors, call):
    diff = [i for i, t in enumerate(tensors) if t.requires_grad and t.dtype.is_floating_point]
    if not diff:
        return None
    process = case.sample.output_process_fn_grad
    n = len(tensors)

    def grads(*inputs):
        ts, cots = list(inputs[:n]), inputs[n:]

        def forward(*d):
            full = list(ts)
            for i, t in zip(diff, d):
                full[i] = t
            return _float_leaves(process(call(*full)))

        _, pullback = torch.func.vjp(forward, *[ts[i] for i in diff])
        return pullback(tuple(cots))

    return grads


def _check_tied_indices(case, got, want):
    """An index output of a TIED_INDICES op: the values it selects along the op's dim are eager's,
    and a full sort's indices are a permutation of that dim."""
    _, position, keyword, default = TIED_INDICES[case.op.name]
    args, kwargs = case.sample.args, case.sample.kwargs
    dim = default
    if position is not None and len(args) > position:
        dim = args[position]
    elif keyword is not None:
        dim = kwargs.get(keyword, default)
    x = case.sample.input.detach()
    if x.dim() == 0:
        x, got, want = x.reshape(1), got.reshape(1), want.reshape(1)
    assert got.shape == want.shape and got.dtype == want.dtype, f"{got.dtype}{list(got.shape)}"
    torch.testing.assert_close(x.gather(dim, got), x.gather(dim, want), equal_nan=True,
                               rtol=0, atol=0, check_stride=False)
    if case.op.name != "topk":
        ordered = torch.arange(x.shape[dim]).view([-1 if d == dim % x.dim() else 1
                                                   for d in range(x.dim())])
        torch.testing.assert_close(got.sort(dim).values, ordered.expand_as(got).contiguous())


def check(case) -> Result:
    """Runs one case; see the module doc."""
    tensors, call = _flat_function(case)
    fn = call
    inputs = [t.detach() for t in tensors]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if case.backward:
                fn = _backward_function(case, tensors, call)
                if fn is None:
                    return Result(set(), fallback="no differentiable input")
                torch.manual_seed(1)
                outs = _float_leaves(case.sample.output_process_fn_grad(call(*inputs)))
                if not outs:
                    return Result(set(), fallback="no differentiable output")
                inputs = inputs + [torch.randn_like(o) for o in outs]
            expected = fn(*inputs)
            if case.dtype in SIXTEEN_BIT_TOLERANCE and case.op.name in FLOAT64_REFERENCE:
                expected = _in_float64(fn, inputs, case.dtype)
    except Exception as e:  # noqa: BLE001 (a sample eager refuses is no case)
        return Result(set(), fallback=f"eager raised {type(e).__name__}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = _aten.decompositions() if case.decompose else {}
            gm = make_fx(torch.func.functionalize(fn), table, tracing_mode="real")(*inputs)
    except Exception as e:  # noqa: BLE001
        return Result(set(), fallback=f"not traceable ({type(e).__name__})")
    used = set()
    for node in gm.graph.nodes:
        reason = _aten.why_not_lowered(node)
        if reason is not None:
            whole = "" if case.decompose else " (traced without decompositions)"
            return Result(set(), fallback=f"{node.target}: {reason}{whole}")
        if node.op == "call_function" and _aten.entry(node.target) is not None:
            used.add(str(node.target))
    refused = _aten.refused_complex(gm)
    if refused:
        return Result(set(), fallback=next(iter(refused.values())))
    if used & RANDOM_ENTRIES:
        names = ", ".join(sorted(used & RANDOM_ENTRIES))
        return Result(set(), fallback=f"random ({names}): Lazuli's stream, not eager's")
    where = f"{case.id}: {_describe(case)}"
    try:
        got = _aten.interpret(gm, *[_to_lz(t) for t in inputs])
        got_leaves = pytree.tree_leaves(got)
        lz_leaves = [g for g in got_leaves if isinstance(g, lz.Tensor)]
        if lz_leaves:
            lz.sync_tensors(lz_leaves, wait=True)
        got_leaves = [_to_torch(g) if isinstance(g, lz.Tensor) else g for g in got_leaves]
    except Exception as e:  # noqa: BLE001 (an entry that claims a case must not raise)
        return Result(used, error=f"{where}: lowering raised {type(e).__name__}: {e}")
    return Result(used, error=_compare(case, got_leaves, pytree.tree_leaves(expected), where))


# ---- the lazy device ----------------------------------------------------------------------------
# check_on_device(case) runs a case's op on the lazuli device (lazuli.torch.device()) instead of
# through the bridge: the sample's tensors move to the device (those that require grad become
# leaves there), case.op.op runs on them op by op through the device's kernel (python/device/
# dispatch.cpp: the ATen table, or the CPU where the table lacks the op, counted as
# fallback::<op>), and every output read back with .cpu() is compared with eager CPU at the
# bridge mode's tolerances. Backward runs torch.autograd.grad on the device with the bridge mode's
# cotangents. No graph, no decompositions: the device sees what eager dispatch sends it, in-place
# and out= variants and views included. A case is lowered when no fallback:: counter moved; one
# that passes through the CPU fallback passes "with fallback".

# Samples per dtype on the device (forward; backward takes the same samples, floats only). A case
# costs ~2 ms, far less than a trace, so the budget is set by pytest's cost per test: ~12,500
# cases, every OpInfo at every dtype, in under a minute on two cores (all of op_db's samples for
# these OpInfos, ~45,000 cases, find no other cause of failure).
DEVICE_SAMPLES = {torch.float32: 16, torch.float64: 6, torch.int32: 6, torch.int64: 6,
                  torch.bool: 6, torch.float16: 6, torch.bfloat16: 6}
# Sample tensors that stay on the CPU, as in PyTorch's own device tests (the OpInfo's sample
# function makes them on the CPU whatever the device): per OpInfo, positions among the sample's
# tensors.
HOST_TENSORS = {"tensor_split": (1,)}  # indices_or_sections: eager requires a CPU tensor
# Tolerances the device mode adds to TOLERANCES (OpInfos whose samples the bridge's budget never
# reached), with why.
DEVICE_TOLERANCES = {
    # As nn.functional.layer_norm: a single element normalized, the weight's gradient is eager's
    # rounding noise times rsqrt(eps).
    "native_layer_norm": TOLERANCES["nn.functional.layer_norm"],
}


@dataclasses.dataclass
class DeviceResult:
    fallbacks: dict = dataclasses.field(default_factory=dict)  # "aten.<overload>" -> calls
    skip: Optional[str] = None
    error: Optional[str] = None
    # "float64" where a 16-bit result missed eager's but is within the tolerance of eager's
    # float64 result rounded to the dtype (eager's 16-bit CPU kernel was the less accurate).
    reference: str = "eager"

    @property
    def passed(self) -> bool:
        return self.skip is None and self.error is None

    @property
    def lowered(self) -> bool:
        """Passed with every op on the table (no fallback:: counter moved)."""
        return self.passed and not self.fallbacks

    @property
    def outcome(self) -> str:
        if self.skip is not None:
            return "skipped"
        if self.error is not None:
            return "failed"
        return "passed with fallback" if self.fallbacks else "passed"


def device_cases(samples=None) -> List[Case]:
    """The cases check_on_device runs: cases() at DEVICE_SAMPLES, less the bridge's traces
    without decompositions (the device has no trace)."""
    return [c for c in cases(samples or DEVICE_SAMPLES) if c.decompose]


# The counters a case reads: the CPU fallback's, and the reference backend's executed random
# nodes (rng_uniform...: the device's values are Lazuli's stream, not eager's).
def _counts():
    return {n: lz.debug.counter_value(n) for n in lz.debug.counter_names()
            if n.startswith("fallback::") or n.startswith("ExecutedNode::rng")}


def _moved(before, prefix):
    after = _counts()
    return {n.split("::", 1)[1]: v - before.get(n, 0) for n, v in after.items()
            if n.startswith(prefix) and v != before.get(n, 0)}


def _device_inputs(case, dev):
    """(the sample's tensors on the device, a function of them that calls the op there). A
    factory's device= keyword names the device too."""
    s = case.sample
    leaves, spec = pytree.tree_flatten((s.input, s.args, s.kwargs))
    idx = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    moved = []
    host = HOST_TENSORS.get(case.op.name, ())
    for k, i in enumerate(idx):
        t = leaves[i].detach()
        if k not in host:
            t = t.to(dev).requires_grad_(leaves[i].requires_grad)
        moved.append(t)

    def call(*ts):
        ls = list(leaves)
        for i, t in zip(idx, ts):
            ls[i] = t
        a, args, kwargs = pytree.tree_unflatten(ls, spec)
        if "device" in kwargs:
            kwargs = dict(kwargs, device=dev)
        return case.op.op(a, *args, **kwargs)

    return moved, call


def _tied_gradient(case, g):
    """A TIED_INDICES op's input gradient in an order independent of which of equal elements the
    op picked: along the op's dim, by the input's value, then by the gradient's (elements tied in
    the input hold the same cotangents, in some order)."""
    _, position, keyword, default = TIED_INDICES[case.op.name]
    args, kwargs = case.sample.args, case.sample.kwargs
    dim = args[position] if position is not None and len(args) > position else kwargs.get(
        keyword, default)
    x = case.sample.input.detach()
    if x.dim() == 0 or g.shape != x.shape:
        return g
    by_grad = g.argsort(stable=True, dim=dim)
    by_x = x.gather(dim, by_grad).argsort(stable=True, dim=dim)
    return g.gather(dim, by_grad).gather(dim, by_x)


def _device_tolerance(case, expected):
    if expected.dtype in SIXTEEN_BIT_TOLERANCE:
        return _tolerance(case, expected)
    return DEVICE_TOLERANCES.get(case.op.name) or _tolerance(case, expected)


def _compare(case, got_leaves, want_leaves, where, device=False):
    """None, or what differs between Lazuli's outputs (read back as torch tensors) and eager's.
    `device`: the lazy device's run: its tolerances, a tensor where eager has none (or the
    reverse) is a difference, and gradients of UNORDERED_VALUES ops are compared as values."""
    if len(got_leaves) != len(want_leaves):
        return f"{where}: {len(got_leaves)} outputs, eager has {len(want_leaves)}"
    tolerance = _device_tolerance if device else _tolerance
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        try:
            if not isinstance(w, torch.Tensor):
                assert not (device and isinstance(g, torch.Tensor)) and g == w, f"{g!r} != {w!r}"
            elif device and not isinstance(g, torch.Tensor):
                raise AssertionError(f"{g!r}, eager has a tensor")
            elif TIED_INDICES.get(case.op.name, (None,))[0] == k and not case.backward:
                _check_tied_indices(case, g, w)
            elif case.op.name in UNORDERED_VALUES and not (device and case.backward):
                assert g.dtype == w.dtype and g.shape == w.shape, f"{g.dtype}{list(g.shape)}"
            else:
                w = w.detach()
                if case.backward and case.op.name in TIED_INDICES:
                    g, w = _tied_gradient(case, g), _tied_gradient(case, w)
                torch.testing.assert_close(g, w, equal_nan=True, check_stride=False,
                                           **tolerance(case, w))
        except AssertionError as e:
            return f"{where}: {'gradient' if device and case.backward else 'output'} {k}: {e}"
    return None


def check_on_device(case) -> DeviceResult:
    """Runs one case on the lazuli device; see the comment above DEVICE_SAMPLES."""
    from . import _device
    dev = _device.device()
    tensors, call = _flat_function(case)
    inputs = [t.detach() for t in tensors]
    where = f"{case.id}: {_describe(case)}"
    if any(t.layout != torch.strided for t in tensors):
        return DeviceResult(skip="a sparse input: the device has strided tensors only")
    lacking = sorted({_aten.dtype_name(t.dtype) for t in tensors if t.dtype not in DTYPES})
    if lacking:
        return DeviceResult(skip=f"a {', '.join(lacking)} input: a dtype the device lacks")
    if not tensors and "device" not in case.sample.kwargs:
        return DeviceResult(skip="no tensor and no device=: the op makes a CPU tensor")
    # Made before eager runs: an op that writes an input must not change the device's copy.
    dev_inputs, dev_call = _device_inputs(case, dev)
    cots = []
    diff = [i for i, t in enumerate(tensors) if t.requires_grad and t.dtype.is_floating_point]
    process = case.sample.output_process_fn_grad
    fn = call
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if case.backward:
                fn = _backward_function(case, tensors, call)
                if fn is None:
                    return DeviceResult(skip="no differentiable input")
                torch.manual_seed(1)
                outs = _float_leaves(process(call(*inputs)))
                if not outs:
                    return DeviceResult(skip="no differentiable output")
                cots = [torch.randn_like(o) for o in outs]
                inputs = inputs + cots
            expected = fn(*inputs)
            if case.dtype in SIXTEEN_BIT_TOLERANCE and case.op.name in FLOAT64_REFERENCE:
                expected = _in_float64(fn, inputs, case.dtype)
    except Exception as e:  # noqa: BLE001 (a sample eager refuses is no case)
        return DeviceResult(skip=f"eager raised {type(e).__name__}")
    before = _counts()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = dev_call(*dev_inputs)
            if case.backward:
                leaves = [dev_inputs[i] for i in diff]
                pairs = [(o, c.to(dev)) for o, c in zip(_float_leaves(process(out)), cots)
                         if o.requires_grad]
                # As torch.func.vjp: outputs that need no grad add nothing, unreached inputs
                # get zeros.
                grads = (torch.autograd.grad([o for o, _ in pairs], leaves,
                                             [c for _, c in pairs], allow_unused=True)
                         if pairs else [None] * len(leaves))
                out = [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]
            got = pytree.tree_leaves(out)
            misplaced = [k for k, g in enumerate(got)
                         if isinstance(g, torch.Tensor) and g.device != dev]
            got = [g.detach().cpu() if isinstance(g, torch.Tensor) else g for g in got]
    except Exception as e:  # noqa: BLE001 (the device must run what eager runs)
        msg = str(e).strip().split("\n")[0][:300]
        return DeviceResult(_moved(before, "fallback::"),
                            error=f"{where}: device raised {type(e).__name__}: {msg}")
    fallbacks = _moved(before, "fallback::")
    if misplaced:
        return DeviceResult(fallbacks, error=f"{where}: outputs {misplaced} are not on the device")
    error = _compare(case, got, pytree.tree_leaves(expected), where, device=True)
    if error and _moved(before, "ExecutedNode::rng"):
        return DeviceResult(fallbacks, skip="random: Lazuli's stream, not eager's")
    if error and case.dtype in SIXTEEN_BIT_TOLERANCE and case.op.name not in FLOAT64_REFERENCE:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                wide = _in_float64(fn, inputs, case.dtype)
        except Exception:  # noqa: BLE001
            return DeviceResult(fallbacks, error=error)
        if _compare(case, got, pytree.tree_leaves(wide), where, device=True) is None:
            return DeviceResult(fallbacks, reference="float64")
    return DeviceResult(fallbacks, error=error)


def main_device():
    import collections
    import sys

    lz._C._set_backend("interp")
    counts = collections.Counter()
    for c in device_cases():
        r = check_on_device(c)
        counts[("backward" if c.backward else "forward", r.outcome)] += 1
        if r.error:
            print("FAIL", r.error, file=sys.stderr)
    for k, v in sorted(counts.items()):
        print(*k, v)


def main():
    import collections
    import sys

    lz._C._set_backend("interp")
    counts = collections.Counter()
    for c in cases():
        r = check(c)
        kind = "backward" if c.backward else "forward"
        counts[(kind, "passed" if r.passed else "fallback" if r.fallback else "failed")] += 1
        if r.error:
            print("FAIL", r.error, file=sys.stderr)
    for k, v in sorted(counts.items()):
        print(*k, v)


if __name__ == "__main__":
    import sys as _sys
    main_device() if "--device" in _sys.argv[1:] else main()
