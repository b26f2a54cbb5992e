"""Lowering entries: views, joins, indexing, creation and copies (part of the table in lowering.py).

Functionalized graphs (aot_autograd, make_fx of a functionalized function) have no in-place or out=
variants; views stay as view ops (view, permute, slice...) and become Lazuli's views or reshapes,
which record no data movement until something reads them.
"""
import torch

import lazuli as lz

from .lowering import ALL, INTS, TORCH_TO_LZ, aten, cast, lower, promote, torch_dtype


def _norm_dim(d, ndim):
    return d + max(ndim, 1) if d < 0 else d


def _factory_when(*args, dtype=None, layout=None, device=None, pin_memory=None,
                  memory_format=None, **kwargs):
    """Conditions shared by the creation ops and _to_copy: a Lazuli dtype on the CPU, strided."""
    if dtype is not None and dtype not in TORCH_TO_LZ:
        return f"dtype {str(dtype).replace('torch.', '')} not supported"
    if layout not in (None, torch.strided):
        return f"layout {layout}"
    if device is not None and torch.device(device).type not in ("cpu", "meta"):
        return f"device {device}"
    if pin_memory:
        return "pin_memory"
    return None


def _fill_dtype(value, dtype):
    if dtype is not None:
        return dtype
    if isinstance(value, bool):
        return torch.bool
    return torch.int64 if isinstance(value, int) else torch.get_default_dtype()


# ---- views and reshapes ----------------------------------------------------------------------

def _resolve_shape(x, shape):
    shape = [int(s) for s in shape]
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape[shape.index(-1)] = x.numel() // known if known else 0
    return tuple(shape)


@lower(aten.view.default, aten._unsafe_view.default, aten.reshape.default, dtypes=ALL)
def _view(a, shape):
    return lz.reshape(a, _resolve_shape(a, shape))


@lower(aten.t.default, dtypes=ALL)
def _t(a):
    return a if a.ndim < 2 else lz.transpose(a, 0, 1)


@lower(aten.transpose.int, dtypes=ALL)
def _transpose(a, dim0, dim1):
    return a if a.ndim < 2 else lz.transpose(a, dim0, dim1)


@lower(aten.permute.default, dtypes=ALL)
def _permute(a, dims):
    return a if a.ndim == 0 else lz.permute(a, tuple(dims))


@lower(aten.expand.default, dtypes=ALL)
def _expand(a, size, *, implicit=False):
    size = list(size)
    lead = len(size) - a.ndim
    for i in range(lead, len(size)):
        if size[i] == -1:
            size[i] = a.shape[i - lead]
    return lz.broadcast_to(a, tuple(int(s) for s in size))


def _squeezed(a, dims):
    dims = {_norm_dim(d, a.ndim) for d in dims}
    return tuple(s for i, s in enumerate(a.shape) if not (i in dims and s == 1))


@lower(aten.squeeze.default, dtypes=ALL)
def _squeeze(a):
    return lz.reshape(a, tuple(s for s in a.shape if s != 1))


@lower(aten.squeeze.dim, dtypes=ALL)
def _squeeze_dim(a, dim):
    return lz.reshape(a, _squeezed(a, [dim]))


@lower(aten.squeeze.dims, dtypes=ALL)
def _squeeze_dims(a, dim):
    return lz.reshape(a, _squeezed(a, dim))


@lower(aten.unsqueeze.default, dtypes=ALL)
def _unsqueeze(a, dim):
    return lz.unsqueeze(a, dim + a.ndim + 1 if dim < 0 else dim)


@lower(aten.alias.default, dtypes=ALL)
def _alias(a):
    return a


@lower(aten.clone.default, aten.lift_fresh_copy.default, dtypes=ALL)
def _clone(a, *, memory_format=None):
    return a.clone()


def _to_copy_when(a, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
                  memory_format=None):
    return _factory_when(dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)


@lower(aten._to_copy.default, dtypes=ALL, when=_to_copy_when,
       note="to a Lazuli dtype on the CPU; float to int truncates")
