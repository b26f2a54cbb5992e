"""Sizes near and past the limits. A tensor whose element or byte count does not fit in int64 can
never exist: the op that would record it raises lz.OutOfMemoryError (both an lz.Error and a
MemoryError) naming the op and the shape, and records nothing. A huge shape that does fit is
recorded lazily, as in PyTorch/XLA; materializing it raises the same error at the wait point, and
the runtime keeps working. Values that overflow an integer dtype (nan into int64) are refused."""
import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lazuli as lz

I64_MAX = 2**63 - 1


def raises_without_leak(exc, fn, *match):
    """fn() raises exc, its message holds every string of `match`, and no tensor was left alive."""
    gc.collect()
    before = lz.debug.live_tensor_count()
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for m in match:
        assert m in msg, f"{m!r} not in {msg!r}"
    del info
    gc.collect()
    assert lz.debug.live_tensor_count() == before
    return msg


# Operands here are lazy and at least 1 TiB, so a sync that materializes one by mistake fails
# cleanly (more than RAM and swap) instead of filling this machine's memory.
BIG = 2**38


def assert_runtime_works():
    assert (lz.tensor([1.0, 2.0]) * 3 + 1).tolist() == [4.0, 7.0]
    pending = lz.exp(lz.zeros(1))
    lz.sync(wait=True)
    assert pending.tolist() == [1.0]


def test_out_of_memory_error_is_a_memory_error_and_a_lazuli_error():
    assert issubclass(lz.OutOfMemoryError, MemoryError)
    assert issubclass(lz.OutOfMemoryError, lz.Error)
    assert issubclass(lz.OutOfMemoryError, RuntimeError)


# ---- raised at the op: the size cannot be represented ----------------------------------------

PAST_INT64 = [
    # bytes past int64: 2^62 float32 elements are 2^64 bytes
    ("ones_2_62", lambda: lz.ones(2**62), ["ones", "float32[4611686018427387904]", "bytes"]),
    ("zeros_int64_max", lambda: lz.zeros(I64_MAX), ["zeros", str(I64_MAX)]),
    ("zeros_2_31_squared", lambda: lz.zeros(2**31, 2**31), ["zeros", "[2147483648, 2147483648]"]),
    ("full_int64", lambda: lz.full((2**61,), 3, dtype=lz.int64), ["full", "int64[2305843009213693952]"]),
    ("rand", lambda: lz.rand(2**62), ["rand", "[4611686018427387904]"]),
    ("randint", lambda: lz.randint(0, 5, (2**61,)), ["randint", "[2305843009213693952]"]),
    ("arange_2_62", lambda: lz.arange(0, 2**62, 1), ["arange", "int64[4611686018427387904]"]),
    # elements past int64
    ("ones_2_32_squared", lambda: lz.ones((2**32, 2**32)),
     ["ones", "[4294967296, 4294967296]", "elements"]),
    ("eye_2_40", lambda: lz.eye(2**40), ["eye", "[1099511627776, 1099511627776]"]),
    ("eye_column_indices", lambda: lz.eye(2**62, 0), ["eye"]),
    ("arange_1e60_elements", lambda: lz.arange(0, 1e30, 1e-30), ["arange", "1e+60 elements"]),
    ("arange_float_past_int64", lambda: lz.arange(0.0, 1e19, 1.0), ["arange", "elements"]),
    ("bool_past_int64", lambda: lz.zeros(2**62, 2, dtype=lz.bool), ["zeros", "bool"]),
]


@pytest.mark.parametrize("name,fn,match", PAST_INT64, ids=[c[0] for c in PAST_INT64])
def test_creation_past_int64_raises_memory_error_at_the_op(name, fn, match):
    raises_without_leak(MemoryError, fn, *match)
    assert_runtime_works()


def test_ones_numel_past_int64_is_not_a_silent_empty_tensor():
    # It used to be recorded with numel() 0 and sum() 0.0.
    with pytest.raises(lz.OutOfMemoryError):
        lz.ones((2**32, 2**32)).sum().item()


