"""torch.compile(model, backend="lazuli"): dynamo's FX graphs as Lazuli programs (DESIGN.md 5b).

The pipeline, per FX graph dynamo hands over:
1. aot_autograd turns it into ATen graphs (forward, and backward when something needs grad), with
   the lowering table's decompositions, and gives each to `compile_aten_graph`.
2. Partitioning: every node whose `_table.why_not_lowered(node)` is not None (the C++ lowering
   table's verdict, src/aten/table.h) is known before
   anything is traced; CapabilityBasedPartitioner groups the others into partitions. Each
   partition becomes a `LazuliPartition`; the nodes left outside run in PyTorch eager between
   them, each run counted as `fallback::aten.<op>`.
3. A partition's first call with a new input signature records its nodes on Lazuli tensors
   standing for the inputs (over the torch inputs' memory) through `_table.interpret`, the
   recording is compiled without running (the warm-up route: `_C._WarmProgram`), and dropped.
   The first signature is the partition's one trace: its FX graph is converted to the table's
   C++ form (`_table.aten_graph`, src/aten/graph.h: sizes are values of it) and each result is
   checked against the FX metadata. A later signature (a new size under dynamic shapes) is
   recorded from that form in C++, with no Python per node (`TorchRecord`), and planned.
   Every call, the first included, then runs that program on the call's inputs: no node is
   recorded and no graph is hashed (the seed's "run the cached graph by hash").
   An output that is a chain of view ops over an input (a saved weight's `t()`) is returned as
   that view of the torch input, not computed (`_input_views`); chains of permutes are folded
   into one, or none, before the trace (`_fold_permutes`).
4. Inputs a partition updates in place (a `copy_` into a placeholder, which aot_autograd keeps in
   inference graphs as the backend asks: parameters and optimizer state in an optimizer's step)
   are donated: the program computes their new value into the input's own memory, as eager's
   in-place op would, with no copy back (a non-contiguous input, which crossed as a copy, is
   copied back once). Where another node of the graph runs in eager, the updates do too
   (`_refused_updates`). Training graphs' updates (BatchNorm's running statistics) are
   functionalized by aot_autograd, which copies them back after the call.
"""
from __future__ import annotations

import functools
import logging
import operator
import traceback
import warnings
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

import lazuli as lz
from lazuli import _C
from lazuli import _logging

from . import _aten as _table
from ._boundary import LentIds, layout_of, to_lazuli, to_torch, torch_frames_are_library

_GRAPH_IDS = iter(range(1 << 62))
_LENT_IDS = LentIds()  # the parameters of partitions compiled with keep_weight_layouts


def _count(name, n=1):
    _C._bump_counter(name, n)


_LOGGER = _logging.get_logger("lazuli.torch")


def _log(text, level=logging.INFO):
    """One line of the bridge's debug output (lazuli/_logging.py: LAZULI_DEBUG, TORCH_LOGS)."""
    _logging.log(_LOGGER, level, text)


# The torch glue (python/src/torch_glue.h): a partition's replay in one C++ call. Without it (not
# built: no PyTorch where Lazuli was built; or a torch other than the one it was built against,
# whose symbols it lacks) partitions replay through Python, with the same values, slower.
try:
    from lazuli import _torch_glue
    _C._set_torch_glue(_torch_glue._API)
    _GLUE = True
except (ImportError, ValueError) as _e:
    _GLUE = False
    # Not built is a choice (INFO); built but refused is a mismatch worth seeing (WARNING).
    _log(f"the torch glue is not loaded ({type(_e).__name__}: {_e}): partitions replay through "
         "Python", logging.INFO if isinstance(_e, ModuleNotFoundError) else logging.WARNING)


def user_line(node: torch.fx.Node) -> str:
    """The user's source line a node came from ("model.py:12 in forward: return self.fc(x)"),
    read from the innermost frame of its stack trace; "" when dynamo recorded none."""
    trace = node.meta.get("stack_trace") or ""
    lines = trace.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        s = lines[i].strip()
        if s.startswith("File "):
            try:
                file = s.split('"')[1]
                line = s.split(", line ")[1].split(",")[0]
                func = s.split(", in ")[1] if ", in " in s else ""
            except IndexError:
                return s
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            return f"{file}:{line} in {func}: {code}".rstrip(": ")
    return ""


