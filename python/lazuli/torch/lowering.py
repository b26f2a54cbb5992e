"""The ATen lowering table: the one place an ATen op is taught to Lazuli (DESIGN.md 5b).

Each entry maps one ATen overload (``torch.ops.aten.addmm.default``) to a function over Lazuli
tensors, with the conditions under which it applies: the dtypes its tensor arguments may have and,
where needed, a check of the other arguments. Both PyTorch front ends use this table and nothing
else to decide what Lazuli runs: the torch.compile bridge asks ``why_not_lowered(node)`` before
tracing to partition a graph (so an unsupported node is known up front, never found by trial), and
then calls ``lowering.fn`` while tracing.

Conventions for an entry's ``fn``: it takes the ATen overload's arguments in schema order, with
Lazuli tensors where the schema has tensors and Python values elsewhere (keyword-only arguments as
keywords); it returns a Lazuli tensor, or a tuple of them for a multi-output overload. It records
Lazuli ops only: no value reads, no torch calls.

Conventions for ``when``: it takes the same arguments, with the torch tensors (FakeTensors or meta
values from the FX graph, whose dtypes and shapes are known) in tensor positions, and returns None
when the entry applies, else a short reason ("alpha != 1 on an integer tensor").

The entries live in lowering_pointwise.py (elementwise ops and activations), lowering_reduce.py
(reductions, softmax, normalization, matrix products), lowering_shape.py (views, joins,
indexing, creation, copies), lowering_foreach.py (the optimizers' _foreach_* ops, lerp,
addcmul, addcdiv), lowering_attention.py (scaled dot-product attention), lowering_conv.py
(convolution, pooling), lowering_random.py (dropout, bernoulli: Lazuli's random stream) and
lowering_scan.py (cumsum, cumprod); importing this module registers them all. Every entry is checked against eager PyTorch on the sample inputs of
PyTorch's OpInfo database (tests/python/torch_frontend/test_opinfo.py; the results are in
docs/torch-support.md).
"""
from __future__ import annotations

import dataclasses
import functools
import operator
import re
from typing import Any, Callable, Dict, FrozenSet, Optional

import torch

import lazuli as lz
from lazuli import _C

aten = torch.ops.aten
prims = torch.ops.prims

# Dtypes Lazuli has, both ways.
TORCH_TO_LZ = {
    torch.float32: lz.float32,
    torch.float64: lz.float64,
    torch.int32: lz.int32,
    torch.int64: lz.int64,
    torch.bool: lz.bool,
    torch.float16: lz.float16,
    torch.bfloat16: lz.bfloat16,
}
LZ_TO_TORCH = {int(v): k for k, v in TORCH_TO_LZ.items()}

# Lazuli computes float16 and bfloat16 in float32 and rounds each op's result, as PyTorch does on
# CPUs, so an entry that takes float32 takes them too (why_not); the entries' own dtype sets, and
# docs/torch-support.md's dtype column, name the dtypes they were written and checked for.
REDUCED_FLOATS: FrozenSet[torch.dtype] = frozenset({torch.float16, torch.bfloat16})

FLOATS: FrozenSet[torch.dtype] = frozenset({torch.float32, torch.float64})
INTS: FrozenSet[torch.dtype] = frozenset({torch.int32, torch.int64})
NUMBERS: FrozenSet[torch.dtype] = FLOATS | INTS
ALL: FrozenSet[torch.dtype] = NUMBERS | {torch.bool}


@dataclasses.dataclass(frozen=True)
class Lowering:
    target: torch._ops.OpOverload
    fn: Callable[..., Any]
    dtypes: FrozenSet[torch.dtype]
    when: Optional[Callable[..., Optional[str]]] = None
    note: str = ""

    @property
    def name(self) -> str:
        return str(self.target)  # "aten.addmm.default"


TABLE: Dict[torch._ops.OpOverload, Lowering] = {}

