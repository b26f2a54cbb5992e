"""Tensor creation from Python data, indexing, and the Python protocols of lz.Tensor."""
import builtins
import numbers

import numpy as np

from . import _C
from ._origin import user_op

_NP_TO_LZ = {
    np.dtype(np.float32): _C.dtype.float32,
    np.dtype(np.float64): _C.dtype.float64,
    np.dtype(np.int32): _C.dtype.int32,
    np.dtype(np.int64): _C.dtype.int64,
    np.dtype(np.bool_): _C.dtype.bool,
}
_LZ_TO_NP = {v: k for k, v in _NP_TO_LZ.items()}


def _contains_float(data):
    if isinstance(data, builtins.bool):
        return False
    if isinstance(data, numbers.Real) and not isinstance(data, numbers.Integral):
        return True
    if isinstance(data, (list, tuple)):
        return builtins.any(_contains_float(x) for x in data)
    return False


def tensor(data, dtype=None):
    """A new tensor holding a copy of ``data`` (nested lists, a Python number, a numpy array or a
    tensor). Python floats become float32 and ints int64, as in PyTorch; a numpy array keeps its
    dtype."""
    if isinstance(data, _C.Tensor):
        t = data.clone()
        return t if dtype is None else t.to(dtype)
    if isinstance(data, np.ndarray) or np.isscalar(data) and isinstance(data, np.generic):
        arr = np.asarray(data)
    else:
        try:
            arr = np.array(data)
        except ValueError as e:
            raise ValueError(f"tensor: cannot make a tensor from {type(data).__name__}: {e}") from None
        if arr.dtype == object or arr.dtype.kind in "USV":
            raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__} holding "
                            f"non-numeric values")
        if arr.dtype.kind == "f" and _contains_float(data):
            arr = arr.astype(np.float32)
        elif arr.dtype.kind == "f" and arr.size == 0:
            arr = arr.astype(np.float32)  # tensor([]) is float32, as in PyTorch
    if dtype is not None:
        if not isinstance(dtype, _C.dtype):
            raise TypeError(f"tensor: dtype must be a lazuli dtype, got {dtype!r}")
        arr = arr.astype(_LZ_TO_NP[dtype])
    if arr is data or arr.base is not None:
        arr = arr.copy()  # from_numpy shares the array's memory; tensor() owns its data
    return _C.from_numpy(arr)


# ---- indexing ---------------------------------------------------------------------------------

def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, builtins.bool)


def _as_index_tensor(key, size=None):
    """An integer index tensor for a list, numpy array or tensor key, or None. Host keys (lists,
    numpy arrays) are known now, so their values are checked against `size` here, as PyTorch
    does; tensor keys are checked when the program runs."""
    if isinstance(key, _C.Tensor):
        return key
    if isinstance(key, (list, np.ndarray)):
        arr = np.asarray(key)
        if arr.dtype.kind not in "iub" and arr.size:
            raise IndexError(f"tensors used as indices must be integer or bool, got {arr.dtype}")
        if arr.size == 0:
            arr = arr.astype(np.int64)
        if size is not None and arr.dtype.kind in "iu" and arr.size:
            bad = arr[(arr < -size) | (arr >= size)]
            if bad.size:
                raise IndexError(f"index {int(bad.flat[0])} is out of bounds for dimension with size {size}")
        return tensor(arr)
    return None


def _expand_key(t, key):
    if not isinstance(key, tuple):
        key = (key,)
    n_ellipsis = builtins.sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = builtins.sum(
        (k.ndim if isinstance(k, _C.Tensor) and k.dtype == _C.dtype.bool else 1)
        for k in key if k is not None and k is not Ellipsis)
    if consumed > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (t.ndim - consumed))
        else:
            out.append(k)
    return out


