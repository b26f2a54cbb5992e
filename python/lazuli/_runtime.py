"""Runtime helpers written in Python: compile regions and eager mode."""
import contextlib
import functools

from . import _C


class UnexpectedExecutionError(_C.Error):
    """Something executed inside a ``compile(full_graph=True)`` function."""


class TooManyGraphsError(_C.Error):
    """A ``compile(max_different_graphs=N)`` function traced one graph too many."""


def eager_mode(enabled):
    """Every op runs at once, as its own small cached program (for debugging)."""
    _C.eager_mode(bool(enabled))


@contextlib.contextmanager
def eager():
    previous = _C.is_eager_mode()
    _C.eager_mode(True)
    try:
        yield
    finally:
        _C.eager_mode(previous)


def compile(fn=None, *, full_graph=False, max_different_graphs=None, name=None):
    """Decorator: pending work is synced before ``fn`` (cut reason compile-region-start) and
    ``fn``'s work after it (compile-region-end), so ``fn`` is one program per input signature."""
    if full_graph or max_different_graphs is not None:
        raise NotImplementedError(
            "compile(full_graph=..., max_different_graphs=...) guards arrive with the "
            "diagnostics work; use compile(fn) for now")

    def wrap(f):
        @functools.wraps(f)
        def inner(*args, **kwargs):
            _C._sync_with_reason("compile-region-start")
            out = f(*args, **kwargs)
            _C._sync_with_reason("compile-region-end")
            return out
        inner.__lazuli_name__ = name or getattr(f, "__name__", "compiled")
        return inner

    return wrap(fn) if fn is not None else wrap
