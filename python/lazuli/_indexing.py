"""x[key] and x[key] = value, with PyTorch's rules as the specification.

A key is read as PyTorch reads it: ints, slices and None are views (select, slice, unsqueeze);
a Python bool is a new dim of size 1 (True) or 0 (False); integer tensors, lists and numpy arrays,
0-d integer tensors among them, are advanced indices; bool tensors are masks over as many dims as
they have. Several advanced indices broadcast together; their result dims take the place of the
first one when they are adjacent, else they come first. Advanced results are copies.

A mask's selection has a size that depends on its values, so reading it is a cut (nonzero), except
in `x[mask] = value` where the value does not depend on that size: that is where(mask, value, x).
"""
import builtins
import math
import numbers
import warnings
from collections.abc import Sequence

import numpy as np

from . import _C
from ._origin import user_op

_INTEGER_DTYPES = (_C.dtype.int64, _C.dtype.int32)


def _is_int(x):
    return isinstance(x, (numbers.Integral, np.integer)) and not _is_bool(x)


def _is_bool(x):
    return isinstance(x, (builtins.bool, np.bool_))


def _reads_as_tuple(key):
    """PyTorch's reading of a list key (treatSequenceAsTuple, torch/csrc/autograd/
    python_variable_indexing.cpp): a list shorter than 32 that holds a sequence, a slice, a tensor,
    None or ... is a tuple of indices, so x[[0, [1, 2]]] is x[0, [1, 2]]; any other list is one
    index. PyTorch warns that it will read such lists as one index some day; so does Lazuli."""
    if not isinstance(key, list) or len(key) >= 32:
        return False
    tuple_like = builtins.any(
        k is None or k is Ellipsis or isinstance(k, (_C.Tensor, slice, np.ndarray, Sequence))
        for k in key)
    if tuple_like:
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated (as in "
                      "PyTorch); use x[tuple(seq)] instead of x[seq]: a later version will read "
                      "x[seq] as x[lz.tensor(seq)]", UserWarning, stacklevel=5)
    return tuple_like


def _index_tensor(k, size, dim=0):
    """k (a tensor, list or numpy array) as an integer index tensor or a bool mask. Values of a
    host key are known now and checked against `size` here, as PyTorch does; a tensor's are
    checked when the program runs."""
    if isinstance(k, _C.Tensor):
        if k.dtype not in _INTEGER_DTYPES and k.dtype != _C.dtype.bool:
            raise IndexError(f"tensors used as indices must be long, int or bool tensors, got {k.dtype}")
        return k
    arr = np.asarray(k)
    if arr.size == 0 or (isinstance(k, list) and arr.dtype.kind == "f"):
        arr = arr.astype(np.int64)  # PyTorch reads a list's numbers as long indices
    if arr.dtype.kind not in "iub":
        raise IndexError(f"tensors used as indices must be long, int or bool tensors, got {arr.dtype}")
    if size is not None and arr.dtype.kind in "iu" and arr.size:
        bad = arr[(arr < -size) | (arr >= size)]
        if bad.size:
            raise IndexError(f"index {int(bad.flat[0])} is out of bounds for dimension {dim} "
                             f"with size {size}")
    from ._tensor import tensor
    return tensor(arr)


def _specified_dims(items):
    """Dims of the indexed tensor the key's items consume (None, ..., and bools consume none)."""
    n = 0
    for k in items:
        if k is None or k is Ellipsis or _is_bool(k):
            continue
        if isinstance(k, _C.Tensor) and k.dtype == _C.dtype.bool:
            n += k.ndim
        elif isinstance(k, (list, np.ndarray)) and np.asarray(k).dtype == np.bool_:
            n += np.asarray(k).ndim
        else:
            n += 1
    return n


