"""The torch side of the ATen lowering table (src/aten/table.h, bound as ``lazuli._C._aten``).

The table itself is C++: it is the one place an ATen op is taught to Lazuli, and both PyTorch
front ends use it. This module only converts: torch values into the table's neutral form
(FakeTensors and metas into ``TensorMeta``, torch dtypes into Lazuli's, devices and layouts by
name), an overload's arguments into schema order with the schema's defaults, and it interprets an
ATen FX graph by asking the table of each node:

- ``why_not_lowered(node)``: None when the table lowers the node, else why not (the bridge
  partitions with it before tracing, so an unsupported node is known up front);
- ``interpret(gm, *args)``: records the graph on Lazuli tensors, every node through the
  table, checking each result against the graph's metadata. The graph is converted once to the
  table's C++ form (``aten_graph``, src/aten/graph.h) and recorded there: a new input signature
  (a new size under dynamic shapes) is a record in C++, with no Python per node. A graph without
  that form is walked in Python.
"""
from __future__ import annotations

import functools
import operator
import re
import weakref
from typing import Any, Dict, List, Optional

import torch

import lazuli as lz
from lazuli import _C

_A = _C._aten

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
# Complex dtypes: inside a partition, a complex value is a _C._aten.Complex over real pairs
# (src/aten/entries_complex.cpp); these are its components' dtypes. Never a partition's input or
# output (the bridge keeps complex values inside one partition).
COMPLEX_PARTS = {torch.complex64: lz.float32, torch.complex128: lz.float64}


def dtype_name(dt) -> str:
    return str(dt).replace("torch.", "")


# ---- torch values in the table's neutral form ----------------------------------------------------

def _size(s) -> int:
    """A size: an int, or a SymInt's hint (deciding whether a node lowers must not guard on it)."""
    if isinstance(s, torch.SymInt):
        hint = s.node.hint
        return int(hint) if hint is not None else 0
    return int(s)


def _meta(t: torch.Tensor, laid_out: bool = False):
    """`t` as the table's TensorMeta; with its strides and storage offset where `laid_out` (its
    layout at run time is known to be the fake's: see _LaidOut)."""
    if t.dtype in COMPLEX_PARTS and t.device.type in ("cpu", "meta") and t.layout == torch.strided:
        return _A.TensorMeta(COMPLEX_PARTS[t.dtype], [_size(s) for s in t.shape], complex=True)
    dt = TORCH_TO_LZ.get(t.dtype)
    reason = "" if dt is not None else f"dtype {dtype_name(t.dtype)} not supported"
    if t.device.type not in ("cpu", "meta"):
        reason = f"device {t.device}"
    elif t.layout != torch.strided:
        reason = f"layout {t.layout}"
    if laid_out and t.layout == torch.strided:
        return _A.TensorMeta(dt, [_size(s) for s in t.shape], reason,
                             [_size(s) for s in t.stride()], _size(t.storage_offset()))
    return _A.TensorMeta(dt, [_size(s) for s in t.shape], reason)


class _LaidOut:
    """A tensor value whose memory layout at run time is its fake's: the graph makes its
    storage (not an input, a constant, or a view of one, whose storage offset a graph does not
    know). Entries that read memory (as_strided) need that."""

    def __init__(self, t: torch.Tensor):
        self.t = t


# ATen ops whose result depends on their first input's memory, not only its values.
READS_MEMORY = frozenset({"aten.as_strided.default", "aten.as_strided_scatter.default"})


def _storage_made_by_graph(node) -> bool:
    """Whether the graph makes the storage `node`'s value lives in: through views and getitem
    to a computing op; not a placeholder, a constant, or a view of one."""
    while isinstance(node, torch.fx.Node):
        if node.op != "call_function":
            return False
        t = node.target
        if t is operator.getitem or (isinstance(t, torch._ops.OpOverload) and t.is_view):
            node = node.args[0]
            continue
        return True
    return False


_PLAIN = (int, float, bool, str, type(None), lz.Tensor, _A.Complex)


