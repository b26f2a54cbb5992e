"""torch.distributed on the lazuli device: a c10d backend named "lazuli" (docs/distributed.md).

``dist.init_process_group("lazuli")`` (under torchrun, or with any init_method) gives device
tensors a backend whose collectives are recorded into the step graph, as every other device op
is: ``dist.all_reduce(t)`` on a device tensor records an all-reduce node and returns at once, and
the collective runs inside the step's program when ``sync()`` (or a value read) runs it. PyTorch's
``DistributedDataParallel`` over a model on the device so reduces its gradient buckets inside the
step program. The program's collectives run on an engine made here: a gloo backend of their own
(on a prefix of the group's store), called from the device's executor thread (all_reduce and
broadcast from its communication thread, beside the program's later steps). CPU tensors of the
same group go to a second gloo backend, on the caller's thread, as under ``"gloo"``.

Every rank must record the same collectives in the same order, as with any engine; before a
program with collectives runs, the ranks check that they agree (LAZULI_DIST_CHECK), and a rank
that stops answering is reported after LAZULI_DIST_TIMEOUT seconds.
"""
import atexit
import itertools
import warnings

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as c10d

from .. import _C
from .._C import _distributed as _d

NAME = "lazuli"
_engines = itertools.count()

_REDUCE_OPS = {
    dist.ReduceOp.SUM: _d.ReduceOp.SUM,
    dist.ReduceOp.AVG: _d.ReduceOp.AVG,
    dist.ReduceOp.PRODUCT: _d.ReduceOp.PRODUCT,
    dist.ReduceOp.MIN: _d.ReduceOp.MIN,
    dist.ReduceOp.MAX: _d.ReduceOp.MAX,
}


def register():
    """Registers the "lazuli" c10d backend (once the device is registered)."""
    if NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(NAME, _LazuliBackend, devices=[NAME, "cpu"])
        # Functional collectives (FSDP2's) register their Work per output tensor, which c10d
        # refuses for tensors without storage and warns. This backend's Work is complete when
        # returned (the collective runs inside the step program), so there is nothing to wait on.
        warnings.filterwarnings("ignore", message="Registering collective work for tensor without storage")


def _core(t):
    return _C._take_tensors(torch.ops.lazuli._put([t]))[0]


def _device(core):
    return torch.ops.lazuli._take(_C._put_tensors([core]))[0]


def start_engine(store, rank, size, timeout):
    """Makes a gloo group of its own (on a prefix of `store`) the engine of Lazuli's world group:
    the collectives of Lazuli's programs run on it, from the device's executor thread."""
    engine = c10d.ProcessGroup(rank, size)
    engine._register_backend(torch.device("cpu"), c10d.ProcessGroup.BackendType.GLOO,
                             c10d.ProcessGroupGloo(c10d.PrefixStore("lazuli-engine/", store),
                                                   rank, size, timeout))
    # c10d's group registry is how the device library (C++) reaches a group made in Python.
    name = f"lazuli-engine-{next(_engines)}"
    c10d._register_process_group(name, engine)
    try:
        torch.ops.lazuli._use_process_group(name)
    finally:
        c10d._unregister_process_group(name)
    if not _release_engine.registered:
        atexit.register(_release_engine)
        _release_engine.registered = True


def _release_engine():
    """Lets the engine go once the programs queued on it ran (at shutdown, or at exit for a
    group nobody destroyed: gloo's threads must not outlive the interpreter). Nothing when the
    world is Lazuli's own MPI group or none."""
    torch.ops.lazuli._use_process_group("")


_release_engine.registered = False


def _done(result):
    fut = torch.futures.Future()
    fut.set_result(result)
    return c10d._create_work_from_future(fut)


def _reduce_op(op, name):
    for torch_op, ours in _REDUCE_OPS.items():
        if op == torch_op:
            return ours
    raise ValueError(f"torch.distributed.{name} on the lazuli device: reduce op {op} is not "
                     f"supported (SUM, AVG, PRODUCT, MIN and MAX are)")


