"""lz.nn's convolution, pooling and normalization modules against torch.nn's: the same
constructor gives the same repr, parameter and buffer names, shapes and dtypes; with torch's
weights loaded through numpy, the same outputs and gradients (input and parameters), the same
running statistics step after step, the same eval-mode outputs; state_dicts load both ways."""
import collections

import numpy as np
import pytest
import torch

import lazuli as lz
from lazuli import nn

# Constructor calls, written once for both libraries ("nn." is torch.nn or lazuli.nn).
MODULES = [
    "Conv1d(4, 6, 3)",
    "Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, bias=False)",
    "Conv1d(4, 6, 4, padding='same', padding_mode='circular')",
    "Conv2d(3, 8, 3)",
    "Conv2d(4, 8, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)",
    "Conv2d(4, 4, 3, padding=1, groups=4, bias=False)",
    "Conv2d(3, 5, 3, padding='same', padding_mode='reflect')",
    "Conv2d(3, 5, (3, 4), padding=(2, 1), padding_mode='replicate')",
    "Conv2d(3, 5, 3, stride=2, padding='valid', padding_mode='circular')",
    "ConvTranspose1d(4, 6, 3, stride=3, padding=1, output_padding=2)",
    "ConvTranspose2d(4, 6, 3)",
    "ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, groups=2, "
    "dilation=(1, 2))",
    "MaxPool1d(3, stride=2, padding=1)",
    "MaxPool2d(2)",
    "MaxPool2d((3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), ceil_mode=True)",
    "AvgPool1d(3, stride=2, padding=1, count_include_pad=False)",
    "AvgPool2d(3, stride=2, padding=1, ceil_mode=True)",
    "AvgPool2d(2, divisor_override=3)",
    "AdaptiveAvgPool1d(4)",
    "AdaptiveAvgPool2d((3, 2))",
    "AdaptiveAvgPool2d(1)",
    "AdaptiveAvgPool2d((None, 3))",
    "GroupNorm(2, 4)",
    "GroupNorm(4, 4, eps=1e-3, affine=False)",
    "RMSNorm([5, 6])",
    "RMSNorm(6, eps=1e-4, elementwise_affine=False)",
]

# Input shapes per module kind (batched; unbatched ones are tested separately).
INPUT = {"1d": (2, 4, 11), "2d": (2, 4, 9, 8), "3": (2, 3, 9, 8)}


def input_shape(spec):
    if spec.startswith(("Conv1d", "ConvTranspose1d", "MaxPool1d", "AvgPool1d",
                        "AdaptiveAvgPool1d")):
        return INPUT["1d"]
    if spec.startswith("Conv2d(3"):
        return INPUT["3"]
    if spec.startswith("RMSNorm"):
        return (2, 3, 5, 6)
    return INPUT["2d"]


def build(spec):
    torch.manual_seed(0)
    lz.manual_seed(0)
    t = eval("torch.nn." + spec)  # noqa: S307  (our own table)
    m = eval("nn." + spec)  # noqa: S307
    return t, m


def load_torch_weights(m, t):
    m.load_state_dict({k: lz.from_numpy(v.detach().numpy().copy()) for k, v in
                       t.state_dict().items()})


def np_state(sd):
    return collections.OrderedDict((k, v.detach().numpy() if isinstance(v, torch.Tensor)
                                    else v.numpy()) for k, v in sd.items())