def _basic_and_advanced(t, key):
    """Applies ints, slices and None as views; returns the view and the advanced indices left:
    a list of (dim in the view, index tensor)."""
    view = t
    dim = 0
    advanced = []
    for k in _expand_key(t, key):
        if k is None:
            view = view.unsqueeze(dim)
            dim += 1
        elif _is_int(k) or (isinstance(k, np.integer)):
            view = view.select(dim, int(k))
        elif isinstance(k, slice):
            step = 1 if k.step is None else k.step
            if step <= 0:
                raise ValueError("step must be greater than zero")
            view = view._slice(dim, k.start, k.stop, step)
            dim += 1
        else:
            idx = _as_index_tensor(k, view.shape[dim] if dim < view.ndim else None)
            if idx is None:
                raise IndexError(f"only integers, slices, None, '...', integer or bool tensors "
                                 f"and lists are valid indices (got {type(k).__name__})")
            advanced.append((dim, idx))
            dim += idx.ndim if idx.dtype == _C.dtype.bool else 1
    return view, advanced


@user_op("x[index]")
def _getitem(self, key):
    view, advanced = _basic_and_advanced(self, key)
    if not advanced:
        return view
    if len(advanced) > 1:
        raise IndexError("lazuli supports one tensor index per indexing expression")
    dim, idx = advanced[0]
    if idx.dtype == _C.dtype.bool:
        # A bool mask: the result's size depends on the values (a cut).
        lead = view.shape[:dim]
        mshape = idx.shape
        if tuple(view.shape[dim:dim + idx.ndim]) != tuple(mshape):
            raise IndexError(f"the mask of shape {tuple(mshape)} does not match the indexed "
                             f"dims {tuple(view.shape[dim:dim + idx.ndim])}")
        rest = view.shape[dim + idx.ndim:]
        flat = view.reshape(*lead, -1, *rest) if idx.ndim else view.unsqueeze(dim)
        positions = _C._nonzero_flat(idx.reshape(-1))
        return flat.index_select(dim, positions)
    if idx.dtype not in (_C.dtype.int64, _C.dtype.int32):
        raise IndexError(f"tensors used as indices must be integer or bool, got {idx.dtype}")
    size = view.shape[dim]
    _C._check_index_bounds(idx, size, "x[index]")
    # Negative indices count from the end, as in PyTorch.
    idx = _C.where(idx < 0, idx + size, idx)
    picked = view.index_select(dim, idx.reshape(-1))
    if idx.ndim == 1:
        return picked
    shape = tuple(view.shape[:dim]) + tuple(idx.shape) + tuple(view.shape[dim + 1:])
    return picked.reshape(*shape)


@user_op("x[index] = value")
def _setitem(self, key, value):
    if not isinstance(value, _C.Tensor):
        value = _C._scalar_tensor(value, self.dtype)
    view, advanced = _basic_and_advanced(self, key)
    if not advanced:
        view.copy_(value)
        return
    if len(advanced) > 1:
        raise IndexError("lazuli supports one tensor index per indexing expression")
    dim, idx = advanced[0]
    if idx.dtype == _C.dtype.bool:
        # Masked assignment keeps shapes static: where(mask, value, old).
        mask = idx
        for _ in range(view.ndim - dim - idx.ndim):
            mask = mask.unsqueeze(-1)
        view.copy_(_C.where(mask, value.to(view.dtype), view))
        return
    size = view.shape[dim]
    _C._check_index_bounds(idx, size, "x[index] = value")
    idx = _C.where(idx < 0, idx + size, idx).reshape(-1)
    target_shape = list(view.shape)
    target_shape[dim] = idx.shape[0]
    src = value.to(view.dtype).broadcast_to(tuple(target_shape))
    view.copy_(view._index_copy(dim, idx, src))


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(self.shape[0]):
        yield self.select(0, i)


def _format(self, spec):
    """format(t, spec) as in PyTorch: a 0-d tensor formats its value (f"{loss:.4f}"); any other
    tensor formats as str(t) with an empty spec and refuses a non-empty one."""
    if self.ndim == 0:
        return format(self.item(), spec)
    if spec:
        raise TypeError(f"Tensor.__format__: the format spec {spec!r} needs a 0-d tensor, got shape "
                        f"{tuple(self.shape)}; format t.item() (one element) or str(t) instead")
    return str(self)


_C.Tensor.__getitem__ = _getitem
_C.Tensor.__setitem__ = _setitem
_C.Tensor.__iter__ = _iter
_C.Tensor.__str__ = _C.Tensor.__repr__
_C.Tensor.__format__ = _format