def test_largest_representable_shapes_are_recorded_lazily():
    # Bytes exactly at the limit and one element past it, per dtype.
    assert lz.zeros(I64_MAX, dtype=lz.bool).shape == (I64_MAX,)
    assert lz.zeros(2**61 - 1, dtype=lz.float32).shape == (2**61 - 1,)
    with pytest.raises(MemoryError):
        lz.zeros(2**61, dtype=lz.float32)
    assert lz.zeros(2**60 - 1, dtype=lz.int64).shape == (2**60 - 1,)
    with pytest.raises(MemoryError):
        lz.zeros(2**60, dtype=lz.int64)
    assert lz.zeros(2**40).numel() == 2**40


def test_arange_integer_length_is_exact_past_2_53():
    # A double computes 2^53 for 2^53 + 1.
    assert lz.arange(2**53 + 1).shape == (2**53 + 1,)
    assert lz.arange(-(2**62), 2**62, 2**61).shape == (4,)


def test_arange_nan_step_raises_value_error():
    raises_without_leak(ValueError, lambda: lz.arange(0.0, 10.0, float("nan")), "arange", "step")


# ---- growing ops -------------------------------------------------------------------------------

def test_expand_past_int64_bytes_raises_memory_error_naming_expand():
    one = lz.ones(1)
    raises_without_leak(MemoryError, lambda: one.expand(2**62), "expand", "[4611686018427387904]")
    raises_without_leak(MemoryError, lambda: one.expand(2**32, 2**32), "expand")
    assert_runtime_works()


def test_cat_sizes_adding_past_int64_raise_memory_error():
    a = lz.ones(1, dtype=lz.bool).expand(2**62)
    raises_without_leak(MemoryError, lambda: lz.cat([a, a]), "cat", "add up past int64")
    b = lz.ones(1).expand(2**60)  # 2^62 bytes: fits; two of them do not
    raises_without_leak(MemoryError, lambda: lz.cat([b, b]), "cat", "float32[2305843009213693952]")
    raises_without_leak(MemoryError, lambda: lz.stack([b, b, b, b]), "cat")
    assert_runtime_works()


def test_matmul_output_past_int64_raises_memory_error_naming_matmul():
    a, b = lz.ones(BIG, 1), lz.ones(1, BIG)
    raises_without_leak(MemoryError, lambda: a @ b, "matmul", f"[{BIG}, {BIG}]")
    c, d = lz.ones(BIG, 1, 1, 1), lz.ones(1, BIG, 1, 1)  # batch dims broadcast past int64
    raises_without_leak(MemoryError, lambda: c @ d, "matmul", f"[{BIG}, {BIG}, 1, 1]")
    del a, b, c, d
    assert_runtime_works()


def test_broadcast_past_int64_raises_memory_error_naming_the_op():
    a, b = lz.ones(BIG, 1), lz.ones(1, BIG)
    raises_without_leak(MemoryError, lambda: a + b, "add", f"[{BIG}, {BIG}]")
    raises_without_leak(MemoryError, lambda: lz.where(a > 0, a, b), "where")
    del a, b
    assert_runtime_works()


def test_cast_past_int64_bytes_raises_memory_error():
    m = lz.ones(1, dtype=lz.bool).expand(2**62)  # 2^62 bytes as bool, 2^65 as float64
    raises_without_leak(MemoryError, lambda: m.double(), "[4611686018427387904]")


def test_reshape_whose_sizes_wrap_to_the_element_count_raises_value_error():
    # (2^62 + 1) * 4 wraps to 4 in int64: it was accepted as a view of 4 elements.
    raises_without_leak(ValueError, lambda: lz.ones(4).reshape(2**62 + 1, 4), "reshape", "past int64")
    raises_without_leak(ValueError, lambda: lz.ones(4).reshape(2**62 + 1, 4, -1), "reshape")


def test_slice_with_a_step_past_the_dim_picks_one_element():
    assert lz.arange(10)[::I64_MAX].tolist() == [0]
    assert lz.arange(10)[3::2**62].tolist() == [3]
    assert lz.arange(10).chunk(I64_MAX)[0].tolist() == [0]
    assert len(lz.arange(10).chunk(I64_MAX)) == 10


# ---- raised at the wait point: the size fits, the memory does not ------------------------------