def _to_copy(a, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    return a.clone() if dtype is None or dtype == torch_dtype(a) else a.to(TORCH_TO_LZ[dtype])


@lower(aten.copy.default, dtypes=ALL, note="src cast to self's dtype and broadcast to its shape")
def _copy(a, src, non_blocking=False):
    return lz.broadcast_to(cast(src, torch_dtype(a)), tuple(a.shape)).clone()


@lower(aten.copy_.default, dtypes=ALL,
       note="an input updated in place (aot_autograd's keep_inference_input_mutations): the "
            "partition writes its new value into the input's memory; joins a partition only "
            "where the whole graph lowers")
def _copy_(a, src, non_blocking=False):
    # The stand-in takes the new value as its IR; the bridge makes it a program output donated
    # into the input's memory (_bridge.py, writebacks).
    a.copy_(lz.broadcast_to(cast(src, torch_dtype(a)), tuple(a.shape)))
    return a


def _slice_bounds(a, dim, start, end, step):
    size = a.shape[_norm_dim(dim, a.ndim)]
    return slice(start, end, step).indices(size)


def _slice_when(a, dim=0, start=None, end=None, step=1):
    return None if step > 0 else f"step {step}"


@lower(aten.slice.Tensor, dtypes=ALL, when=_slice_when)
def _slice(a, dim=0, start=None, end=None, step=1):
    start, end, step = _slice_bounds(a, dim, start, end, step)
    return a._slice(dim, start, max(start, end), step)


@lower(aten.select.int, dtypes=ALL)
def _select(a, dim, index):
    size = a.shape[_norm_dim(dim, a.ndim)]
    return a.select(dim, index + size if index < 0 else index)


def _slice_scatter_when(a, src, dim=0, start=None, end=None, step=1):
    return _slice_when(a, dim, start, end, step)


@lower(aten.slice_scatter.default, dtypes=ALL, when=_slice_scatter_when)
def _slice_scatter(a, src, dim=0, start=None, end=None, step=1):
    start, end, step = _slice_bounds(a, dim, start, end, step)
    out = a.clone()
    out._slice(dim, start, max(start, end), step).copy_(src.to(a.dtype))
    return out


@lower(aten.select_scatter.default, dtypes=ALL)
def _select_scatter(a, src, dim, index):
    size = a.shape[_norm_dim(dim, a.ndim)]
    out = a.clone()
    out.select(dim, index + size if index < 0 else index).copy_(src.to(a.dtype))
    return out


# ---- joins and splits ------------------------------------------------------------------------

@lower(aten.cat.default, dtypes=ALL, note="dtypes promote; legacy 1-D empty tensors are skipped")
def _cat(tensors, dim=0):
    dt = promote(*[t for t in tensors if t.ndim > 0]) or torch_dtype(tensors[0])
    keep = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not keep:
        return cast(tensors[0], dt).clone()
    keep = [cast(t, dt) for t in keep]
    return keep[0].clone() if len(keep) == 1 else lz.cat(keep, _norm_dim(dim, keep[0].ndim))


@lower(aten.split_with_sizes.default, dtypes=ALL)
def _split_with_sizes(a, split_sizes, dim=0):
    return tuple(lz.split(a, [int(s) for s in split_sizes], dim))


@lower(aten.split.Tensor, dtypes=ALL)
def _split(a, split_size, dim=0):
    return tuple(lz.split(a, int(split_size), dim))


@lower(aten.repeat.default, dtypes=ALL)
def _repeat(a, repeats):
    repeats = [int(r) for r in repeats]
    shape = (1,) * (len(repeats) - a.ndim) + tuple(a.shape)
    x = lz.reshape(a, tuple(i for s in shape for i in (1, s)))
    x = lz.broadcast_to(x, tuple(i for r, s in zip(repeats, shape) for i in (r, s)))
    return lz.reshape(x, tuple(r * s for r, s in zip(repeats, shape)))


@lower(aten.flip.default, dtypes=ALL)
def _flip(a, dims):
    for d in dims:
        n = a.shape[_norm_dim(d, a.ndim)]
        if n > 1:
            a = lz.index_select(a, d, lz.arange(n - 1, -1, -1, dtype=lz.int64))
    return a.clone()


@lower(aten.constant_pad_nd.default, dtypes=ALL)
def _constant_pad_nd(a, pad, value=0):
    x = a
    for i in range(len(pad) // 2):
        d = a.ndim - 1 - i
        lo, hi = int(pad[2 * i]), int(pad[2 * i + 1])
        if lo < 0 or hi < 0:
            size = x.shape[d]
            x = x._slice(d, max(-lo, 0), max(size - max(-hi, 0), max(-lo, 0)), 1)
        parts = []
        for n in (max(lo, 0), None, max(hi, 0)):
            if n is None:
                parts.append(x)
            elif n:
                shape = list(x.shape)
                shape[d] = n
                parts.append(lz.full(tuple(shape), value, dtype=x.dtype))
        if len(parts) > 1:
            x = lz.cat(parts, d)
    return x.clone()


# ---- indexing with tensors -------------------------------------------------------------------

def _as_index(idx, size=None):
    idx = idx if idx.dtype == lz.int64 else idx.to(lz.int64)
    if size is not None:
        idx = lz.where(idx < 0, idx + size, idx)  # negative indices count from the end
    return idx


@lower(aten.index_select.default, dtypes=ALL)
def _index_select(a, dim, index):
    index = _as_index(index)
    if a.ndim == 0:
        return lz.index_select(a.reshape(1), 0, index.reshape(-1)).reshape(())
    return lz.index_select(a, dim, index.reshape(-1))


def _gather_when(a, dim, index, *, sparse_grad=False):
    return "sparse_grad" if sparse_grad else None


@lower(aten.gather.default, dtypes=ALL, when=_gather_when)
def _gather(a, dim, index, *, sparse_grad=False):
    if a.ndim == 0:
        return lz.broadcast_to(a, tuple(index.shape)).clone()
    dim = _norm_dim(dim, a.ndim)
    for d in range(a.ndim):
        if d != dim and index.shape[d] < a.shape[d]:
            a = a._slice(d, 0, index.shape[d], 1)
    return lz.gather(a, dim, _as_index(index))


def _scatter_mask(a, dim, index):
    if index.numel() == 0:
        return lz.zeros(*a.shape, dtype=lz.bool)
    hits = lz.scatter_add(lz.zeros(*a.shape, dtype=lz.int64), dim, _as_index(index),
                          lz.ones(*index.shape, dtype=lz.int64))
    return hits > 0


@lower(aten.scatter.value, dtypes=ALL, note="every indexed element takes the value")
def _scatter_value(a, dim, index, value):
    if a.ndim == 0:
        return lz.where(_scatter_mask(a.reshape(1), 0, index.reshape(-1)).reshape(()),
                        cast(value, torch_dtype(a)), a)
    return lz.where(_scatter_mask(a, _norm_dim(dim, a.ndim), index), cast(value, torch_dtype(a)), a)


@lower(aten.scatter_add.default, dtypes=ALL)
def _scatter_add(a, dim, index, src):
    if index.numel() == 0:
        return a.clone()
    dim = _norm_dim(dim, a.ndim)
    for d in range(src.ndim):
        if index.shape[d] < src.shape[d]:
            src = src._slice(d, 0, index.shape[d], 1)
    return lz.scatter_add(a, dim, _as_index(index), src)


def _one_index(indices):
    """(position, tensor) of the single index tensor of an `indices` list."""
    return next((i, t) for i, t in enumerate(indices) if t is not None)


def _index_when(a, indices, *args):
    present = [t for t in indices if t is not None]
    if not present:
        return "no index tensor"
    for t in present:
        if t.dtype not in INTS:
            return f"a {str(t.dtype).replace('torch.', '')} index (data-dependent shape)"
    return None


def _key(indices):
    """aten's indices (None: a whole dim) as a Python indexing key, whose rules are PyTorch's:
    several index tensors broadcast together, their result dims in place when adjacent, else
    first (src/ops/tensor_indexing.cpp)."""
    return tuple(slice(None) if t is None else t for t in indices)


@lower(aten.index.Tensor, dtypes=ALL, when=_index_when, note="integer index tensors")
def _index(a, indices):
    if sum(t is not None for t in indices) > 1:
        return a[_key(indices)]
    pos, idx = _one_index(indices)
    size = a.shape[pos]
    flat = _as_index(idx, size).reshape(-1)
    out = lz.index_select(a, pos, flat)
    return out.reshape(*(tuple(a.shape[:pos]) + tuple(idx.shape) + tuple(a.shape[pos + 1:])))


def _index_put_when(a, indices, values, accumulate=False):
    r = _index_when(a, indices)
    if r is not None:
        return r
    if not accumulate:
        return "accumulate=False (duplicate indices are unordered in eager)"
    return None


@lower(aten.index_put.default, dtypes=ALL, when=_index_put_when,
       note="integer index tensors, accumulate=True")
def _index_put(a, indices, values, accumulate=False):
    if sum(t is not None for t in indices) > 1:
        if torch_dtype(a) == torch.bool:  # accumulate on bool is "or"
            hits = lz.index_put(lz.zeros(*a.shape, dtype=lz.int64), tuple(indices),
                                cast(values, torch.int64), accumulate=True)
            return lz.logical_or(a, hits > 0)
        return lz.index_put(a, tuple(indices), cast(values, torch_dtype(a)), accumulate=True)
    pos, idx = _one_index(indices)
    size = a.shape[pos]
    flat = _as_index(idx, size).reshape(-1)
    n = flat.shape[0]
    target = tuple(a.shape[:pos]) + tuple(idx.shape) + tuple(a.shape[pos + 1:])
    vals = lz.broadcast_to(cast(values, torch_dtype(a)), target)
    vals = vals.reshape(*(tuple(a.shape[:pos]) + (n,) + tuple(a.shape[pos + 1:])))
    if n == 0:
        return a.clone()
    shape = [1] * a.ndim
    shape[pos] = n
    full_index = lz.broadcast_to(flat.reshape(*shape), tuple(vals.shape))
    if torch_dtype(a) == torch.bool:
        hits = lz.scatter_add(lz.zeros(*a.shape, dtype=lz.int64), pos, full_index,
                              vals.to(lz.int64))
        return lz.logical_or(a, hits > 0)
    return lz.scatter_add(a, pos, full_index, vals)


@lower(aten.embedding.default, dtypes=ALL)
def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    flat = _as_index(indices).reshape(-1)
    return lz.index_select(weight, 0, flat).reshape(*(tuple(indices.shape) + (weight.shape[1],)))


# ---- creation --------------------------------------------------------------------------------

@lower(aten.full.default, dtypes=ALL, when=_factory_when)
def _full(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    dt = _fill_dtype(fill_value, dtype)
    return lz.full(tuple(int(s) for s in size), cast(fill_value, dt), dtype=TORCH_TO_LZ[dt])


@lower(aten.full_like.default, dtypes=ALL, when=_factory_when)
def _full_like(a, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None,
               memory_format=None):
    dt = dtype or torch_dtype(a)
    return lz.full(tuple(a.shape), cast(fill_value, dt), dtype=TORCH_TO_LZ[dt])


@lower(aten.empty.memory_format, dtypes=ALL, when=_factory_when, note="zero-filled")
def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dt = dtype or torch.get_default_dtype()
    return lz.zeros(tuple(int(s) for s in size), dtype=TORCH_TO_LZ[dt])


@lower(aten.empty_permuted.default, dtypes=ALL, when=_factory_when, note="zero-filled")
def _empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                    pin_memory=None):
    return _empty(size, dtype=dtype)


@lower(aten.empty_like.default, dtypes=ALL, when=_factory_when, note="zero-filled")
def _empty_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dt = dtype or torch_dtype(a)
    return lz.zeros(tuple(a.shape), dtype=TORCH_TO_LZ[dt])


@lower(aten.scalar_tensor.default, dtypes=ALL, when=_factory_when)
def _scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    dt = dtype or torch.get_default_dtype()
    return lz.full((), cast(s, dt), dtype=TORCH_TO_LZ[dt])


def _arange_dtype(dtype, *values):
    if dtype is not None:
        return dtype
    if all(isinstance(v, int) for v in values):
        return torch.int64
    return torch.get_default_dtype()


def _arange_when(*args, dtype=None, layout=None, device=None, pin_memory=None):
    r = _factory_when(dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)
    if r is None and _arange_dtype(dtype, *args) == torch.bool:
        return "bool arange"
    return r


@lower(aten.arange.start_step, dtypes=ALL, when=_arange_when)
def _arange(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    dt = _arange_dtype(dtype, start, end, step)
    return lz.arange(start, end, step, dtype=TORCH_TO_LZ[dt])


@lower(aten.arange.default, dtypes=ALL, when=_arange_when)
def _arange_end(end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _arange(0, end, 1, dtype=dtype)


@lower(aten.arange.start, dtypes=ALL, when=_arange_when)
def _arange_start(start, end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _arange(start, end, 1, dtype=dtype)


@lower(aten.fill.Scalar, dtypes=ALL)
def _fill(a, value):
    return lz.full(tuple(a.shape), cast(value, torch_dtype(a)), dtype=a.dtype)


@lower(aten.fill.Tensor, dtypes=ALL)
def _fill_tensor(a, value):
    return lz.broadcast_to(value.to(a.dtype), tuple(a.shape)).clone()


@lower(aten.sym_size.int, dtypes=ALL)
def _sym_size(a, dim):
    return int(a.shape[dim])
