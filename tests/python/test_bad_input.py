"""Bad input raises the Python exception a user expects (ValueError, TypeError, IndexError) with
the op, shapes and dtypes in the message, records nothing, leaks no tensor, and leaves the runtime
working; a failure inside a running program surfaces as lz.ExecutionError at the next wait."""
import gc

import numpy as np
import pytest

import lazuli as lz

from conftest import counter, executions, raises_without_leak


@pytest.fixture
def ts():
    return {
        "a": lz.ones(2, 3), "b": lz.ones(4, 5), "f": lz.tensor([1.0, 2.0]), "i": lz.tensor([1, 2]),
        "m": lz.tensor([True, False]),
    }


SHAPE_ERRORS = [
    ("add", lambda t: t["a"] + t["b"], ["add", "[2, 3]", "[4, 5]"]),
    ("mul_fn", lambda t: lz.mul(t["a"], t["f"]), ["mul", "[2, 3]", "[2]"]),
    ("matmul", lambda t: t["a"] @ t["b"], ["matmul", "[2, 3]", "[4, 5]"]),
    ("matmul_0d", lambda t: lz.matmul(lz.tensor(1.0), lz.tensor(2.0)), ["matmul"]),
    ("reshape", lambda t: t["a"].reshape(4, 2), ["reshape", "[2, 3]", "[4, 2]"]),
    ("view", lambda t: t["a"].view(7), ["[2, 3]", "[7]"]),
    ("cat", lambda t: lz.cat([t["a"], t["b"]]), ["cat", "[2, 3]", "[4, 5]"]),
    ("stack", lambda t: lz.stack([t["a"], t["b"]]), ["stack", "[2, 3]", "[4, 5]"]),
    ("where", lambda t: lz.where(lz.ones(5, dtype=lz.bool), t["a"], t["a"]), ["where", "[5]", "[2, 3]"]),
    ("expand", lambda t: t["a"].expand(3, 3), ["expand", "[2, 3]", "[3, 3]"]),
    ("broadcast_to", lambda t: t["a"].broadcast_to((4, 2)), ["[2, 3]"]),
    ("gather_rank", lambda t: t["a"].gather(1, lz.zeros(2, 3, 4, dtype=lz.int64)), ["gather", "[2, 3]"]),
    ("copy_", lambda t: t["a"].copy_(t["b"]), ["copy_", "[4, 5]", "[2, 3]"]),
    ("setitem", lambda t: t["a"].__setitem__(0, lz.ones(4)), ["[4]", "[3]"]),
    ("iadd_result_shape", lambda t: t["f"].__iadd__(t["a"].reshape(3, 2)), ["add_", "[3, 2]", "[2]"]),
    ("split_size", lambda t: t["a"].split(0), ["split"]),
    ("chunk", lambda t: t["a"].chunk(0), ["chunk"]),
    ("permute", lambda t: t["a"].permute(0, 0), ["permute"]),
    ("flatten", lambda t: t["a"].flatten(1, 0), ["flatten"]),
    ("negative_shape", lambda t: lz.zeros(-1), ["zeros", "-1"]),
    ("arange_zero_step", lambda t: lz.arange(0, 5, 0), ["arange"]),
    ("ragged_list", lambda t: lz.tensor([[1], [1, 2]]), ["tensor"]),
    ("item_of_many", lambda t: t["a"].item(), ["[2, 3]"]),
]


@pytest.mark.parametrize("fn, match", [pytest.param(f, m, id=n) for n, f, m in SHAPE_ERRORS])
def test_wrong_shapes_raise_value_error_naming_op_and_shapes(ts, fn, match):
    raises_without_leak(ValueError, lambda: fn(ts), *match)