# ---- partitioning -------------------------------------------------------------------------------

class _LazuliSupport(OperatorSupportBase):
    """What Lazuli runs: the lowering table's verdict, before tracing. A getitem goes with its
    producer, so a partition never receives a tuple."""

    def __init__(self, refused):
        self.refused = refused  # {node name: reason} decided beforehand (bad-input fallbacks)

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node.name in self.refused:
            return False
        if node.target is operator.getitem:
            src = node.args[0]
            return isinstance(src, torch.fx.Node) and self.is_node_supported(submodules, src)
        return _table.why_not_lowered(node) is None


def _fallback_runner(target):
    """The target of a node that runs in PyTorch eager, counted on every run."""
    name = f"fallback::{target}"

    def run(*args, **kwargs):
        _C._bump_counter(name, 1)
        return target(*args, **kwargs)

    # Not functools.wraps: FX would then emit the ATen op itself (its torch module and name).
    run.__name__ = run.__qualname__ = "lazuli_fallback_" + str(target).replace(".", "_")
    run.__lazuli_fallback__ = target
    return run


def _refused_updates(gm: torch.fx.GraphModule) -> Dict[str, str]:
    """The in-place updates of inputs (`copy_` into a placeholder, which aot_autograd puts at the
    end of an inference graph) that must stay out of partitions: all of them when some other node
    runs in eager. FX has no edge from an update to the earlier readers of the old value, so a
    partition could run it before an eager reader that follows it in the graph."""
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    updates = [n for n in calls if n.target is torch.ops.aten.copy_.default]
    if not updates or all(_table.why_not_lowered(n) is None for n in calls if n not in updates):
        return {}
    return {n.name: "an in-place update of an input joins a Lazuli partition only where the whole "
                    "graph lowers" for n in updates}


class _Report:
    """What LAZULI_DEBUG prints about one FX graph: its partitions and the nodes that fall back."""

    def __init__(self, name, kind):
        self.name, self.kind = name, kind
        self.lines: List[str] = []

    def fallback(self, node, why):
        where = user_line(node)
        self.lines.append(f"  fallback {node.target} (node %{node.name}): {why}"
                          + (f"\n      at {where}" if where else ""))


def compile_aten_graph(gm: torch.fx.GraphModule, example_inputs, kind="forward",
                       keep_weight_layouts=False, graph=None):
    """An ATen FX graph (after aot_autograd) as a callable: partitions Lazuli lowers, the rest in
    eager. Returns a function of the graph's placeholders, boxed (called with a list).
    `keep_weight_layouts`: see `backend`."""
    # One dynamo graph's forward and backward share its name: graph3.forward, graph3.backward.
    name = f"{graph or f'graph{next(_GRAPH_IDS)}'}.{kind}"
    _count("TorchGraphCompiled")
    report = _Report(name, kind)
    n_nodes = sum(1 for n in gm.graph.nodes if n.op == "call_function")  # fusing moves them
    support = _LazuliSupport({**_refused_updates(gm), **_table.refused_complex(gm)})
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    fused = partitioner.fuse_partitions(partitions) if partitions else gm
    n_part = 0
    for node in list(fused.graph.nodes):
        if node.op == "call_module" and node.target.startswith("fused_"):
            sub = getattr(fused, node.target)
            setattr(fused, node.target, LazuliPartition(sub, f"{name}.{node.target}",
                                                        keep_weight_layouts))
            n_part += 1
        elif node.op == "call_function" and node.target is not operator.getitem:
            why = (_table.why_not_lowered(node) or support.refused.get(node.name)
                   or "not in a partition")
            report.fallback(node, why)
            node.target = _fallback_runner(node.target)
    fused.recompile()
    _count("TorchPartition", n_part)
    _log(f"compiled {name}: {n_nodes} ATen nodes, {n_part} Lazuli partition(s), "
         f"{len(report.lines)} node(s) in PyTorch eager" + ("\n" if report.lines else "")
         + "\n".join(report.lines))

    def run(args):
        # aot_autograd's boxed convention: we own `args` and clear it, so inputs can be freed early.
        a = list(args)
        args.clear()
        return fused(*a)

    run._boxed_call = True
    run.__lazuli_graph__ = fused
    return run


