"""Lowering entries: random ops (part of the table in lowering.py): dropout and bernoulli.

Lazuli cannot reproduce PyTorch's random stream: its draws come from its own counter-based
generator (each element a hash of a key and the element's index, src/backend/interp's rng_bits).
So a mask never equals eager's; what holds is its distribution, the scaling, and that the
backward applies the forward's mask (aot_autograd saves `native_dropout`'s mask for the backward).

The key: inside a partition of the torch.compile bridge (`keyed`), the draws read a key that is
an input of the partition's program, not the device's RNG state (which a traced program would
read once, at its trace, and then replay forever). Each call the bridge passes a fresh key drawn
from torch's default generator (`fresh_key`), so every step draws new masks, `torch.manual_seed`
makes them repeat, and the program never changes (no trace, no compile). The partition's first
random node uses the key itself, each further one the key advanced once more (RngAdvance, inside
the program). Outside a partition (lowering.interpret called directly) the draws use lz.rand.
"""
import contextlib
import contextvars

import torch

import lazuli as lz
from lazuli import _C

from .lowering import ALL, FLOATS, TORCH_TO_LZ, aten, cast, lower, torch_dtype


class _KeySource:
    def __init__(self, key):
        self.key = key

    def next(self):
        key = self.key
        self.key = _C._rng_advance(key)
        return key


_SOURCE = contextvars.ContextVar("lazuli_torch_rng_key", default=None)


@contextlib.contextmanager
def keyed(key):
    """Random entries lowered inside draw from `key` (an int64 0-d Lazuli tensor)."""
    token = _SOURCE.set(_KeySource(key))
    try:
        yield
    finally:
        _SOURCE.reset(token)


def fresh_key() -> torch.Tensor:
    """A new key for one call of a partition, from torch's default generator."""
    return torch.randint(-(2 ** 63), 2 ** 63 - 1, (), dtype=torch.int64)


RANDOM_TARGETS = frozenset()  # filled below: the overloads that draw


def uses_random(gm: "torch.fx.GraphModule") -> bool:
    """Whether a graph has a node that draws random numbers (it then takes a key input)."""
    return any(n.op == "call_function" and n.target in RANDOM_TARGETS for n in gm.graph.nodes)


def uniform(shape, dtype):
    """U[0, 1) of `shape` and Lazuli `dtype`, from the partition's key (or the device RNG)."""
    source = _SOURCE.get()
    shape = tuple(int(s) for s in shape)
    if source is None:
        return lz.rand(*shape, dtype=dtype)
    return _C._rand_from_key(source.next(), shape, dtype)


def _dropout_when(a, p, train):
    if a.numel() == 0:
        return "an empty input (eager's mask then has the input's dtype)"
    if not 0.0 <= p <= 1.0:
        return f"p={p} outside [0, 1]"
    return None


@lower(aten.native_dropout.default, dtypes=FLOATS, when=_dropout_when,
       note="(output, bool mask); Lazuli's random stream, not eager's (docs/torch.md)")
def _native_dropout(a, p, train):
    if train is not None and not train:
        return a.clone(), lz.ones(*a.shape, dtype=lz.bool)
    # Eager's: keep with probability 1 - p, scale by 1/(1-p) (0 when p is 1).
    keep = uniform(a.shape, a.dtype) < (1.0 - p)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return a * keep.to(a.dtype) * scale, keep


def _bernoulli_when(a, p, *, generator=None):
    if generator is not None:
        return "an explicit generator"
    if not 0.0 <= p <= 1.0:
        return f"p={p} outside [0, 1]"
    return None


@lower(aten.bernoulli.p, dtypes=ALL, when=_bernoulli_when,
       note="1 with probability p, in the input's dtype; Lazuli's random stream")
def _bernoulli_p(a, p, *, generator=None):
    draw = uniform(a.shape, lz.float64 if torch_dtype(a) == torch.float64 else lz.float32)
    return cast(draw < p, torch_dtype(a))


def _rand_like_when(a, *, dtype=None, layout=None, device=None, pin_memory=None,
                    memory_format=None, generator=None):
    dt = dtype or a.dtype
    if not dt.is_floating_point or dt not in TORCH_TO_LZ:
        return f"dtype {str(dt).replace('torch.', '')} not supported"
    if generator is not None:
        return "an explicit generator"
    return None


@lower(aten.rand_like.default, dtypes=ALL, when=_rand_like_when,
       note="U[0, 1); Lazuli's random stream")
def _rand_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None,
               generator=None):
    return uniform(a.shape, TORCH_TO_LZ[dtype or torch_dtype(a)])


RANDOM_TARGETS = frozenset({aten.native_dropout.default, aten.bernoulli.p,
                            aten.rand_like.default})
