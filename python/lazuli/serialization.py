"""Saving and loading: ``lz.save(obj, path)`` / ``lz.load(path)`` in the safetensors format (no
pickled code; docs/serialization.md), and the pickle and ``copy.deepcopy`` support of tensors.

A flat ``{str: Tensor}`` dict (a model's ``state_dict()``) is written as a plain safetensors file:
the `safetensors` package and PyTorch read it as they read their own. Anything else (an
optimizer's state dict, ``{"model": ..., "optimizer": ..., "epoch": 3}``) is flattened: each
tensor is stored under the dotted path that leads to it (``state.0.exp_avg``) and the rest of the
structure (dicts with str or int keys, lists, tuples, str, int, float, bool, None) is a JSON
document in the file's ``__metadata__`` under ``"lazuli.structure"``. Reading is strict: a file
that is not what it claims raises an error naming the file, and nothing in it is ever executed.
"""
import copy
import errno
import json
import math
import os

import numpy as np

from . import _C

_STRUCTURE_KEY = "lazuli.structure"
_STRUCTURE_VERSION = 1

_NP_DTYPES = {
    _C.dtype.float32: np.float32, _C.dtype.float64: np.float64, _C.dtype.int32: np.int32,
    _C.dtype.int64: np.int64, _C.dtype.bool: np.bool_, _C.dtype.float16: np.float16,
    _C.dtype.bfloat16: np.float32,  # numpy has no bfloat16: pickled as float32 (exact), cast back
}
_DTYPE_BY_NAME = {name: dt for name, dt in _C.dtype.__members__.items()}


def _path(f, fn):
    if isinstance(f, (str, bytes, os.PathLike)):
        return os.fsdecode(os.fspath(f))
    raise TypeError(f"{fn}: expected a path (str or os.PathLike), got {type(f).__name__}; file "
                    f"objects are not supported")


def _where(at):
    return "obj" + "".join(f"[{k!r}]" for k in at)


class _Encoder:
    """Turns a nested structure into (named tensors, JSON-able skeleton)."""

    def __init__(self):
        self.tensors = []   # [(name, tensor)]
        self.names = set()
        self.by_id = {}     # id(tensor) -> name: a tensor reached twice is stored once

    def name_for(self, at):
        base = ".".join(str(k) for k in at) or "tensor"
        name, n = base, 1
        while name in self.names or name == "__metadata__":
            name, n = f"{base}#{n}", n + 1
        self.names.add(name)
        return name

    def encode(self, obj, at):
        if isinstance(obj, _C.Tensor):
            name = self.by_id.get(id(obj))
            if name is None:
                name = self.by_id[id(obj)] = self.name_for(at)
                self.tensors.append((name, obj))
            return {"tensor": name}
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, (int, np.integer)) and not isinstance(obj, np.bool_):
            return int(obj)
        if isinstance(obj, np.bool_):
            return bool(obj)
        if isinstance(obj, (float, np.floating)):
            x = float(obj)
            return x if math.isfinite(x) else {"float": repr(x)}
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise TypeError(f"lz.save: a dict key of type {type(k).__name__} at "
                                    f"{_where(at)} (keys must be str or int)")
                items.append([k, self.encode(v, at + [k])])
            return {"dict": items}
        if isinstance(obj, (list, tuple)):
            kind = "list" if isinstance(obj, list) else "tuple"
            return {kind: [self.encode(v, at + [i]) for i, v in enumerate(obj)]}
        raise TypeError(f"lz.save: cannot save a value of type {type(obj).__name__} at "
                        f"{_where(at)}: lz.save stores tensors, numbers, strings, bools, None, "
                        f"and dicts, lists and tuples of them (never pickled objects)")


class _Decoder:
    def __init__(self, tensors, path):
        self.tensors = tensors
        self.path = path

    def bad(self, what):
        return ValueError(f"lz.load: '{self.path}': the {_STRUCTURE_KEY} metadata is malformed: "
                          f"{what}")

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, dict) and len(node) == 1:
            (kind, body), = node.items()
            if kind == "tensor" and isinstance(body, str):
                if body not in self.tensors:
                    raise self.bad(f"it refers to a tensor {body!r} the file does not have")
                return self.tensors[body]
            if kind == "float" and body in ("inf", "-inf", "nan"):
                return float(body)
            if kind in ("list", "tuple") and isinstance(body, list):
                items = [self.decode(v) for v in body]
                return items if kind == "list" else tuple(items)
            if kind == "dict" and isinstance(body, list):
                out = {}
                for item in body:
                    if (not isinstance(item, list) or len(item) != 2 or isinstance(item[0], bool)
                            or not isinstance(item[0], (str, int))):
                        raise self.bad(f"a dict item {str(item)[:60]} is not [key, value]")
                    out[item[0]] = self.decode(item[1])
                return out
        raise self.bad(f"unexpected element {str(node)[:60]}")


