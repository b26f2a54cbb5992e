"""Collectives across processes, named as ``torch.distributed`` names them (docs/distributed.md).

Start the program with ``mpirun -n N python train.py`` and call ``init_process_group("mpi")``.
A collective is recorded into the step graph like any op and runs inside the step's program on
the group's engine (the system's MPI), so communication costs no extra barrier. Every rank must
record the same ops in the same order, as with any collective engine. ``all_reduce`` and
``broadcast`` update their tensor in place, as PyTorch's do; ``all_gather_into_tensor`` and
``reduce_scatter_tensor`` write their output tensor.
"""
import sys

from ._C import _distributed as _d

ReduceOp = _d.ReduceOp

is_initialized = _d.is_initialized
get_rank = _d.get_rank
get_world_size = _d.get_world_size
get_backend = _d.get_backend
destroy_process_group = _d.destroy_process_group
barrier = _d.barrier
all_reduce = _d.all_reduce
broadcast = _d.broadcast

__all__ = ["ReduceOp", "init_process_group", "is_initialized", "get_rank", "get_world_size",
           "get_backend", "destroy_process_group", "barrier", "abort", "all_reduce", "broadcast",
           "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor"]


def init_process_group(backend="mpi", *, world_size=-1, rank=-1):
    """Starts the default group on ``backend`` ("mpi"): the ranks and their number come from
    the launcher (``mpirun``). ``world_size`` and ``rank``, when given, are checked against it.

    From then on an exception nobody catches ends every rank of a group of more than one
    (``abort``), after its traceback is printed: the other ranks would otherwise wait for this
    one in their next collective."""
    _d.init_process_group(backend)
    for name, given, actual in (("world_size", world_size, _d.get_world_size()),
                                ("rank", rank, _d.get_rank())):
        if given != -1 and given != actual:
            _d.destroy_process_group()
            raise ValueError(f"init_process_group: {name}={given}, but the launcher started this "
                             f"process with {name} {actual}")
    _install_abort_on_uncaught()


def abort(code=1):
    """Ends every rank's process now (MPI_Abort), with exit status ``code``."""
    _d.abort(code)


def _install_abort_on_uncaught():
    previous = sys.excepthook
    if getattr(previous, "_lazuli_aborts", False):
        return

    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        if _d.is_initialized() and _d.get_world_size() > 1:
            print(f"lazuli.distributed: rank {_d.get_rank()} ends the job (an uncaught "
                  f"{exc_type.__name__})", file=sys.stderr, flush=True)
            _d.abort(1)

    hook._lazuli_aborts = True
    sys.excepthook = hook


def all_gather(tensor_list, tensor):
    """Fills ``tensor_list`` (one tensor per rank, each shaped as ``tensor``) with every rank's
    ``tensor``, in rank order."""
    world = _d.get_world_size()
    if len(tensor_list) != world:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors for a group of "
                         f"{world} ranks")
    gathered = _d.all_gather(tensor.reshape([1] + list(tensor.shape)))
    for i, out in enumerate(tensor_list):
        out.copy_(gathered[i])


def all_gather_into_tensor(output_tensor, input_tensor):
    """``output_tensor`` ([world * n, ...]) becomes every rank's ``input_tensor`` ([n, ...])
    along dim 0, in rank order."""
    output_tensor.copy_(_d.all_gather(input_tensor))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM):
    """``input`` ([world * n, ...]) is reduced over the ranks; rank r's ``output`` ([n, ...]) is
    block r of the result."""
    output.copy_(_d.reduce_scatter(input, op))
