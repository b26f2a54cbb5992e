"""Tensor creation from Python data and the Python protocols of lz.Tensor (indexing is C++:
python/src/indexing_bindings.cpp)."""
import builtins
import numbers

import numpy as np

from . import _C

_NP_TO_LZ = {
    np.dtype(np.float32): _C.dtype.float32,
    np.dtype(np.float64): _C.dtype.float64,
    np.dtype(np.float16): _C.dtype.float16,
    np.dtype(np.int32): _C.dtype.int32,
    np.dtype(np.int64): _C.dtype.int64,
    np.dtype(np.bool_): _C.dtype.bool,
}
_LZ_TO_NP = {v: k for k, v in _NP_TO_LZ.items()}


# PyTorch's dtype order for promotion across the elements of nested data (a total order for the
# dtypes numpy has: bool < int32 < int64 < float16 < float32 < float64; a bfloat16 tensor inside a
# list is left to numpy, whose conversion of it raises: numpy has no bfloat16).
_RANK = [_C.dtype.bool, _C.dtype.int32, _C.dtype.int64, _C.dtype.float16, _C.dtype.float32,
         _C.dtype.float64]


def _element_dtype(t, x):
    """The dtype PyTorch gives one element of type t (x itself for arrays and tensors), or None
    when Lazuli has no such dtype (numpy then decides, as before)."""
    if t is builtins.bool:
        return _C.dtype.bool
    if t is builtins.int:
        return _C.dtype.int64
    if t is builtins.float:
        return _C.dtype.float32  # the default float dtype
    if issubclass(t, (np.generic, np.ndarray)):
        return _NP_TO_LZ.get(x.dtype)
    if issubclass(t, _C.Tensor):
        return x.dtype if x.dtype != _C.dtype.bfloat16 else None
    if issubclass(t, numbers.Integral):
        return _C.dtype.int64
    if issubclass(t, numbers.Real):
        return _C.dtype.float32
    return None


def _inferred_dtype(data):
    """torch.tensor's dtype for nested lists: each element's own dtype (a numpy scalar keeps its
    dtype, a Python float is float32), promoted across elements; None if any is unknown."""
    best = -1
    stack = [data]
    while stack:
        seq = stack.pop()
        types = set(map(type, seq))  # one pass in C: nested lists hold few distinct types
        for t in types:
            if t is list or t is tuple:
                stack.extend(x for x in seq if type(x) is t)
                continue
            # Arrays and tensors each have their own dtype; for a scalar its type decides.
            if t is np.ndarray or t is _C.Tensor:
                samples = [x for x in seq if type(x) is t]
            else:
                samples = [next(x for x in seq if type(x) is t)]
            for x in samples:
                dt = _element_dtype(t, x)
                if dt is None:
                    return None
                best = builtins.max(best, _RANK.index(dt))
    return _RANK[best] if best >= 0 else _C.dtype.float32  # tensor([]) is float32


def tensor(data, dtype=None):
    """A new tensor holding a copy of ``data`` (nested lists, a Python number, a numpy array or a
    tensor). Python floats become float32 and ints int64, as in PyTorch; a numpy array or numpy
    scalar keeps its dtype, also inside a list (promoted across the elements, as torch.tensor)."""
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
        inferred = _inferred_dtype(data) if isinstance(data, (list, tuple)) else None
        if inferred is not None and dtype is None:
            arr = arr.astype(_LZ_TO_NP[inferred], copy=False)
        elif arr.dtype.kind == "f" and isinstance(data, builtins.float):
            arr = arr.astype(np.float32)
    if dtype is not None:
        if not isinstance(dtype, _C.dtype):
            raise TypeError(f"tensor: dtype must be a lazuli dtype, got {dtype!r}")
        if dtype == _C.dtype.bfloat16:
            # numpy has no bfloat16: float32 holds the values, rounded (to nearest even) by a cast.
            return _C.from_numpy(arr.astype(np.float32)).to(dtype)
        arr = arr.astype(_LZ_TO_NP[dtype])
    if arr is data or arr.base is not None:
        arr = arr.copy()  # from_numpy shares the array's memory; tensor() owns its data
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


_C.Tensor.__iter__ = _iter
_C.Tensor.__str__ = _C.Tensor.__repr__
_C.Tensor.__format__ = _format


# ---- Tensor methods for functions defined in Python (every lazuli function PyTorch
# has as a method is a method here too; tests/python/test_tensor_methods.py checks the list). ----
def _method_dtype(x, dtype, fn):
    if dtype is None:
        return x
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"Tensor.{fn}(): argument 'dtype' must be a lazuli dtype, not "
                        f"{type(dtype).__name__}")
    return x.to(dtype)


def _method_number(v, fn, arg):
    if isinstance(v, builtins.bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"Tensor.{fn}(): argument '{arg}' must be a number, not {type(v).__name__}")
    return v


def _softmax(self, dim, dtype=None):
    from .nn import functional as F
    return F.softmax(_method_dtype(self, dtype, "softmax"), dim)


def _log_softmax(self, dim, dtype=None):
    from .nn import functional as F
    return F.log_softmax(_method_dtype(self, dtype, "log_softmax"), dim)


def _where(self, condition, other):
    """t.where(condition, other): t where condition holds, else other (torch.Tensor.where)."""
    return _C.where(condition, self, other)


def _uniform_(self, a=0.0, b=1.0, generator=None):
    """Fills the tensor in place with U(a, b) draws from the device RNG (on a leaf that requires
    grad, under lz.no_grad(), as in PyTorch)."""
    a, b = _method_number(a, "uniform_", "from"), _method_number(b, "uniform_", "to")
    return self.copy_(_C.rand(*self.shape, dtype=self.dtype) * (b - a) + a)


def _normal_(self, mean=0.0, std=1.0, generator=None):
    """Fills the tensor in place with N(mean, std^2) draws from the device RNG."""
    mean, std = _method_number(mean, "normal_", "mean"), _method_number(std, "normal_", "std")
    return self.copy_(_C.randn(*self.shape, dtype=self.dtype) * std + mean)


_C.Tensor.softmax = _softmax
_C.Tensor.log_softmax = _log_softmax
_C.Tensor.where = _where
_C.Tensor.uniform_ = _uniform_
_C.Tensor.normal_ = _normal_