def neutral(v):
    """`v` (an argument of an ATen call: Lazuli tensors, torch metas, numbers, torch dtypes...)
    in the neutral form the table reads."""
    if isinstance(v, _PLAIN):
        return v
    if isinstance(v, (list, tuple)):
        return [neutral(x) for x in v]
    if isinstance(v, torch.Tensor):
        return _meta(v)
    if isinstance(v, _LaidOut):
        return _meta(v.t, laid_out=True)
    if isinstance(v, torch.dtype):
        dt = TORCH_TO_LZ.get(v)
        return dt if dt is not None else _A.Foreign("dtype", dtype_name(v))  # "complex64"
    if isinstance(v, torch.SymInt):
        return _size(v)
    if isinstance(v, torch.SymFloat):
        hint = v.node.hint
        return float(hint) if hint is not None else 0.0
    if isinstance(v, torch.SymBool):
        hint = v.node.hint
        return bool(hint) if hint is not None else False
    if isinstance(v, torch.device):
        return _A.Foreign("device", str(v))
    if isinstance(v, torch.layout):
        return _A.Foreign("layout", str(v))
    if isinstance(v, torch.memory_format):
        return _A.Foreign("memory_format", str(v))
    if isinstance(v, torch.Generator):
        return "<generator>"  # conditions refuse any generator (is it None?)
    raise TypeError(f"lazuli.torch: an ATen argument of type {type(v).__name__} ({v!r})")


_NO_DEFAULT = object()


@functools.lru_cache(maxsize=None)
def _schema_arguments(target):
    """Per schema argument: (name, kwarg_only, default or _NO_DEFAULT)."""
    out = []
    for a in target._schema.arguments:
        default = a.default_value if a.has_default_value() else _NO_DEFAULT
        out.append((a.name, a.kwarg_only, default))
    return tuple(out)


def normalize(target, args, kwargs) -> list:
    """An overload's arguments in schema order, each given or its default (None for an omitted
    optional argument without one)."""
    out = list(args)
    for i, (name, _, default) in enumerate(_schema_arguments(target)):
        if i < len(args):
            continue
        if name in kwargs:
            out.append(kwargs[name])
        else:
            out.append(None if default is _NO_DEFAULT else default)
    return out


# ---- the table ------------------------------------------------------------------------------------

_ENTRIES: Dict[Any, Any] = {}


def entry(target):
    """The table's entry for an overload (an OpOverload), or None."""
    try:
        return _ENTRIES[target]
    except KeyError:
        e = _ENTRIES[target] = _A.find(str(target)) if isinstance(target, torch._ops.OpOverload) else None
        return e


def why_not(target, args, kwargs) -> Optional[str]:
    """None when the table lowers `target` applied to these arguments (torch tensors or metas in
    tensor positions), else why not, in a few words."""
    e = entry(target)
    if e is None:
        return "no lowering"
    return e.why_not(neutral(normalize(target, args, kwargs)))


def lower(target, args, kwargs, result_dtypes=None, call=None, user_op=""):
    """Records `target` applied to `args` (Lazuli tensors in tensor positions) through the table
    and returns its result (a Lazuli tensor, a number, None, or a tuple of them).
    result_dtypes: eager's Lazuli dtype per tensor result, where known; call: a _C._aten.Call
    whose key random draws come from; user_op: what run-time errors name."""
    return entry(target).lower(neutral(normalize(target, args, kwargs)), result_dtypes, call,
                               user_op)


# Python functions on sizes (SymInts under dynamic shapes) that appear in ATen graphs between
# ATen calls; interpret evaluates them on the concrete values.
SIZE_FUNCTIONS = frozenset({
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv, operator.mod,
    operator.neg, operator.pow, operator.eq, operator.ne, operator.lt, operator.le, operator.gt,
    operator.ge, operator.and_, operator.or_, operator.not_, max, min, abs,
})


