"""Torch CPU tensors cross into Lazuli and back over the same memory (lazuli.torch.to_lazuli /
to_torch): same addresses, each side sees the other's writes, and each keeps the other's memory
alive."""
import gc
import time
import weakref

import numpy as np
import pytest
import torch

import lazuli as lz
from lazuli.torch import to_lazuli, to_torch
from lazuli import _C
from lazuli.torch._boundary import data_ptr


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool,
                                   torch.float16])
def test_to_lazuli_is_device_data_over_the_torch_memory(dtype):
    t = torch.arange(12).reshape(3, 4).to(dtype)
    lt = to_lazuli(t)
    assert lz.debug.tensor_state(lt) == "device_data"
    assert data_ptr(lt) == t.data_ptr()
    assert lt.shape == (3, 4)
    t[0, 0] = 1 if dtype is not torch.bool else False  # a torch write is seen by Lazuli
    np.testing.assert_array_equal(lt.numpy(), t.numpy())


def test_to_lazuli_keeps_the_torch_storage_alive():
    lt = to_lazuli(torch.arange(1000, dtype=torch.float64))
    gc.collect()
    assert lt.sum().item() == 499500.0


def test_to_torch_is_a_view_of_the_lazuli_buffer_and_keeps_it():
    x = lz.arange(6, dtype=lz.float32) * 2
    t = to_torch(x)  # computes x (a value read), then shares its buffer
    assert t.data_ptr() == data_ptr(x)
    t[0] = 42.0  # shared memory: the write is seen from Lazuli
    assert x.numpy()[0] == 42.0
    del x
    gc.collect()
    torch.testing.assert_close(t, torch.tensor([42.0, 2, 4, 6, 8, 10]))


def test_round_trip_shares_one_block():
    t = torch.randn(4, 5)
    back = to_torch(to_lazuli(t))
    assert back.data_ptr() == t.data_ptr()
    torch.testing.assert_close(back, t)


def test_non_contiguous_tensor_is_copied_once_and_keeps_its_values():
    t = torch.randn(4, 6).t()
    lt = to_lazuli(t)
    assert data_ptr(lt) != t.data_ptr()  # no dense block to share: the one documented copy
    np.testing.assert_array_equal(lt.numpy(), t.numpy())


def test_bfloat16_enters_and_leaves_without_a_copy():
    t = torch.tensor([1.5, -2.0, 3.0e38]).to(torch.bfloat16)
    lt = to_lazuli(t)
    assert lt.dtype == lz.bfloat16 and data_ptr(lt) == t.data_ptr()
    doubled = lt * 2
    back = to_torch(doubled)
    assert back.dtype == torch.bfloat16 and back.data_ptr() == data_ptr(doubled)
    assert torch.equal(back, t * 2)  # 6e38 is past bfloat16's range: inf on both sides
    with pytest.raises(TypeError, match="bfloat16"):  # numpy's own view still refuses it
        _C._numpy_view(doubled)


def test_unsupported_dtype_raises_naming_it():
    with pytest.raises(TypeError, match="int16"):
        to_lazuli(torch.ones(2, dtype=torch.int16))
    with pytest.raises(TypeError, match="lazuli.Tensor"):
        to_torch(torch.ones(2))


def test_a_numpy_that_misreads_lazulis_buffers_fails_the_import_instead_of_the_results(monkeypatch):
    # Seen on this project's machine: numpy 2 under an extension built with pybind11 2.10 made
    # arrays whose every element read as the first, and every bridge result was silently wrong.
    from lazuli.torch import _boundary

    _boundary.check_numpy_interop()  # this environment reads them correctly
    monkeypatch.setattr(_C, "_numpy_view", lambda t: np.lib.stride_tricks.as_strided(
        np.ones(1, dtype=np.float32), shape=(4,), strides=(0,)))
    with pytest.raises(ImportError, match=r"does not read Lazuli's buffers correctly"):
        _boundary.check_numpy_interop()


def _sum_program(shapes):
    """A warm program over stand-ins of `shapes` (float32) computing their sum, as the bridge
    compiles a partition."""
    stand_ins = [to_lazuli(torch.zeros(s)) for s in shapes]
    program = lz._C._WarmProgram(stand_ins, "test", "torch-compile")
    out = stand_ins[0]
    for s in stand_ins[1:]:
        out = out + s
    program.compile([out])
    return program


