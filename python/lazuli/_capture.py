"""lz.capture: capture and replay of a step function (DESIGN.md section 5b, docs/capture.md).

The function is traced like any lazy code (ops record a graph, its end is a step barrier). Once two
traces with the same input signature give the same program, later calls replay that program with
the new arguments: no Python of the function runs, no graph is recorded or hashed. The C++ core
(src/exec/capture.cpp) keeps the records and decides; this file turns Python arguments and results
into tensors and back.
"""
import functools
import sys
import warnings

from . import _C

_Tensor = _C.Tensor


class _Leaf:
    """Marks a tensor's place in a flattened structure."""
    __slots__ = ()

    def __repr__(self):
        return "<tensor>"


_LEAF = _Leaf()


class _Static:
    """A non-tensor leaf: compared and hashed with its type, so f(x, 1) and f(x, 1.0), which trace
    different graphs, have different signatures; unhashable values raise TypeError here."""
    __slots__ = ("value", "key")

    def __init__(self, value):
        self.value = value
        # Floats by their bits: 0.0 and -0.0 (equal, same hash) trace different graphs.
        self.key = (type(value), value.hex() if isinstance(value, float) else value)

    def __eq__(self, other):
        return isinstance(other, _Static) and self.key == other.key

    def __hash__(self):
        return hash(self.key)


def _flatten(obj, tensors, tensor_type=_Tensor):
    """The structure of `obj` (nested tuples, lists and dicts) as a hashable spec: a tensor (an
    instance of `tensor_type`: lazuli.torch.capture passes torch.Tensor) becomes _LEAF (and is
    appended to `tensors`), any other leaf a _Static."""
    if isinstance(obj, tensor_type):
        tensors.append(obj)
        return _LEAF
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(_flatten(x, tensors, tensor_type) for x in obj))
    if isinstance(obj, dict):
        return (dict, tuple(obj.keys()), tuple(_flatten(v, tensors, tensor_type) for v in obj.values()))
    return _Static(obj)


def _unflatten(spec, tensors):
    """Inverse of _flatten: `tensors` is an iterator over the tensors, in order."""
    if spec is _LEAF:
        return next(tensors)
    if isinstance(spec, _Static):
        return spec.value
    if len(spec) == 3:  # (dict, keys, items)
        return {k: _unflatten(s, tensors) for k, s in zip(spec[1], spec[2])}
    kind, items = spec
    values = [_unflatten(s, tensors) for s in items]
    if kind is list:
        return values
    if kind is tuple:
        return tuple(values)
    return kind(*values)  # a namedtuple


_SPEC_OF_TENSORS = {}  # n -> the spec of f(t1, ..., tn) with tensors only (the common call)


def _spec_of_tensors(n):
    spec = _SPEC_OF_TENSORS.get(n)
    if spec is None:
        spec = _SPEC_OF_TENSORS[n] = (tuple, ((tuple, (_LEAF,) * n), (dict, (), ())))
    return spec