def test_materializing_a_huge_lazy_tensor_raises_memory_error_at_the_read():
    t = lz.zeros(2**40)  # 4 TiB: recorded, never allocated
    msg = raises_without_leak(MemoryError, t.numpy, "float32[1099511627776]", "4398046511104 bytes")
    assert "RAM and swap" in msg
    assert isinstance(pytest.raises(lz.Error, t.tolist).value, lz.OutOfMemoryError)
    del t
    assert_runtime_works()


def test_huge_sync_raises_memory_error_at_the_wait_and_runtime_keeps_working():
    t = lz.zeros(2**40)
    lz.sync()  # scheduled; the failure is kept for the wait
    with pytest.raises(lz.OutOfMemoryError):
        lz.wait()
    lz.wait()  # raised once
    del t
    assert_runtime_works()


def test_expand_then_contiguous_materializes_and_raises_memory_error():
    big = lz.ones(1).expand(2**40)  # a view: fine
    assert big.shape == (2**40,)
    raises_without_leak(MemoryError, lambda: big.contiguous().numpy(), "float32[1099511627776]")
    assert big[5:7].tolist() == [1.0, 1.0]  # the view itself is still usable
    assert_runtime_works()


def test_huge_matmul_output_raises_memory_error_at_the_read():
    a, b = lz.ones(2**20, 1), lz.ones(1, 2**20)  # a 4 TiB product
    raises_without_leak(MemoryError, lambda: (a @ b).numpy(), "float32[1048576, 1048576]")
    assert_runtime_works()


def test_allocation_refused_by_the_system_raises_memory_error():
    # Below RAM and swap, so it reaches malloc, which an address-space limit makes fail.
    code = textwrap.dedent("""
        import os, resource
        import lazuli as lz
        assert (lz.ones(3) * 2).tolist() == [2.0, 2.0, 2.0]
        vm = int(open('/proc/self/statm').read().split()[0]) * os.sysconf('SC_PAGE_SIZE')
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        soft = vm + (1 << 30) if hard == resource.RLIM_INFINITY else min(vm + (1 << 30), hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        try:
            (lz.ones(2**31) * 2).numpy()
        except lz.OutOfMemoryError as e:
            print('OOM', e)
        assert (lz.ones(3) * 3).tolist() == [3.0, 3.0, 3.0]
        print('ALIVE')
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "OOM" in r.stdout and "out of memory" in r.stdout and "float32[2147483648]" in r.stdout
    assert "ALIVE" in r.stdout


# ---- values that overflow the dtype (PyTorch raises; they became INT64_MIN) ---------------------

@pytest.mark.parametrize("value,dtype", [
    (float("nan"), lz.int64), (float("inf"), lz.int64), (-float("inf"), lz.int32),
    (1e19, lz.int64), (2**40, lz.int32), (2.0**31, lz.int32), (1e300, lz.float32),
])
def test_full_and_fill_with_a_value_past_the_dtype_raise_value_error(value, dtype):
    raises_without_leak(ValueError, lambda: lz.full((2,), value, dtype=dtype), "full", "overflow")
    t = lz.zeros(2, dtype=dtype)
    raises_without_leak(ValueError, lambda: t.fill_(value), "fill_", "overflow")
    assert t.tolist() == [0, 0]

    def setitem():
        t[0] = value
    raises_without_leak(ValueError, setitem, "overflow")
    assert t.tolist() == [0, 0]


def test_full_and_fill_keep_values_that_fit():
    assert lz.full((2,), 3.7, dtype=lz.int64).tolist() == [3, 3]  # truncates, as PyTorch
    assert lz.full((1,), -(2**31), dtype=lz.int32).tolist() == [-(2**31)]
    assert lz.full((1,), 2**63 - 1, dtype=lz.int64).tolist() == [2**63 - 1]
    assert np.isnan(lz.full((1,), float("nan")).numpy()[0])
    assert lz.full((1,), float("inf"), dtype=lz.float32).tolist() == [float("inf")]
    assert lz.full((1,), float("nan"), dtype=lz.bool).tolist() == [True]


def test_fill_with_a_tensor_needs_a_0_dim_value():
    t = lz.zeros(3)
    raises_without_leak(ValueError, lambda: t.fill_(lz.tensor([1.0, 2.0, 3.0])), "fill_", "0-dim", "[3]")
    assert t.tolist() == [0.0, 0.0, 0.0]
    assert t.fill_(lz.tensor(2.0)).tolist() == [2.0, 2.0, 2.0]
