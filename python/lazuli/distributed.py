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
    """Starts the default group on ``backend``: ``"mpi"`` (the system's MPI; ranks from
    ``mpirun``) or ``"gloo"`` (torch.distributed's gloo; ranks from ``torchrun``'s environment,
    needs PyTorch). ``world_size`` and ``rank``, when given, are checked against the launcher's.

    From then on an exception nobody catches ends every rank of a group of more than one
    (``abort``), after its traceback is printed: the other ranks would otherwise wait for this
    one in their next collective."""
    if backend == "gloo":
        _init_gloo()
    else:
        if backend == "mpi" and _started_by_torchrun():
            raise RuntimeError(
                "init_process_group: this process was started by torchrun (RANK and WORLD_SIZE "
                "are set), which MPI cannot join: use init_process_group(\"gloo\") under "
                "torchrun, or start the program with mpirun")
        _d.init_process_group(backend)
    for name, given, actual in (("world_size", world_size, _d.get_world_size()),
                                ("rank", rank, _d.get_rank())):
        if given != -1 and given != actual:
            _d.destroy_process_group()
            raise ValueError(f"init_process_group: {name}={given}, but the launcher started this "
                             f"process with {name} {actual}")
    _install_abort_on_uncaught()


def _started_by_torchrun():
    import os
    return ("TORCHELASTIC_RUN_ID" in os.environ and "WORLD_SIZE" in os.environ
            and "OMPI_COMM_WORLD_SIZE" not in os.environ)


def _init_gloo():
    """The world group over torch.distributed's gloo, with torchrun's rendezvous (env://: RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT): the engine the lazy device's "lazuli" backend uses."""
    try:
        import torch.distributed as tdist
    except ImportError as e:
        raise RuntimeError("init_process_group(\"gloo\") runs collectives on torch.distributed's "
                           "gloo and needs PyTorch; without it, use \"mpi\" (mpirun)") from e
    import os
    from datetime import timedelta

    import lazuli.torch as lzt
    lzt.device()  # loads the device library, which holds the gloo engine
    from lazuli.torch._distributed import start_engine
    seconds = float(os.environ.get("LAZULI_DIST_TIMEOUT") or 600) or 86400.0
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise RuntimeError(f"init_process_group(\"gloo\"): {', '.join(missing)} not set; start the "
                           f"program with torchrun (or set them as torchrun does)")
    store, rank, size = next(tdist.rendezvous("env://", timeout=timedelta(seconds=seconds)))
    start_engine(tdist.PrefixStore("lazuli-native/", store), rank, size, timedelta(seconds=seconds))


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
