"""The module machinery a ported PyTorch model needs: buffers in state_dict,
ModuleList/ModuleDict, apply, named_modules, requires_grad_, recursive train/eval, nn.init, and
the small layers (Flatten, Unflatten, Identity, Dropout2d, SiLU/Hardswish/Hardsigmoid)."""
import collections
import math

import numpy as np
import pytest

import lazuli as lz
from lazuli import nn


class Norm(nn.Module):
    """A BatchNorm-shaped module: two parameters, two persistent buffers, one non-persistent."""

    def __init__(self, n):
        super().__init__()
        self.weight = lz.ones(n).requires_grad_()
        self.bias = lz.zeros(n).requires_grad_()
        self.register_buffer("running_mean", lz.zeros(n))
        self.register_buffer("num_batches_tracked", lz.tensor(0))
        self.register_buffer("scratch", lz.ones(n), persistent=False)

    def forward(self, x):
        return (x - self.running_mean) * self.weight + self.bias


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.norm = Norm(4)
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.ReLU())])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Identity()})

    def forward(self, x):
        x = self.norm(self.stem(x))
        for b in self.blocks:
            x = b(x)
        return self.heads["a"](x)


def test_buffers_are_in_state_dict_in_pytorch_order_and_not_parameters():
    net = Net()
    keys = list(net.state_dict())
    assert keys[:6] == ["stem.weight", "stem.bias", "norm.weight", "norm.bias", "norm.running_mean",
                        "norm.num_batches_tracked"]
    assert "norm.scratch" not in keys  # persistent=False
    assert keys[6:] == ["blocks.0.weight", "blocks.0.bias", "blocks.1.0.weight", "blocks.1.0.bias",
                        "heads.a.weight", "heads.a.bias"]
    assert [n for n, _ in net.named_buffers()] == ["norm.running_mean", "norm.num_batches_tracked",
                                                   "norm.scratch"]
    assert len(list(net.buffers())) == 3
    assert not any(n.startswith("norm.running") for n, _ in net.named_parameters())
    assert len(list(net.parameters())) == 10