# ---- one partition ------------------------------------------------------------------------------

def fresh_key() -> torch.Tensor:
    """A new random key for one call of a partition, from torch's default generator.

    Lazuli cannot reproduce PyTorch's random stream (its draws are a counter-based hash of a key
    and the element's index), so a dropout mask never equals eager's; what holds is its
    distribution and that the backward applies the forward's mask. Inside a partition the draws
    read a key that is an input of the program, not the device's RNG state (which a traced
    program would read once, at its trace, and then replay forever): each call passes a fresh
    one, so every step draws new masks, torch.manual_seed makes them repeat, and the program
    never changes."""
    return torch.randint(-(2 ** 63), 2 ** 63 - 1, (), dtype=torch.int64)


def _signature(args) -> Tuple:
    key = []
    for a in args:
        if isinstance(a, torch.Tensor):
            key.append((a.dtype, tuple(a.shape), layout_of(a)))
        else:
            key.append((type(a), a))
    return tuple(key)


def _shared(a, layout):
    """The torch tensor whose memory a partition's program reads for argument `a`: `a` itself,
    or for a permuted dense `a` (layout a permutation) the contiguous view of its memory."""
    return a.permute(layout) if isinstance(layout, tuple) else a


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


_aten = torch.ops.aten
# ATen view ops: an output that is a chain of them over an input is returned as the same view of
# the torch input (eager's alias), not computed into a new buffer. aot_autograd saves a linear
# layer's `t()` of its weight for the backward: a copy per call of every such weight otherwise.
_VIEW_OPS = frozenset([_aten.t.default, _aten.permute.default, _aten.transpose.int,
                       _aten.view.default, _aten._unsafe_view.default, _aten.expand.default,
                       _aten.unsqueeze.default, _aten.squeeze.dim, _aten.slice.Tensor,
                       _aten.select.int, _aten.alias.default])


def _input_views(gm: torch.fx.GraphModule):
    """Per flat output of `gm`: (placeholder index, [(op, args, kwargs)...]) where the output is a
    chain of view ops over a placeholder that the graph does not update in place, else None."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    updated = {n.args[0] for n in gm.graph.nodes
               if n.op == "call_function" and n.target is _aten.copy_.default}
    outputs, _ = torch.utils._pytree.tree_flatten(gm.graph.output_node().args[0])
    views = []
    for node in outputs:
        chain = []
        while (isinstance(node, torch.fx.Node) and node.op == "call_function"
               and node.target in _VIEW_OPS and node.args and isinstance(node.args[0], torch.fx.Node)
               and not any(isinstance(a, torch.fx.Node) for a in
                           torch.utils._pytree.tree_leaves((node.args[1:], node.kwargs)))):
            chain.append((node.target, tuple(node.args[1:]), dict(node.kwargs)))
            node = node.args[0]
        ok = (chain and isinstance(node, torch.fx.Node) and node.op == "placeholder"
              and node not in updated)
        views.append((placeholders.index(node), chain[::-1]) if ok else None)
    return views


def _permutation(node) -> Optional[List[int]]:
    """The dims of `node` (a permute, t or transpose) as its input's dims, else None."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or node.op != "call_function":
        return None
    rank = val.dim()
    if node.target is _aten.permute.default:
        return [d % max(rank, 1) for d in node.args[1]]
    if node.target is _aten.t.default:
        return [1, 0] if rank == 2 else list(range(rank))
    if node.target is _aten.transpose.int:
        perm = list(range(rank))
        a, b = (d % max(rank, 1) for d in node.args[1:3])
        perm[a], perm[b] = perm[b], perm[a]
        return perm
    return None