# Entries for ops registered by a PyTorch module the table does not import (inductor's prims.fma,
# which its decompositions of lerp and softmax_backward emit): qualified overload name -> the
# arguments of lower(); entered into TABLE the first time the op is looked up.
LATE: Dict[str, tuple] = {}


def lower(*targets, dtypes=FLOATS, when=None, note=""):
    """Decorator: `fn` lowers each of `targets` (ATen overloads, or qualified names such as
    "prims::fma.default" of ops that may not be registered yet) under the given conditions."""

    def register(fn):
        for t in targets:
            if isinstance(t, str):
                LATE[t] = (fn, frozenset(dtypes), when, note)
                continue
            if t in TABLE:
                raise ValueError(f"lowering table: {t} has two entries")
            TABLE[t] = Lowering(t, fn, frozenset(dtypes), when, note)
        return fn

    return register


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def dtype_name(dt) -> str:
    return str(dt).replace("torch.", "")


def lookup(target) -> Optional[Lowering]:
    """The table's entry for an overload, or None."""
    e = TABLE.get(target)
    if e is None and isinstance(target, torch._ops.OpOverload):
        late = LATE.get(f"{target.name()}.{target._overloadname}")
        if late is not None:
            e = TABLE[target] = Lowering(target, *late)
    return e


def why_not(target, args, kwargs) -> Optional[str]:
    """None when the table lowers `target` applied to these arguments (torch tensors or metas in
    tensor positions), else why not, in a few words."""
    entry = lookup(target)
    if entry is None:
        return "no lowering"
    for t in _tensors((args, tuple(kwargs.values()))):
        if t.dtype not in entry.dtypes and not (
                t.dtype in REDUCED_FLOATS and torch.float32 in entry.dtypes):
            return f"dtype {dtype_name(t.dtype)} not supported"
        if t.device.type not in ("cpu", "meta"):
            return f"device {t.device}"
        if t.layout != torch.strided:
            return f"layout {t.layout}"
    if entry.when is not None:
        try:
            return entry.when(*args, **kwargs)
        except TypeError as e:  # arguments the entry does not know (a newer schema)
            return f"unexpected arguments ({e})"
    return None


# Python functions on sizes (SymInts under dynamic shapes) that appear in ATen graphs between
# ATen calls; interpret evaluates them on the concrete values.
SIZE_FUNCTIONS = frozenset({
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv, operator.mod,
    operator.neg, operator.pow, operator.eq, operator.ne, operator.lt, operator.le, operator.gt,
    operator.ge, operator.and_, operator.or_, operator.not_, max, min, abs,
})


def _meta(a):
    if isinstance(a, torch.fx.Node):
        return a.meta.get("val", a.meta.get("example_value"))
    return a


def why_not_lowered(node: "torch.fx.Node") -> Optional[str]:
    """The same question about an FX node of an ATen graph (after aot_autograd), read from the
    `val` metadata of its inputs and outputs; None when it lowers."""
    if node.op == "get_attr":  # a tensor constant: copied into Lazuli by interpret
        val = _meta(node)
        if isinstance(val, torch.Tensor) and val.dtype not in TORCH_TO_LZ:
            return f"constant of dtype {dtype_name(val.dtype)}"
        return None
    if node.op != "call_function" or node.target is operator.getitem:
        return None
    if node.target in SIZE_FUNCTIONS:
        return None
    if not isinstance(node.target, torch._ops.OpOverload):
        return "not an ATen overload"
    args = torch.fx.node.map_aggregate(node.args, _meta)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, _meta)
    reason = why_not(node.target, args, kwargs)
    if reason is None:
        for t in _tensors(_meta(node)):  # an output dtype Lazuli lacks (a cast to float16)
            if t.dtype not in TORCH_TO_LZ:
                return f"result dtype {dtype_name(t.dtype)} not supported"
    return reason


