"""PyTorch tensors on the lazy Lazuli device (lazuli.torch.device()): ops record through the ATen
table and run at the barrier, values read like eager's, PyTorch's autograd and optimizers run on
top unchanged, and the seed's semantics hold for PyTorch programs (a value read cuts, a barrier
after a read compiles once, a changing learning rate or batch size compiles nothing new). Eager
PyTorch on the CPU is the oracle; caches are read through counters."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import lazuli as lz
import lazuli.torch as lzt

counter = lz.debug.counter_value  # counters start at 0 in every test (tests/python/conftest.py)
DEV = lzt.device()


def fallbacks():
    return {n: counter(n) for n in lz.debug.counter_names()
            if n.startswith("fallback::aten.") and counter(n)}


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_registering_is_explicit_never_an_import_or_the_compile_backend():
    code = textwrap.dedent("""
        import torch, lazuli.torch as lzt
        f = torch.compile(lambda x: x * 2, backend=lzt.backend)
        f(torch.ones(2))
        print(torch._C._get_privateuse1_backend_name())
        lzt.device()
        print(torch._C._get_privateuse1_backend_name(), torch.device("lazuli:0"))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["privateuseone", "lazuli", "lazuli:0"]


def test_ops_record_and_run_at_the_value_read():
    x = torch.randn(3, 4)
    y = x.to(DEV)
    assert y.device == torch.device("lazuli:0") and y.shape == (3, 4) and y.dtype == torch.float32
    z = (y * 2 + 1).relu().sum(1)
    assert lzt.tensor_state(z) == "ir"
    assert counter("UncachedCompile") == 0  # nothing ran yet
    torch.testing.assert_close(z.cpu(), (x * 2 + 1).relu().sum(1))
    assert z.sum().item() == pytest.approx(((x * 2 + 1).relu().sum()).item(), rel=1e-6)
    assert not fallbacks()


def test_storage_less_tensors_refuse_raw_pointers_and_read_through_cpu():
    y = torch.arange(6.0).reshape(2, 3).to(DEV)
    with pytest.raises(RuntimeError):
        y.data_ptr()
    assert y.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert str(y.cpu()) == str(torch.arange(6.0).reshape(2, 3))


def test_in_place_update_through_a_view_reaches_the_base():
    x = torch.zeros(2, 3).to(DEV)
    row = x[1]
    row.add_(5)
    x.t()[0].mul_(2)  # column 0 of x, through a transpose
    torch.testing.assert_close(x.cpu(), torch.tensor([[0.0, 0, 0], [10, 5, 5]]))
    assert x.is_contiguous() and not x.t().is_contiguous()  # strides as eager's


def batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(5, 8, generator=g), torch.randint(0, 4, (5,), generator=g))
            for _ in range(n)]


def _train(model, opt, data, device=None):
    losses = []
    for x, y in data:
        if device is not None:
            x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if device is not None:
            lzt.sync()
        losses.append(loss.item())
    return losses


OPTIMIZERS = {
    "sgd": lambda p, fe: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-2, foreach=fe),
    "adam": lambda p, fe: torch.optim.Adam(p, lr=1e-2, foreach=fe),
    "adamw": lambda p, fe: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=fe),
}


