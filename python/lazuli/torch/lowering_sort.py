"""Lowering entries: sort and topk (part of the table in lowering.py), through Lazuli's Sort
primitive (values and int64 indices, one multi-output node). Lazuli's sort is always stable, which
is one of the orders PyTorch allows for stable=False, and the one it gives on the CPU."""
import lazuli as lz

from .lowering import ALL, NUMBERS, aten, lower


@lower(aten.sort.default, dtypes=ALL, note="stable; NaN sorts last (first when descending)")
def _sort(a, dim=-1, descending=False):
    r = lz.sort(a, dim, descending)
    return r.values, r.indices


@lower(aten.sort.stable, dtypes=ALL, note="stable; NaN sorts last (first when descending)")
def _sort_stable(a, *, stable=None, dim=-1, descending=False):
    r = lz.sort(a, dim, descending, stable=bool(stable))
    return r.values, r.indices


@lower(aten.topk.default, dtypes=NUMBERS, note="sorted; ties keep input order")
def _topk(a, k, dim=-1, largest=True, sorted=True):  # noqa: A002 (ATen's argument name)
    r = lz.topk(a, k, dim, largest, sorted)
    return r.values, r.indices
