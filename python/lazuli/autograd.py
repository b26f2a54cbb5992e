"""Grad mode from Python: ``lz.no_grad()``, ``lz.enable_grad()`` (context managers and
decorators) and ``lz.is_grad_enabled()``. The mode is thread-local and lives in the C++ core."""
import functools

from . import _C

is_grad_enabled = _C.is_grad_enabled


class _GradMode:
    _enabled = True

    def __enter__(self):
        self._previous = _C.is_grad_enabled()
        _C._set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return inner


class no_grad(_GradMode):  # noqa: N801  (PyTorch's spelling)
    """Ops recorded inside do not require grad: optimizer updates, evaluation."""
    _enabled = False


class enable_grad(_GradMode):  # noqa: N801
    """Turns grad mode back on inside a no_grad region."""
    _enabled = True


class set_grad_enabled(_GradMode):  # noqa: N801
    def __init__(self, mode):
        self._enabled = bool(mode)
        self._previous = _C.is_grad_enabled()
        _C._set_grad_enabled(self._enabled)  # also works as a plain call, as in PyTorch

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._previous)
        return False
