"""Python protocols of lz.Tensor: creation, value reads, repr, len/iter, indexing and assignment."""
import gc

import numpy as np
import pytest

import lazuli as lz

_NP_OF = {lz.float32: np.float32, lz.float64: np.float64, lz.int32: np.int32, lz.int64: np.int64,
          lz.bool: np.bool_}


def assert_tensor_equal(t, expected):
    expected = np.asarray(expected)
    assert isinstance(t, lz.Tensor)
    assert t.shape == expected.shape
    got = t.numpy()
    assert got.dtype == expected.dtype, f"{got.dtype} != {expected.dtype}"
    np.testing.assert_array_equal(got, expected)


# ---- creation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("data, dtype, np_dtype", [
    ([[1, 2, 3], [4, 5, 6]], lz.int64, np.int64),
    ([[1.0, 2.0], [3.5, -4.0]], lz.float32, np.float32),
    ([1, 2.5, 3], lz.float32, np.float32),  # one float makes the whole list float32
    ([True, False, True], lz.bool, np.bool_),
    ([[True], [False]], lz.bool, np.bool_),
])
def test_tensor_from_nested_lists_infers_pytorch_dtype(data, dtype, np_dtype):
    t = lz.tensor(data)
    assert t.dtype == dtype
    assert_tensor_equal(t, np.array(data, dtype=np_dtype))


@pytest.mark.parametrize("value, dtype", [(3, lz.int64), (2.5, lz.float32), (True, lz.bool), (-7, lz.int64)])
def test_tensor_from_python_scalar_is_0d(value, dtype):
    t = lz.tensor(value)
    assert t.shape == () and t.ndim == 0 and t.numel() == 1
    assert t.dtype == dtype
    assert t.item() == value
    assert type(t.item()) is type(value)


def test_tensor_with_explicit_dtype_converts():
    t = lz.tensor([1, 2, 3], dtype=lz.float64)
    assert_tensor_equal(t, np.array([1.0, 2.0, 3.0]))
    assert_tensor_equal(lz.tensor([1.7, -1.7], dtype=lz.int32), np.array([1, -1], dtype=np.int32))


def test_empty_list_is_float32():
    t = lz.tensor([])
    assert t.shape == (0,) and t.dtype == lz.float32


@pytest.mark.parametrize("np_dtype, dtype", [(np.float32, lz.float32), (np.float64, lz.float64),
                                            (np.int32, lz.int32), (np.int64, lz.int64),
                                            (np.bool_, lz.bool)])
def test_tensor_from_numpy_keeps_dtype_and_copies(np_dtype, dtype, rng):
    a = (rng.uniform(-10, 10, (3, 4)) if np_dtype != np.bool_ else rng.random((3, 4)) < 0.5).astype(np_dtype)
    t = lz.tensor(a)  # copies (lz.from_numpy shares: the next test)
    assert t.dtype == dtype
    expected = a.copy()
    a[...] = a[::-1, ::-1]  # changing the source afterwards does not change the tensor
    assert_tensor_equal(t, expected)


@pytest.mark.parametrize("np_dtype, dtype", [(np.float32, lz.float32), (np.float64, lz.float64),
                                            (np.int32, lz.int32), (np.int64, lz.int64),
                                            (np.bool_, lz.bool)])
def test_from_numpy_shares_memory_both_ways(np_dtype, dtype, rng):
    # As torch.from_numpy: the array's writes show in the tensor, and an in-place update of the
    # tensor at a step barrier (which donates the buffer) lands in the array.
    a = (rng.uniform(-10, 10, (3, 4)) if np_dtype != np.bool_ else rng.random((3, 4)) < 0.5).astype(np_dtype)
    t = lz.from_numpy(a)
    assert t.dtype == dtype
    a[...] = a[::-1, ::-1]
    assert_tensor_equal(t, a.copy())
    expected = np.logical_not(a) if np_dtype == np.bool_ else a * 2
    if np_dtype == np.bool_:
        t.copy_(lz.logical_not(t))
    else:
        t.mul_(2)
    lz.sync(wait=True)
    assert_tensor_equal(t, expected)
    np.testing.assert_array_equal(a, expected)
    del t
    gc.collect()
    assert a.sum() == expected.sum()  # the array outlives the tensor: its memory was never freed


