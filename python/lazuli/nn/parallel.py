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
    when wrapped), so every rank takes the same steps; buffers are rank 0's again at every
    forward (``broadcast_buffers``).

    The gradients are reduced in buckets, as PyTorch's are: in the order the backward produces
    them, one all_reduce over gradients of about ``bucket_cap_mb`` MiB together (default 4: on
    Open MPI's shared memory, larger messages run slower; ``0``: one all_reduce per parameter).

    Needs ``lazuli.distributed.init_process_group`` first."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 bucket_cap_mb=None):
        super().__init__()
        if not _dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group is not "
                               "initialized; call lazuli.distributed.init_process_group(\"mpi\") "
                               "first (and start the program with mpirun)")
        if device_ids not in (None, []) or output_device is not None or dim != 0:
            raise ValueError("DistributedDataParallel: device_ids, output_device and dim are for "
                             "GPUs in PyTorch; a Lazuli rank runs on its own device (leave them out)")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        state = list(module.parameters()) + self._buffers_to_broadcast()
        with no_grad():
            for t in state:
                _dist.broadcast(t, 0)
        # Run now: the first training step's program then holds no parameter broadcast, the same
        # program as every later step's.
        _C.sync_tensors(state, True)
        if bucket_cap_mb is not None and not bucket_cap_mb >= 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be >= 0, got {bucket_cap_mb!r}")
        cap = (_dist._d.DEFAULT_BUCKET_CAP_BYTES if bucket_cap_mb is None
               else int(bucket_cap_mb * 2**20))
        for p in module.parameters():
            if p.requires_grad:
                _dist._d.average_gradients(p, cap)

    def _buffers_to_broadcast(self):
        return [b for _, b in self.module.named_buffers()] if self.broadcast_buffers else []

    def forward(self, *args, **kwargs):
        # As PyTorch's: buffers (batch norm's running statistics) are rank 0's at every forward,
        # a broadcast recorded into the step's program.
        with no_grad():
            for b in self._buffers_to_broadcast():
                _dist.broadcast(b, 0)
        return self.module(*args, **kwargs)