def forward_and_grads(t, m, shape, seed=0, call=lambda mod, x: mod(x)):
    """Output, input gradient and parameter gradients of both, for the same input and the same
    random upstream gradient."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    xl = lz.tensor(x).requires_grad_()
    yt, yl = call(t, xt), call(m, xl)
    assert tuple(yl.shape) == tuple(yt.shape)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    (yt * torch.tensor(g)).sum().backward()
    (yl * lz.tensor(g)).sum().backward()
    return yt, yl, xt, xl


@pytest.mark.parametrize("spec", MODULES)
def test_module_repr_names_shapes_and_dtypes_match_torch(spec):
    t, m = build(spec)
    assert repr(m) == repr(t)
    want, got = t.state_dict(), m.state_dict()
    assert list(got) == list(want)
    for k in want:
        assert tuple(got[k].shape) == tuple(want[k].shape), k
        assert str(got[k].dtype).split(".")[-1] == str(want[k].dtype).split(".")[-1], k
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in t.named_buffers()]


@pytest.mark.parametrize("spec", MODULES)
def test_module_values_and_gradients_match_torch_with_torch_weights(backend, spec):
    t, m = build(spec)
    load_torch_weights(m, t)
    yt, yl, xt, xl = forward_and_grads(t, m, input_shape(spec))
    np.testing.assert_allclose(yl.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(m.named_parameters(), t.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-4,
                                   err_msg=name)


@pytest.mark.parametrize("spec,shape", [
    ("Conv1d(4, 6, 3, padding=2, padding_mode='reflect')", (4, 11)),
    ("Conv2d(4, 6, 3, padding=1)", (4, 7, 6)),
    ("Conv2d(4, 6, 3, padding='same', padding_mode='replicate')", (4, 7, 6)),
    ("ConvTranspose2d(4, 6, 3, stride=2)", (4, 5, 5)),
    ("MaxPool2d(3, 2, 1)", (4, 7, 6)),
    ("AvgPool2d(2)", (4, 7, 6)),
    ("AdaptiveAvgPool2d((2, None))", (4, 7, 6)),
])
def test_unbatched_inputs_match_torch(spec, shape):
    t, m = build(spec)
    load_torch_weights(m, t)
    yt, yl, xt, xl = forward_and_grads(t, m, shape)
    np.testing.assert_allclose(yl.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dim", [1, 2])
def test_max_pool_return_indices_match_torch(dim):
    spec = f"MaxPool{dim}d(3, stride=2, padding=1, return_indices=True)"
    t, m = build(spec)
    x = np.random.default_rng(3).standard_normal((2, 3, 9, 8)[:dim + 2]).astype(np.float32)
    vt, it = t(torch.tensor(x))
    vl, il = m(lz.tensor(x))
    np.testing.assert_array_equal(vl.numpy(), vt.numpy())
    np.testing.assert_array_equal(il.numpy(), it.numpy())
    assert il.dtype == lz.int64


@pytest.mark.parametrize("output_size", [None, (10, 9), (2, 4, 10, 9), [9, 10]])
def test_conv_transpose_output_size_matches_torch(output_size):
    t, m = build("ConvTranspose2d(6, 4, 3, stride=2, padding=1)")
    load_torch_weights(m, t)
    call = (lambda mod, x: mod(x, output_size=output_size))
    yt, yl, xt, xl = forward_and_grads(t, m, (2, 6, 5, 5), call=call)
    np.testing.assert_allclose(yl.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_conv_transpose_impossible_output_size_raises_as_torch():
    t, m = build("ConvTranspose2d(6, 4, 3, stride=2, padding=1)")
    x = np.zeros((2, 6, 5, 5), np.float32)
    with pytest.raises(ValueError) as want:
        t(torch.tensor(x), output_size=(12, 9))
    with pytest.raises(ValueError) as got:
        m(lz.tensor(x), output_size=(12, 9))
    assert "valid sizes range from [9, 9] to [10, 10]" in str(want.value)
    assert "valid sizes range from [9, 9] to [10, 10]" in str(got.value)


BATCH_NORMS = [
    ("BatchNorm2d(4)", (3, 4, 5, 6)),
    ("BatchNorm2d(4, momentum=None)", (3, 4, 5, 6)),
    ("BatchNorm2d(4, momentum=0.3, eps=1e-3, affine=False)", (3, 4, 5, 6)),
    ("BatchNorm2d(4, track_running_stats=False)", (3, 4, 5, 6)),
    ("BatchNorm2d(4, bias=False)", (3, 4, 5, 6)),
    ("BatchNorm1d(4)", (8, 4)),
    ("BatchNorm1d(4, momentum=None)", (3, 4, 7)),
    ("BatchNorm1d(4, affine=False, track_running_stats=False)", (3, 4, 7)),
]


def assert_buffers_equal(m, t):
    for name, b in t.named_buffers():
        got = m.get_buffer(name)
        if b is None:
            assert got is None, name
            continue
        np.testing.assert_allclose(got.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        assert str(got.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], name


@pytest.mark.parametrize("spec,shape", BATCH_NORMS, ids=[s for s, _ in BATCH_NORMS])
def test_batch_norm_training_running_stats_and_eval_match_torch(backend, spec, shape):
    t, m = build(spec)
    if t.affine:  # non-trivial affine parameters, so their gradients and effect are checked
        with torch.no_grad():
            t.weight.uniform_(0.5, 1.5)
            if t.bias is not None:
                t.bias.uniform_(-0.5, 0.5)
    load_torch_weights(m, t)
    for step in range(3):  # training: the batch's statistics; running ones updated each step
        yt, yl, xt, xl = forward_and_grads(t, m, shape, seed=step)
        lz.sync()
        np.testing.assert_allclose(yl.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
        for (name, p), q in zip(m.named_parameters(), t.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-4,
                                       err_msg=name)
        assert_buffers_equal(m, t)
    m.eval()
    t.eval()
    assert not m.training
    for step in range(2):  # eval: the running statistics, nothing updated
        x = np.random.default_rng(10 + step).standard_normal(shape).astype(np.float32)
        with torch.no_grad():
            want = t(torch.tensor(x))
        np.testing.assert_allclose(m(lz.tensor(x)).numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
        assert_buffers_equal(m, t)
    m.train()
    t.train()  # and back: statistics move again
    yt, yl, _, _ = forward_and_grads(t, m, shape, seed=20)
    np.testing.assert_allclose(yl.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert_buffers_equal(m, t)


def cnn(nn_):
    """A CNN with every kind of state: conv weights and biases, batch norm buffers, group norm;
    the same code builds it from torch.nn or lazuli.nn."""
    return nn_.Sequential(
        nn_.Conv2d(3, 8, 3, padding=1), nn_.BatchNorm2d(8), nn_.ReLU(), nn_.MaxPool2d(2),
        nn_.Conv2d(8, 8, 3, padding=1, groups=2, bias=False), nn_.GroupNorm(2, 8), nn_.ReLU(),
        nn_.AdaptiveAvgPool2d(1), nn_.Flatten(), nn_.Linear(8, 5))


def test_state_dict_round_trips_between_torch_and_lazuli():
    torch.manual_seed(0)
    tnet, lnet = cnn(torch.nn), cnn(nn)
    assert list(lnet.state_dict()) == list(tnet.state_dict())
    # Lazuli trains a step (running statistics and num_batches_tracked move), torch loads it.
    opt = lz.optim.SGD(lnet.parameters(), lr=0.1)
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    lnet(lz.tensor(x)).sum().backward()
    opt.step()
    lz.sync()
    sd = np_state(lnet.state_dict())
    assert sd["1.num_batches_tracked"] == 1
    assert sd["1.num_batches_tracked"].dtype == np.int64
    tnet.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in sd.items()}, strict=True)
    lnet.eval()
    tnet.eval()
    x2 = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = tnet(torch.tensor(x2)).numpy()
    np.testing.assert_allclose(lnet(lz.tensor(x2)).numpy(), want, rtol=1e-4, atol=1e-5)
    # And back: torch trains, Lazuli loads torch's state_dict into a fresh model.
    tnet.train()
    tnet(torch.tensor(x)).sum().backward()
    fresh = cnn(nn)
    result = fresh.load_state_dict({k: lz.from_numpy(v) for k, v in np_state(
        tnet.state_dict()).items()})
    assert result == ([], [])
    fresh.eval()
    tnet.eval()
    with torch.no_grad():
        want = tnet(torch.tensor(x2)).numpy()
    np.testing.assert_allclose(fresh(lz.tensor(x2)).numpy(), want, rtol=1e-4, atol=1e-5)
    assert fresh[1].num_batches_tracked.item() == 2


@pytest.mark.parametrize("spec", ["Conv2d(16, 64, 3)", "Conv1d(8, 64, 5, groups=2)",
                                  "ConvTranspose2d(16, 64, 3, groups=2)"])
def test_conv_initialization_has_torchs_bounds(spec):
    # kaiming_uniform_(a=sqrt(5)) and the bias rule both give U(-b, b), b = 1/sqrt(fan_in), with
    # fan_in from the weight's dims 1.. (for a transposed conv: out_channels/groups * kernel).
    # With 64 or more draws the largest reaches 0.7 b but with a chance of 1e-10.
    t, m = build(spec)
    bound = 1 / np.sqrt(np.prod(t.weight.shape[1:]))
    for name, q in t.named_parameters():
        for values in (q.detach().numpy(), m.get_parameter(name).numpy()):
            assert values.shape == tuple(q.shape)
            assert 0.7 * bound < np.abs(values).max() <= bound * (1 + 1e-6), name
            assert abs(values.std() - bound / np.sqrt(3)) < 0.2 * bound / np.sqrt(3), name
