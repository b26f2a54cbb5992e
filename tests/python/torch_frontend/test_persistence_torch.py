"""Persistence and training-loop pieces against PyTorch itself: safetensors files written by one
side and read by the other, optimizer state dicts exchanged both ways, LR schedules equal to
torch.optim.lr_scheduler's to the last bit, and clip_grad_norm_ against torch's.

Values cross between the two through lazuli.torch.to_lazuli and element reads (item), not
through numpy: the torch environment may carry numpy 2, whose arrays Lazuli's numpy interop
(pybind11 2.10) does not lay out correctly."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
st = pytest.importorskip("safetensors.torch")

import lazuli as lz  # noqa: E402
from lazuli import nn  # noqa: E402
from lazuli.optim import lr_scheduler as S  # noqa: E402
from lazuli.torch import to_lazuli  # noqa: E402

_TORCH_DTYPE = {lz.float32: torch.float32, lz.float64: torch.float64, lz.int32: torch.int32,
                lz.int64: torch.int64, lz.bool: torch.bool}


def to_lz(t):
    """A lazuli tensor holding a copy of torch tensor t."""
    return to_lazuli(t.detach().clone().contiguous())


def to_t(x):
    """A torch tensor holding x's values, read element by element."""
    flat = x.reshape(-1)
    values = [flat[i].item() for i in range(flat.shape[0])]
    return torch.tensor(values, dtype=_TORCH_DTYPE[x.dtype]).reshape(tuple(x.shape))


def sample_torch_tensors():
    return {
        "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 7,
        "f64": torch.tensor([1e-300, -2.5], dtype=torch.float64),
        "i64": torch.tensor([1, -2, 2**40]),
        "i32": torch.tensor([[7], [-8]], dtype=torch.int32),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 4),
    }


def test_lazuli_reads_what_safetensors_torch_writes(tmp_path):
    ts = sample_torch_tensors()
    st.save_file(ts, str(tmp_path / "t.safetensors"), metadata={"format": "pt"})
    out = lz.load(tmp_path / "t.safetensors")
    assert sorted(out) == sorted(ts)
    for k, t in ts.items():
        assert tuple(out[k].shape) == tuple(t.shape), k
        assert torch.equal(to_t(out[k]), t), k
    assert lz.serialization.load_metadata(tmp_path / "t.safetensors") == {"format": "pt"}


def test_safetensors_torch_reads_what_lazuli_writes(tmp_path):
    want = sample_torch_tensors()
    ts = {k: to_lz(t) for k, t in want.items()}
    lz.save(ts, tmp_path / "l.safetensors", metadata={"format": "pt"})
    out = st.load_file(str(tmp_path / "l.safetensors"))
    for k, t in want.items():
        assert out[k].dtype == t.dtype, k
        assert torch.equal(out[k], t), k
    # A nested checkpoint is still a valid file: its tensors under dotted names.
    lz.save({"model": {"w": lz.ones(2)}, "epoch": 3}, tmp_path / "n.safetensors")
    assert sorted(st.load_file(str(tmp_path / "n.safetensors"))) == ["model.w"]


def test_a_dtype_lazuli_lacks_is_refused_by_name(tmp_path):
    st.save_file({"h": torch.ones(3, dtype=torch.int8)}, str(tmp_path / "i8.safetensors"))
    with pytest.raises(ValueError, match='"I8" is not supported'):
        lz.load(tmp_path / "i8.safetensors")


def test_16_bit_float_checkpoints_round_trip_with_torch(tmp_path):
    want = {"b": torch.tensor([1.5, -2.0, 3.0e38, 1e-3]).to(torch.bfloat16),
            "h": torch.tensor([0.5, -65504.0, 6e-8]).to(torch.float16)}
    st.save_file(want, str(tmp_path / "t.safetensors"))
    got = lz.load(tmp_path / "t.safetensors")
    assert got["b"].dtype == lz.bfloat16 and got["h"].dtype == lz.float16
    for k, t in want.items():
        assert got[k].float().numpy().tolist() == t.float().tolist(), k
    lz.save(got, tmp_path / "l.safetensors")
    back = st.load_file(str(tmp_path / "l.safetensors"))
    for k, t in want.items():
        assert back[k].dtype == t.dtype and torch.equal(back[k], t), k


