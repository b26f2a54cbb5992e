"""any/all (bool max/min) on the cpu backend are compiled reductions, an or/and fold with their
elementwise producers fused in, not reference kernels: rows, columns, whole tensors and empty
dims give numpy's answers and `fallback::reduce_max` / `fallback::reduce_min` stay 0."""
import numpy as np
import pytest

import lazuli as lz

from conftest import counter

pytestmark = pytest.mark.skipif(lz.backend() != "cpu",
                                reason="tests the cpu backend (LAZULI_BACKEND=cpu, the default)")


def _no_fallback():
    assert counter("fallback::reduce_max") == 0
    assert counter("fallback::reduce_min") == 0


@pytest.mark.parametrize("dim", [0, 1, None])
def test_any_and_all_of_a_fused_comparison_match_numpy(dim):
    rng = np.random.default_rng(0)
    a = rng.random((300, 1000)).astype(np.float32)
    a[17, :] = 0.0   # a row with no True
    a[:, 5] = 1.0    # a column all True
    x = lz.tensor(a)
    for threshold in (0.5, 0.9995):
        mask = x > threshold
        got_any = (lz.any(mask) if dim is None else mask.any(dim)).numpy()
        got_all = (lz.all(mask) if dim is None else mask.all(dim)).numpy()
        want = a > threshold
        np.testing.assert_array_equal(got_any, want.any() if dim is None else want.any(dim))
        np.testing.assert_array_equal(got_all, want.all() if dim is None else want.all(dim))
    _no_fallback()


def test_any_and_all_over_an_empty_dim_are_false_and_true():
    x = lz.tensor(np.zeros((0, 4), dtype=bool))
    np.testing.assert_array_equal(x.any(0).numpy(), np.zeros(4, dtype=bool))
    np.testing.assert_array_equal(x.all(0).numpy(), np.ones(4, dtype=bool))


def test_a_bool_max_over_several_dims_agrees_with_the_reference_backend():
    rng = np.random.default_rng(1)
    a = rng.random((6, 7, 8)) > 0.8
    got = lz.amax(lz.tensor(a), (0, 2)).numpy()
    np.testing.assert_array_equal(got, a.max((0, 2)))
    got = lz.amin(lz.tensor(a), (1, 2)).numpy()
    np.testing.assert_array_equal(got, a.min((1, 2)))
    _no_fallback()