def test_from_numpy_keeps_the_array_alive():
    t = lz.from_numpy(np.arange(1000.0))
    gc.collect()
    assert t.sum().item() == 499500.0  # the only reference to the array was the tensor's


def test_from_numpy_of_a_read_only_array_copies():
    a = np.arange(4.0)
    a.flags.writeable = False  # a barrier could not write into it: a private copy instead
    t = lz.from_numpy(a)
    t.add_(1)
    lz.sync(wait=True)
    np.testing.assert_array_equal(a, np.arange(4.0))
    assert_tensor_equal(t, np.arange(4.0) + 1)


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_tensor_from_non_contiguous_numpy_arrays(np_dtype, rng):
    base = (rng.uniform(-10, 10, (6, 8)) if np_dtype != np.bool_ else rng.random((6, 8)) < 0.5).astype(np_dtype)
    for view in (base[::2, 1::3], base.T, base[:, ::-1], base[1:4, 2]):
        assert not view.flags.c_contiguous or view.ndim == 1
        assert_tensor_equal(lz.tensor(view), view.copy())
        assert_tensor_equal(lz.from_numpy(view), view.copy())


def test_tensor_from_big_endian_numpy_array():
    a = np.array([1.5, -2.0, 3.25], dtype=">f8")
    assert_tensor_equal(lz.tensor(a), np.array([1.5, -2.0, 3.25]))


@pytest.mark.parametrize("np_dtype, dtype", [(np.float32, lz.float32), (np.float64, lz.float64),
                                            (np.int32, lz.int32), (np.int64, lz.int64),
                                            (np.bool_, lz.bool)])
def test_tensor_from_0d_numpy_array_and_numpy_scalar(np_dtype, dtype):
    for src in (np.array(3, dtype=np_dtype), np_dtype(3)):
        t = lz.tensor(src)
        assert t.shape == () and t.dtype == dtype
        assert t.item() == np_dtype(3).item()


@pytest.mark.parametrize("bad", [
    np.zeros(3, dtype=np.complex64), np.zeros(3, dtype=np.uint8), np.zeros(3, dtype=np.uint16),
    np.array(["a", "b"]), np.zeros(2, dtype=np.int16),
])
def test_unsupported_numpy_dtype_raises_type_error_naming_it(bad):
    for make in (lz.tensor, lz.from_numpy):
        with pytest.raises(TypeError) as e:
            make(bad)
        msg = str(e.value)
        assert bad.dtype.name in msg or str(bad.dtype) in msg or "non-numeric" in msg, msg


def test_unsupported_dtype_message_lists_supported_dtypes():
    with pytest.raises(TypeError, match="float16.*float32.*float64.*int32.*int64.*bool"):
        lz.tensor(np.zeros(3, dtype=np.int16))


# ---- value reads --------------------------------------------------------------------------------

def test_numpy_returns_a_fresh_array_with_the_values():
    t = lz.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = t.numpy()
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (2, 2)
    a[0, 0] = 100.0
    np.testing.assert_array_equal(t.numpy(), [[1.0, 2.0], [3.0, 4.0]])


def test_numpy_of_computed_view_and_noncontiguous_result():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = lz.tensor(a)
    assert_tensor_equal((t * 2).T, (a * 2).T)
    assert_tensor_equal(t[:, 1::2], a[:, 1::2])


def test_tolist_gives_python_values():
    assert lz.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert lz.tensor([0.5, 1.5]).tolist() == [0.5, 1.5]
    assert lz.tensor([True, False]).tolist() == [True, False]
    assert lz.tensor(4).tolist() == 4
    assert type(lz.tensor([1]).tolist()[0]) is int


def test_item_and_python_number_conversions():
    t = lz.tensor([2.75])
    assert t.item() == 2.75 and type(t.item()) is float
    assert float(t) == 2.75
    assert int(t) == 2
    assert int(lz.tensor(-2.75)) == -2  # truncation, as int(float)
    assert bool(lz.tensor(0.0)) is False
    assert bool(lz.tensor([3])) is True
    assert int(lz.tensor(5, dtype=lz.int32)) == 5
    assert lz.tensor(7).item() == 7 and type(lz.tensor(7).item()) is int
    assert lz.tensor(True).item() is True
    assert float(lz.tensor([[1.5]]) * 2) == 3.0