def test_a_torch_model_state_dict_loads_into_the_same_lazuli_model(tmp_path):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 2))
    st.save_file(tm.state_dict(), str(tmp_path / "m.safetensors"))
    lm = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 2))
    lm.load_state_dict(lz.load(tmp_path / "m.safetensors"))
    x = torch.randn(4, 5)
    torch.testing.assert_close(to_t(lm(to_lz(x))), tm(x).detach(), rtol=1e-5, atol=1e-6)


# ---- optimizer state dicts ----------------------------------------------------------------------

def _numpy_interop_works():
    try:
        return (lz.from_numpy(np.arange(3.0)).sum().item() == 3.0
                and list(lz.arange(3).numpy()) == [0, 1, 2])
    except TypeError:
        return False


# The optimizers make their hyper-parameter scalars with lz.from_numpy, which mislays numpy 2's
# arrays (pybind11 2.10 reads numpy 1's dtype struct); the torch environment may bring numpy 2.
needs_numpy_interop = pytest.mark.skipif(
    not _numpy_interop_works(),
    reason=f"lazuli's numpy interop does not work with numpy {np.__version__} here")

W0 = [np.array([[0.1, 0.2, -0.3], [0.4, -0.5, 0.6]]), np.array([0.7, -0.8])]
OPTS = {
    "sgd": (lz.optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2)),
    "adam": (lz.optim.Adam, torch.optim.Adam, dict(lr=1e-2, betas=(0.8, 0.99), weight_decay=1e-2)),
    "adamw": (lz.optim.AdamW, torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
}


def grads_at(step):
    return [np.full(w.shape, 0.3 * (step + 1)) * np.sign(w) + 0.01 * step for w in W0]


def torch_steps(opt, params, steps, start=0):
    for i in range(start, start + steps):
        for p, g in zip(params, grads_at(i)):
            p.grad = torch.from_numpy(g.copy())
        opt.step()


def lz_steps(opt, params, steps, start=0):
    for i in range(start, start + steps):
        for p, g in zip(params, grads_at(i)):
            p.grad = to_lz(torch.from_numpy(g))
        opt.step()
        lz.sync()


def torch_state_to_lz(sd):
    return {"state": {i: {k: to_lz(v) if torch.is_tensor(v) else v for k, v in s.items()}
                      for i, s in sd["state"].items()},
            "param_groups": [dict(g) for g in sd["param_groups"]]}


def lz_state_to_torch(sd):
    return {"state": {i: {k: to_t(v) for k, v in s.items()}
                      for i, s in sd["state"].items()},
            "param_groups": [dict(g) for g in sd["param_groups"]]}


@needs_numpy_interop
@pytest.mark.parametrize("kind", sorted(OPTS))
def test_state_dicts_cross_between_torch_and_lazuli(kind):
    lz_cls, torch_cls, kw = OPTS[kind]
    tp = [torch.nn.Parameter(torch.from_numpy(w.copy())) for w in W0]
    topt = torch_cls(tp, **kw)
    torch_steps(topt, tp, 3)
    tsd = topt.state_dict()

    lp = [to_lz(p).requires_grad_() for p in tp]
    lopt = lz_cls(lp, **kw)
    lopt.load_state_dict(torch_state_to_lz(tsd))  # torch's flags (maximize=False, ...) accepted
    lsd = lopt.state_dict()
    assert list(lsd["state"]) == list(tsd["state"])
    assert [g["params"] for g in lsd["param_groups"]] == [g["params"] for g in tsd["param_groups"]]
    for i in tsd["state"]:
        assert sorted(lsd["state"][i]) == sorted(tsd["state"][i])

    torch_steps(topt, tp, 3, start=3)
    lz_steps(lopt, lp, 3, start=3)
    for a, b in zip(lp, tp):
        torch.testing.assert_close(to_t(a), b.detach(), rtol=1e-12, atol=1e-14)

    # ... and back: lazuli's state dict loads into torch's optimizer and continues the same way.
    tp2 = [torch.nn.Parameter(to_t(p)) for p in lp]
    topt2 = torch_cls(tp2, **kw)
    topt2.load_state_dict(lz_state_to_torch(lopt.state_dict()))
    torch_steps(topt2, tp2, 2, start=6)
    lz_steps(lopt, lp, 2, start=6)
    for a, b in zip(lp, tp2):
        torch.testing.assert_close(to_t(a), b.detach(), rtol=1e-12, atol=1e-14)