DTYPE_ERRORS = [
    ("bitwise_and_float", lambda t: t["f"] & t["f"], ["bitwise_and", "float32"]),
    ("invert_float", lambda t: ~t["f"], ["float32"]),
    ("mean_int", lambda t: t["i"].mean(), ["mean", "int64"]),
    ("var_int", lambda t: t["i"].var(), ["var", "int64"]),
    ("index_select_float_index", lambda t: t["a"].index_select(0, t["f"]), ["index_select", "float32"]),
    ("gather_float_index", lambda t: t["a"].gather(0, lz.zeros(2, 3)), ["gather"]),
    ("where_float_condition", lambda t: lz.where(t["f"], t["f"], t["f"]), ["where", "float32"]),
    ("matmul_bool", lambda t: t["m"] @ t["m"], ["matmul", "bool"]),
    ("neg_bool", lambda t: -t["m"], ["neg", "bool"]),
    ("iadd_float_into_int", lambda t: t["i"].__iadd__(0.5), ["int64", "float32"]),
    ("to_numpy_dtype", lambda t: t["f"].to(np.float32), ["dtype"]),
    ("zeros_dtype", lambda t: lz.zeros(2, dtype="float32"), ["dtype"]),
    ("tensor_dtype", lambda t: lz.tensor([1, 2], dtype=np.int64), ["dtype"]),
]


@pytest.mark.parametrize("fn, match", [pytest.param(f, m, id=n) for n, f, m in DTYPE_ERRORS])
def test_wrong_dtypes_raise_type_error(ts, fn, match):
    raises_without_leak(TypeError, lambda: fn(ts), *match)


INDEX_ERRORS = [
    ("sum_dim", lambda t: t["a"].sum(5), ["sum", "5"]),
    ("sum_neg_dim", lambda t: t["a"].sum(-3), ["sum", "-3"]),
    ("transpose", lambda t: t["a"].transpose(0, 3), ["transpose", "3"]),
    ("unsqueeze", lambda t: t["a"].unsqueeze(4), ["unsqueeze"]),
    ("squeeze", lambda t: t["a"].squeeze(3), ["squeeze"]),
    ("argmax", lambda t: t["a"].argmax(4), ["argmax"]),
    ("max_dim", lambda t: t["a"].max(2), []),
    ("index_select_dim", lambda t: t["a"].index_select(3, t["i"]), ["index_select"]),
    ("cat_dim", lambda t: lz.cat([t["a"], t["a"]], 2), []),
    ("getitem_int", lambda t: t["a"][5], ["5", "2"]),
    ("getitem_negative_int", lambda t: t["a"][-3], ["-3"]),
    ("getitem_second_dim", lambda t: t["a"][0, 3], ["3"]),
    ("too_many_indices", lambda t: t["a"][0, 0, 0], []),
    ("setitem_int", lambda t: t["a"].__setitem__(2, 1.0), []),
    ("mask_wrong_shape", lambda t: t["a"][lz.tensor([True, False, True])], []),
    # PyTorch: "tensors used as indices must be long, int, byte or bool tensors" is an IndexError.
    ("float_index_tensor", lambda t: t["a"][lz.ones(2, 3)], ["float32"]),
]


@pytest.mark.parametrize("fn, match", [pytest.param(f, m, id=n) for n, f, m in INDEX_ERRORS])
def test_out_of_range_dims_and_indices_raise_index_error(ts, fn, match):
    raises_without_leak(IndexError, lambda: fn(ts), *match)


@pytest.mark.parametrize("bad", [np.zeros(3, np.complex64), np.zeros(3, np.uint8), np.zeros(3, np.int16),
                                 np.array(["x", "y"]), np.zeros(2, np.uint64)], ids=lambda a: a.dtype.name)
def test_unsupported_numpy_dtypes_raise_type_error(bad):
    for make in (lz.tensor, lz.from_numpy):
        raises_without_leak(TypeError, lambda: make(bad))