def _fold_permutes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """permute(permute(x, p), q) is one permute of x, and an identity permute is x. A backward
    graph returns a weight's gradient through its `t()` as the transpose of a transpose of a
    product: unfolded, the product is computed transposed (fusion rule 7) and then copied back
    transposed, every call."""
    changed = False
    for node in list(gm.graph.nodes):
        outer = _permutation(node)
        src = node.args[0] if outer is not None else None
        inner = _permutation(src) if isinstance(src, torch.fx.Node) else None
        if inner is None:
            continue
        composed = [inner[q] for q in outer]
        if composed == list(range(len(composed))):
            node.replace_all_uses_with(src.args[0])
            gm.graph.erase_node(node)
        else:
            node.target, node.args, node.kwargs = _aten.permute.default, (src.args[0], composed), {}
        if not src.users:
            gm.graph.erase_node(src)
        changed = True
    if changed:
        gm.recompile()
    return gm


def _apply_view(t, chain):
    for op, args, kwargs in chain:
        t = op(t, *args, **kwargs)
    return t


def _is_view_of(view, args, out) -> bool:
    """Whether the chain applies to this call's torch input as a view with `out`'s shape and
    dtype (`view` of a non-contiguous input can refuse; then the program computes the output)."""
    i, chain = view
    if not isinstance(args[i], torch.Tensor):
        return False
    try:
        t = _apply_view(args[i], chain)
    except RuntimeError:
        return False
    return (tuple(t.shape) == tuple(out.shape)
            and _table.TORCH_TO_LZ.get(t.dtype) == out.dtype
            and t.untyped_storage().data_ptr() == args[i].untyped_storage().data_ptr())


class _Traced:
    """One input signature of a partition: its warm program and where each output comes from."""
    __slots__ = ("program", "spec", "outputs", "writebacks", "keyed", "layouts", "tensor_args",
                 "reshaped", "n_run", "bf16", "in_cpp", "flat_seq", "only_run")

    def __init__(self, program, spec, outputs, writebacks, keyed=False, layouts=None,
                 tensor_args=None, n_run=0, bf16=()):
        self.program = program    # _C._WarmProgram, or None when no output needs computing
        self.spec = spec          # the output structure (torch.utils._pytree spec)
        self.outputs = outputs    # per flat output: ("run", k) | ("arg", i) | ("view", i, chain)
        #                           | ("const", tensor) | ("value", v)
        self.writebacks = writebacks  # [(arg index, program output k)]: inputs updated in place
        self.keyed = keyed        # the program's last input is a random key (fresh_key)
        self.layouts = layouts or []  # per argument: layout_of (None for non-tensors)
        # The arguments that are the program's inputs, in order (None: every argument is).
        self.tensor_args = tensor_args
        # (input position, layout) of the inputs that cross other than as they are: a permuted
        # dense tensor as its dense block, anything else non-contiguous as a contiguous copy.
        inputs = range(len(self.layouts)) if tensor_args is None else tensor_args
        self.reshaped = [(j, self.layouts[i]) for j, i in enumerate(inputs)
                         if self.layouts[i] is not None]
        self.n_run = n_run        # program outputs 0..n_run-1 are ("run", k) outputs
        self.bf16 = bf16          # which of them are bfloat16
        # Replayed in one C++ call (replay_torch): set by forward, where the glue keyed the call.
        self.in_cpp = False
        # The outputs are a flat tuple or list (as aot_autograd's graphs return them): made
        # without tree_unflatten; and where every one is the program's, in order, as they come.
        self.flat_seq = (spec.type in (tuple, list) and spec.num_children == len(outputs)
                         and all(c.is_leaf() for c in spec.children()))
        self.only_run = self.flat_seq and all(o[0] == "run" and o[1] == k
                                              for k, o in enumerate(outputs))


