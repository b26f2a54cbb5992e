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
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable, Dict, FrozenSet, Optional

import torch

import lazuli as lz

aten = torch.ops.aten

# Dtypes Lazuli has, both ways.
TORCH_TO_LZ = {
    torch.float32: lz.float32,
    torch.float64: lz.float64,
    torch.int32: lz.int32,
    torch.int64: lz.int64,
    torch.bool: lz.bool,
}
LZ_TO_TORCH = {int(v): k for k, v in TORCH_TO_LZ.items()}

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


def lower(*targets, dtypes=FLOATS, when=None, note=""):
    """Decorator: `fn` lowers each of `targets` (ATen overloads) under the given conditions."""

    def register(fn):
        for t in targets:
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


def why_not(target, args, kwargs) -> Optional[str]:
    """None when the table lowers `target` applied to these arguments (torch tensors or metas in
    tensor positions), else why not, in a few words."""
    entry = TABLE.get(target)
    if entry is None:
        return "no lowering"
    for t in _tensors((args, tuple(kwargs.values()))):
        if t.dtype not in entry.dtypes:
            return f"dtype {str(t.dtype).replace('torch.', '')} not supported"
        if t.device.type not in ("cpu", "meta"):
            return f"device {t.device}"
    if entry.when is not None:
        return entry.when(*args, **kwargs)
    return None


def why_not_lowered(node: "torch.fx.Node") -> Optional[str]:
    """The same question about an FX node of an ATen graph (after aot_autograd), read from the
    `val` metadata of its inputs; None when it lowers."""
    if node.op != "call_function" or node.target is operator.getitem:
        return None
    if not isinstance(node.target, torch._ops.OpOverload):
        return "not an ATen overload"

    def meta(a):
        if isinstance(a, torch.fx.Node):
            return a.meta.get("val", a.meta.get("example_value"))
        return a

    args = torch.fx.node.map_aggregate(node.args, meta)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, meta)
    return why_not(node.target, args, kwargs)


def supported_ops():
    """The overloads the table lowers, with their conditions: a list of dicts, sorted by name."""
    rows = []
    for e in TABLE.values():
        rows.append({
            "op": e.name,
            "dtypes": sorted(str(d).replace("torch.", "") for d in e.dtypes),
            "conditions": e.note,
        })
    return sorted(rows, key=lambda r: r["op"])


def interpret(gm: "torch.fx.GraphModule", *args):
    """Runs an ATen FX graph whose every call lowers (why_not_lowered is None for each) on Lazuli
    tensors: placeholders take `args` in order, each call records its entry's Lazuli ops, and the
    output's structure is returned with Lazuli tensors in it. Records only; runs nothing."""
    env = {}
    it = iter(args)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(it)
        elif node.op == "call_function":
            load = lambda a: env[a] if isinstance(a, torch.fx.Node) else a  # noqa: E731
            a = torch.fx.node.map_aggregate(node.args, load)
            kw = torch.fx.node.map_aggregate(node.kwargs, load)
            if node.target is operator.getitem:
                env[node] = a[0][a[1]]
                continue
            entry = TABLE.get(node.target)
            if entry is None:
                raise NotImplementedError(f"lazuli: no lowering for {node.target} (node {node.name})")
            env[node] = entry.fn(*a, **kw)
        elif node.op == "output":
            load = lambda a: env[a] if isinstance(a, torch.fx.Node) else a  # noqa: E731
            return torch.fx.node.map_aggregate(node.args[0], load)
        else:
            raise NotImplementedError(f"lazuli: FX node kind {node.op} ({node.name})")
    return None


# ---------------------------------------------------------------------------------------------
# Entries. Keep them grouped as ATen's native_functions.yaml groups them; one entry per overload.

@lower(aten.add.Tensor, dtypes=NUMBERS)
def _add(a, b, alpha=1):
    return lz.add(a, b if alpha == 1 else b * alpha)


@lower(aten.sub.Tensor, dtypes=NUMBERS)
def _sub(a, b, alpha=1):
    return lz.sub(a, b if alpha == 1 else b * alpha)


@lower(aten.mul.Tensor, dtypes=NUMBERS)
def _mul(a, b):
    return lz.mul(a, b)


@lower(aten.div.Tensor, dtypes=FLOATS)
def _div(a, b):
    return lz.div(a, b)


@lower(aten.neg.default, dtypes=NUMBERS)
def _neg(a):
    return lz.neg(a)


@lower(aten.exp.default)
def _exp(a):
    return lz.exp(a)


@lower(aten.tanh.default)
def _tanh(a):
    return lz.tanh(a)


@lower(aten.relu.default, dtypes=NUMBERS)
def _relu(a):
    return lz.relu(a)


@lower(aten.threshold_backward.default, dtypes=FLOATS)
def _threshold_backward(grad, x, threshold):
    return lz.where(x <= threshold, lz.zeros_like(grad), grad)


@lower(aten.mm.default)
def _mm(a, b):
    return lz.matmul(a, b)


@lower(aten.addmm.default, when=lambda bias, a, b, beta=1, alpha=1: None
       if beta == 1 and alpha == 1 else "beta or alpha != 1", note="beta == alpha == 1")
def _addmm(bias, a, b, beta=1, alpha=1):
    return lz.add(lz.matmul(a, b), bias)


@lower(aten.t.default, dtypes=ALL)
def _t(a):
    return a if a.ndim < 2 else lz.transpose(a, 0, 1)


@lower(aten.view.default, aten._unsafe_view.default, aten.reshape.default, dtypes=ALL)
def _view(a, shape):
    return lz.reshape(a, tuple(shape))


@lower(aten.sum.dim_IntList, dtypes=NUMBERS,
       when=lambda a, dim, keepdim=False, dtype=None: None if dtype is None else "dtype= given",
       note="no dtype=")
def _sum_dim(a, dim, keepdim=False, dtype=None):
    return lz.sum(a, tuple(dim) if dim else None, keepdim)


@lower(aten.mean.dim, when=lambda a, dim, keepdim=False, dtype=None: None
       if dtype is None else "dtype= given", note="no dtype=")
def _mean_dim(a, dim, keepdim=False, dtype=None):
    return lz.mean(a, tuple(dim) if dim else None, keepdim)


@lower(aten.sum.default, dtypes=NUMBERS,
       when=lambda a, dtype=None: None if dtype is None else "dtype= given", note="no dtype=")
def _sum(a, dtype=None):
    return lz.sum(a)


@lower(aten.mean.default,
       when=lambda a, dtype=None: None if dtype is None else "dtype= given", note="no dtype=")
def _mean(a, dtype=None):
    return lz.mean(a)
