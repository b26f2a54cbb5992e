"""Lowering entries: reductions, softmax, normalization and matrix products (part of the table in
lowering.py).

ATen's reductions take `dim` as None, an int or a list, where an empty list means every dim (sum,
amax); a zero-dim tensor accepts dim 0 or -1. `_dims` maps all of these onto Lazuli's None / tuple.
"""
import torch

import lazuli as lz

from .lowering import ALL, NUMBERS, TORCH_TO_LZ, aten, cast, lower


def _dims(x, dim):
    if dim is None or x.ndim == 0:
        return None
    if isinstance(dim, int):
        return (dim,)
    return tuple(dim) if len(dim) else None


def _dtype_when(a, *args, dtype=None, **kwargs):
    return None if dtype is None or dtype in TORCH_TO_LZ else f"dtype={dtype}"


def _with_dtype(a, dtype):
    return a if dtype is None else cast(a, dtype)


@lower(aten.sum.default, dtypes=ALL, when=_dtype_when, note="bool and integers sum in int64")
def _sum(a, *, dtype=None):
    return lz.sum(_with_dtype(a, dtype))


@lower(aten.sum.dim_IntList, dtypes=ALL, when=_dtype_when, note="bool and integers sum in int64")
def _sum_dim(a, dim, keepdim=False, *, dtype=None):
    return lz.sum(_with_dtype(a, dtype), _dims(a, dim), keepdim)


def _mean_when(a, *args, dtype=None, **kwargs):
    dt = dtype or a.dtype
    if not dt.is_floating_point or dt not in TORCH_TO_LZ:
        return f"mean in {dt}"
    return None


@lower(aten.mean.default, dtypes=ALL, when=_mean_when, note="float result dtype")
def _mean(a, *, dtype=None):
    return lz.mean(_with_dtype(a, dtype))


@lower(aten.mean.dim, dtypes=ALL, when=_mean_when, note="float result dtype")
def _mean_dim(a, dim, keepdim=False, *, dtype=None):
    return lz.mean(_with_dtype(a, dtype), _dims(a, dim), keepdim)


@lower(aten.prod.default, dtypes=ALL, when=_dtype_when)
def _prod(a, *, dtype=None):
    return lz.prod(_with_dtype(a, dtype))


@lower(aten.prod.dim_int, dtypes=ALL, when=_dtype_when)
def _prod_dim(a, dim, keepdim=False, *, dtype=None):
    return lz.prod(_with_dtype(a, dtype), _dims(a, dim), keepdim)


@lower(aten.amax.default, dtypes=ALL, note="NaN propagates")
def _amax(a, dim=(), keepdim=False):
    return lz.amax(a, _dims(a, dim), keepdim)


@lower(aten.amin.default, dtypes=ALL, note="NaN propagates")
def _amin(a, dim=(), keepdim=False):
    return lz.amin(a, _dims(a, dim), keepdim)


@lower(aten.max.default, dtypes=ALL, note="NaN propagates")
def _max(a):
    return lz.amax(a)


@lower(aten.min.default, dtypes=ALL, note="NaN propagates")
def _min(a):
    return lz.amin(a)


@lower(aten.max.dim, dtypes=ALL, note="(values, indices); the first index of the maximum")
def _max_dim(a, dim, keepdim=False):
    if a.ndim == 0:
        return a.add(0), lz.zeros(dtype=lz.int64)
    return tuple(lz.max(a, dim, keepdim))


@lower(aten.min.dim, dtypes=ALL, note="(values, indices); the first index of the minimum")
def _min_dim(a, dim, keepdim=False):
    if a.ndim == 0:
        return a.add(0), lz.zeros(dtype=lz.int64)
    return tuple(lz.min(a, dim, keepdim))


@lower(aten.argmax.default, dtypes=NUMBERS, note="the first index of the maximum")
def _argmax(a, dim=None, keepdim=False):
    if a.ndim == 0:
        return lz.zeros(dtype=lz.int64)
    if dim is None and keepdim:
        return lz.argmax(a.reshape(-1), 0, False).reshape(*([1] * a.ndim))
    return lz.argmax(a, dim, keepdim)


@lower(aten.argmin.default, dtypes=NUMBERS, note="the first index of the minimum")
def _argmin(a, dim=None, keepdim=False):
    if a.ndim == 0:
        return lz.zeros(dtype=lz.int64)
    if dim is None and keepdim:
        return lz.argmin(a.reshape(-1), 0, False).reshape(*([1] * a.ndim))
    return lz.argmin(a, dim, keepdim)