NON_TENSOR_ARGUMENTS = [
    ("exp_str", lambda t: lz.exp("a")),
    ("exp_list", lambda t: lz.exp([1.0, 2.0])),
    ("cat_ints", lambda t: lz.cat([1, 2])),
    ("cat_tensor_and_int", lambda t: lz.cat([t["f"], 2])),
    ("add_str", lambda t: t["a"] + "x"),
    ("radd_str", lambda t: "x" + t["a"]),
    ("rdiv_str", lambda t: "x" / t["a"]),
    ("matmul_int", lambda t: t["a"] @ 3),
    ("rmatmul_int", lambda t: 3 @ t["a"]),
    ("add_none", lambda t: t["a"] + None),
    ("mul_list", lambda t: t["f"] * [1, 2]),
    ("lt_str", lambda t: t["f"] < "a"),
    ("where_str", lambda t: lz.where(t["m"], "a", t["f"])),
    ("clamp_str_bound", lambda t: t["f"].clamp("a")),
    ("index_select_list", lambda t: t["a"].index_select(0, [0, 1])),
    ("reshape_str", lambda t: t["a"].reshape("a")),
    ("zeros_str", lambda t: lz.zeros("a")),
    ("full_str_value", lambda t: lz.full((2,), "a")),
    ("tensor_objects", lambda t: lz.tensor([object()])),
    ("tensor_str", lambda t: lz.tensor("abc")),
    ("step_closure", lambda t: lz.add_step_closure("not callable")),
    ("int_of_float_index", lambda t: [1, 2][lz.tensor(0.0)]),
]


@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in NON_TENSOR_ARGUMENTS])
def test_non_tensor_arguments_raise_type_error(ts, fn):
    raises_without_leak(TypeError, lambda: fn(ts))


CAST_FAILURES = [
    ("sum_str_dim", lambda a: a.sum("x")),
    ("mean_float_dim", lambda a: lz.mean(a, dim=1.5)),
    ("amax_str_dim", lambda a: a.amax(dim="0")),
    ("std_str_dim", lambda a: a.std("x")),
    ("max_str_dim", lambda a: a.max("x")),
    ("argmax_str_dim", lambda a: a.argmax("x")),
    ("squeeze_str_dim", lambda a: a.squeeze("x")),
    ("split_str", lambda a: a.split("x")),
    ("split_sections_with_str", lambda a: a.split([1, "x"])),
    ("clamp_str", lambda a: a.clamp("a")),
    ("clamp_max_str", lambda a: a.clamp(max="a")),
    ("randint_str_high", lambda a: lz.randint(0, "a", (2,))),
    ("eye_str_columns", lambda a: lz.eye(2, "a")),
    ("graph_hash_ints", lambda a: lz.debug.graph_hash([1, 2])),
    ("dump_graph_ints", lambda a: lz.debug.dump_graph([1])),
]


@pytest.mark.parametrize("call", [pytest.param(f, id=n) for n, f in CAST_FAILURES])
def test_badly_typed_arguments_converted_in_bindings_raise_type_error(call):
    raises_without_leak(TypeError, lambda: call(lz.ones(2, 3)))


def test_reduction_of_empty_tensor_names_the_user_op():
    raises_without_leak(ValueError, lambda: lz.zeros(0).amax(), "amax", "float32[0]")


def test_empty_reduction_without_identity_raises_as_pytorch():
    # torch: amax() of an empty tensor is a RuntimeError (a ValueError here); naming the
    # zero-size dim is an IndexError, as torch's "Expected reduction dim 1 to have non-zero size"
    raises_without_leak(ValueError, lambda: lz.zeros(0).amax())
    raises_without_leak(IndexError, lambda: lz.zeros(2, 0).amin(1))
    raises_without_leak(IndexError, lambda: lz.max(lz.zeros(2, 0), 1))
    raises_without_leak(IndexError, lambda: lz.argmax(lz.zeros(2, 0), 1))


def test_errors_record_nothing():
    """A failing op records no node and runs nothing: the next sync runs nothing either."""
    a = lz.ones(2, 3)
    lz.sync(wait=True)
    before = executions()
    with pytest.raises(ValueError):
        a + lz.ones(4)
    with pytest.raises(TypeError):
        a & a
    with pytest.raises(IndexError):
        a.sum(3)
    lz.sync(wait=True)
    assert executions() == before
    assert lz.debug.tensor_state(a) == "device_data"