def _is_flat(obj):
    return isinstance(obj, dict) and all(
        isinstance(k, str) and isinstance(v, _C.Tensor) for k, v in obj.items())


def save(obj, f, metadata=None):
    """Saves ``obj`` to the file ``f`` in the safetensors format (values read with one program).

    ``obj``: a ``{str: Tensor}`` dict (written as a plain safetensors file), or any nesting of
    dicts (str or int keys), lists and tuples over tensors, numbers, strings, bools and None.
    ``metadata``: extra ``{str: str}`` for the file's ``__metadata__``. The file is written beside
    ``f`` and renamed over it when complete: a failed save leaves an existing file as it was."""
    path = _path(f, "lz.save")
    meta = {}
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("lz.save: metadata must be a dict of str to str")
        if _STRUCTURE_KEY in metadata:
            raise ValueError(f"lz.save: the metadata key {_STRUCTURE_KEY!r} is reserved")
        meta.update(metadata)
    if _is_flat(obj):
        tensors = list(obj.items())
    else:
        enc = _Encoder()
        root = enc.encode(obj, [])
        tensors = enc.tensors
        meta[_STRUCTURE_KEY] = json.dumps({"version": _STRUCTURE_VERSION, "root": root},
                                          separators=(",", ":"), allow_nan=False)
    _C._save_safetensors(tensors, path, meta)


def load(f):
    """Loads what ``lz.save`` wrote, or any safetensors file (as a ``{name: Tensor}`` dict in the
    file's order). Each tensor's bytes go from the file straight into its own memory; the tensors
    are uploaded when a graph first uses them. Raises FileNotFoundError for a missing file and
    ValueError naming the file and the problem for a malformed one."""
    path = _path(f, "lz.load")
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "lz.load: no such file", path)
    named, meta = _C._load_safetensors(path)
    tensors = dict(named)
    text = meta.get(_STRUCTURE_KEY)
    if text is None:
        return tensors
    dec = _Decoder(tensors, path)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise dec.bad(f"not JSON ({e})") from None
    if not isinstance(doc, dict) or "root" not in doc:
        raise dec.bad("no root")
    if doc.get("version") != _STRUCTURE_VERSION:
        raise ValueError(f"lz.load: '{path}' was written with structure version "
                         f"{doc.get('version')!r}; this Lazuli reads version {_STRUCTURE_VERSION}")
    return dec.decode(doc["root"])


def load_metadata(f):
    """The ``__metadata__`` strings of a safetensors file (its header only is read)."""
    path = _path(f, "lz.serialization.load_metadata")
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "lz.serialization.load_metadata: no such file", path)
    return _C._load_safetensors_metadata(path)


# ---- pickle and copy.deepcopy -------------------------------------------------------------------

def _rebuild_tensor(values, dtype_name, shape, requires_grad):
    """Unpickles a tensor: its values (a numpy array), dtype, shape and requires_grad."""
    dt = _DTYPE_BY_NAME.get(dtype_name)
    if dt is None:
        raise ValueError(f"unpickling a lazuli tensor of unknown dtype {dtype_name!r}")
    arr = np.array(values, dtype=_NP_DTYPES[dt], copy=True).reshape(tuple(shape))
    t = _C.from_numpy(arr)
    if dt == _C.dtype.bfloat16:
        t = t.to(dt)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reduce_ex(self, protocol):
    # A value read: pickling stores values, as PyTorch does (not the pending graph).
    values = self.float().numpy() if self.dtype == _C.dtype.bfloat16 else self.numpy()
    return (_rebuild_tensor, (values, self.dtype.name, tuple(self.shape),
                              bool(self.requires_grad)))


def _deepcopy(self, memo):
    """copy.deepcopy(t): a new leaf holding t's value, with t's requires_grad and a deep copy of
    its .grad, as PyTorch. Lazy: the copy is recorded, nothing runs."""
    if id(self) in memo:
        return memo[id(self)]
    if self.requires_grad and not self.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                           "deepcopy protocol; detach() it first")
    from .autograd import no_grad
    with no_grad():
        new = self.detach().clone()
    if self.requires_grad:
        new.requires_grad_(True)
    memo[id(self)] = new
    if self.grad is not None:
        new.grad = copy.deepcopy(self.grad, memo)
    return new


_C.Tensor.__reduce_ex__ = _reduce_ex
_C.Tensor.__deepcopy__ = _deepcopy