def test_run_over_reads_the_torch_tensors_memory_on_every_run():
    program = _sum_program([(2, 3), (2, 3)])
    a, b = torch.ones(2, 3), torch.full((2, 3), 2.0)
    (out,) = lz._C._numpy_views(program.run_over([a, b]))
    np.testing.assert_array_equal(out, np.full((2, 3), 3.0))
    b.fill_(5.0)  # the same tensors, new values: the next run reads them
    (out,) = lz._C._numpy_views(program.run_over([a, b]))
    np.testing.assert_array_equal(out, np.full((2, 3), 6.0))


def test_run_over_holds_its_tensors_until_the_run_is_done():
    program = _sum_program([(1000,), (1000,)])
    results = program.run_over([torch.ones(1000), torch.arange(1000, dtype=torch.float32)])
    gc.collect()  # the temporaries' only holder is the run
    assert float(lz._C._numpy_views(results)[0].sum()) == 1000 + 499500


def _released(refs):
    """Whether every weakly referenced tensor is gone once the owners the executor thread let go
    are released (a pending call, run at the next check of the interpreter's)."""
    lz.wait()
    for _ in range(3):
        gc.collect()
        time.sleep(0.01)
    return all(r() is None for r in refs)


def test_run_over_lets_its_tensors_go_after_the_run():
    program = _sum_program([(1000,), (1000,)])
    a, b = torch.ones(1000), torch.ones(1000)
    refs = [weakref.ref(a), weakref.ref(b)]
    results = program.run_over([a, b])
    del a, b
    assert _released(refs)
    assert float(lz._C._numpy_views(results)[0].sum()) == 2000


def test_a_donated_input_outlives_the_run_alone():
    # Input 0's memory becomes output 0's (an in-place update): it lives as long as the output,
    # but the run's other inputs must not live with it.
    stand_ins = [to_lazuli(torch.zeros(1000)) for _ in range(2)]
    program = lz._C._WarmProgram(stand_ins, "test", "torch-compile")
    program.compile([stand_ins[0] + stand_ins[1]], donate=[(0, 0)])
    del stand_ins
    a, b = torch.ones(1000), torch.full((1000,), 2.0)
    ref_b = weakref.ref(b)
    (out,) = program.run_over([a, b])
    del b
    view = lz._C._numpy_views([out])[0]
    assert _released([ref_b])
    assert view.ctypes.data == a.data_ptr() and float(a.sum()) == 3000  # computed in place


@pytest.mark.parametrize("bad", [
    lambda: torch.ones(4, 3),                  # another size
    lambda: torch.ones(3, 2).t(),              # not one dense block
    lambda: torch.ones(2, 1).expand(2, 3),     # 6 elements over 2 in memory
], ids=["size", "transposed", "expanded"])
def test_run_over_refuses_a_tensor_that_is_not_the_inputs_block(bad):
    program = _sum_program([(2, 3), (2, 3)])
    with pytest.raises(ValueError, match="run_over: tensor 1 is not a contiguous block of 24 bytes"):
        program.run_over([torch.ones(2, 3), bad()])
    with pytest.raises(ValueError, match="2 tensors and 1 content ids"):
        program.run_over([torch.ones(2, 3), torch.ones(2, 3)], [0])
    (out,) = lz._C._numpy_views(program.run_over([torch.ones(2, 3), torch.ones(2, 3)]))
    np.testing.assert_array_equal(out, np.full((2, 3), 2.0))  # the program still runs


def test_a_read_runs_a_short_program_itself_and_leaves_torchs_threads_alone():
    # A partition's program that ran before (so its length is known, and short) runs on the
    # thread that reads its outputs when it is next in line: with the executor thread held, only
    # the reader can run it. Its oneDNN convolution makes the running thread's OpenMP team itself;
    # PyTorch shares that OpenMP runtime, so the reader's own setting must come back after.
    import lazuli.torch as lzt
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3)
    x = torch.randn(2, 3, 16, 16)
    f = torch.compile(conv, backend=lzt.backend)
    threads = torch.get_num_threads()
    # Any earlier run counts as short: a loaded machine may take over the default 10 ms.
    old = lz.debug._get_config("waiter_run_ms")
    lz.debug._set_config("waiter_run_ms", 1_000_000)
    try:
        with torch.no_grad():
            f(x)
            lz.wait()
            before = _C.debug.counter_value("RunOnWaiter")
            _C.debug._hold_executor()
            try:
                out = f(x)
            finally:
                _C.debug._release_executor()
            expected = conv(x)
    finally:
        lz.debug._set_config("waiter_run_ms", old)
    assert _C.debug.counter_value("RunOnWaiter") == before + 1
    assert torch.get_num_threads() == threads
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