def _parse(t, key):
    """Applies ints, slices and None as views; returns the view and the advanced indices left:
    (dim in the view, integer index tensor or bool mask). Bools become a new dim with an index."""
    items = tuple(key) if isinstance(key, tuple) or _reads_as_tuple(key) else (key,)
    specified = _specified_dims(items)
    if specified > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    slack = t.ndim - specified
    view, dim, advanced, seen_ellipsis = t, 0, [], False
    for i, k in enumerate(items):
        if k is Ellipsis:
            # PyTorch moves past `slack` dims at every ellipsis: a later one is a no-op when nothing
            # but ellipses follow it (x[..., ...]), else it would index past the last dim.
            if seen_ellipsis and slack and builtins.any(r is not Ellipsis for r in items[i + 1:]):
                raise IndexError("an index can only have a single ellipsis ('...') when more indices "
                                 "follow it")
            if not seen_ellipsis:
                dim += slack
            seen_ellipsis = True
        elif k is None:
            view = view.unsqueeze(dim)
            dim += 1
        elif _is_bool(k):
            view = view.unsqueeze(dim)
            advanced.append((dim, _index_tensor([0] if k else [], 1)))
            dim += 1
        elif _is_int(k):
            view = view.select(dim, int(k))
        elif isinstance(k, slice):
            step = 1 if k.step is None else k.step
            if step <= 0:
                raise ValueError("step must be greater than zero")
            view = view._slice(dim, k.start, k.stop, step)
            dim += 1
        elif isinstance(k, (_C.Tensor, list, tuple, np.ndarray)):
            idx = _index_tensor(k, view.shape[dim] if dim < view.ndim else None, dim)
            if idx.dtype == _C.dtype.bool and idx.ndim == 0:
                view = view.unsqueeze(dim)  # as PyTorch: a 0-d mask is a new dim, kept or emptied
                idx = idx.reshape(1)
            advanced.append((dim, idx))
            dim += idx.ndim if idx.dtype == _C.dtype.bool else 1
        else:
            raise IndexError(f"only integers, slices, None, '...', bools, integer or bool tensors "
                             f"and lists are valid indices (got {type(k).__name__})")
    return view, advanced


def _check_mask(view, dim, mask):
    indexed = tuple(view.shape[dim:dim + mask.ndim])
    if indexed != tuple(mask.shape):
        bad = next((j for j in range(mask.ndim) if j >= len(indexed) or indexed[j] != mask.shape[j]), 0)
        raise IndexError(f"The shape of the mask {list(mask.shape)} at index {bad} does not match the "
                         f"shape of the indexed tensor {list(view.shape)} at index {dim + bad}")


def _wrapped(view, dim, idx, op):
    """idx with negative entries counted from the end of view's dim `dim`."""
    size = view.shape[dim]
    _C._check_index_bounds(idx, size, op)
    return _C.where(idx < 0, idx + size, idx)


def _flat_positions(mask):
    """The flat positions of a mask's true elements: reads the mask (a cut)."""
    return _C._nonzero_flat(mask.reshape(-1))