def test_load_state_dict_copies_buffers_in_place_and_reports_keys():
    a, b = Net(), Net()
    with lz.no_grad():
        a.norm.running_mean.copy_(lz.tensor([1.0, 2.0, 3.0, 4.0]))
        a.norm.num_batches_tracked.fill_(7)
    mean_before = b.norm.running_mean
    result = b.load_state_dict({k: lz.tensor(v.numpy()) for k, v in a.state_dict().items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.norm.running_mean is mean_before  # the same tensor, new contents
    assert b.norm.running_mean.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert b.norm.num_batches_tracked.item() == 7
    x = lz.randn(3, 4)
    np.testing.assert_allclose(a(x).numpy(), b(x).numpy(), rtol=1e-6)


def test_strict_load_state_dict_raises_before_copying_anything():
    net = Net()
    sd = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    bad = dict(sd)
    del bad["norm.running_mean"]
    bad["extra"] = np.zeros(1)
    bad["stem.bias"] = np.ones(4, np.float32) * 5
    with pytest.raises(RuntimeError, match="Missing key.*norm.running_mean") as info:
        net.load_state_dict(bad)
    assert "extra" in str(info.value) and isinstance(info.value, KeyError)
    assert net.stem.bias.tolist() == sd["stem.bias"].tolist()  # nothing copied
    with pytest.raises(RuntimeError, match="size mismatch for stem.weight"):
        net.load_state_dict(dict(sd, **{"stem.weight": np.zeros((2, 2), np.float32)}))
    missing, unexpected = net.load_state_dict(bad, strict=False)
    assert missing == ["norm.running_mean"] and unexpected == ["extra"]
    assert net.stem.bias.tolist() == [5.0] * 4


def test_assigning_a_tensor_to_a_buffer_name_keeps_it_a_buffer():
    m = Norm(2)
    m.running_mean = lz.ones(2)
    assert "running_mean" in dict(m.named_buffers())
    m.running_mean = None
    assert "running_mean" not in m.state_dict()
    del m.num_batches_tracked
    assert [n for n, _ in m.named_buffers()] == ["scratch"]


def test_register_buffer_checks_names_and_values():
    m = nn.Module()
    with pytest.raises(TypeError, match="buffer 'x'"):
        m.register_buffer("x", 3)
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", lz.ones(1))
    m.y = 1
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("y", lz.ones(1))
    m.register_buffer("none", None)
    assert list(m.state_dict()) == []


def test_cross_entropy_loss_keeps_its_weight_as_a_buffer():
    w = lz.tensor([1.0, 2.0, 0.5])
    loss = nn.CrossEntropyLoss(weight=w)
    assert loss.weight is w and list(loss.state_dict()) == ["weight"]
    assert list(loss.parameters()) == []
    assert list(nn.CrossEntropyLoss().state_dict()) == []
    assert list(nn.NLLLoss(weight=w).state_dict()) == ["weight"]


def test_module_list_indexing_and_renumbering():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    first, last = layers[0], layers[-1]
    assert len(layers) == 3 and list(layers) == [first, layers[1], last]
    del layers[1]
    assert [n for n, _ in layers.named_children()] == ["0", "1"] and layers[1] is last
    layers.insert(0, nn.ReLU())
    assert isinstance(layers[0], nn.ReLU) and layers[1] is first
    layers.append(nn.Identity()).extend([nn.GELU()])
    assert len(layers) == 5
    assert isinstance(layers[1:3], nn.ModuleList) and list(layers[1:3]) == [first, last]
    layers[0] = nn.Tanh()
    assert isinstance(layers.pop(0), nn.Tanh) and len(layers) == 4
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    with pytest.raises(IndexError):
        layers[9]


def test_module_dict_behaves_as_an_ordered_dict_of_modules():
    d = nn.ModuleDict([("b", nn.Linear(2, 2)), ("a", nn.ReLU())])
    assert list(d) == ["b", "a"] and "a" in d and len(d) == 2
    d["c"] = nn.Linear(2, 3)
    d.update({"a": nn.GELU()})
    assert list(d.keys()) == ["b", "a", "c"] and isinstance(d["a"], nn.GELU)
    assert [n for n, _ in d.named_parameters()] == ["b.weight", "b.bias", "c.weight", "c.bias"]
    assert isinstance(d.pop("b"), nn.Linear) and list(d) == ["a", "c"]
    d.clear()
    assert len(d) == 0


def test_named_modules_apply_and_requires_grad():
    net = Net()
    names = [n for n, _ in net.named_modules()]
    assert names[:4] == ["", "stem", "norm", "blocks"]
    assert "blocks.1.1" in names and "heads.b" in names
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, shared)
    assert len(list(seq.modules())) == 2 and len(list(seq.parameters())) == 2
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]  # as PyTorch
    visited = []
    net.apply(lambda m: visited.append(type(m).__name__))
    assert visited[-1] == "Net" and visited.count("Linear") == 4
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_()
    assert all(p.requires_grad for p in net.parameters())
    assert net.get_submodule("blocks.1.0") is net.blocks[1][0]
    assert net.get_parameter("stem.bias") is net.stem.bias
    assert net.get_buffer("norm.running_mean") is net.norm.running_mean


def test_train_and_eval_recurse_through_each_child_s_train():
    calls = []

    class Tracked(nn.Module):
        def train(self, mode=True):
            calls.append(mode)
            return super().train(mode)

    net = nn.Sequential(nn.ModuleList([Tracked(), nn.Dropout2d()]), nn.ModuleDict({"d": nn.Dropout()}))
    assert net.eval() is net
    assert calls == [False]
    assert not any(m.training for m in net.modules())
    net.train()
    assert calls == [False, True] and all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")