def _val(a):
    if isinstance(a, torch.fx.Node):
        return a.meta.get("val", a.meta.get("example_value"))
    return a


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def why_not_lowered(node: "torch.fx.Node") -> Optional[str]:
    """The same question about an FX node of an ATen graph (after aot_autograd), read from the
    `val` metadata of its inputs and outputs; None when it lowers."""
    if node.op == "get_attr":  # a tensor constant: copied into Lazuli by interpret
        val = _val(node)
        if isinstance(val, torch.Tensor) and val.dtype not in TORCH_TO_LZ:
            return f"constant of dtype {dtype_name(val.dtype)}"
        return None
    if node.op != "call_function" or node.target is operator.getitem:
        return None
    if node.target in SIZE_FUNCTIONS:
        return None
    if not isinstance(node.target, torch._ops.OpOverload):
        return "not an ATen overload"
    args = torch.fx.node.map_aggregate(node.args, _val)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, _val)
    if str(node.target) in READS_MEMORY and _storage_made_by_graph(node.args[0]):
        args = (_LaidOut(args[0]),) + tuple(args[1:])
    reason = why_not(node.target, args, kwargs)
    if reason is None:
        for t in _tensors(_val(node)):  # an output dtype Lazuli lacks (a cast to int16)
            if t.dtype not in TORCH_TO_LZ and t.dtype not in COMPLEX_PARTS:
                return f"result dtype {dtype_name(t.dtype)} not supported"
    return reason


def _is_complex(value) -> bool:
    return any(isinstance(t, torch.Tensor) and t.is_complex() for t in _tensors(value))


def refused_complex(gm: "torch.fx.GraphModule") -> Dict[str, str]:
    """The nodes that take or make complex values, all of them, unless every one lowers and no
    complex value is a graph input or output: Lazuli's complex values (pairs of reals, see
    src/aten/entries_complex.cpp) live only inside one partition, never cross into eager."""
    touching = {n for n in gm.graph.nodes if _touches_complex(n)}
    if not touching:
        return {}
    blocked = None
    for n in gm.graph.nodes:
        if n.op == "placeholder" and n.users and _is_complex(_val(n)):
            blocked = f"%{n.name} is a complex graph input"
        elif n.op == "output" and any(isinstance(a, torch.fx.Node) and _is_complex(_val(a))
                                      for a in n.all_input_nodes):
            blocked = "the graph returns a complex value"
        elif n in touching and n.target is not operator.getitem:
            why = why_not_lowered(n)
            if why is not None:
                blocked = f"%{n.name} ({n.target}) does not lower: {why}"
        if blocked:
            break
    if blocked is None:
        return {}
    return {n.name: f"complex values stay inside one partition, and {blocked}" for n in touching}


def _touches_complex(node) -> bool:
    if node.op != "call_function":
        return False
    if _is_complex(_val(node)):
        return True
    return any(isinstance(a, torch.fx.Node) and _is_complex(_val(a))
               for a in node.all_input_nodes)


def supported_ops() -> List[dict]:
    """The overloads the table lowers, with their conditions: a list of dicts, sorted by name."""
    return [{"op": e.name, "dtypes": sorted(d.name for d in e.dtypes), "conditions": e.note}
            for e in _A.entries()]


def uses_random(gm: "torch.fx.GraphModule") -> bool:
    """Whether a graph has a node that draws random numbers (the bridge then gives it a key)."""
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            e = entry(n.target)
            if e is not None and e.random:
                return True
    return False


def eager_error_type(target, detail: str) -> type:
    """The exception type eager PyTorch raises where `target` failed as Lazuli's `detail` says."""
    if "out of range" in detail and _A.raises_index_error(str(target)):
        return IndexError
    return RuntimeError


# ---- decompositions -----------------------------------------------------------------------------

def _overload(name):
    """"aten.std_mean.correction" -> the OpOverload, or None where this torch lacks it."""
    namespace, base, overload = name.split(".")
    packet = getattr(getattr(torch.ops, namespace), base, None)
    return getattr(packet, overload, None) if packet is not None else None


@functools.lru_cache(maxsize=None)
def _decomposition_table():
    from torch._decomp import core_aten_decompositions, get_decompositions

    table = dict(core_aten_decompositions())
    for name in _A.kept_whole():
        table.pop(_overload(name), None)
    extra = [op for op in map(_overload, _A.extra_decompositions())
             if op is not None and _A.find(str(op)) is None]
    table.update(get_decompositions(extra))
    return table


def decompositions():
    """The decomposition table for aot_autograd / make_fx: PyTorch's core ATen decompositions,
    less those the table keeps whole, plus the table's extras (src/aten/table.cpp). A new dict
    each call (callers may add to theirs)."""
    return dict(_decomposition_table())


# ---- interpreting an ATen graph -------------------------------------------------------------------