# ---- LR schedules -------------------------------------------------------------------------------

SCHEDULES = {
    "step": lambda m, o: m.StepLR(o, step_size=3, gamma=0.7),
    "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=1e-3),
    "lambda": lambda m, o: m.LambdaLR(o, lambda e: 1.0 / (1 + e) ** 0.5),
    "onecycle": lambda m, o: m.OneCycleLR(o, max_lr=0.3, total_steps=25),
    "onecycle3": lambda m, o: m.OneCycleLR(o, max_lr=[0.3, 0.1], total_steps=25, pct_start=0.4,
                                           three_phase=True, anneal_strategy="linear"),
    "onecycle_epochs": lambda m, o: m.OneCycleLR(o, max_lr=0.2, epochs=3, steps_per_epoch=7,
                                                 div_factor=10.0, final_div_factor=100.0),
}


def two_groups(lib, kind):
    if lib is torch:
        ps = [torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(1))]
        cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[kind]
    else:
        ps = [lz.ones(2).requires_grad_(), lz.ones(1).requires_grad_()]
        cls = {"sgd": lz.optim.SGD, "adam": lz.optim.Adam}[kind]
    kw = dict(lr=0.05, momentum=0.9) if kind == "sgd" else dict(lr=0.05)
    return cls([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.02}], **kw)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules_equal_torchs_exactly(name, kind):
    topt, lopt = two_groups(torch, kind), two_groups(lz, kind)
    tsched, lsched = SCHEDULES[name](torch.optim.lr_scheduler, topt), SCHEDULES[name](S, lopt)
    momentum = "momentum" if kind == "sgd" else "betas"
    for step in range(getattr(tsched, "total_steps", 30)):
        for tg, lg in zip(topt.param_groups, lopt.param_groups):
            assert lg["lr"] == tg["lr"], (step, lg["lr"], tg["lr"])
            assert lg[momentum] == tg[momentum], step
        assert lsched.get_last_lr() == tsched.get_last_lr()
        assert lsched.last_epoch == tsched.last_epoch
        topt.step()
        tsched.step()
        lsched.step()


# ---- clip_grad_norm_ ----------------------------------------------------------------------------

@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0, 0.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_matches_torch(norm_type, dtype):
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(s).astype(dtype) for s in [(4, 5), (7,), (2, 3, 2)]]
    tps, lps = [], []
    for g in grads:
        tp = torch.nn.Parameter(torch.zeros(g.shape, dtype=getattr(torch, dtype)))
        tp.grad = torch.from_numpy(g.copy())
        tps.append(tp)
        lp = lz.zeros(*g.shape, dtype=getattr(lz, dtype)).requires_grad_()
        lp.grad = to_lz(torch.from_numpy(g))
        lps.append(lp)
    want = torch.nn.utils.clip_grad_norm_(tps, 1.5, norm_type=norm_type)
    got = lz.nn.utils.clip_grad_norm_(lps, 1.5, norm_type=norm_type)
    tol = 1e-6 if dtype == "float32" else 1e-12
    assert str(got.dtype).endswith(str(want.dtype).split(".")[-1])
    np.testing.assert_allclose(got.item(), want.item(), rtol=tol)
    for lp, tp in zip(lps, tps):
        torch.testing.assert_close(to_t(lp.grad), tp.grad, rtol=tol, atol=tol)
