"""Data parallelism across processes (docs/distributed.md)."""
from .. import _C
from .. import distributed as _dist
from ..autograd import no_grad
from .modules import Module

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    """PyTorch's ``DistributedDataParallel`` on Lazuli's collectives: each rank runs the wrapped
    module on its share of the batch, and every gradient ``backward()`` accumulates into a
    parameter is first averaged over the ranks, inside the step's program (an all_reduce node per
    parameter, recorded with the backward). Parameters and buffers start as rank 0's (broadcast
    when wrapped), so every rank takes the same steps.

    Needs ``lazuli.distributed.init_process_group`` first."""

    def __init__(self, module, broadcast_buffers=True):
        super().__init__()
        if not _dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group is not "
                               "initialized; call lazuli.distributed.init_process_group(\"mpi\") "
                               "first (and start the program with mpirun)")
        self.module = module
        state = [p for p in module.parameters()]
        if broadcast_buffers:
            state += [b for _, b in module.named_buffers()]
        with no_grad():
            for t in state:
                _dist.broadcast(t, 0)
        # Run now: the first training step's program then holds no broadcast, the same program
        # as every later step's.
        _C.sync_tensors(state, True)
        for p in module.parameters():
            if p.requires_grad:
                _dist._d.average_gradients(p)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)
