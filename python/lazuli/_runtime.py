"""Runtime helpers written in Python: compile regions and eager mode."""
import contextlib
import functools

from . import _C


# Raised by the C++ core; both are lz.Error subclasses.
UnexpectedExecutionError = _C.UnexpectedExecutionError  # something executed in compile(full_graph=True)
TooManyGraphsError = _C.TooManyGraphsError  # compile(max_different_graphs=N) saw one graph too many


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
    ``fn``'s work after it (compile-region-end), so each call of ``fn`` is one program.

    full_graph=True: anything that would execute inside ``fn`` (a value read, a sync) raises
    lz.UnexpectedExecutionError naming the cause and your line, before it runs.
    max_different_graphs=N: when ``fn`` traces a graph that differs from the N already seen,
    lz.TooManyGraphsError is raised before compiling it, naming where the new trace diverges.
    name: labels the graphs in debug output, graph files and lz.debug.recent_cuts().
    """
    if max_different_graphs is not None and (not isinstance(max_different_graphs, int) or max_different_graphs < 1):
        raise ValueError(f"compile: max_different_graphs must be a positive int, got {max_different_graphs!r}")

    def wrap(f):
        label = name or getattr(f, "__name__", "compiled")
        limit = -1 if max_different_graphs is None else max_different_graphs

        @functools.wraps(f)
        def inner(*args, **kwargs):
            _C._sync_with_reason("compile-region-start")
            _C._region_enter(label, bool(full_graph), limit, id(inner))
            try:
                out = f(*args, **kwargs)
                _C._region_check()
                _C._sync_with_reason("compile-region-end")  # inside: labelled with the name
            finally:
                _C._region_exit()
            return out
        inner.__lazuli_name__ = label
        return inner

    return wrap(fn) if fn is not None else wrap