class LoweringMismatch(RuntimeError):
    """An entry produced a result whose dtype or shape differs from the FX graph's metadata (what
    eager PyTorch gives): a bug in the entry, caught before anything runs."""


def _check_result(node, value):
    expected = _val(node)
    if expected is None:
        return
    got = value if isinstance(value, (list, tuple)) else (value,)
    want = expected if isinstance(expected, (list, tuple)) else (expected,)
    for g, w in zip(got, want):
        if not isinstance(w, torch.Tensor):
            continue
        shape = tuple(int(s) if isinstance(s, int) else s for s in w.shape)
        if isinstance(g, _A.Complex):  # pairs: the components' dtype, one more dim of 2
            got_dtype, got_shape = ("complex " + str(g.pairs.dtype), tuple(g.pairs.shape)[:-1])
            ok = COMPLEX_PARTS.get(w.dtype) == g.pairs.dtype
        elif isinstance(g, lz.Tensor):
            got_dtype, got_shape = str(g.dtype), tuple(g.shape)
            ok = LZ_TO_TORCH.get(int(g.dtype)) == w.dtype
        else:
            continue
        if not ok or (all(isinstance(s, int) for s in shape) and got_shape != shape):
            raise LoweringMismatch(
                f"lazuli: the lowering of {node.target} (node {node.name}) gave "
                f"{got_dtype} {got_shape}, PyTorch gives {dtype_name(w.dtype)} {shape}")


def _result_dtypes(node):
    """Eager's Lazuli dtype per tensor result of `node` (None elsewhere), from its metadata."""
    val = _val(node)
    if val is None:
        return None
    vals = val if isinstance(val, (list, tuple)) else (val,)
    return [TORCH_TO_LZ.get(v.dtype) if isinstance(v, torch.Tensor) else None for v in vals]


def to_lazuli_constant(value: torch.Tensor):
    """A tensor constant of a graph copied into a Lazuli tensor."""
    import numpy as np
    value = value.detach().cpu()
    if value.dtype == torch.bfloat16:  # numpy has no bfloat16: through float32, exactly
        return lz.from_numpy(np.array(value.float().numpy(), order="C")).to(lz.bfloat16)
    return lz.from_numpy(np.array(value.numpy(), order="C"))


def _constant(gm, node):
    """A tensor constant of the graph (get_attr), copied into a Lazuli tensor."""
    value = gm
    for part in node.target.split("."):
        value = getattr(value, part)
    return to_lazuli_constant(value) if isinstance(value, torch.Tensor) else value


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


class AtenGraph:
    """A graph converted to the table's C++ form (src/aten/graph.h, `_C._aten.Graph`): `graph`;
    `spec`, its output's structure; `calls`, the value index of each call, whose result a
    checked recording compares with its node's metadata; `positions`, the node position of each
    value. Positions, not nodes: a node holds its GraphModule, which would then never leave the
    cache that holds this."""
    __slots__ = ("graph", "spec", "calls", "positions")

    def __init__(self, graph, spec, calls, positions):
        self.graph, self.spec, self.calls, self.positions = graph, spec, calls, positions


# GraphModule -> (its code when converted, AtenGraph or None).
_CONVERTED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def aten_graph(gm: "torch.fx.GraphModule") -> Optional[AtenGraph]:
    """`gm` in the table's C++ form, converted on first use and kept with `gm` (again after
    `gm.recompile()`, which an edit of its graph calls); None where a node has none (an argument
    neutral() cannot convert, an in-place update of a constant, a getitem of a computed index):
    such a graph is walked in Python."""
    code = getattr(gm, "_code", None)
    got = _CONVERTED.get(gm)
    if got is None or got[0] is not code:
        try:
            converted = _convert(gm)
        except Exception:  # noqa: BLE001  (any node the conversion cannot take: walk in Python)
            converted = None
        got = _CONVERTED[gm] = (code, converted)
    return got[1]