def test_error_classes():
    assert issubclass(lz.Error, RuntimeError)
    assert issubclass(lz.ExecutionError, lz.Error)
    assert issubclass(lz.UnexpectedExecutionError, lz.Error)
    assert issubclass(lz.TooManyGraphsError, lz.Error)


def _bad_gather_program():
    x = lz.tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3))
    # index 5 of a dim of size 4; "+ 0": computed, so only the program finds it (a host index
    # is checked at the line)
    return x.index_select(0, lz.tensor([0, 5]) + 0) * 2.0


def test_async_failure_raises_execution_error_at_wait_and_runtime_keeps_working():
    gc.collect()
    live = lz.debug.live_tensor_count()
    bad = _bad_gather_program()
    with pytest.raises(lz.ExecutionError) as info:
        lz.sync()
        lz.wait()
    assert isinstance(info.value, lz.Error) and isinstance(info.value, RuntimeError)
    assert "index_select" in str(info.value) and "5" in str(info.value)
    del info
    lz.wait()  # raised once: the next wait is clean
    lz.sync(wait=True)
    # The interpreter and the runtime keep working.
    x = lz.tensor(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal((x * 3.0 + 1.0).numpy(), np.arange(6) * 3.0 + 1.0)
    assert (lz.tensor([[1.0, 2.0]]) @ lz.tensor([[3.0], [4.0]])).item() == 11.0
    del bad, x
    gc.collect()
    assert lz.debug.live_tensor_count() == live


def test_async_failure_surfaces_at_the_value_read():
    bad = _bad_gather_program()
    with pytest.raises(lz.ExecutionError):
        bad.numpy()
    # Reading a value computed from the failed one fails too, with lz.Error.
    with pytest.raises(lz.Error):
        (bad + 1.0).tolist()
    del bad
    _settle()
    good = lz.tensor([1.0, 2.0]) + 1.0
    assert good.tolist() == [2.0, 3.0]


def _settle():
    try:
        lz.wait()
    except lz.Error:
        pass


def test_async_failure_in_a_training_loop_then_recovery():
    w = lz.tensor([1.0, 2.0, 3.0])
    idx = lz.tensor([0, 7]) + 0  # computed: checked when the program runs
    w2 = w.index_select(0, idx)
    with pytest.raises(lz.ExecutionError):
        lz.sync(wait=True)
    del w2
    _settle()
    for _ in range(3):
        w -= 0.5 * w
        lz.sync()
    lz.wait()
    np.testing.assert_allclose(w.numpy(), np.array([1.0, 2.0, 3.0]) * 0.125)


def test_async_error_raised_by_a_read_is_not_raised_again():
    # The failing program holds the last reference to a 64 MB input, so the executor thread takes
    # a moment to release it after completing the execution (and only then records the error).
    big = np.zeros((4, 4_000_000), dtype=np.float32)
    raised_again = 0
    for _ in range(6):
        t = lz.tensor(big).index_select(0, lz.tensor([0, 5]) + 0)
        with pytest.raises(lz.ExecutionError):
            t.numpy()
        try:
            lz.wait()
        except lz.ExecutionError:
            raised_again += 1
    assert raised_again == 0


def test_bad_input_does_not_grow_live_tensors_over_many_errors():
    a = lz.ones(3, 3)
    gc.collect()
    before = lz.debug.live_tensor_count()
    for _ in range(20):
        for bad in (lambda: a + lz.ones(2), lambda: a.sum(4), lambda: a & a, lambda: a @ "x",
                    lambda: a.reshape(5), lambda: lz.tensor(np.zeros(2, np.uint8))):
            try:
                bad()
            except (ValueError, TypeError, IndexError):
                pass
    gc.collect()
    assert lz.debug.live_tensor_count() == before
    assert counter("UncachedCompile") == 0