def test_item_of_many_elements_raises_value_error():
    with pytest.raises(ValueError):
        lz.tensor([1.0, 2.0]).item()
    with pytest.raises(ValueError):
        float(lz.tensor([1.0, 2.0]))
    with pytest.raises((ValueError, RuntimeError)):
        bool(lz.tensor([True, False]))


def test_np_asarray_reads_values():
    t = lz.tensor([[1, 2], [3, 4]], dtype=lz.int32) + 1
    a = np.asarray(t)
    assert a.dtype == np.int32
    np.testing.assert_array_equal(a, [[2, 3], [4, 5]])
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), [[2.0, 3.0], [4.0, 5.0]])
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_tensor_as_python_index():
    items = ["a", "b", "c", "d"]
    assert items[lz.tensor(2)] == "c"
    assert items[lz.tensor(1) + 2] == "d"


@pytest.mark.parametrize("make, expected", [
    (lambda: lz.tensor([1.0, 2.0]), "tensor([1., 2.])"),
    (lambda: lz.tensor(3.5), "tensor(3.5)"),
    (lambda: lz.tensor([1, 2, 3]), "tensor([1, 2, 3])"),
    (lambda: lz.tensor([True, False]), "tensor([True, False])"),
    (lambda: lz.tensor([1.0, 2.0], dtype=lz.float64), "tensor([1., 2.], dtype=lazuli.float64)"),
    (lambda: lz.tensor([1, 2], dtype=lz.int32), "tensor([1, 2], dtype=lazuli.int32)"),
    (lambda: lz.tensor(7), "tensor(7)"),
    (lambda: lz.tensor([[1, 2], [3, 4]]), "tensor([[1, 2],\n        [3, 4]])"),
    (lambda: lz.tensor([1.0, 2.0]) * 3, "tensor([3., 6.])"),
    (lambda: lz.tensor([]), "tensor([])"),
])
def test_repr_and_str_show_values_like_pytorch(make, expected):
    t = make()
    assert repr(t) == expected
    assert str(t) == expected


def test_repr_of_empty_2d_tensor_like_pytorch():
    assert repr(lz.zeros(2, 0)) == "tensor([], size=(2, 0))"


def test_len_and_iteration_over_first_dim():
    a = np.arange(12).reshape(3, 4)
    t = lz.tensor(a)
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3
    for row, expected in zip(rows, a):
        assert_tensor_equal(row, expected)
    assert [int(x) for x in lz.tensor([5, 6, 7])] == [5, 6, 7]
    with pytest.raises(TypeError):
        len(lz.tensor(1.0))
    with pytest.raises(TypeError):
        iter(lz.tensor(1.0)).__next__()


def test_shape_attributes():
    t = lz.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and isinstance(t.shape, tuple)
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert lz.zeros((2, 3)).shape == (2, 3)


# ---- indexing -----------------------------------------------------------------------------------

A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

BASIC_KEYS = [
    1, -1, (0, 2), (-1, -2, -3), slice(None), slice(1, None), slice(None, None, 2),
    (slice(None), slice(1, 4, 2)), (slice(None), slice(None), slice(None, None, 3)),
    (slice(-3, -1), 1), None, (None, 0), (slice(None), None, 2), Ellipsis, (Ellipsis, 1),
    (0, Ellipsis, slice(1, 3)), (Ellipsis, None), slice(10, 20), (slice(None), slice(3, 1)),
    (1, 2, 3),
]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=repr)
def test_basic_indexing_matches_numpy(key):
    t = lz.tensor(A)
    assert_tensor_equal(t[key], A[key])


ADVANCED_KEYS = [
    [0, 2], [2, 0, 0], [-1, 0], np.array([1, -2]), (slice(None), [3, 0, -1]),
    (1, [3, 0]), (Ellipsis, [1, 1]), np.array([[0, 1], [2, -1]]), (slice(None), np.array([[0], [3]])),
]


@pytest.mark.parametrize("key", ADVANCED_KEYS, ids=repr)
def test_integer_list_and_array_indexing_matches_numpy(key):
    t = lz.tensor(A)
    assert_tensor_equal(t[key], A[key])