@pytest.mark.parametrize("foreach", [False, True], ids=["single_tensor", "foreach"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_training_step_matches_eager_and_stops_compiling(name, foreach):
    data = batches(4)
    eager, model = mlp(), mlp().to(DEV)
    want = _train(eager, OPTIMIZERS[name](eager.parameters(), foreach), data)
    opt = OPTIMIZERS[name](model.parameters(), foreach)
    got = _train(model, opt, data[:2], DEV)
    compiles = counter("UncachedCompile")
    got += _train(model, opt, data[2:], DEV)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert counter("UncachedCompile") == compiles  # warm after two steps
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-5, atol=1e-6)
    assert not fallbacks(), fallbacks()


def test_changing_learning_rate_and_batch_size_compile_no_new_kernels():
    model = mlp().to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step(batch):
        x, y = torch.randn(batch, 8).to(DEV), torch.randint(0, 4, (batch,)).to(DEV)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        sched.step()
        lzt.sync(wait=True)

    step(4)
    step(4)
    programs, kernels = counter("UncachedCompile"), counter("KernelCompile")
    step(4)
    assert counter("UncachedCompile") == programs  # the lr is a parameter, not a constant
    step(7)
    assert counter("KernelCompile") == kernels  # a new batch size: a new plan, no new kernel


def test_value_read_then_barrier_compiles_once():
    x = torch.randn(4, 4).to(DEV)
    for _ in range(3):
        y = (x @ x).relu()
        print(y.sum().item())  # a value read cuts ...
        lzt.sync()             # ... and the barrier after it finds the same program
    assert counter("UncachedCompile") <= 2


def test_op_without_lowering_runs_on_the_cpu_counted_and_correct():
    x = torch.rand(5)
    y = torch.special.i0(x.to(DEV)) * 2
    torch.testing.assert_close(y.cpu(), torch.special.i0(x) * 2)
    # special_i0 is i0, a structured op: its functional form decomposes into i0.out, which runs.
    assert fallbacks() == {"fallback::aten.i0.out": 1}


def test_bad_shapes_raise_runtime_error_at_the_line_and_record_nothing():
    a, b = torch.ones(3, 4).to(DEV), torch.ones(5).to(DEV)
    live = lz.debug.live_tensor_count()
    with pytest.raises(RuntimeError, match="add"):
        a + b
    assert lz.debug.live_tensor_count() == live
    torch.testing.assert_close((a + 1).cpu(), torch.full((3, 4), 2.0))  # still works


def test_mixing_devices_is_pytorchs_error():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3).to(DEV) + torch.ones(3)


def test_manual_seed_repeats_dropout_masks_without_recompiling():
    x = torch.ones(1000).to(DEV)

    def mask():
        return (torch.nn.functional.dropout(x, 0.5) != 0).cpu()

    torch.manual_seed(3)
    a, b = mask(), mask()
    compiles = counter("UncachedCompile")
    torch.manual_seed(3)
    c, d = mask(), mask()
    assert torch.equal(a, c) and torch.equal(b, d) and not torch.equal(a, b)
    assert 400 < int(a.sum()) < 600
    assert counter("UncachedCompile") == compiles  # the seed and the key are data


def test_as_strided_over_a_dense_region_is_a_view_that_writes_reach():
    # DistributedDataParallel's gradient buckets: dense views of one flat buffer, written through.
    got, want = torch.zeros(200, device=DEV), torch.zeros(200)
    for t in (got, want):
        t.as_strided((16, 6), (6, 1), 10).copy_(torch.arange(96.0).reshape(16, 6).to(t.device))
        t.as_strided((3, 4), (1, 3), 120).copy_(torch.arange(12.0).reshape(3, 4).to(t.device))
    assert got.as_strided((3, 4), (1, 3), 120).stride() == (1, 3)
    torch.testing.assert_close(got.cpu(), want)
    # Not a dense region (overlapping windows): a copy, and writing into it says why it raises.
    windows = got.as_strided((3, 4), (2, 1), 0)
    torch.testing.assert_close(windows.cpu(), want.as_strided((3, 4), (2, 1), 0))
    with pytest.raises(RuntimeError, match="as_strided"):
        windows.add_(1)


def test_unfold_on_the_device_is_lazy_and_a_copy_that_refuses_writes():
    x = torch.arange(20.0).reshape(2, 10)
    got = x.to(DEV).unfold(1, 4, 3)
    assert got.shape == (2, 3, 4)
    torch.testing.assert_close(got.cpu(), x.unfold(1, 4, 3))
    assert counter("fallback::aten.unfold.default") == 0
    with pytest.raises(RuntimeError, match="unfold"):
        got.add_(1)


def test_a_tensor_and_its_views_share_a_storage_and_nothing_else_does():
    # One empty storage per root tensor: at::Tensor::is_alias_of (DDP's reducer asks it of every
    # gradient) compares storages.
    def storage(t):
        return t.untyped_storage()._cdata

    a = torch.ones(4, device=DEV)
    assert storage(a.view(2, 2)) == storage(a) == storage(a[1:])
    assert storage(a) != storage(torch.ones(4, device=DEV)) and storage(a + 1) != storage(a)
    assert a.untyped_storage().nbytes() == 0
    with pytest.raises(RuntimeError):
        a.data_ptr()