def _var_when(a, dim=None, *, correction=None, keepdim=False):
    if correction is not None and not (isinstance(correction, int) or float(correction).is_integer()):
        return f"a fractional correction ({correction})"
    return None


@lower(aten.var.correction, when=_var_when, note="integer corrections")
def _var(a, dim=None, *, correction=None, keepdim=False):
    c = 1 if correction is None else int(correction)
    return lz.var(a, _dims(a, dim), correction=c, keepdim=keepdim)


@lower(aten.var_mean.correction, when=_var_when, note="integer corrections")
def _var_mean(a, dim=None, *, correction=None, keepdim=False):
    return _var(a, dim, correction=correction, keepdim=keepdim), lz.mean(a, _dims(a, dim), keepdim)


@lower(aten.all.default, dtypes=ALL)
def _all(a):
    return lz.all(a)


@lower(aten.all.dim, aten.all.dims, dtypes=ALL)
def _all_dim(a, dim=None, keepdim=False):
    return lz.all(a, _dims(a, dim), keepdim)


@lower(aten.any.default, dtypes=ALL)
def _any(a):
    return lz.any(a)


@lower(aten.any.dim, aten.any.dims, dtypes=ALL)
def _any_dim(a, dim=None, keepdim=False):
    return lz.any(a, _dims(a, dim), keepdim)


def _softmax_when(a, dim, half_to_float):
    return "half_to_float" if half_to_float else None


def _shifted(a, dim):
    if a.ndim == 0:
        return lz.sub(a, a)
    return lz.sub(a, lz.amax(a, dim, True))


@lower(aten._softmax.default, when=_softmax_when, note="exp(x - max) / sum")
def _softmax(a, dim, half_to_float=False):
    e = lz.exp(_shifted(a, dim))
    return lz.div(e, e if a.ndim == 0 else lz.sum(e, dim, True))


@lower(aten._log_softmax.default, when=_softmax_when, note="(x - max) - log(sum(exp(x - max)))")
def _log_softmax(a, dim, half_to_float=False):
    s = _shifted(a, dim)
    return lz.sub(s, lz.log(lz.exp(s) if a.ndim == 0 else lz.sum(lz.exp(s), dim, True)))


@lower(aten.logsumexp.default, note="max + log(sum(exp(x - max))); all -inf gives -inf")
def _logsumexp(a, dim, keepdim=False):
    return lz.logsumexp(a, _dims(a, dim), keepdim)


@lower(aten.native_layer_norm.default, note="(out, mean, rstd); biased variance")
def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    if not dims:
        mean = lz.add(x, 0.0)
    else:
        mean = lz.mean(x, dims, True)
    centered = lz.sub(x, mean)
    var = lz.mean(lz.mul(centered, centered), dims, True) if dims else lz.mul(centered, 0.0)
    rstd = lz.rsqrt(lz.add(var, float(eps)))
    out = lz.mul(centered, rstd)
    if weight is not None:
        out = lz.mul(out, weight)
    if bias is not None:
        out = lz.add(out, bias)
    return out, mean, rstd


# ---- matrix products -------------------------------------------------------------------------

@lower(aten.mm.default, dtypes=NUMBERS)
def _mm(a, b):
    return lz.matmul(a, b)


@lower(aten.bmm.default, dtypes=NUMBERS)
def _bmm(a, b):
    return lz.matmul(a, b)


@lower(aten.addmm.default, dtypes=NUMBERS, note="beta == 0 ignores the bias (NaN included), as eager")
def _addmm(bias, a, b, *, beta=1, alpha=1):
    p = lz.matmul(a, b)
    if alpha != 1:
        p = lz.mul(p, alpha)
    if beta == 0:
        return lz.broadcast_to(p, tuple(torch.broadcast_shapes(tuple(p.shape), tuple(bias.shape))))
    return lz.add(p, bias if beta == 1 else lz.mul(bias, beta))


@lower(aten.baddbmm.default, dtypes=NUMBERS, note="beta == 0 ignores the input (NaN included), as eager")
def _baddbmm(bias, a, b, *, beta=1, alpha=1):
    return _addmm(bias, a, b, beta=beta, alpha=alpha)


@lower(aten.dot.default)
def _dot(a, b):
    return lz.sum(lz.mul(a, b))


@lower(aten.mv.default)
def _mv(a, b):
    return lz.matmul(a, b)