def capture(fn=None, *, full_graph=False, name=None):
    """Decorator: capture and replay. ``fn`` is traced (run as lazy code, one program per call)
    until two calls with the same input signature trace the same program; from then on a call with
    that signature replays the program on its new arguments without running ``fn``'s Python.

    A replay reads the tensor arguments and the tensors ``fn`` read that existed before the call
    (weights, optimizer state, the RNG key), and writes the tensors ``fn`` updated in place or
    created and kept (``.grad``, optimizer moments); returned tensors are new on every replay.
    Python side effects of ``fn`` (prints, list appends, counters) happen only when it is traced.
    A Python value that changes between calls must be an argument (non-tensor arguments are part of
    the signature) or an lz tensor. See docs/capture.md.

    full_graph=True: anything that would execute inside ``fn`` (a value read) raises
    lz.UnexpectedExecutionError; by default such a function is traced on every call, with a
    warning saying why. ``fn.capture_stats()`` gives the counts of traces and replays.
    """
    def wrap(f):
        label = name or getattr(f, "__name__", "captured")
        cache = _C._CaptureCache(label, bool(full_graph))
        keys = _SignatureKeys(label)
        warned = set()

        def body_for(spec):
            def body(targs):
                args, kwargs = _unflatten(spec, iter(targs))
                out = f(*args, **kwargs)
                out_tensors = []
                out_spec = _flatten(out, out_tensors)
                _refuse_if_kept(out_tensors)
                del out
                return out_tensors, out_spec
            return body

        @functools.wraps(f)
        def inner(*args, **kwargs):
            if not kwargs and all(type(a) is _Tensor for a in args):  # the common call, fast
                tensors = list(args)
                spec = _spec_of_tensors(len(args))
            else:
                tensors = []
                spec = _flatten((args, kwargs), tensors)
            traces = cache.traces
            outs, out_spec = cache.call(tensors, keys.of(spec), body_for(spec))
            _warn_if_traced(cache, traces, "lz.capture", label, warned)
            return _unflatten(out_spec, iter(outs))

        _add_stats(inner, cache, label)
        return inner

    return wrap(fn) if fn is not None else wrap


class _SignatureKeys:
    """Signature specs (compared with ==, never by hash alone) to the small ints the core's records
    are keyed by."""

    def __init__(self, label):
        self.label = label
        self.ids = {}
        self.next = 0

    def of(self, spec):
        try:
            key = self.ids.get(spec)
            if key is None:
                if len(self.ids) >= 4096:  # never reused: the core's records age out by LRU
                    self.ids.clear()
                key = self.ids[spec] = self.next
                self.next += 1
            return key
        except TypeError:
            raise TypeError(f"capture '{self.label}': every non-tensor argument must be hashable (it "
                            f"is part of the signature a replay is chosen by)") from None


def _warn_if_traced(cache, traces_before, api, label, warned):
    """One RuntimeWarning per distinct reason (`warned`: those already given) a call was traced
    instead of replayed; warming up gives none."""
    if cache.traces != traces_before:
        reason = cache.last_reason
        if reason and reason not in warned:
            warned.add(reason)
            warnings.warn(f"{api} '{label}': not replayed: {reason}", RuntimeWarning, stacklevel=3)


def _add_stats(inner, cache, label):
    inner.capture_stats = lambda: {"traces": cache.traces, "replays": cache.replays,
                                   "last_reason": cache.last_reason}
    inner.__lazuli_name__ = label


def _kept_elsewhere(out_tensors, refs_per_occurrence):
    """The returned tensors something besides the result also holds (self.last = y; return y),
    found by reference count: each occurrence in the result accounts for `refs_per_occurrence`
    references, plus the loop variable and getrefcount's argument."""
    kept = []
    for t in out_tensors:
        occurrences = sum(1 for u in out_tensors if u is t)
        if sys.getrefcount(t) > refs_per_occurrence * occurrences + 2:
            kept.append(t)
    return kept


def _refuse_if_kept(out_tensors):
    """A returned tensor the function made and also kept would go stale: replays return a new
    tensor and never write the kept one. Here the result structure and `out_tensors` hold each
    occurrence; the core refuses the trace if such a tensor is one the function made."""
    for t in _kept_elsewhere(out_tensors, 2):
        _C._capture_note_kept(t)


def _refuse_replay(reason):
    """Called by traced library code whose Python effect a replay would skip (an LR scheduler
    stepped inside the function): the trace is never replayed."""
    if _C._capture_tracing():
        _C._capture_refuse(reason)


def _add_replay_guard(check, identity):
    """Called by traced library code (optimizers): `check()` runs before every replay of the
    capture being traced, may refresh tensors from Python values (idempotently), and returns False
    when the replay would be wrong (the call is then traced again)."""
    if _C._capture_tracing():
        _C._capture_add_guard(check, identity)