class LazuliPartition(torch.nn.Module):
    """A partition of an ATen graph whose every node lowers, run as Lazuli programs: one trace
    and one compile (without running) per input signature, then replays."""

    def __init__(self, gm: torch.fx.GraphModule, name: str, keep_weight_layouts=False):
        super().__init__()
        self.gm = _fold_permutes(gm)
        self.name = name
        # Parameters cross with an id lent per torch version (LentIds), so the backend keeps
        # what it derives from them (blocked convolution weights) across calls.
        self.lent_ids = _LENT_IDS if keep_weight_layouts else None
        self.traced: Dict[Tuple, _Traced] = {}
        self.views = _input_views(self.gm)  # per flat output, as _input_views says
        self.keyed = _table.uses_random(self.gm)  # its programs take a random key (fresh_key)
        self.eager_reason: Optional[str] = None  # set when tracing failed: the partition runs in eager

    def forward(self, *args):
        if self.eager_reason is not None:
            return self._run_eager(args)
        key = _C._torch_signature(args)
        if key is None:
            key = _signature(args)
        traced = self.traced.get(key)
        if traced is None:
            traced = self._trace(args)
            if traced is None:
                return self._run_eager(args)
            # Arguments only Python could key (a tensor of over 16 dims, an object of another
            # type) are only read through Python.
            traced.in_cpp = _GLUE and isinstance(key, bytes)
            self.traced[key] = traced
        else:
            _count("TorchReplay")
        return self._run(traced, args)

    # The trace: record on stand-ins over the inputs' memory, compile without running, drop.
    # The first signature walks the FX graph (converting it to the table's C++ form, and checking
    # each result against its metadata); every later one (a new size under dynamic shapes, a new
    # layout) is recorded from that C++ form, with no Python per node, and planned.
    def _trace(self, args) -> Optional[_Traced]:
        first = not self.traced
        _count("TorchTrace" if first or _table.aten_graph(self.gm) is None else "TorchRecord")
        layouts = [layout_of(a) if isinstance(a, torch.Tensor) else None for a in args]
        # The program's inputs: device data over each tensor argument's memory (for a permuted
        # dense argument, its dense block); the graph sees them through the inverse permutation.
        inputs = [to_lazuli(_shared(a, layouts[i])) for i, a in enumerate(args)
                  if isinstance(a, torch.Tensor)]
        arg_of_input = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        stand_ins = list(args)
        for j, i in enumerate(arg_of_input):
            perm = layouts[i]
            stand_ins[i] = (lz.permute(inputs[j], _inverse(perm)) if isinstance(perm, tuple)
                            else inputs[j])
        # A partition that draws random numbers takes a key as one more input, fresh each call.
        keyed = self.keyed
        key = to_lazuli(torch.zeros((), dtype=torch.int64)) if keyed else None
        program = _C._WarmProgram(inputs + ([key] if keyed else []), self.name, "torch-compile")
        try:
            out = _table.interpret(self.gm, *stand_ins,
                                   call=_C._aten.Call(key) if keyed else None, check=first)
            flat, spec = torch.utils._pytree.tree_flatten(out)
            del out
            # By Lazuli tensor id: the table hands back new Python objects over the same tensors.
            by_id = {stand_ins[i]._id: (i, j) for j, i in enumerate(arg_of_input)}
            views = self.views
            pending, outputs = [], []
            for p, o in enumerate(flat):
                if isinstance(o, _C._aten.Complex):  # refused_complex keeps them inside
                    raise TypeError(f"a complex value is output {p} of the partition")
                state = lz.debug.tensor_state(o) if isinstance(o, lz.Tensor) else None
                view = views[p] if len(views) == len(flat) else None
                if view is not None and state is not None and _is_view_of(view, args, o):
                    outputs.append(("view",) + view)
                elif state is None:
                    outputs.append(("value", o))
                elif (o._id in by_id and
                      lz.debug.tensor_state(inputs[by_id[o._id][1]]) == "device_data"):
                    outputs.append(("arg", by_id[o._id][0]))  # an input returned unchanged
                elif state in ("device_data", "host"):
                    outputs.append(("const", to_torch(o).clone()))
                else:
                    outputs.append(("run", len(pending)))
                    pending.append(o)
            # Stand-ins the graph updated in place (copy_ into a placeholder) have new IR now:
            # their new values are outputs too, written back into the torch inputs.
            writebacks = []
            for j, s in enumerate(inputs):
                if lz.debug.tensor_state(s) != "device_data":
                    writebacks.append((arg_of_input[j], len(pending)))
                    pending.append(s)
            if pending:
                # Each updated input donates its memory to its new value (arg index -> input j).
                input_of_arg = {a: j for j, a in enumerate(arg_of_input)}
                program.compile(pending, [(input_of_arg[i], k) for i, k in writebacks])
            else:
                program = None
            if _logging.enabled(_LOGGER, logging.INFO):
                shapes = [f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}"
                          if isinstance(a, torch.Tensor) else repr(a) for a in args]
                what = f"program {program.hash}" if program is not None else "no program (outputs are inputs)"
                _log(f"traced {self.name}: {len(shapes)} input(s) "
                     f"({_logging.summarize(shapes, detail=_LOGGER.isEnabledFor(logging.DEBUG))}): {what}")
        except Exception as e:  # noqa: BLE001  (any lowering error: this partition falls back)
            self._refuse(e)
            return None
        finally:
            del stand_ins, inputs, key
        n_run = len(pending) - len(writebacks)
        return _Traced(program, spec, outputs, writebacks, keyed, layouts,
                       tensor_args=None if len(arg_of_input) == len(args) else arg_of_input,
                       n_run=n_run,
                       bf16=[k for k, o in enumerate(pending[:n_run]) if o.dtype == lz.bfloat16])

    def _run(self, traced: _Traced, args):
        try:
            return self._run_program(traced, args)
        except lz.Error as e:
            raise self._as_torch_error(e) from e

    def _as_torch_error(self, error):
        """A run-time error as eager PyTorch reports it: the type eager raises for that ATen op
        (IndexError for an embedding's index out of range), the message naming the op and the
        user's line. Lazuli's error stays the cause. Without a node in the message (out of
        memory, a failed compile) it is a RuntimeError listing the partition's ATen ops."""
        text = str(error)
        node = _table.node_of_error(self.gm, text)
        if node is None:
            return RuntimeError(f"lazuli.torch: {self.name} failed when its program ran: {text}\n"
                                f"  its ATen ops:\n{self._describe()}")
        detail = text.split("failed when its program ran: ", 1)[-1]
        detail, _, graph = detail.rpartition(" (graph ")
        line = user_line(node)
        # A node a decomposition made names the op the user's code called (nll_loss_forward
        # for the gather of cross_entropy's decomposition), and that op picks the error type.
        op = node.meta.get("original_aten") or node.target
        what = f"node %{node.name}"
        if op != node.target:
            what += f", {node.target} of its decomposition"
        where = f" at {line}" if line else ""
        return _table.eager_error_type(op, detail)(
            f"{detail}, in {op} ({what}){where}\n"
            f"  (lazuli.torch: {self.name} failed when its program ran; graph {graph.rstrip(')')})")

    def _describe(self):
        rows = []
        for node in self.gm.graph.nodes:
            if node.op == "call_function" and node.target is not operator.getitem:
                line = user_line(node)
                rows.append(f"    %{node.name} = {node.target}" + (f"  at {line}" if line else ""))
        return "\n".join(rows)

    def _run_program(self, traced: _Traced, args):
        torched = ()
        if traced.program is not None and traced.in_cpp:
            # One C++ call reads the tensor arguments (address, dtype, sizes, layout), runs the
            # program, makes a torch tensor over each output's buffer and checks the in-place
            # writes. The signature that chose `traced` vouches for the arguments, and
            # replay_torch checks each one's dtype and dense shape again.
            torched, copies = traced.program.replay_torch(
                args, traced.tensor_args, fresh_key() if traced.keyed else None,
                self._content_ids(traced, args), traced.n_run, traced.writebacks)
            for i, result in copies:  # a donation the program declined
                self._copy_back(traced, args, i, result)
            if traced.only_run:
                return tuple(torched) if traced.spec.type is tuple else torched
        elif traced.program is not None:
            torched = self._run_program_in_python(traced, args)
        flat = []
        for kind, v, *rest in traced.outputs:
            if kind == "run":
                flat.append(torched[v])
            elif kind == "arg":
                flat.append(args[v])
            elif kind == "view":
                flat.append(_apply_view(args[v], rest[0]))
                _count("TorchOutputView")
            elif kind == "const":
                flat.append(v.clone())
            else:
                flat.append(v)
        if traced.flat_seq:
            return tuple(flat) if traced.spec.type is tuple else flat
        return torch.utils._pytree.tree_unflatten(flat, traced.spec)

    def _run_program_in_python(self, traced: _Traced, args):
        """_run_program's route without the torch glue: the program's torch outputs, its
        in-place writes done."""
        # The program's inputs are the tensor arguments' memory, read in one C++ call
        # (run_over): the signature that chose `traced` vouches for their dtypes, shapes and
        # layouts, and run_over checks each tensor's size and contiguity again.
        tensors = args if traced.tensor_args is None else [args[i] for i in traced.tensor_args]
        inputs = list(tensors)
        for j, layout in traced.reshaped:
            if isinstance(layout, tuple):
                inputs[j] = _shared(inputs[j], layout)
            else:
                inputs[j] = inputs[j].contiguous()
                _C._bump_counter("TorchInputCopy", 1)
        if traced.keyed:
            inputs.append(fresh_key())
        results = traced.program.run_over(inputs, self._content_ids(traced, args))
        del inputs
        # One wait for the program, then a view of each output's buffer; a bfloat16 output
        # leaves as a uint16 view of its bits, viewed back as bfloat16.
        torched = [torch.from_numpy(a)
                   for a in _C._numpy_views(results[:traced.n_run], raw_bfloat16=True)]
        for k in traced.bf16:
            torched[k] = torched[k].view(torch.bfloat16)
        for i, k in traced.writebacks:
            # Donated: the program wrote the new value into args[i] itself (this waits for it).
            # An input that crossed as a contiguous copy, or a declined donation, is copied back.
            if _C._buffer_address(results[k]) != args[i].data_ptr():
                self._copy_back(traced, args, i, results[k])
            else:
                _count("TorchWriteBackInPlace")
        return torched

    def _content_ids(self, traced: _Traced, args):
        """Per program input, the id lent with its memory (LentIds: parameters, where the
        partition keeps weight layouts), 0 for the random key; [] when nothing is lent."""
        lent = self.lent_ids
        if lent is None:
            return []
        tensors = args if traced.tensor_args is None else [args[i] for i in traced.tensor_args]
        return ([lent.id_for(a) if isinstance(a, torch.nn.Parameter) else 0 for a in tensors]
                + ([0] if traced.keyed else []))

    @staticmethod
    def _copy_back(traced: _Traced, args, i, result):
        """Argument i's new value, computed into other memory than its own, copied into it."""
        with torch.no_grad():
            _shared(args[i], traced.layouts[i]).copy_(to_torch(result))
        _count("TorchWriteBackCopy")

    def _refuse(self, error):
        node = _failing_node(error)
        where = ""
        if node is not None:
            line = user_line(node)
            where = f" at node %{node.name} ({node.target})" + (f", {line}" if line else "")
        self.eager_reason = f"{type(error).__name__}: {error}"
        traceback.clear_frames(error.__traceback__)
        warnings.warn(f"lazuli.torch: {self.name} falls back to PyTorch eager: its lowering raised "
                      f"while tracing{where}: {self.eager_reason}", RuntimeWarning, stacklevel=2)
        _count("TorchTraceFailed")
        _log(f"{self.name}: trace failed{where}: {self.eager_reason}; runs in PyTorch eager")

    def _run_eager(self, args):
        for node in self.gm.graph.nodes:
            if node.op == "call_function" and node.target is not operator.getitem:
                _count(f"fallback::{node.target}")
        return self.gm(*args)


