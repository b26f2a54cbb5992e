"""Lowering entries: the scans cumsum and cumprod (part of the table in lowering.py), onto
Lazuli's CumSum / CumProd primitives. Bool and integer inputs give int64 unless a dtype is asked
for, as in both libraries; a dtype casts the input first."""
import lazuli as lz

from .lowering import ALL, TORCH_TO_LZ, aten, lower


def _scan_when(a, dim, *, dtype=None):
    if dtype is not None and dtype not in TORCH_TO_LZ:
        return f"dtype={dtype}"
    return None


@lower(aten.cumsum.default, dtypes=ALL, when=_scan_when, note="bool and integers sum in int64")
def _cumsum(a, dim, *, dtype=None):
    return lz.cumsum(a, dim, dtype=None if dtype is None else TORCH_TO_LZ[dtype])


@lower(aten.cumprod.default, dtypes=ALL, when=_scan_when,
       note="bool and integers multiply in int64; the gradient at zeros as PyTorch's")
def _cumprod(a, dim, *, dtype=None):
    return lz.cumprod(a, dim, dtype=None if dtype is None else TORCH_TO_LZ[dtype])
