"""sort, argsort, msort and topk against numpy's stable sort: values, indices, dtypes, NaN last,
equal elements in input order, the named tuples PyTorch returns, and bad arguments."""
import numpy as np
import pytest

import lazuli as lz
from conftest import raises_without_leak


def _np_sort(a, dim, descending):
    """numpy's stable sort along dim; descending keeps ties in input order (and NaN first), as
    torch.sort(stable=True) does: a stable sort of the negated keys, with NaN as the largest."""
    if not descending:
        idx = np.argsort(a, axis=dim, kind="stable")
    elif a.dtype == np.bool_:
        idx = np.argsort(~a, axis=dim, kind="stable")
    else:
        key = -a.astype(np.float64)
        key = np.where(np.isnan(key), -np.inf, key)
        idx = np.argsort(key, axis=dim, kind="stable")
    return np.take_along_axis(a, idx, axis=dim), idx


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_numpys_stable_sort(backend, rng, dtype, dim, descending):
    if dtype == "bool":
        a = rng.random((5, 7)) < 0.5
    else:
        a = rng.integers(-3, 4, (5, 7)).astype(dtype)  # ties everywhere
    if dtype.startswith("float"):
        a[1, 2] = np.nan
    values, indices = lz.sort(lz.tensor(a), dim, descending)
    want_v, want_i = _np_sort(a, dim, descending)
    assert values.dtype == lz.tensor(a).dtype and indices.dtype == lz.int64
    np.testing.assert_array_equal(values.numpy(), want_v)
    np.testing.assert_array_equal(indices.numpy(), want_i)


def test_sort_returns_the_named_tuple_and_methods_agree(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    t = lz.tensor(a)
    r = t.sort(dim=0, descending=True)
    assert type(r).__name__ == "sort" and isinstance(r, lz.return_types.sort)
    v, i = r
    np.testing.assert_array_equal(r.values.numpy(), v.numpy())
    np.testing.assert_array_equal(lz.argsort(t, 0, True).numpy(), i.numpy())
    np.testing.assert_array_equal(t.argsort(dim=1).numpy(), np.argsort(a, axis=1, kind="stable"))
    np.testing.assert_array_equal(lz.msort(t).numpy(), np.sort(a, axis=0))
    np.testing.assert_array_equal(lz.sort(t, stable=True).values.numpy(), np.sort(a, axis=-1))


def test_topk_gives_the_k_largest_or_smallest_in_order(backend, rng):
    a = rng.permutation(40).reshape(5, 8).astype(np.float32)  # distinct: one right answer
    r = lz.topk(lz.tensor(a), 3)
    assert type(r).__name__ == "topk"
    want_i = np.argsort(-a, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(r.indices.numpy(), want_i)
    np.testing.assert_array_equal(r.values.numpy(), np.take_along_axis(a, want_i, 1))
    small = lz.tensor(a).topk(2, dim=0, largest=False)
    np.testing.assert_array_equal(small.values.numpy(), np.sort(a, axis=0)[:2])


def test_sort_gradient_reaches_where_each_value_came_from(backend):
    x = lz.tensor([[0.5, -2.0, 3.0], [1.0, 4.0, 0.0]])
    x.requires_grad_()
    v, _ = lz.sort(x, 1, True)
    (v * lz.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2.0, 3.0, 1.0], [5.0, 4.0, 6.0]])


def test_sort_and_topk_bad_arguments_record_nothing():
    t = lz.tensor([[1.0, 2.0], [3.0, 4.0]])
    raises_without_leak(IndexError, lambda: lz.sort(t, 2), "sort")
    raises_without_leak(IndexError, lambda: lz.topk(t, 3), "topk", "k=3", "size 2")
    raises_without_leak(IndexError, lambda: lz.topk(t, -1), "topk")