def _failing_node(error) -> Optional[torch.fx.Node]:
    """The FX node _table.interpret was at when `error` was raised (its frame's `node`: set from
    the C++ record's failing value, or by the walk in Python)."""
    tb = error.__traceback__
    found = None
    codes = (_table.interpret.__code__, _table._interpret_in_python.__code__)
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            found = tb.tb_frame.f_locals.get("node")
        tb = tb.tb_next
    return found


# ---- the dynamo backend -------------------------------------------------------------------------

_OPTIONS = {"keep_weight_layouts": False}

# torch.compile's modes. Lazuli compiles every graph one way (fused kernels, cached across calls
# and processes; a later call runs the program without tracing), so a mode changes nothing; each
# is accepted, with one line saying so.
_MODES = {
    "default": None,
    "reduce-overhead": "Lazuli already runs each later call as one cached program with no "
                       "tracing (CUDA graphs' aim on the CPU)",
    "max-autotune": "Lazuli has no autotuning: kernels are fused and compiled once, and matrix "
                    "products run on oneDNN",
    "max-autotune-no-cudagraphs": "Lazuli has no autotuning: kernels are fused and compiled once, "
                                  "and matrix products run on oneDNN",
}
_MODES_SAID = set()


def _accept_mode(mode):
    if mode is None:
        return
    if mode not in _MODES:
        raise TypeError(f"lazuli backend: unknown mode {mode!r} (torch.compile's modes: "
                        f"{', '.join(sorted(_MODES))}; Lazuli's own settings go in options=)")
    note = _MODES[mode]
    if note and mode not in _MODES_SAID:
        _MODES_SAID.add(mode)
        _log(f"torch.compile mode={mode!r} has no setting of its own in Lazuli: {note}")


