"""Autocast (mixed precision) from Python: ``lz.autocast(...)``, a context manager and decorator
as ``torch.autocast``; ``lz.amp.autocast`` is the same. The region is thread-local and lives in the
C++ core (include/lazuli/autocast.h has the policy): inside it, matrix products (matmul, linear,
bmm, einsum, attention) and convolutions cast float32 operands to the region's dtype (bfloat16 by
default, or float16) and return it; losses compute in float32; other ops run in their inputs'
dtypes. Run ``backward()`` outside the region, as in PyTorch."""
import functools

from . import _C

_DEVICE_TYPES = ("lazuli", "cpu")


def is_autocast_enabled():
    """Whether this thread is inside an enabled autocast region."""
    return _C._autocast_state()[0]


def get_autocast_dtype():
    """The dtype an autocast region on this thread casts to (bfloat16 unless set)."""
    return _C._autocast_state()[1]


class autocast:  # noqa: N801  (PyTorch's spelling)
    """``with lz.autocast(dtype=lz.bfloat16): loss = loss_fn(model(x), y)``.

    ``device_type`` is accepted for ``torch.autocast`` code: "lazuli" or "cpu" (the ops run on
    Lazuli either way). ``dtype`` is lz.bfloat16 (default) or lz.float16. ``enabled=False`` turns
    autocast off inside an outer region. ``cache_enabled`` is accepted and ignored: a cast of a
    parameter is an IR node, recorded once per step like any other."""

    def __init__(self, device_type="lazuli", dtype=None, enabled=True, cache_enabled=None):
        if device_type not in _DEVICE_TYPES:
            raise ValueError(f"autocast: device_type must be one of {_DEVICE_TYPES}, got {device_type!r}")
        self._dtype = _C.dtype.bfloat16 if dtype is None else dtype
        if self._dtype not in (_C.dtype.bfloat16, _C.dtype.float16):
            raise ValueError(f"autocast: dtype must be lazuli.bfloat16 or lazuli.float16, got {self._dtype!r}")
        self._enabled = bool(enabled)
        self._device_type = device_type
        self._previous = []

    def __enter__(self):
        self._previous.append(_C._autocast_state())
        _C._set_autocast_state(self._enabled, self._dtype)
        return self

    def __exit__(self, *exc):
        _C._set_autocast_state(*self._previous.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with autocast(self._device_type, self._dtype, self._enabled):
                return fn(*args, **kwargs)
        return inner

