"""Indexing, index assignment and aliasing agree with PyTorch.

Every expected value here is what PyTorch 2 gives for the same expression (written out, so the
tests do not need torch). Where Lazuli deliberately differs (ValueError for shape mismatches,
a copy for a 0-d index tensor) the test says so.
"""
import gc
import pickle
import warnings

import numpy as np
import pytest

import lazuli as lz
from conftest import executions, raises_without_leak


def values(t):
    assert isinstance(t, lz.Tensor)
    return t.numpy().tolist()


def arange(*shape):
    return lz.tensor(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))


MASK = [[True, False, True], [False, True, False]]


# ---- item 1: bool-mask assignment -----------------------------------------------------------

def test_mask_assignment_with_a_value_tensor_fills_in_mask_order():
    b = lz.zeros(2, 3)
    b[lz.tensor(MASK)] = lz.tensor([1.0, 2.0, 3.0])
    assert values(b) == [[1, 0, 2], [0, 3, 0]]


def test_mask_assignment_drops_leading_ones_of_the_value():
    for value in ([[1.0, 2.0, 3.0]], [[[1.0, 2.0, 3.0]]]):
        b = lz.zeros(2, 3)
        b[lz.tensor(MASK)] = lz.tensor(value)
        assert values(b) == [[1, 0, 2], [0, 3, 0]]


def test_augmented_assignment_through_a_mask_writes_the_selected_places():
    b = arange(2, 3)
    b[b % 3 == 0] += 100
    assert values(b) == [[100, 1, 2], [103, 4, 5]]


def test_row_mask_assignment_with_rows_and_columns():
    b = lz.zeros(2, 3)
    b[lz.tensor([True, False])] = lz.tensor([[1.0, 2.0, 3.0]])
    assert values(b) == [[1, 2, 3], [0, 0, 0]]
    b = lz.zeros(2, 3)
    b[lz.tensor([True, True])] = lz.tensor([[1.0], [2.0]])  # one value per selected row
    assert values(b) == [[1, 1, 1], [2, 2, 2]]


@pytest.mark.parametrize("mask, value, message", [
    (MASK, [1.0, 2.0], "value tensor of shape [2] cannot be broadcast to indexing result of shape [3]"),
    ([True, False], [1.0, 2.0], "value tensor of shape [2] cannot be broadcast to indexing result of shape [1, 3]"),
    ([True, True], [[1.0], [2.0], [3.0]],
     "value tensor of shape [3, 1] cannot be broadcast to indexing result of shape [2, 3]"),
], ids=["too_few", "wrong_row", "too_many_rows"])
def test_mask_assignment_of_a_value_that_does_not_fit_raises_and_records_nothing(mask, value, message):
    # PyTorch raises RuntimeError("shape mismatch: ..."); Lazuli's shape errors are ValueErrors.
    b = lz.zeros(2, 3)
    m, v = lz.tensor(mask), lz.tensor(value)
    lz.sync(wait=True)
    raises_without_leak(ValueError, lambda: b.__setitem__(m, v), "shape mismatch", message)
    assert lz.debug.tensor_state(b) == "device_data"  # no new value recorded
    assert values(b) == [[0, 0, 0], [0, 0, 0]]
    b[m] = 1.0  # the runtime still works
    assert np.sum(values(b)) == np.sum(mask) * (3 if np.ndim(mask) == 1 else 1)


def test_mask_assignment_of_a_broadcast_value_does_not_read_the_mask():
    b = arange(2, 3)
    lz.sync(wait=True)
    before = executions()
    b[b > 2] = lz.tensor(-1.0)
    b[b < 1] = 5.0
    assert executions() == before  # where(mask, value, b): no cut
    assert values(b) == [[5, 1, 2], [5, 5, 5]]


# ---- item 4: aliasing ------------------------------------------------------------------------

def test_contiguous_of_a_contiguous_tensor_is_the_tensor_itself():
    x = arange(2, 3)
    assert x.contiguous() is x
    row = x[1]
    assert row.contiguous() is row  # a contiguous view too, as in PyTorch
    row.contiguous().fill_(0)
    assert values(x) == [[0, 1, 2], [0, 0, 0]]


def test_contiguous_of_a_transpose_is_a_copy():
    x = arange(2, 3)
    t = x.T
    c = t.contiguous()
    assert c is not t and c.is_contiguous() and not t.is_contiguous()
    c.fill_(-1)
    assert values(x) == [[0, 1, 2], [3, 4, 5]]
    assert values(t.contiguous()) == [[0, 3], [1, 4], [2, 5]]


