"""Values that must agree with PyTorch (the spec): argument readings, dtypes and lengths. Each
expected value is what PyTorch 2 gives for the same call, written out so no test needs torch."""
import math

import numpy as np
import pytest

import lazuli as lz
from conftest import raises_without_leak


# ---- var / std: PyTorch's (input, unbiased) overload -------------------------------------------

X = [1.0, 2.0, 4.0]


def test_var_reads_a_bool_second_argument_as_unbiased():
    x = lz.tensor(X)
    # torch.tensor([1., 2., 4.]).var(False), .var(True), .var(0)
    assert x.var(False).item() == pytest.approx(1.5555555820465088)
    assert x.var(True).item() == pytest.approx(2.3333332538604736)
    assert lz.var(x, False).item() == pytest.approx(1.5555555820465088)
    assert x.var(0).item() == pytest.approx(2.3333332538604736)  # an int is still a dim
    assert x.var(False).shape == ()


def test_std_reads_a_bool_second_argument_as_unbiased():
    x = lz.tensor(X)
    assert x.std(True).item() == pytest.approx(1.5275252316519468)
    assert x.std(False).item() == pytest.approx(math.sqrt(14 / 9))
    assert lz.std(x, True).item() == pytest.approx(1.5275252316519468)


def test_var_takes_pytorchs_positional_keepdim_and_correction():
    x = lz.tensor([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0]])
    v = x.var(1, False, True)  # dim, unbiased, keepdim as in torch's var(input, dim, unbiased, keepdim)
    assert v.shape == (2, 1)
    np.testing.assert_allclose(v.numpy().ravel(), [14 / 9, 2.0], rtol=1e-6)
    np.testing.assert_allclose(x.var(1, correction=0).numpy(), [14 / 9, 2.0], rtol=1e-6)
    np.testing.assert_allclose(x.var(1, keepdim=True).numpy().ravel(), [7 / 3, 3.0], rtol=1e-6)


def test_var_with_both_unbiased_and_correction_raises():
    x = lz.tensor(X)
    raises_without_leak(TypeError, lambda: x.var(0, True, correction=1), "var", "not both")
    raises_without_leak(TypeError, lambda: x.std(True, unbiased=True), "std", "unbiased")


# ---- clamp with nan bounds ----------------------------------------------------------------------

def test_clamp_with_a_nan_bound_is_nan_as_in_pytorch():
    # torch.tensor([1., 2.]).clamp(min=nan) and clamp(max=nan): tensor([nan, nan])
    assert np.isnan(lz.tensor([1.0, 2.0]).clamp(min=float("nan")).numpy()).all()
    assert np.isnan(lz.tensor([1.0, 2.0]).clamp(max=float("nan")).numpy()).all()
    # a nan input stays nan; the other element is clamped
    np.testing.assert_array_equal(lz.tensor([1.0, float("nan")]).clamp(0.0, 1.0).numpy(), [1.0, np.nan])
    # min > max: every element is max
    np.testing.assert_array_equal(lz.clamp(lz.tensor([0.5, 1.0, 3.0]), 2.0, 1.0).numpy(), [1, 1, 1])
    np.testing.assert_array_equal(lz.tensor([1, 5]).clamp(2, 3).numpy(), [2, 3])


# ---- arange with an integer dtype ---------------------------------------------------------------

def test_arange_with_an_int_dtype_has_pytorchs_length_and_values():
    # PyTorch 2: the length is ceil((end - start) / step) of the numbers as given, the values
    # start + i * step with start and step truncated to the dtype.
    cases = [
        ((0, 5.5), [0, 1, 2, 3, 4, 5]),
        ((0.5, 5), [0, 1, 2, 3, 4]),
        ((-2.5, 2.5), [-2, -1, 0, 1, 2]),
        ((0, 3, 0.5), [0, 0, 0, 0, 0, 0]),
    ]
    for args, want in cases:
        got = lz.arange(*args, dtype=lz.int64)
        assert got.dtype == lz.int64
        assert got.tolist() == want, args
    assert lz.arange(0, 5.5, dtype=lz.int32).tolist() == [0, 1, 2, 3, 4, 5]
    np.testing.assert_allclose(lz.arange(0, 2.5, 0.5).numpy(), [0, 0.5, 1, 1.5, 2])


# ---- tensor(): numpy scalars keep their dtype, as in torch.tensor --------------------------------

@pytest.mark.parametrize("data, dtype", [
    ([np.float64(1.5)], lz.float64),
    (np.float64(1.5), lz.float64),
    ([np.float32(1.5), 2.0], lz.float32),
    ([np.float64(1.5), 2.0], lz.float64),
    ([1.0, np.float64(1.5)], lz.float64),
    ([[np.float64(1.0)], [2.0]], lz.float64),
    ([np.float32(1.0), 2], lz.float32),
    ([np.int32(1)], lz.int32),
    ([np.int32(1), 2], lz.int64),
    ([np.int32(1), 2.5], lz.float32),
    ([np.int64(1), np.float32(2)], lz.float32),
    ([np.bool_(True)], lz.bool),
    ([True, 2], lz.int64),
    ([True, 2.0], lz.float32),
    ([np.array([1.0, 2.0]), np.array([3.0, 4.0])], lz.float64),
    ([1.5, 2.5], lz.float32),
    ([1, 2], lz.int64),
    ([], lz.float32),
    ([[], []], lz.float32),
    (1.5, lz.float32),
])
def test_tensor_infers_torch_tensors_dtype(data, dtype):
    t = lz.tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data, dtype=t.numpy().dtype))