def _convert(gm) -> AtenGraph:
    g = _A.Graph()
    index: Dict[Any, int] = {}
    constants = set()
    calls, positions = [], []

    def arg(v):
        if isinstance(v, torch.fx.Node):
            return _A.Ref(index[v])
        if isinstance(v, (list, tuple)):
            return [arg(x) for x in v]
        return neutral(v)

    spec = None
    for position, node in enumerate(gm.graph.nodes):
        if node.op == "placeholder":
            index[node] = g.input()
        elif node.op == "get_attr":
            index[node] = g.constant(_constant(gm, node))
            constants.add(node)
        elif node.op == "call_function" and node.target is operator.getitem:
            src, i = node.args
            if not isinstance(src, torch.fx.Node) or not isinstance(i, int):
                raise NotImplementedError(f"getitem of {type(src).__name__} by {type(i).__name__}")
            index[node] = g.item(index[src], i)
        elif node.op == "call_function" and node.target in SIZE_FUNCTIONS:
            if node.kwargs:
                raise NotImplementedError(f"{node.target.__name__} with keyword arguments")
            index[node] = g.size_op(node.target.__name__, [arg(a) for a in node.args])
        elif node.op == "call_function":
            e = entry(node.target)
            if e is None:
                raise NotImplementedError(f"no lowering for {node.target}")
            if e.mutates and constants & set(node.all_input_nodes):
                # Every recording shares the graph's constants: none may be updated in place.
                raise NotImplementedError(f"{node.target} updates a constant of the graph")
            index[node] = g.call(e, [arg(a) for a in normalize(node.target, node.args, node.kwargs)],
                                 _result_dtypes(node), user_op_name(node))
            calls.append(index[node])
        elif node.op == "output":
            flat, spec = torch.utils._pytree.tree_flatten(node.args[0])
            g.set_outputs([arg(x) for x in flat])
        else:
            raise NotImplementedError(f"FX node kind {node.op}")
        if node in index:
            positions.append(position)
    if spec is None:
        raise NotImplementedError("a graph without an output")
    return AtenGraph(g, spec, calls, positions)


def interpret(gm: "torch.fx.GraphModule", *args, call=None, check=True):
    """Runs an ATen FX graph whose every call lowers (why_not_lowered is None for each) on Lazuli
    tensors: placeholders take `args` in order, each call records its entry's Lazuli ops, and the
    output's structure is returned with Lazuli tensors in it. Records only; runs nothing. Tensor
    constants (get_attr) are copied in, once per graph: an output that is one is that copy (clone
    it before updating it). An op that fails when the program runs names its node
    (user_op_name). `call`: a _C._aten.Call whose key the graph's random draws come from (else
    the device's RNG).

    The graph is converted once to the table's C++ form (aten_graph) and recorded there, with no
    Python per node: a new input signature of a graph (a new size under dynamic shapes) costs a
    record in C++, not a walk of the FX graph. An error names its node (the frame's `node`, which
    the bridge reads). `check`: compare each result with the node's metadata (dtype, shape),
    LoweringMismatch otherwise. A graph without a C++ form is walked in Python, node by node,
    always checked."""
    converted = aten_graph(gm)
    if converted is None:
        _C._bump_counter("TorchGraphInPython", 1)
        return _interpret_in_python(gm, args, call)
    node = None
    try:
        inputs = [neutral(a) for a in args]
        if check:
            outs, values = converted.graph.record(inputs, call, True)
        else:
            outs = converted.graph.record(inputs, call)
    except Exception:
        failed = _A.last_failed_value()
        if 0 <= failed < len(converted.positions):
            node = list(gm.graph.nodes)[converted.positions[failed]]  # noqa: F841  (the bridge reads it)
        raise
    if check:
        nodes = list(gm.graph.nodes)
        for i in converted.calls:
            node = nodes[converted.positions[i]]
            _check_result(node, values[i])
    return torch.utils._pytree.tree_unflatten(outs, converted.spec)


def _interpret_in_python(gm, args, call):
    """interpret, node by node in Python, checking each result as it comes: a graph that has
    no C++ form, or a test that replaces `lower`."""
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
            if entry(node.target) is None:
                raise NotImplementedError(f"lazuli: no lowering for {node.target} (node {node.name})")
            env[node] = lower(node.target, a, kw, _result_dtypes(node), call, user_op_name(node))
            _check_result(node, env[node])
        elif node.op == "get_attr":
            env[node] = _constant(gm, node)
        elif node.op == "output":
            return torch.fx.node.map_aggregate(node.args[0], load)
        else:
            raise NotImplementedError(f"lazuli: FX node kind {node.op} ({node.name})")
    return None