def test_to_the_same_dtype_is_the_tensor_itself():
    x = arange(2, 3)
    assert x.to(lz.float32) is x
    assert x.to(dtype=lz.float32) is x
    assert x.to(lz.zeros(1)) is x
    assert x.to("cpu") is x
    assert x.float() is x
    i = lz.tensor([1, 2])
    assert i.long() is i and i.int() is not i
    assert x.to(lz.float32, copy=True) is not x
    assert x.to(lz.float64) is not x and x.double() is not x


def test_strides_and_contiguity_follow_pytorch():
    x = arange(2, 3, 4)
    assert x.stride() == (12, 4, 1) and x.stride(-1) == 1 and x.is_contiguous()
    assert x.permute(1, 0, 2).stride() == (4, 12, 1)
    assert arange(4, 6)[:, ::2].stride() == (6, 2)
    assert arange(1, 3).expand(2, 3).stride() == (0, 1)
    assert arange(3, 4)[1:].is_contiguous()
    assert not arange(3, 4)[:, 1:3].is_contiguous()


def test_view_of_a_transposed_tensor_raises_and_names_reshape():
    t = arange(2, 3).T
    with pytest.raises(RuntimeError, match="view size is not compatible") as info:
        t.view(6)
    assert "reshape" in str(info.value)
    with pytest.raises(RuntimeError):
        t.view(2, 3)
    with pytest.raises(RuntimeError):
        arange(2, 3, 4).permute(1, 0, 2).view(6, 4)
    with pytest.raises(RuntimeError):
        arange(1, 3).expand(2, 3).view(6)


def test_view_accepts_what_the_strides_express():
    t = arange(2, 3).T
    assert values(t.view(3, 2, 1)) == [[[0], [3]], [[1], [4]], [[2], [5]]]
    assert arange(2, 3, 4).permute(1, 0, 2).view(3, 2, 2, 2).shape == (3, 2, 2, 2)
    assert values(arange(4, 6)[:, ::2].view(12)) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22]
    assert values(arange(3, 4)[1:].view(8)) == [4, 5, 6, 7, 8, 9, 10, 11]
    assert values(arange(2, 3).view(-1)) == [0, 1, 2, 3, 4, 5]


def test_view_of_a_wrong_size_still_raises_value_error():
    raises_without_leak(ValueError, lambda: arange(2, 3).view(7), "[2, 3]", "[7]")


def test_reshape_of_a_transposed_tensor_does_not_write_through():
    x = arange(2, 3)
    flat = x.T.reshape(6)
    assert lz.debug.tensor_state(flat) != "view"
    flat.fill_(-1)
    assert values(x) == [[0, 1, 2], [3, 4, 5]]
    snapshot = x.T.reshape(-1)
    x.add_(10)
    assert values(snapshot) == [0, 3, 1, 4, 2, 5]  # a copy: the later update does not reach it
    flat2 = x.T.flatten()
    flat2.zero_()
    assert values(x) == [[10, 11, 12], [13, 14, 15]]


def test_reshape_that_can_be_a_view_still_writes_through():
    x = arange(2, 3)
    x.reshape(3, 2).fill_(1)
    assert values(x) == [[1, 1, 1], [1, 1, 1]]
    y = arange(4, 6)
    y[:, ::2].reshape(12).fill_(-1)
    assert values(y[0]) == [-1, 1, -1, 3, -1, 5]
    z = arange(2, 3)
    z.T.reshape(3, 2, 1).fill_(7)
    assert values(z) == [[7, 7, 7], [7, 7, 7]]


# ---- item 5: indexing ------------------------------------------------------------------------

X = np.arange(12, dtype=np.float32).reshape(3, 4)
Y = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def _nested(key):
    """x[key] for a list key PyTorch reads as a tuple: it warns, and so does Lazuli."""
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        return lz.tensor(X)[key]


def test_nested_list_index_is_read_as_pytorch_reads_it():
    assert values(_nested([[0, 1], [1, 2]])) == [1, 6]  # x[[0, 1], [1, 2]]
    assert values(_nested([0, [1, 2]])) == [1, 2]
    assert values(_nested([[0, 1]])) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert _nested([[[0, 1], [1, 2]]]).shape == (2, 2, 4)
    assert values(_nested([slice(None), 1])) == [1, 5, 9]
    assert values(_nested([None, 0])) == [[0, 1, 2, 3]]
    assert values(_nested([Ellipsis, 1])) == [1, 5, 9]
    assert values(_nested([(0, 1), (1, 2)])) == [1, 6]
    assert values(_nested([np.array([0, 1]), np.array([1, 2])])) == [1, 6]
    with pytest.warns(UserWarning), pytest.raises(IndexError, match="too many indices"):
        lz.tensor(X)[[[0, 1], [1, 2], [0, 0]]]


