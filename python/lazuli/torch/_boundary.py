"""Torch CPU tensors in and out of Lazuli without copies (DESIGN.md 5b).

A torch tensor enters as a Lazuli tensor in the device-data state over the same memory; the Lazuli
tensor holds the torch tensor, so its storage lives as long as Lazuli needs it. A Lazuli result
leaves as a torch tensor over Lazuli's buffer, through a numpy array that holds the buffer. Both
sides then see each other's writes to that memory, as with ``torch.from_numpy``.
"""
import os
import weakref

import numpy as np  # torch.from_numpy needs numpy's C API loaded
import torch

import lazuli as lz
from lazuli import _C

from ._aten import TORCH_TO_LZ

_CODE = {k: int(v) for k, v in TORCH_TO_LZ.items()}


_TORCH_FRAMES_ARE_LIBRARY = False


def torch_frames_are_library():
    """Call sites and debug output name the user's lines: from now on, frames in torch (dynamo,
    aot_autograd, nn.Module's call, a device op's dispatch) and FX's generated code are skipped.
    Called by the bridge's first use and by the device's registration; the second call is free."""
    global _TORCH_FRAMES_ARE_LIBRARY
    if not _TORCH_FRAMES_ARE_LIBRARY:
        _C._add_library_dir(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
        _TORCH_FRAMES_ARE_LIBRARY = True


def check_numpy_interop():
    """Raises ImportError where Lazuli's extension and the numpy imported here disagree on an
    array's layout. The boundary hands buffers over as numpy arrays; an extension built with a
    pybind11 older than 2.12 (Debian 12's 2.10) under numpy 2 makes arrays whose every element
    reads as the first, and every result would be silently wrong. Costs one view of four floats,
    nothing run."""
    a = np.arange(1, 5, dtype=np.float32)
    view = np.asarray(_C._numpy_view(_C._from_memory(a.ctypes.data, _CODE[torch.float32], (4,), a)))
    if view.dtype != np.float32 or not np.array_equal(view, a):
        raise ImportError(
            f"lazuli.torch: numpy {np.__version__} (from {os.path.dirname(np.__file__)}) does not "
            f"read Lazuli's buffers correctly (got {view.tolist()} for [1.0, 2.0, 3.0, 4.0]); "
            "lazuli's bindings were built with a pybind11 older than 2.12; rebuild it (its build "
            "requirement is pybind11>=2.12), or use numpy 1.x")


check_numpy_interop()


def _check(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ValueError(f"{what}: only CPU tensors cross without a copy, got one on {t.device} "
                         f"(move it with .cpu() first)")
    if t.dtype not in _CODE:
        raise TypeError(f"{what}: Lazuli has no dtype {str(t.dtype).replace('torch.', '')} "
                        f"(it has {', '.join(sorted(str(d).replace('torch.', '') for d in _CODE))})")


def dense_order(t):
    """For a non-contiguous `t` that is a permutation of a dense block (a transpose, a permute of
    a contiguous tensor: what aot_autograd hands a backward graph for a saved weight's `t()`), the
    permutation `perm` that makes ``t.permute(perm)`` contiguous; None for any other layout (a
    strided slice, an expanded or overlapping tensor), which has no dense block to share."""
    order = sorted(range(t.dim()), key=lambda d: (-t.stride(d), -t.size(d)))
    return tuple(order) if t.permute(order).is_contiguous() else None


def layout_of(t):
    """How `t` crosses the boundary: None (contiguous: shared as is), a permutation (shared as a
    dense block read through that permutation, see dense_order) or "copy" (copied into a
    contiguous block). Part of a compiled partition's input signature."""
    if t.is_contiguous():
        return None
    return dense_order(t) or "copy"


class LentIds:
    """Content ids lent with parameters' memory, so that what Lazuli derives from a parameter's
    bytes (the cpu backend's oneDNN-blocked copy of a convolution's weights) is kept across calls
    while the parameter is unchanged (core/buffer.h, "lent ids").

    A parameter keeps its id while it is the same object with the same memory and the same
    ``_version``, torch's count of in-place writes to it; a new version gets a new id and the old
    one is retired (its copies dropped), as is the id of a parameter that dies. What the version
    counter does not see, a write through ``.data``, a numpy view or a raw pointer, is not seen
    here either: that is the promise the ``keep_weight_layouts`` option asks of its user."""

    def __init__(self):
        self._by_obj = {}  # id(parameter) -> (weakref, data_ptr, version, content id)

    def id_for(self, t):
        """`t`'s lent id; 0 (nothing lent) for an inference tensor, which has no version."""
        if t.is_inference():
            return 0
        key = id(t)
        ptr, version = t.data_ptr(), t._version
        entry = self._by_obj.get(key)
        if entry is not None:
            ref, p, v, cid = entry
            if ref() is t and p == ptr and v == version:
                return cid
            _C._retire_content_id(cid)
        cid = _C._new_content_id()
        self._by_obj[key] = (weakref.ref(t, lambda _r, key=key, cid=cid: self._gone(key, cid)),
                             ptr, version, cid)
        return cid

    def _gone(self, key, cid):
        entry = self._by_obj.get(key)
        if entry is not None and entry[3] == cid:
            del self._by_obj[key]
        _C._retire_content_id(cid)

    def __len__(self):
        return len(self._by_obj)


def to_lazuli(t, content_id=0):
    """A Lazuli tensor over `t`'s memory (no copy): device data, holding `t`.

    `t` must be a CPU tensor of a dtype Lazuli has. A non-contiguous tensor (a transpose, a strided
    slice) has no single dense block to share: it is copied once into a contiguous one
    (``t.contiguous()``, counted TorchInputCopy), the only copy this function makes; compiled
    partitions share a permuted dense tensor instead (dense_order). Writes to `t` are seen by the Lazuli
    tensor; an in-place update of the Lazuli tensor at a step barrier that donates its buffer
    writes into `t`. Autograd history is not carried (the data is detached). `content_id`: an id
    lent for `t`'s current bytes (LentIds), or 0."""
    _check(t, "to_lazuli")
    if not t.is_contiguous():
        t = t.contiguous()
        _C._bump_counter("TorchInputCopy", 1)
    t = t.detach()
    return _C._from_memory(t.data_ptr(), _CODE[t.dtype], tuple(t.shape), t, content_id)


def to_torch(t):
    """A torch tensor over the Lazuli tensor's buffer (no copy); computes `t` first if it is
    pending (a value read). The torch tensor keeps the buffer alive, and the buffer is never
    donated to a later program while it does, so the values stay. bfloat16, which numpy lacks,
    leaves as a uint16 array over the same bits, viewed back as bfloat16: no copy either."""
    if not isinstance(t, lz.Tensor):
        raise TypeError(f"to_torch: expected a lazuli.Tensor, got {type(t).__name__}")
    if t.dtype == lz.bfloat16:
        return torch.from_numpy(_C._numpy_view(t, raw_bfloat16=True)).view(torch.bfloat16)
    return torch.from_numpy(_C._numpy_view(t))


def data_ptr(t):
    """The address of a Lazuli tensor's memory when it holds device data (else 0): for checking
    that memory is shared."""
    return _C._buffer_address(t)