@pytest.mark.parametrize("idx_dtype", [lz.int64, lz.int32])
def test_integer_tensor_indexing_with_negative_entries(idx_dtype):
    t = lz.tensor(A)
    idx = np.array([2, -1, 0, -3])
    assert_tensor_equal(t[lz.tensor(idx, dtype=idx_dtype)], A[idx])
    assert_tensor_equal(t[:, lz.tensor(idx, dtype=idx_dtype)], A[:, idx])
    idx2 = np.array([[0, -1], [1, 2]])
    assert_tensor_equal(t[lz.tensor(idx2, dtype=idx_dtype)], A[idx2])


def test_computed_index_tensor():
    t = lz.tensor(A)
    idx = lz.tensor([0, 1]) * 2  # [0, 2], still lazy
    assert_tensor_equal(t[idx], A[[0, 2]])


@pytest.mark.parametrize("mask_fn", [
    lambda a: a > 30,                       # full-shape mask
    lambda a: a[:, :, 0] > 20,              # mask over the first two dims
    lambda a: a[:, 0, 0] >= 20,             # mask over the first dim
    lambda a: np.zeros(a.shape, dtype=bool),  # selects nothing
], ids=["full", "leading2", "leading1", "none"])
def test_bool_mask_indexing_matches_numpy(mask_fn):
    t = lz.tensor(A)
    mask = mask_fn(A)
    assert_tensor_equal(t[lz.tensor(mask)], A[mask])


def test_bool_mask_after_slice_and_mask_from_comparison():
    t = lz.tensor(A)
    m = A[0, :, 1] > 7
    assert_tensor_equal(t[:, lz.tensor(m)], A[:, m])
    x = lz.tensor([3.0, -1.0, 2.0, -5.0])
    assert_tensor_equal(x[x < 0], np.array([-1.0, -5.0], dtype=np.float32))
    assert_tensor_equal(x[[True, False, True, False]], np.array([3.0, 2.0], dtype=np.float32))


def test_indexing_errors():
    t = lz.tensor(A)
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError):
        t[0, -5]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError):
        t[..., ..., 0]  # PyTorch takes t[..., ...] but not an index after a second ...
    with pytest.raises(IndexError):
        t["a"]
    with pytest.raises(IndexError):
        t[lz.tensor([1.0])]
    with pytest.raises(IndexError):
        t[lz.tensor([True, False])]  # mask of the wrong length


# ---- assignment ---------------------------------------------------------------------------------

SET_KEYS = [
    1, -1, (0, 2), (slice(None), 1), slice(None, None, 2), (slice(None), slice(1, 4, 2)),
    (Ellipsis, -1), (None, 0), (0, Ellipsis, slice(1, 3)),
    [0, 2], [-1], (slice(None), [3, 0]), (1, [3, -4]),
]


@pytest.mark.parametrize("key", SET_KEYS, ids=repr)
def test_setitem_with_scalar_matches_numpy(key):
    t = lz.tensor(A)
    expected = A.copy()
    t[key] = -7.5
    expected[key] = -7.5
    assert_tensor_equal(t, expected)


@pytest.mark.parametrize("key", SET_KEYS, ids=repr)
def test_setitem_with_tensor_value_matches_numpy(key, rng):
    expected = A.copy()
    target_shape = expected[key].shape
    value = rng.uniform(-1, 1, target_shape[-1:]).astype(np.float32)  # broadcasts along the rest
    t = lz.tensor(A)
    t[key] = lz.tensor(value)
    expected[key] = value
    assert_tensor_equal(t, expected)


def test_setitem_with_int_tensor_index_and_negative_entries():
    t = lz.tensor(A)
    expected = A.copy()
    idx = np.array([-1, 0])
    t[lz.tensor(idx)] = 1.0
    expected[idx] = 1.0
    assert_tensor_equal(t, expected)
    t[:, lz.tensor([1, -1])] = lz.tensor(np.full((3, 2, 5), 9.0, dtype=np.float32))
    expected[:, [1, -1]] = 9.0
    assert_tensor_equal(t, expected)


def test_setitem_with_bool_mask():
    t = lz.tensor(A)
    expected = A.copy()
    mask = (A % 7) == 0
    t[lz.tensor(mask)] = 0.0
    expected[mask] = 0.0
    assert_tensor_equal(t, expected)
    row_mask = np.array([True, False, True])
    t[lz.tensor(row_mask)] = lz.tensor(np.arange(5, dtype=np.float32))
    expected[row_mask] = np.arange(5, dtype=np.float32)
    assert_tensor_equal(t, expected)