def test_tensor_of_numpy_float64_keeps_its_precision():
    v = np.float64(1.0) + np.float64(2.0 ** -40)
    assert lz.tensor([v]).item() == v
    assert lz.tensor([v], dtype=lz.float32).dtype == lz.float32  # an explicit dtype still wins


# ---- integer ** negative integer ----------------------------------------------------------------

def test_integer_tensor_to_a_negative_integer_raises_at_the_line():
    x = lz.tensor([1, 2])
    msg = raises_without_leak(ValueError, lambda: x ** -1, "Integers to negative integer powers are not allowed")
    assert "pow(int64[2], -1)" in msg
    raises_without_leak(ValueError, lambda: lz.pow(x, -2), "negative integer powers")
    assert (x ** 2).tolist() == [1, 4]
    np.testing.assert_allclose((x ** -1.0).numpy(), [1.0, 0.5])  # a float exponent promotes


def test_integer_tensor_to_negative_tensor_powers_is_pytorchs():
    a = lz.tensor([0, 1, -1, 2, -2, 3])
    # torch: a ** torch.tensor([-1] * 6), ** torch.tensor([-2] * 6), 2 ** torch.tensor([-1, 2])
    assert (a ** lz.tensor([-1] * 6)).tolist() == [0, 1, -1, 0, 0, 0]
    assert (a ** lz.tensor([-2] * 6)).tolist() == [0, 1, 1, 0, 0, 0]
    assert (2 ** lz.tensor([-1, 2])).tolist() == [0, 4]
    assert (a.int() ** lz.tensor([-1] * 6, dtype=lz.int32)).tolist() == [0, 1, -1, 0, 0, 0]


# ---- edge cases two outside differential suites found -----------------------------------------

def test_relu_and_square_root_keep_negative_zero():
    z = lz.tensor(np.array([-0.0, 0.0, -1.0, np.nan], np.float32))
    # torch.relu(z) -> [-0., 0., 0., nan]; z ** 0.5 -> [-0., 0., nan, nan]; z ** -0.5 -> [-inf, inf, nan, nan]
    for backend in ("cpu", "interp"):
        prev = lz.backend()
        lz._C._set_backend(backend)
        try:
            r = lz.relu(z).numpy()
            np.testing.assert_array_equal(np.signbit(r[:3]), [True, False, False])
            assert r[2] == 0 and np.isnan(r[3])
            s = (z ** 0.5).numpy()
            assert np.signbit(s[0]) and s[0] == 0 and not np.signbit(s[1]) and np.isnan(s[2])
            np.testing.assert_array_equal((z ** -0.5).numpy()[:2], [-np.inf, np.inf])
        finally:
            lz.wait()
            lz._C._set_backend(prev)


def test_max_min_and_argmax_over_a_non_empty_dim_of_an_empty_tensor_are_empty():
    t = lz.zeros(0, 3)
    values, indices = lz.max(t, 1)  # torch: values tensor([]), indices tensor([], dtype=int64)
    assert values.numpy().shape == (0,) and indices.numpy().shape == (0,)
    assert indices.dtype == lz.int64
    assert lz.min(t, 1)[0].numpy().shape == (0,)
    assert lz.amax(t, 1).numpy().shape == (0,)
    assert lz.argmax(lz.zeros(2, 0, 3), 0, keepdim=True).numpy().shape == (1, 0, 3)


def test_clamp_of_a_bool_tensor_computes_in_the_bounds_type():
    b = lz.tensor([True, False])
    c = lz.clamp(b, 0, 1)  # torch: tensor([1, 0]) int64
    assert c.dtype == lz.int64 and c.tolist() == [1, 0]
    f = lz.clamp(b, 0.5)  # torch: tensor([1.0, 0.5]) float32
    assert f.dtype == lz.float32 and f.tolist() == [1.0, 0.5]
    p = b ** 2  # torch: tensor([1, 0]) int64
    assert p.dtype == lz.int64 and p.tolist() == [1, 0]


def test_argmax_of_bool_is_refused_as_pytorch_refuses_it_but_max_dim_takes_bool():
    b = lz.tensor([[True, False], [False, True]])
    raises_without_leak(TypeError, lambda: lz.argmax(b), "argmax", "bool")
    raises_without_leak(TypeError, lambda: lz.argmin(b, 1), "argmin", "bool")
    values, indices = lz.max(b, 1)  # torch: values [True, True], indices [0, 1]
    assert values.tolist() == [True, True] and indices.tolist() == [0, 1]


def test_cat_skips_a_one_dim_empty_tensor_among_others():
    out = lz.cat([lz.ones(2, 3), lz.zeros(0), lz.ones(1, 3)])  # torch: shape (3, 3)
    assert out.shape == (3, 3) and out.numpy().sum() == 9
    assert lz.cat([lz.zeros(0), lz.zeros(0)]).shape == (0,)
    # it still counts for the result's dtype: int32 [2] with float64 [0] is float64 in torch
    mixed = lz.cat([lz.tensor(np.array([1, 2], np.int32)), lz.zeros(0, dtype=lz.float64)])
    assert mixed.dtype == lz.float64


def test_index_select_takes_a_scalar_index_and_refuses_a_matrix_with_index_error():
    x = lz.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    row = lz.index_select(x, 0, lz.tensor(np.array(2)))  # torch: shape (1, 3), [[6, 7, 8]]
    assert row.tolist() == [[6.0, 7.0, 8.0]]
    raises_without_leak(IndexError, lambda: lz.index_select(x, 0, lz.tensor(np.array([[1, 2]]))),
                        "index_select", "vector")
