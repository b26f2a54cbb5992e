"""Tensor creation from Python data and the Python protocols of lz.Tensor (indexing: _indexing.py)."""
import builtins
import numbers

import numpy as np

from . import _C, _indexing

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
    return _C.from_numpy(arr)


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


_C.Tensor.__getitem__ = _indexing.getitem
_C.Tensor.__setitem__ = _indexing.setitem
_C.Tensor.__iter__ = _iter
_C.Tensor.__str__ = _C.Tensor.__repr__
_C.Tensor.__format__ = _format