def supported_ops():
    """The overloads the table lowers, with their conditions: a list of dicts, sorted by name."""
    rows = []
    for e in TABLE.values():
        rows.append({
            "op": e.name,
            "dtypes": sorted(dtype_name(d) for d in e.dtypes),
            "conditions": e.note,
        })
    for name, (_, dtypes, _, note) in LATE.items():
        op = name.replace("::", ".")
        if all(r["op"] != op for r in rows):
            rows.append({"op": op, "dtypes": sorted(dtype_name(d) for d in dtypes),
                         "conditions": note})
    return sorted(rows, key=lambda r: r["op"])


class LoweringMismatch(RuntimeError):
    """An entry produced a result whose dtype or shape differs from the FX graph's metadata (what
    eager PyTorch gives): a bug in the entry, caught before anything runs."""


def _check_result(node, value):
    expected = _meta(node)
    if expected is None:
        return
    got = value if isinstance(value, (list, tuple)) else (value,)
    want = expected if isinstance(expected, (list, tuple)) else (expected,)
    for g, w in zip(got, want):
        if not isinstance(w, torch.Tensor) or not isinstance(g, lz.Tensor):
            continue
        shape = tuple(int(s) if isinstance(s, int) else s for s in w.shape)
        if LZ_TO_TORCH.get(int(g.dtype)) != w.dtype or (
                all(isinstance(s, int) for s in shape) and tuple(g.shape) != shape):
            raise LoweringMismatch(
                f"lazuli: the lowering of {node.target} (node {node.name}) gave "
                f"{g.dtype} {tuple(g.shape)}, PyTorch gives {dtype_name(w.dtype)} {shape}")


def _constant(gm, node):
    """A tensor constant of the graph (get_attr), copied into a Lazuli tensor."""
    value = gm
    for part in node.target.split("."):
        value = getattr(value, part)
    if not isinstance(value, torch.Tensor):
        return value
    import numpy as np
    value = value.detach().cpu()
    if value.dtype == torch.bfloat16:  # numpy has no bfloat16: through float32, exactly
        return lz.from_numpy(np.array(value.float().numpy(), order="C")).to(lz.bfloat16)
    return lz.from_numpy(np.array(value.numpy(), order="C"))


def user_op_name(node) -> str:
    """The name Lazuli's run-time errors give the ops recorded for `node` (src/ir/origin.h):
    "aten.gather.default (node %gather_1)"; node_of_error finds the node again from it."""
    return f"{node.target} (node %{node.name})"


def node_of_error(gm: "torch.fx.GraphModule", message: str) -> Optional["torch.fx.Node"]:
    """The node of `gm` a Lazuli run-time error message names (user_op_name), or None."""
    for name in re.findall(r"\(node %([A-Za-z0-9_]+)\)", message):
        for node in gm.graph.nodes:
            if node.name == name:
                return node
    return None


# ATen ops whose index out of range eager reports as IndexError (checked in eager: embedding,
# index_select, x[i], x[i] = v, index_copy, a loss target); gather, scatter and index_add raise
# RuntimeError there, as does any other failure when a program runs.
_INDEX_ERROR_OPS = frozenset({
    "embedding", "index_select", "index", "_unsafe_index", "index_put", "_unsafe_index_put",
    "index_copy", "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward",
    "nll_loss2d_backward",
})


def eager_error_type(target, detail: str) -> type:
    """The exception type eager PyTorch raises where `target` failed as Lazuli's `detail` says."""
    parts = str(target).split(".")
    if len(parts) > 1 and parts[1] in _INDEX_ERROR_OPS and "out of range" in detail:
        return IndexError
    return RuntimeError


# bfloat16 products Lazuli computes as eager does (oneDNN's bf16 matmul, float32 sums, bias
# added in float32): they keep their 16-bit operands; addmm and baddbmm then round the product
# before adding the bias, one rounding more than eager.
_BF16_NATIVE = frozenset(("mm.default", "bmm.default", "addmm.default", "baddbmm.default"))