class _Advanced:
    """Several advanced indices as one: the view's indexed dims moved first and flattened
    (`flat`), and one linear index into them (`linear`, shape `shape`)."""

    def __init__(self, view, advanced, op):
        groups = []  # (dims covered, their sizes, index into them)
        for dim, idx in advanced:
            if idx.dtype == _C.dtype.bool:
                _check_mask(view, dim, idx)
                dims = list(range(dim, dim + idx.ndim))
                groups.append((dims, list(idx.shape), _flat_positions(idx)))
            else:
                size = view.shape[dim]
                on_host = _C.debug.tensor_state(idx) == "host"  # values checked by _wrapped
                idx = _wrapped(view, dim, idx, op)
                if idx.numel() and not on_host:
                    # Entries out of range could still make an in-range linear index: pass them
                    # through an index_select, which checks them when the program runs.
                    idx = _C.arange(size).index_select(0, idx.reshape(-1)).reshape(*idx.shape)
                groups.append(([dim], [size], idx))
        try:
            self.shape = tuple(np.broadcast_shapes(*[tuple(g[2].shape) for g in groups]))
        except ValueError:
            shapes = ", ".join(str(list(g[2].shape)) for g in groups)
            raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together with "
                             f"shapes {shapes}") from None
        self.dims = [d for g in groups for d in g[0]]
        self.sizes = [s for g in groups for s in g[1]]
        self.rest = [d for d in range(view.ndim) if d not in self.dims]
        self.rest_sizes = [view.shape[d] for d in self.rest]
        self.perm = self.dims + self.rest
        linear, mult = None, 1
        for dims, sizes, idx in reversed(groups):
            term = idx.long().broadcast_to(self.shape) * mult
            linear = term if linear is None else linear + term
            mult *= math.prod(sizes)
        self.linear = linear.reshape(-1)
        self.flat = view.permute(*self.perm).reshape(math.prod(self.sizes), *self.rest_sizes)
        # PyTorch puts the result dims where the first index was when the indices are adjacent.
        # A 0-d integer index is a select there (it reads the value): it removes its dim and
        # takes no part in that placement.
        selected = {g[0][0] for g in groups if g[2].ndim == 0 and len(g[0]) == 1}
        placed = [d - builtins.sum(1 for s in selected if s < d)
                  for d in self.dims if d not in selected]
        if placed and placed == list(range(placed[0], placed[0] + len(placed))):
            first = next(d for d in self.dims if d not in selected)
            self.at = builtins.sum(1 for d in self.rest if d < first)
        else:
            self.at = 0
        self.result_shape = (tuple(self.rest_sizes[:self.at]) + self.shape +
                             tuple(self.rest_sizes[self.at:]))

    def get(self):
        nb = len(self.shape)
        picked = self.flat.index_select(0, self.linear).reshape(*self.shape, *self.rest_sizes)
        if self.at:  # the index dims (first nb) move to `at`
            order = (list(range(nb, nb + self.at)) + list(range(nb)) +
                     list(range(nb + self.at, picked.ndim)))
            picked = picked.permute(*order).contiguous()
        return picked

    def put(self, src):
        """view with src (already of result_shape) written at the indexed places."""
        nb = len(self.shape)
        if self.at:  # back to index dims first
            order = (list(range(self.at, self.at + nb)) + list(range(self.at)) +
                     list(range(self.at + nb, src.ndim)))
            src = src.permute(*order)
        src = src.reshape(self.linear.numel(), *self.rest_sizes)
        new = self.flat._index_copy(0, self.linear, src)
        inverse = [0] * len(self.perm)
        for i, p in enumerate(self.perm):
            inverse[p] = i
        return new.reshape(*self.sizes, *self.rest_sizes).permute(*inverse)


    def add(self, src):
        """view with src (already of result_shape) added at the indexed places; an index that
        appears several times adds each of its values (index_put with accumulate=True)."""
        nb = len(self.shape)
        if self.at:
            order = (list(range(self.at, self.at + nb)) + list(range(self.at)) +
                     list(range(self.at + nb, src.ndim)))
            src = src.permute(*order)
        src = src.reshape(self.linear.numel(), *self.rest_sizes)
        index = self.linear.reshape(-1, *([1] * len(self.rest_sizes))).expand(*src.shape)
        new = _C.scatter_add(self.flat, 0, index, src)
        inverse = [0] * len(self.perm)
        for i, p in enumerate(self.perm):
            inverse[p] = i
        return new.reshape(*self.sizes, *self.rest_sizes).permute(*inverse)


def _broadcast_value(value, shape, dtype):
    """value (cast to dtype) broadcast to `shape`, as PyTorch's index_put_: leading dims of size 1
    are dropped first; anything else that does not broadcast raises, naming both shapes."""
    vshape = tuple(value.shape)
    while len(vshape) > len(shape) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        ok = len(vshape) <= len(shape) and np.broadcast_shapes(vshape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                         f"broadcast to indexing result of shape {list(shape)}")
    return value.to(dtype).reshape(*vshape).broadcast_to(tuple(shape))


@user_op("x[index]")
def getitem(self, key):
    view, advanced = _parse(self, key)
    if not advanced:
        return view
    if len(advanced) > 1:
        return _Advanced(view, advanced, "x[index]").get()
    dim, idx = advanced[0]
    if idx.dtype == _C.dtype.bool:
        # A bool mask: the result's size depends on the values (a cut).
        _check_mask(view, dim, idx)
        lead, rest = view.shape[:dim], view.shape[dim + idx.ndim:]
        flat = view.reshape(*lead, math.prod(idx.shape), *rest)
        return flat.index_select(dim, _flat_positions(idx))
    idx = _wrapped(view, dim, idx, "x[index]")
    picked = view.index_select(dim, idx.reshape(-1))
    if idx.ndim == 1:
        return picked
    return picked.reshape(*view.shape[:dim], *idx.shape, *view.shape[dim + 1:])