def test_flatten_unflatten_identity():
    x = lz.randn(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nn.Unflatten(1, (3, 20))(nn.Flatten()(x)).shape == (2, 3, 20)
    assert nn.Unflatten(-1, (-1, 4))(lz.ones(2, 8)).shape == (2, 2, 4)
    assert nn.Identity(54, unused="x")(x) is x
    np.testing.assert_array_equal(nn.Unflatten(1, (3, 4, 5))(nn.Flatten()(x)).numpy(), x.numpy())


def test_dropout2d_module_zeroes_whole_channels_in_training_only():
    lz.manual_seed(0)
    m = nn.Dropout2d(0.5)
    y = m(lz.ones(8, 16, 3, 3)).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0.25 < (per_channel[..., 0] == 0).mean() < 0.75
    m.eval()
    x = lz.ones(2, 3, 2, 2)
    assert m(x) is x


def test_activation_modules_and_inplace():
    x = lz.tensor([-4.0, -3.0, 0.0, 1.0, 3.0, 5.0])
    np.testing.assert_allclose(nn.Hardsigmoid()(x).numpy(), [0, 0, 0.5, 4 / 6, 1, 1], rtol=1e-6)
    np.testing.assert_allclose(nn.Hardswish()(x).numpy(), [0, 0, 0, 4 / 6, 3, 5], rtol=1e-6)
    np.testing.assert_allclose(nn.SiLU()(x).numpy(), x.numpy() / (1 + np.exp(-x.numpy())), rtol=1e-6)
    y = lz.tensor([-1.0, 2.0])
    assert nn.Hardswish(inplace=True)(y) is y
    np.testing.assert_allclose(y.numpy(), [-1 / 3, 2 * 5 / 6], rtol=1e-6)


# ---- nn.init -----------------------------------------------------------------------------------
def test_init_fills_in_place_and_keeps_the_parameter():
    lin = nn.Linear(300, 200)
    w = lin.weight
    assert nn.init.zeros_(w) is w and w.is_leaf and w.requires_grad
    assert float(w.abs().sum()) == 0
    nn.init.ones_(lin.bias)
    nn.init.constant_(lin.bias, 0.25)
    assert lin.bias.tolist() == [0.25] * 200
    nn.init.eye_(w)
    assert np.array_equal(w.numpy(), np.eye(200, 300, dtype=np.float32))


@pytest.mark.parametrize("fn, kwargs, std", [
    ("xavier_uniform_", {}, math.sqrt(2 / (64 * 9 + 32 * 9))),
    ("xavier_normal_", {"gain": 2.0}, 2 * math.sqrt(2 / (64 * 9 + 32 * 9))),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, math.sqrt(2 / 6) / math.sqrt(64 * 9)),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, math.sqrt(2) / math.sqrt(32 * 9)),
    ("normal_", {"mean": 0.0, "std": 0.02}, 0.02),
    ("uniform_", {"a": -1.0, "b": 1.0}, 1 / math.sqrt(3)),
])
def test_random_inits_have_pytorch_s_spread(fn, kwargs, std):
    lz.manual_seed(3)
    w = lz.zeros(32, 64, 3, 3).requires_grad_()  # a conv weight: fan_in 64*9, fan_out 32*9
    getattr(nn.init, fn)(w, **kwargs)
    v = w.numpy()
    assert abs(v.std() - std) < 0.03 * std and abs(v.mean()) < 0.05 * std
    if "uniform" in fn:
        assert np.abs(v).max() <= std * math.sqrt(3) * (1 + 1e-6)


def test_trunc_normal_stays_in_its_bounds_with_the_truncated_spread():
    lz.manual_seed(4)
    w = nn.init.trunc_normal_(lz.zeros(200, 200), mean=0.5, std=1.0, a=-1.0, b=1.5)
    v = w.numpy()
    assert v.min() >= -1.0 and v.max() <= 1.5
    # mean and std of N(0.5, 1) truncated to [-1, 1.5] (closed forms)
    alpha, beta = -1.5, 1.0
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    zz = cdf(beta) - cdf(alpha)
    mean = 0.5 + (phi(alpha) - phi(beta)) / zz
    var = 1 + (alpha * phi(alpha) - beta * phi(beta)) / zz - ((phi(alpha) - phi(beta)) / zz) ** 2
    assert abs(v.mean() - mean) < 0.01 and abs(v.std() - math.sqrt(var)) < 0.01


def test_init_errors_are_pytorch_s():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(lz.zeros(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        nn.init.kaiming_uniform_(lz.zeros(3, 3), mode="fan_avg")
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    with pytest.raises(TypeError, match="floating-point"):
        nn.init.normal_(lz.zeros(3, dtype=lz.int64))
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert collections.Counter(nn.init.__all__)["kaiming_uniform_"] == 1