def _in_float32(node, fn, args, kwargs):
    """Calls an entry's lowering as eager computes the op: a computing ATen op whose operands
    include float16/bfloat16 tensors reads them as float32, computes in float32 and rounds each
    16-bit result once, however many Lazuli ops its lowering records (Lazuli's own ops round
    after each one). Views, in-place ops and bfloat16 products keep their operands."""
    target = node.target
    sixteen = (lz.float16, lz.bfloat16)
    found = []

    def scan(x):
        if isinstance(x, lz.Tensor) and x.dtype in sixteen:
            found.append(x.dtype)
        return x

    torch.fx.node.map_aggregate((args, kwargs), scan)
    expected = _meta(node)
    if (not found or expected is None or not isinstance(target, torch._ops.OpOverload)
            or target.is_view or target._schema.is_mutable
            or (lz.bfloat16 in found and target.__name__ in _BF16_NATIVE)):
        return fn(*args, **kwargs)

    def up(x):
        return x.float() if isinstance(x, lz.Tensor) and x.dtype in sixteen else x

    out = fn(*torch.fx.node.map_aggregate(args, up), **torch.fx.node.map_aggregate(kwargs, up))
    want = expected if isinstance(expected, (list, tuple)) else (expected,)
    got = out if isinstance(out, (list, tuple)) else (out,)
    back = []
    for g, w in zip(got, want):
        if (isinstance(g, lz.Tensor) and isinstance(w, torch.Tensor) and g.dtype == lz.float32
                and w.dtype in (torch.float16, torch.bfloat16)):
            g = g.to(TORCH_TO_LZ[w.dtype])
        back.append(g)
    back += list(got[len(back):])
    if isinstance(out, (list, tuple)):
        return type(out)(back) if isinstance(out, tuple) else back
    return back[0]


def interpret(gm: "torch.fx.GraphModule", *args):
    """Runs an ATen FX graph whose every call lowers (why_not_lowered is None for each) on Lazuli
    tensors: placeholders take `args` in order, each call records its entry's Lazuli ops, and the
    output's structure is returned with Lazuli tensors in it. Records only; runs nothing. Each
    result is checked against the node's metadata (dtype, shape) where the graph has it
    (LoweringMismatch otherwise). Tensor constants (get_attr) are copied in. An op that fails
    when the program runs names its node (user_op_name)."""
    env = {}
    it = iter(args)

    def load(a):
        return env[a] if isinstance(a, torch.fx.Node) else a

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(it)
        elif node.op == "call_function":
            a = torch.fx.node.map_aggregate(node.args, load)
            kw = torch.fx.node.map_aggregate(node.kwargs, load)
            if node.target is operator.getitem or node.target in SIZE_FUNCTIONS:
                env[node] = node.target(*a, **kw)
                continue
            entry = lookup(node.target)
            if entry is None:
                raise NotImplementedError(f"lazuli: no lowering for {node.target} (node {node.name})")
            # An op that fails when its program runs (an index out of range) names this node.
            outer = _C._enter_user_op(user_op_name(node))
            try:
                env[node] = _in_float32(node, entry.fn, a, kw)
            finally:
                _C._exit_user_op(outer)
            _check_result(node, env[node])
        elif node.op == "get_attr":
            env[node] = _constant(gm, node)
        elif node.op == "output":
            return torch.fx.node.map_aggregate(node.args[0], load)
        else:
            raise NotImplementedError(f"lazuli: FX node kind {node.op} ({node.name})")
    return None