def test_flat_lists_and_arrays_are_one_index():
    x = lz.tensor(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation warning for these
        assert values(x[[0, 1]]) == X[[0, 1]].tolist()
        assert x[np.array([[0, 1], [1, 2]])].shape == (2, 2, 4)
        assert values(x[[True, False, True]]) == [[0, 1, 2, 3], [8, 9, 10, 11]]
        assert values(x[[1, True]]) == [[4, 5, 6, 7], [4, 5, 6, 7]]  # True is 1 among ints
        assert x[[0, 1, 2] * 11].shape == (33, 4)  # 32 or more: one index, whatever it holds
        assert values(x[[1.0]]) == [[4, 5, 6, 7]]  # PyTorch reads a list's floats as longs
        assert x[[]].shape == (0, 4)


@pytest.mark.parametrize("key, expected", [
    (([0, 2], [1, 3]), [1, 11]),
    (([0, 2], [[1], [3]]), [[1, 9], [3, 11]]),
    (([0, 2], None, [1, 3]), [[1], [11]]),
    ((slice(None), [0, 1], None), [[[0], [1]], [[4], [5]], [[8], [9]]]),
    ((slice(1, None), [0, 2]), [[4, 6], [8, 10]]),
    (([0, 2], slice(1, None)), [[1, 2, 3], [9, 10, 11]]),
], ids=repr)
def test_several_index_lists_broadcast_together(key, expected):
    assert values(lz.tensor(X)[key]) == expected


@pytest.mark.parametrize("key, shape", [
    (([0, 1], slice(None), [0, 1]), (2, 3)),
    ((slice(None), [0, 1], [0, 1]), (2, 2)),
    (([0, 1], 1, [0, 1]), (2,)),
    ((0, slice(None), [0, 1]), (3, 2)),  # numpy gives (2, 3): PyTorch applies the int first
    ((slice(None), 0, [0, 1]), (2, 2)),
    ((None, slice(None), [0, 1], [1, 2]), (1, 2, 2)),
    (([0, 1], slice(None), None, [1, 2]), (2, 3, 1)),
    (([[0], [1]], slice(None), [1, 2, 3]), (2, 3, 3)),
    (([0, 1], Ellipsis, [1, 2]), (2, 3)),
], ids=repr)
def test_advanced_result_dims_go_where_pytorch_puts_them(key, shape):
    got = lz.tensor(Y)[key]
    assert got.shape == shape
    if not any(isinstance(k, int) for k in key):  # numpy agrees on these
        np.testing.assert_array_equal(got.numpy(), Y[key])


def test_advanced_index_values_with_an_int_between():
    y = lz.tensor(Y)
    assert values(y[0, :, [0, 1]]) == [[0, 1], [4, 5], [8, 9]]
    assert values(y[[0, 1], 1, [0, 1]]) == [4, 17]


def test_mask_over_a_view_with_an_empty_dim():
    y = lz.tensor(np.zeros((2, 1, 3), np.float32))
    assert y[lz.tensor([True, False]), 1:].shape == (1, 0, 3)
    y[lz.tensor([True, True]), 1:] += 1
    assert values(y) == [[[0, 0, 0]], [[0, 0, 0]]]


def test_mask_combined_with_an_index_list():
    x = lz.tensor(X)
    assert values(x[lz.tensor([True, False, True]), [0, 1]]) == [0, 9]
    assert values(x[lz.tensor([True, False, True]), 1]) == [1, 9]


def test_index_lists_that_do_not_broadcast_raise_index_error():
    raises_without_leak(IndexError, lambda: lz.tensor(X)[[0, 1], [0, 1, 2]], "shape mismatch", "[2]", "[3]")


def test_out_of_range_entry_of_a_computed_index_raises_when_it_runs():
    x = lz.tensor(X)
    j = lz.tensor([1, 5]) * 1  # not on the host: checked when the program runs
    with pytest.raises(lz.Error, match="index"):
        x[[0, 1], j].numpy()
    assert values(x[[0, 1], j - 4]) == [1, 5]  # the runtime still works


def test_bools_add_a_dim_as_in_pytorch():
    x = lz.tensor(X)
    assert x[True].shape == (1, 3, 4) and values(x[True])[0] == X.tolist()
    assert x[False].shape == (0, 3, 4)
    assert values(x[True, 1]) == [[4, 5, 6, 7]]
    assert x[..., True].shape == (3, 4, 1)
    assert x[None, True].shape == (1, 1, 3, 4)
    assert x[1, False].shape == (0, 4)
    assert x[True, True].shape == (1, 3, 4)
    assert x[(True,)].shape == (1, 3, 4)
    copy = x[True]
    copy.fill_(-1)  # an advanced index: a copy, as in PyTorch
    assert values(x) == X.tolist()


def test_several_ellipses_as_in_pytorch():
    x, y = lz.tensor(X), lz.tensor(Y)
    assert values(x[..., ...]) == X.tolist()
    assert values(y[..., 0, ...]) == Y[:, :, 0].tolist()
    assert values(y[0, ..., ...]) == Y[0].tolist()
    assert y[..., None, ...].shape == (2, 3, 4, 1)
    assert values(y[..., 1, 2, ...]) == [6, 18]
    with pytest.raises(IndexError):
        y[..., ..., 0]  # PyTorch indexes past the last dim here


def test_zero_dim_index_tensors_as_in_pytorch():
    x = lz.tensor(X)
    assert values(x[lz.tensor(1)]) == [4, 5, 6, 7]
    assert x[lz.tensor(1)].shape == (4,)
    assert x[lz.tensor(1), lz.tensor(2)].shape == () and x[lz.tensor(1), lz.tensor(2)].item() == 6
    assert values(x[:, lz.tensor(2)]) == [2, 6, 10]
    assert values(x[lz.tensor(-1)]) == [8, 9, 10, 11]
    assert values(x[lz.tensor(1, dtype=lz.int32)]) == [4, 5, 6, 7]
    assert values(x[lz.tensor(1), [0, 1]]) == [4, 5]
    assert values(x[lz.tensor(0), lz.tensor([1, 2])]) == [1, 2]
    assert x[lz.tensor(True)].shape == (1, 3, 4)
    assert x[lz.tensor(False)].shape == (0, 3, 4)
    assert values(x[lz.tensor(True), 1]) == [[4, 5, 6, 7]]
    # PyTorch selects with a 0-d index: it takes no part in placing the other indices' dims.
    y = lz.tensor(Y)
    assert y[lz.tensor(0), None, [[0], [1]], -1].shape == (1, 2, 1)
    assert values(y[None, [-1, 0, 0], ..., lz.tensor(1)][0]) == [[13, 17, 21], [1, 5, 9], [1, 5, 9]]
    assert y[[0, 1], lz.tensor(1), [0, 1]].shape == (2,)
    raises_without_leak(IndexError, lambda: x[lz.tensor(5)], "5")
    raises_without_leak(IndexError, lambda: x[lz.tensor(1.0)], "float32")


def test_zero_dim_index_tensor_assignment():
    b = lz.zeros(3, 4)
    b[lz.tensor(1)] = 7.0
    assert values(b) == [[0] * 4, [7] * 4, [0] * 4]
    b = lz.zeros(3, 4)
    b[lz.tensor(True)] = lz.arange(4.0)
    assert values(b) == [[0, 1, 2, 3]] * 3
    b[lz.tensor(False)] = 9.0
    assert values(b) == [[0, 1, 2, 3]] * 3


def test_assignment_with_a_value_shaped_like_the_result():
    b = lz.zeros(3, 4)
    b[lz.tensor([[0, 1], [1, 2]])] = lz.ones(2, 2, 4)
    assert values(b) == [[1] * 4] * 3
    b = lz.zeros(3, 4)
    b[[0, 2], [1, 3]] = lz.tensor([5.0, 6.0])
    assert values(b) == [[0, 5, 0, 0], [0, 0, 0, 0], [0, 0, 0, 6]]
    b = lz.zeros(3, 4)
    b[[[0], [2]], [1, 3]] = lz.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert values(b) == [[0, 1, 0, 2], [0, 0, 0, 0], [0, 3, 0, 4]]
    b = lz.zeros(3, 4)
    b[:, [0, 2]] = lz.tensor([[1.0], [2.0], [3.0]])
    assert values(b) == [[1, 0, 1, 0], [2, 0, 2, 0], [3, 0, 3, 0]]
    c = lz.zeros(2, 3, 4)
    c[[0, 1], :, [1, 3]] = lz.arange(6.0).reshape(2, 3)
    assert values(c) == [[[0, 0, 0, 0], [0, 1, 0, 0], [0, 2, 0, 0]],
                         [[0, 0, 0, 3], [0, 0, 0, 4], [0, 0, 0, 5]]]
    b = lz.zeros(3, 4)
    b[lz.tensor([True, False, True]), 1:] = lz.tensor([1.0, 2.0, 3.0])
    assert values(b) == [[0, 1, 2, 3], [0, 0, 0, 0], [0, 1, 2, 3]]
    b = lz.zeros(3, 4)
    b[lz.tensor([True, False, True]), [0, 3]] = lz.tensor([1.0, 2.0])
    assert values(b) == [[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 2]]


def test_assignment_through_a_view_with_several_indices_writes_the_base():
    b = lz.zeros(3, 4)
    b[1:][[0, 1], [1, 2]] = lz.tensor([5.0, 6.0])
    assert values(b) == [[0, 0, 0, 0], [0, 5, 0, 0], [0, 0, 6, 0]]


def test_bool_assignment_as_in_pytorch():
    b = lz.zeros(3, 4)
    b[True] = 1.0
    assert values(b) == [[1] * 4] * 3
    b[False] = lz.ones(5)  # PyTorch selects nothing and does not look at the value
    assert values(b) == [[1] * 4] * 3


@pytest.mark.parametrize("key, value, message", [
    (([0, 2], [1, 3]), [5.0, 6.0, 7.0], "value tensor of shape [3] cannot be broadcast to indexing result of shape [2]"),
    ([0, 1], np.ones((2, 5), np.float32), "value tensor of shape [2, 5] cannot be broadcast to indexing result of shape [2, 4]"),
], ids=["pair", "rows"])
def test_assignment_of_a_value_that_does_not_fit_raises_and_records_nothing(key, value, message):
    b = lz.zeros(3, 4)
    v = lz.tensor(value)
    lz.sync(wait=True)
    raises_without_leak(ValueError, lambda: b.__setitem__(key, v), "shape mismatch", message)
    assert lz.debug.tensor_state(b) == "device_data"
    assert values(b) == [[0] * 4] * 3


@pytest.mark.parametrize("value", [[1.0, 2.0, 3.0, 4.0], np.ones(4, np.float32), "a", None],
                         ids=["list", "ndarray", "str", "none"])
def test_assignment_of_a_value_that_is_neither_tensor_nor_number_raises_type_error(value):
    # PyTorch: "can't assign a list to a torch.FloatTensor"
    b = lz.zeros(3, 4)
    raises_without_leak(TypeError, lambda: b.__setitem__(0, value), "can't assign a", type(value).__name__)
    b[0] = np.float32(3)  # a numpy number is a number
    assert values(b[0]) == [3, 3, 3, 3]


def test_max_and_min_with_dim_return_named_tuples():
    x = lz.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    r = x.max(1)
    assert isinstance(r, tuple) and type(r).__name__ == "max"
    assert values(r.values) == [5, 7] and values(r.indices) == [1, 0]
    v, i = r
    assert values(v) == [5, 7] and values(i) == [1, 0]
    m = lz.min(x, 0, keepdim=True)
    assert type(m).__name__ == "min"
    assert values(m.values) == [[1, 0, 2]] and values(m.indices) == [[0, 1, 0]]
    assert values(m[0]) == [[1, 0, 2]]
    assert "values=" in repr(r) and "indices=" in repr(r)
    assert isinstance(x.max(), lz.Tensor)  # no dim: one tensor, as in PyTorch
    from lazuli import return_types
    assert type(r) is return_types.max and type(m) is return_types.min
    assert pickle.loads(pickle.dumps(return_types.max(1, 2))) == (1, 2)


def test_indexing_leaves_no_tensors_behind():
    x = lz.tensor(X)
    gc.collect()
    before = lz.debug.live_tensor_count()
    x[[0, 2], [1, 3]].numpy()
    x[x > 3].numpy()
    b = lz.zeros(2, 3)
    b[lz.tensor(MASK)] = lz.tensor([1.0, 2.0, 3.0])
    b.numpy()
    del b
    gc.collect()
    assert lz.debug.live_tensor_count() == before