def backend(gm: torch.fx.GraphModule, example_inputs, options=None, mode=None, **kwargs):
    """The dynamo backend: ``torch.compile(model, backend="lazuli")``. Forward and backward graphs
    go through aot_autograd (with the lowering table's decompositions) to `compile_aten_graph`.

    ``options`` (``torch.compile(..., options={...})``):
    - ``keep_weight_layouts`` (False): keep what the backend derives from a parameter's values
      (oneDNN's blocked layout of a convolution's weights) across calls while torch's version
      counter says the parameter is unchanged, instead of making it again every call. The
      promise it asks: between calls, parameters are written only by torch operations (an
      optimizer's step, ``copy_``, ``load_state_dict``), never through ``.data``, a numpy view
      or a raw pointer, which torch does not count (docs/torch.md).

    ``mode`` (``torch.compile(..., mode=...)``): each of torch's modes is accepted and changes
    nothing (one INFO line on the ``lazuli.torch`` logger says why); an unknown one is a
    TypeError."""
    from torch._dynamo.backends.common import aot_autograd
    if kwargs:
        raise TypeError(f"lazuli backend: unknown arguments {sorted(kwargs)} (it takes options= "
                        "and mode=)")
    _accept_mode(mode)
    torch_frames_are_library()
    opts = dict(_OPTIONS)
    for k, v in (options or {}).items():
        if k not in _OPTIONS:
            raise TypeError(f"lazuli backend: unknown option {k!r} (it has {sorted(_OPTIONS)})")
        if not isinstance(v, bool):
            raise TypeError(f"lazuli backend: option {k!r} takes a bool, got {v!r}")
        opts[k] = v
    devices = sorted({t.device.type for t in example_inputs if isinstance(t, torch.Tensor)} - {"cpu"})
    if devices:
        # Lazuli compiles CPU tensors' graphs. Another device's graph (meta tensors, the lazy
        # lazuli device, which records it by itself) runs as PyTorch runs it, as aot_eager would.
        _count("TorchGraphNotCpu")
        _log(f"a graph over {', '.join(devices)} tensors runs as PyTorch runs it "
             "(the backend compiles CPU tensors' graphs)")
        return gm.forward
    keep = opts["keep_weight_layouts"]
    graph = f"graph{next(_GRAPH_IDS)}"
    fw = functools.partial(compile_aten_graph, kind="forward", keep_weight_layouts=keep, graph=graph)
    bw = functools.partial(compile_aten_graph, kind="backward", keep_weight_layouts=keep, graph=graph)
    inference = functools.partial(compile_aten_graph, kind="inference", keep_weight_layouts=keep,
                                  graph=graph)
    return aot_autograd(fw_compiler=fw, bw_compiler=bw, inference_compiler=inference,
                        decompositions=_table.decompositions(),
                        # An inference graph's updates of its inputs (an optimizer's step,
                        # in-place ops under no_grad) stay in the graph as copy_ into the
                        # placeholder, which a partition donates; else aot_autograd would copy
                        # each new value back after the call.
                        keep_inference_input_mutations=True)(gm, example_inputs)
