"""lz.linalg: PyTorch's torch.linalg norms (src/ops/linalg_norms.cpp).

- ``vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None)``: any ord (inf, -inf, 0 too).
- ``matrix_norm(A, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None)``: 'fro', 1, -1, inf,
  -inf ('nuc', 2 and -2 need singular values, which Lazuli does not compute: ValueError).
- ``norm(A, ord=None, dim=None, keepdim=False, *, dtype=None)``: a vector or a matrix norm as
  torch.linalg.norm chooses.

A zero norm has gradient 0, as in PyTorch.
"""
from ._C import _linalg

vector_norm = _linalg.vector_norm
matrix_norm = _linalg.matrix_norm
norm = _linalg.norm

__all__ = ["vector_norm", "matrix_norm", "norm"]