def _set_masked(view, dim, mask, value):
    """view[..., mask, ...] = value for one mask at `dim`."""
    _check_mask(view, dim, mask)
    lead, rest = tuple(view.shape[:dim]), tuple(view.shape[dim + mask.ndim:])
    vshape = tuple(value.shape)
    while len(vshape) > len(rest) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        fits_rest = len(vshape) <= len(rest) and np.broadcast_shapes(vshape, rest) == rest
    except ValueError:
        fits_rest = False
    if fits_rest:
        # The value does not depend on how many elements are selected: no cut.
        m = mask.reshape(*mask.shape, *([1] * len(rest)))
        src = value.to(view.dtype).reshape(*vshape)
        view.copy_(_C.where(m, src, view))
        return
    positions = _flat_positions(mask)  # the value is laid out in mask order: read the mask
    src = _broadcast_value(value, lead + (positions.numel(),) + rest, view.dtype)
    flat = view.reshape(*lead, math.prod(mask.shape), *rest)
    view.copy_(flat._index_copy(dim, positions, src).reshape(*view.shape))


@user_op("x[index] = value")
def setitem(self, key, value):
    if key is False:
        return  # as PyTorch: nothing is selected, and the value is not looked at
    if not isinstance(value, _C.Tensor):
        if not (isinstance(value, (numbers.Number, np.bool_, np.number)) or
                isinstance(value, np.ndarray) and value.ndim == 0):
            # As PyTorch: a list or array is not taken as a value (lz.tensor(value) is); a 0-d
            # array, which PyTorch refuses too, stays accepted as the number it holds.
            raise TypeError(f"x[index] = value: can't assign a {type(value).__name__} to a lazuli "
                            f"tensor; assign a tensor (lz.tensor(value)) or a number")
        value = _C._scalar_tensor(value, self.dtype)
    view, advanced = _parse(self, key)
    if not advanced:
        view.copy_(value)
        return
    if len(advanced) > 1:
        adv = _Advanced(view, advanced, "x[index] = value")
        src = _broadcast_value(value, adv.result_shape, view.dtype)
        view.copy_(adv.put(src))
        return
    dim, idx = advanced[0]
    if idx.dtype == _C.dtype.bool:
        _set_masked(view, dim, idx, value)
        return
    idx = _wrapped(view, dim, idx, "x[index] = value")
    lead, rest = tuple(view.shape[:dim]), tuple(view.shape[dim + 1:])
    src = _broadcast_value(value, lead + tuple(idx.shape) + rest, view.dtype)
    src = src.reshape(*lead, idx.numel(), *rest)
    view.copy_(view._index_copy(dim, idx.reshape(-1), src))


def _index_put_key(indices, fn):
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{fn}(): argument 'indices' must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    key = []
    for i, t in enumerate(indices):
        if t is None:
            key.append(slice(None))  # as PyTorch: no index for this dim
        elif isinstance(t, _C.Tensor):
            key.append(t)
        else:
            raise TypeError(f"{fn}(): argument 'indices' must be tuple of Tensors, but element {i} "
                            f"is {type(t).__name__}")
    return tuple(key)


def _index_put_into(target, indices, values, accumulate, fn):
    """target[indices] = values (or += with accumulate), in place, with PyTorch's index_put
    rules: indices is a tuple of index tensors (None: the whole dim), broadcast together."""
    key = _index_put_key(indices, fn)
    if not isinstance(values, _C.Tensor):
        raise TypeError(f"{fn}(): argument 'values' must be Tensor, not {type(values).__name__}")
    if len(key) > target.ndim:
        raise IndexError(f"{fn}(): too many indices for tensor of dimension {target.ndim} (got "
                         f"{len(key)})")
    if not accumulate:
        setitem(target, key, values)
        return target
    view, advanced = _parse(target, key)
    if not advanced:
        view.copy_(view + _broadcast_value(values, tuple(view.shape), view.dtype))
        return target
    adv = _Advanced(view, advanced, fn)
    src = _broadcast_value(values, adv.result_shape, view.dtype)
    view.copy_(adv.add(src))
    return target


@user_op("index_put_")
def index_put_(self, indices, values, accumulate=False):
    """self[indices] = values in place, or self[indices] += values with accumulate=True, where
    an index repeated adds every one of its values (torch.Tensor.index_put_). indices: a tuple
    of index tensors (integer or bool); None for a whole dim is accepted too, as aten.index_put
    takes it (torch.Tensor.index_put_ refuses it)."""
    return _index_put_into(self, indices, values, accumulate, "index_put_")


@user_op("index_put")
def index_put(self, indices, values, accumulate=False):
    """The out-of-place index_put_: a copy of self with the values put (or added) there."""
    if not isinstance(self, _C.Tensor):
        raise TypeError(f"index_put(): argument 'input' must be Tensor, not {type(self).__name__}")
    return _index_put_into(self.clone(), indices, values, accumulate, "index_put")