# ---------------------------------------------------------------------------------------------
# The decomposition table.
#
# PyTorch's core ATen decompositions (torch._decomp.core_aten_decompositions) take aot_autograd's
# and make_fx's graphs down to the ~190 ops of the Core ATen IR, the set PyTorch keeps stable and
# the table is written against; the softmax, layer-norm and loss backward ops, addcmul/addcdiv/lerp
# of the optimizers, silu, stack, split, t, transpose and the like all decompose there. On top of
# them, the decompositions PyTorch ships outside the core set for the ops listed below, each added
# only while the table has no entry of its own for that op (an entry keeps the op whole: fewer
# nodes, eager's formula): batch and group norm (to mean/var with running statistics), std_mean,
# addmv/addbmm, masked_fill, index_add, _unsafe_index and a few activations.
_EXTRA_DECOMPOSITIONS = (
    "std_mean.correction",
    "native_batch_norm.default",  # training BatchNorm through mean/var (running stats included)
    "_native_batch_norm_legit_functional.default",
    "_native_batch_norm_legit.default",
    "_native_batch_norm_legit_no_training.default",
    "native_group_norm.default",
    "addmv.default",
    "addbmm.default",
    "hardtanh.default",
    "leaky_relu.default",
    "elu.default",
    "erfc.default",
    "log2.default",
    "log10.default",
    "exp2.default",
    "_unsafe_index.Tensor",
    "index_add.default",
    "masked_fill.Scalar",
    "masked_fill.Tensor",
)


# Core decompositions the table overrides with an entry of its own, because the decomposition is
# wrong for training: PyTorch's decomposition of the CPU flash attention returns the attention
# weights where the op returns the logsumexp its backward reads (lowering_attention.py).
_NOT_DECOMPOSED = (
    "_scaled_dot_product_flash_attention_for_cpu.default",
)


def _overload(name):
    base, overload = name.rsplit(".", 1)
    packet = getattr(aten, base, None)
    return getattr(packet, overload, None) if packet is not None else None


@functools.lru_cache(maxsize=None)
def _decomposition_table():
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    for name in _NOT_DECOMPOSED:
        table.pop(_overload(name), None)
    extra = []
    for name in _EXTRA_DECOMPOSITIONS:
        op = _overload(name)
        if op is not None and op not in TABLE:
            extra.append(op)
    table.update(get_decompositions(extra))
    return table


def decompositions():
    """The decomposition table for aot_autograd / make_fx: PyTorch's core ATen decompositions, less
    _NOT_DECOMPOSED, plus the extras above. A new dict each call (callers may add to theirs)."""
    return dict(_decomposition_table())


# ---------------------------------------------------------------------------------------------
# Helpers shared by the entry modules.

def lz_dtype(dt):
    """The Lazuli dtype of a torch dtype (None stays None)."""
    return None if dt is None else TORCH_TO_LZ[dt]


def torch_dtype(t):
    return LZ_TO_TORCH[int(t.dtype)]


def _tier(o):
    if isinstance(o, lz.Tensor):
        return (0 if o.ndim else 1), torch_dtype(o)
    if isinstance(o, bool):
        return 2, torch.bool
    if isinstance(o, int):
        return 2, torch.int64
    return 2, torch.get_default_dtype()


def _category(dt):
    return 2 if dt.is_floating_point else (0 if dt == torch.bool else 1)


def promote(*operands):
    """The result dtype (a torch dtype) of PyTorch's type promotion over these operands (Lazuli
    tensors, Python numbers; None skipped): dimensioned tensors, then zero-dim tensors, then
    numbers, a lower tier counting only when its category (bool < int < float) is higher."""
    tiers = [None, None, None]
    for o in operands:
        if o is None:
            continue
        tier, dt = _tier(o)
        tiers[tier] = dt if tiers[tier] is None else torch.promote_types(tiers[tier], dt)
    r = None
    for dt in tiers:
        if dt is not None and (r is None or _category(dt) > _category(r)):
            r = dt
    return r


def cast(t, dt):
    """`t` (a Lazuli tensor or a Python number) as torch dtype `dt`."""
    if isinstance(t, lz.Tensor):
        return t if torch_dtype(t) == dt else t.to(TORCH_TO_LZ[dt])
    if dt == torch.bool:
        return bool(t)
    return float(t) if dt.is_floating_point else int(t)


# Registers the entries (each module imports `lower` and the helpers above).
from . import lowering_pointwise, lowering_reduce, lowering_shape, lowering_foreach  # noqa: E402,F401,I001
from . import lowering_attention  # noqa: E402,F401,I001
from . import lowering_conv, lowering_sort  # noqa: E402,F401
from . import lowering_random, lowering_scan  # noqa: E402,F401