def test_save_and_load_device_tensors(tmp_path):
    model = mlp().to(DEV)
    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    loaded = torch.load(path, map_location="cpu")
    for k, v in mlp().state_dict().items():
        torch.testing.assert_close(loaded[k], v)
    # A storage cannot be mapped onto a storage-less device: the error says what works instead.
    with pytest.raises(RuntimeError, match="map_location='cpu'"):
        torch.load(path, map_location=DEV)
    fresh = mlp(seed=5).to(DEV)
    fresh.load_state_dict(loaded)
    for k, v in fresh.state_dict().items():
        torch.testing.assert_close(v.cpu(), loaded[k])


def test_torch_compile_backend_works_beside_the_device():
    f = torch.compile(lambda x: (x * 3).sum(), backend=lzt.backend)
    assert f(torch.ones(4)).item() == 12.0


def test_debug_names_the_fallback_and_the_users_line(tmp_path):
    log = tmp_path / "debug.txt"
    code = textwrap.dedent(f"""
        import torch, lazuli.torch as lzt
        dev = lzt.device()
        x = torch.rand(3).to(dev)
        y = torch.special.i0(x)  # the line
    """)
    env = dict(os.environ, LAZULI_DEBUG="1", LAZULI_DEBUG_FILE=str(log))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    text = log.read_text()
    assert "fallback aten.i0.out" in text and "<string>:5" in text


def test_weights_shared_by_two_modules_are_tied_again_after_the_move():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)
            self.tie_weights()

        def tie_weights(self):
            self.head.weight = self.embed.weight

        def forward(self, i):
            return self.head(self.embed(i))

    torch.manual_seed(0)
    eager = Tied()
    model = Tied()
    model.load_state_dict(eager.state_dict())
    model = model.to(DEV)
    assert model.head.weight is not model.embed.weight  # new Parameters, as on PyTorch/XLA
    model.tie_weights()
    i = torch.tensor([[1, 2, 3, 1]])
    model(i.to(DEV)).sum().backward()
    eager(i).sum().backward()
    torch.testing.assert_close(model.embed.weight.grad.cpu(), eager.embed.weight.grad)


def test_device_loader_moves_batches_ahead_and_ends_each_step_with_a_barrier():
    data = torch.utils.data.TensorDataset(torch.randn(12, 8), torch.randint(0, 4, (12,)))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    eager, model = mlp(), mlp().to(DEV)
    opt, opt_eager = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager))
    marks = counter("MarkStep")
    losses = []
    for x, y in lzt.DeviceLoader(loader, DEV):
        assert x.device.type == "lazuli" and y.device.type == "lazuli"
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss)
    assert counter("MarkStep") - marks == 3  # one barrier per batch, the last one's included
    want = _train(eager, opt_eager, list(loader))
    torch.testing.assert_close([l.item() for l in losses], want, rtol=1e-5, atol=1e-6)


CHILD = textwrap.dedent("""
    import torch, lazuli as lz, lazuli.torch as lzt
    dev = lzt.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(torch.randn(5, 8).to(dev)),
                                          torch.randint(0, 4, (5,)).to(dev)).backward()
        opt.step()
        lzt.sync()
    lz.wait()
    print(lz.debug.counter_value("KernelCompile"), lz.debug.counter_value("PersistentCacheHit"))
""")