def test_setitem_mask_from_tensor_comparison():
    x = lz.tensor([3.0, -1.0, 2.0, -5.0])
    x[x < 0] = 0.0
    assert_tensor_equal(x, np.array([3.0, 0.0, 2.0, 0.0], dtype=np.float32))


def test_setitem_converts_value_dtype():
    t = lz.tensor([1, 2, 3])
    t[1] = 7.9  # PyTorch casts the value to the tensor's dtype (truncating)
    assert_tensor_equal(t, np.array([1, 7, 3]))
    f = lz.zeros(3)
    f[0] = lz.tensor(4)
    assert_tensor_equal(f, np.array([4.0, 0.0, 0.0], dtype=np.float32))


def test_augmented_assignment_on_a_column():
    t = lz.tensor(np.arange(12).reshape(3, 4))
    expected = np.arange(12).reshape(3, 4)
    t[:, 1] += 1
    expected[:, 1] += 1
    assert_tensor_equal(t, expected)
    t[0] *= 3
    expected[0] *= 3
    assert_tensor_equal(t, expected)
    t[1:, ::2] -= lz.tensor([10, 20])
    expected[1:, ::2] -= np.array([10, 20])
    assert_tensor_equal(t, expected)


def test_views_write_through_to_the_base():
    base = lz.tensor(np.zeros((3, 4), dtype=np.float32))
    expected = np.zeros((3, 4), dtype=np.float32)
    row = base[1]
    row.fill_(5.0)
    expected[1] = 5.0
    assert_tensor_equal(base, expected)
    col = base.T[2]  # a view of a view
    col += 1.0
    expected[:, 2] += 1.0
    assert_tensor_equal(base, expected)
    # Another view taken before the write sees it too.
    r = base.reshape(12)
    base[0, 0] = -1.0
    expected[0, 0] = -1.0
    assert_tensor_equal(r, expected.reshape(12))
    assert_tensor_equal(row, expected[1])
    # Writing through a strided slice.
    s = base[:, ::2]
    s.zero_()
    expected[:, ::2] = 0.0
    assert_tensor_equal(base, expected)


def test_in_place_methods():
    t = lz.tensor([1.0, 2.0, 3.0])
    t.mul_(2.0).div_(lz.tensor([2.0, 4.0, 1.0]))
    assert_tensor_equal(t, np.array([1.0, 1.0, 6.0], dtype=np.float32))
    t.copy_(lz.tensor([9.0, 8.0, 7.0]))
    assert_tensor_equal(t, np.array([9.0, 8.0, 7.0], dtype=np.float32))
    t /= 2
    t -= 1
    t += lz.tensor([1.0, 0.0, 0.0])
    t *= 2
    assert_tensor_equal(t, np.array([9.0, 6.0, 5.0], dtype=np.float32))
    t.fill_(2)
    assert_tensor_equal(t, np.array([2.0, 2.0, 2.0], dtype=np.float32))
    t.zero_()
    assert_tensor_equal(t, np.zeros(3, dtype=np.float32))


def test_add_and_sub_in_place_methods():
    t = lz.tensor([1.0, 2.0, 3.0])
    t.add_(1.0)
    assert_tensor_equal(t, np.array([2.0, 3.0, 4.0], dtype=np.float32))
    t.add_(lz.tensor([1.0, 1.0, 1.0]))
    t.sub_(lz.tensor([1.0, 2.0, 3.0]), alpha=2)
    assert_tensor_equal(t, np.array([1.0, 0.0, -1.0], dtype=np.float32))
    t.sub_(1.0)
    assert_tensor_equal(t, np.array([0.0, -1.0, -2.0], dtype=np.float32))


def test_clamp_in_place_method():
    t = lz.tensor([1.0, 2.0, 3.0])
    t.clamp_(min=1.5, max=2.5)
    assert_tensor_equal(t, np.array([1.5, 2.0, 2.5], dtype=np.float32))
    t.clamp_(2.0)
    assert_tensor_equal(t, np.array([2.0, 2.0, 2.5], dtype=np.float32))


def test_out_of_range_list_index_raises_index_error_at_once():
    t = lz.tensor(A)
    try:
        with pytest.raises(IndexError):
            t[[0, 3]]
        with pytest.raises(IndexError):
            t[1, [4, 0]]
    finally:
        try:
            lz.sync(wait=True)
        except lz.Error:
            pass