class _LazuliBackend(c10d.Backend):
    """The c10d backend of the lazuli device (and, on a gloo of its own, of CPU tensors)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        # The default group's backend (made before torch.distributed counts as initialized)
        # starts and owns the engine of the step programs' collectives: Lazuli's world group.
        # A later group's (new_group, a 2-D mesh's dims) takes CPU tensors only: collectives on
        # device tensors run over the whole world.
        self._owns_engine = not dist.is_initialized()
        if self._owns_engine:
            start_engine(store, rank, size, timeout)
        self._cpu = c10d.ProcessGroupGloo(c10d.PrefixStore("lazuli-cpu/", store), rank, size,
                                          timeout)

    def getBackendName(self):  # noqa: N802 (the C++ virtual's name)
        return NAME

    def _on_device(self, tensors, name):
        """Whether `tensors` are device tensors (all) or CPU tensors (all); anything else raises."""
        kinds = {t.device.type for t in tensors}
        if kinds == {NAME}:
            if not self._owns_engine:
                raise NotImplementedError(
                    f"torch.distributed.{name} on lazuli tensors over a group other than the "
                    f"default one (new_group, a mesh's sub-dimension): the device's collectives "
                    f"run over the whole world for now; use the default group, or CPU tensors")
            return True
        if kinds == {"cpu"}:
            return False
        raise TypeError(f"torch.distributed.{name} on the lazuli backend: tensors on "
                        f"{sorted(kinds)}; each call takes lazuli tensors or CPU tensors")

    def allreduce(self, tensors, opts):
        if not self._on_device(tensors, "all_reduce"):
            return self._cpu.allreduce(tensors, opts)
        op = _reduce_op(opts.reduceOp, "all_reduce")
        for t in tensors:
            core = _core(t)
            _d.all_reduce(core, op)
        return _done(tensors)

    def allreduce_coalesced(self, tensors, opts):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        if not self._on_device(tensors, "broadcast"):
            return self._cpu.broadcast(tensors, opts)
        for t in tensors:
            core = _core(t)
            _d.broadcast(core, opts.rootRank)
        return _done(tensors)

    def allgather(self, output_lists, inputs, opts):
        if not self._on_device(inputs, "all_gather"):
            return self._cpu.allgather(output_lists, inputs, opts)
        for outputs, t in zip(output_lists, inputs):
            if len(outputs) != self.size():
                raise ValueError(f"torch.distributed.all_gather: {len(outputs)} output tensors "
                                 f"for a group of {self.size()} ranks")
            gathered = _device(_d.all_gather(_core(t.reshape((1,) + tuple(t.shape)))))
            for r, out in enumerate(outputs):
                out.copy_(gathered[r])
        return _done(output_lists)

    def all_gather_single(self, output, input, opts):
        if not self._on_device([output, input], "all_gather_into_tensor"):
            return self._cpu.all_gather_single(output, input, opts)
        if output.numel() != input.numel() * self.size():
            raise ValueError(f"torch.distributed.all_gather_into_tensor: output of "
                             f"{output.numel()} elements for an input of {input.numel()} on "
                             f"{self.size()} ranks")
        gathered = _device(_d.all_gather(_core(input.reshape(1, -1))))
        output.copy_(gathered.reshape(output.shape))
        return _done([output])

    def reduce_scatter(self, outputs, input_lists, opts):
        if not self._on_device(outputs, "reduce_scatter"):
            return self._cpu.reduce_scatter(outputs, input_lists, opts)
        op = _reduce_op(opts.reduceOp, "reduce_scatter")
        for out, inputs in zip(outputs, input_lists):
            if len(inputs) != self.size():
                raise ValueError(f"torch.distributed.reduce_scatter: {len(inputs)} input tensors "
                                 f"for a group of {self.size()} ranks")
            stacked = torch.stack([i.reshape(-1) for i in inputs])
            out.copy_(_device(_d.reduce_scatter(_core(stacked), op)).reshape(out.shape))
        return _done(outputs)

    def reduce_scatter_single(self, output, input, opts):
        if not self._on_device([output, input], "reduce_scatter_tensor"):
            return self._cpu.reduce_scatter_single(output, input, opts)
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"torch.distributed.reduce_scatter_tensor: input of {input.numel()} "
                             f"elements for an output of {output.numel()} on {self.size()} ranks")
        op = _reduce_op(opts.reduceOp, "reduce_scatter_tensor")
        reduced = _device(_d.reduce_scatter(_core(input.reshape(self.size(), -1)), op))
        output.copy_(reduced.reshape(output.shape))
        return _done([output])

    _allgather_base = all_gather_single  # their older names
    _reduce_scatter_base = reduce_scatter_single

    def all_gather_single_coalesced(self, outputs, inputs, opts):
        for output, input in zip(outputs, inputs):
            self.all_gather_single(output, input, opts)
        return _done(outputs)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
        for output, input in zip(outputs, inputs):
            self.reduce_scatter_single(output, input, opts)
        return _done(outputs)

    def shutdown(self):
        # destroy_process_group: queued programs finish, then the engine is let go.
        if self._owns_engine:
            self._owns_engine = False
            _release_engine()

    def barrier(self, opts):
        # Behind this process's queued programs (their collectives), on the engine.
        _d.barrier()
        return _done([])