def test_a_second_process_compiles_no_kernel(tmp_path):
    env = dict(os.environ, LAZULI_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    (first_compiles, _), (second_compiles, second_hits) = [map(int, r) for r in runs]
    assert first_compiles > 0
    assert second_compiles == 0 and second_hits > 0  # every kernel from the disk cache


def test_a_cut_inside_torch_code_names_the_users_line(tmp_path):
    log = tmp_path / "debug.txt"
    code = textwrap.dedent("""
        import torch, lazuli.torch as lzt
        dev = lzt.device()
        x = torch.rand(3).to(dev)
        y = torch.nn.functional.logsigmoid(x)  # the line: an op the table lacks, inside torch
    """)
    env = dict(os.environ, LAZULI_DEBUG="1", LAZULI_DEBUG_FILE=str(log))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    text = log.read_text()
    assert "fallback aten.log_sigmoid" in text and "<string>:5" in text, text
    assert "torch/nn/functional.py" not in text


def test_autocast_casts_products_to_bfloat16_and_keeps_training_in_float32():
    model = mlp().to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(5, 8).to(DEV), torch.randint(0, 4, (5,)).to(DEV)
    with torch.autocast("lazuli", dtype=torch.bfloat16):
        hidden = model[0](x)
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
    assert hidden.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
    opt.step()
    lzt.sync()
    reference = torch.nn.functional.cross_entropy(mlp()(x.cpu()), y.cpu())
    assert abs(loss.item() - reference.item()) < 0.05  # bfloat16 products, float32 elsewhere
    assert not fallbacks(), fallbacks()


def test_compile_guards_name_the_value_read_and_count_graphs():
    x = torch.randn(4).to(DEV)

    @lzt.compile(full_graph=True)
    def reads(x):
        y = x * 2
        return y.sum().item()  # an execution inside the region

    with pytest.raises(RuntimeError, match=r"full_graph=True.*value-read.*test_device.py"):
        reads(x)

    @lzt.compile(max_different_graphs=1)
    def total(x):
        return (x * 3).sum()

    total(x)
    total(x)
    with pytest.raises(lz.TooManyGraphsError):
        total(torch.randn(5).to(DEV))


def test_registering_after_a_backward_pass_says_to_register_first():
    code = textwrap.dedent("""
        import torch, lazuli.torch as lzt
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()  # the autograd engine sizes its device queues here
        try:
            lzt.device()
        except RuntimeError as e:
            print("raised:", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "before any backward" in out.stdout, out.stdout + out.stderr


def test_the_exit_drain_leaves_the_autograd_thread_holding_no_python_object(monkeypatch):
    # Tensor.backward stashes a contextvars.Context in the graph task; the engine's device thread
    # may drop it after backward() returned, needing the GIL, and aborts the process if it gets
    # the GIL only while the interpreter finalizes. The exit hook makes that drop happen first.
    import contextvars
    import torch.autograd.graph as graph

    stashed = contextvars.copy_context()
    monkeypatch.setattr(graph.contextvars, "copy_context", lambda: stashed)
    before = sys.getrefcount(stashed)
    x = torch.ones(3).to(DEV).requires_grad_()
    (x * 2).sum().backward()
    from lazuli.torch._device import _device_backward

    def stashing_backward(*args, **kwargs):
        raise AssertionError("the drain went through Tensor.backward, which stashes a Context")
    monkeypatch.setattr(graph, "_engine_run_backward", stashing_backward)
    with torch.no_grad():  # at exit, grad mode is whatever the program left
        _device_backward()  # what the exit hook runs (the hook itself swallows any error)
    assert sys.getrefcount(stashed) == before  # nothing in the engine holds it any more
    torch.testing.assert_close(x.grad.cpu(), torch.full((3,), 2.0))


def test_a_tensor_kept_alive_joins_the_step_barrier_and_closures_run_after_it():
    x = torch.randn(4, 4).to(DEV)
    kept = (x @ x).relu()  # never read: the barrier computes it with everything else pending
    seen = []
    lzt.add_step_closure(lambda: seen.append(lzt.tensor_state(kept)))
    assert lzt.tensor_state(kept) == "ir"
    lzt.sync()
    assert seen == ["device_data"]  # the closure ran after the barrier
    torch.testing.assert_close(kept.cpu(), (x.cpu() @ x.cpu()).relu())


def test_eager_mode_runs_each_op_as_it_is_recorded():
    x = torch.randn(3).to(DEV)
    lzt.eager_mode(True)
    try:
        y = x * 2
        assert lzt.tensor_state(y) == "device_data"
    finally:
        lzt.eager_mode(False)
    assert lzt.tensor_state(x * 2) == "ir"


def test_a_recompile_explanation_names_the_aten_op_that_recorded_the_node():
    lz.debug.explain_recompiles(True)
    x = torch.randn(4, 4).to(DEV)
    lzt.sync()
    for act in (torch.relu, torch.relu, torch.sigmoid):  # a Python branch takes another path
        y = act(x @ x) * 2.0
        lzt.sync()
    cut = [c for c in lz.debug.recent_cuts() if c["compiled"]][-1]
    assert cut["cause"] == "structure", cut
    assert "aten.sigmoid" in cut["explanation"] and "aten.relu" in cut["explanation"], cut
    assert y.shape == (4, 4)
