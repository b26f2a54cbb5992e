"""lz.nn's convolution, pooling and normalization modules against numpy (the comparisons
with torch.nn are in torch_frontend/test_cnn_modules_vs_torch.py): padding modes, batch norm's
running statistics (momentum=None included) and train/eval switching, state_dict round trips,
initialization, a CNN training step compiled once, and bad input that names the module and the
shapes and records nothing."""
import gc

import numpy as np
import pytest

import lazuli as lz
from conftest import counter, executions, raises_without_leak
from lazuli import nn


def np_conv1d(x, w, b=None, stride=1):
    """x (N, C, L), w (O, C, K): the cross-correlation, no padding."""
    k = w.shape[2]
    windows = np.lib.stride_tricks.sliding_window_view(x, k, axis=2)[:, :, ::stride]  # N C L' K
    y = np.einsum("nclk,ock->nol", windows, w)
    return y if b is None else y + b[None, :, None]


def np_conv2d(x, w, b, stride, padding):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]  # N C H' W' kh kw
    return np.einsum("nchwij,ocij->nohw", win, w) + b[None, :, None, None]


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_conv2d_module_matches_numpy():
    m = nn.Conv2d(3, 5, 3, stride=2, padding=1)
    x = arr(2, 3, 9, 8)
    want = np_conv2d(x, m.weight.numpy(), m.bias.numpy(), 2, 1)
    np.testing.assert_allclose(m(lz.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,np_mode", [("reflect", "reflect"), ("replicate", "edge"),
                                          ("circular", "wrap"), ("zeros", "constant")])
def test_conv1d_padding_modes_pad_as_numpy(mode, np_mode):
    m = nn.Conv1d(2, 3, 3, padding=2, padding_mode=mode)
    x = arr(2, 2, 7)
    padded = np.pad(x, ((0, 0), (0, 0), (2, 2)), mode=np_mode)
    want = np_conv1d(padded, m.weight.numpy(), m.bias.numpy())
    np.testing.assert_allclose(m(lz.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)


def test_same_padding_with_an_even_kernel_pads_more_on_the_right_as_torch():
    # Total padding d*(k-1) = 3: one on the left, two on the right (PyTorch's split).
    m = nn.Conv1d(1, 1, 4, padding="same", padding_mode="replicate", bias=False)
    x = arr(1, 1, 6)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 2)), mode="edge")
    want = np_conv1d(padded, m.weight.numpy())
    got = m(lz.tensor(x)).numpy()
    assert got.shape == (1, 1, 6)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_adaptive_avg_pool2d_none_keeps_the_input_size():
    x = arr(2, 3, 5, 4)
    got = nn.AdaptiveAvgPool2d((None, 1))(lz.tensor(x)).numpy()
    np.testing.assert_allclose(got, x.mean(axis=3, keepdims=True), rtol=1e-5, atol=1e-6)
    got = nn.AdaptiveAvgPool2d((1, None))(lz.tensor(x[0])).numpy()  # unbatched
    np.testing.assert_allclose(got, x[0].mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_max_pool_return_indices_gives_flat_offsets_in_each_plane():
    x = arr(1, 2, 4, 4)
    values, idx = nn.MaxPool2d(2, return_indices=True)(lz.tensor(x))
    flat = x.reshape(1, 2, 16)
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.numpy().reshape(1, 2, 4), 2),
                                  values.numpy().reshape(1, 2, 4))


def batch_stats(x):
    dims = (0,) + tuple(range(2, x.ndim))
    return x.mean(axis=dims), x.var(axis=dims, ddof=1), x.var(axis=dims)


def test_batch_norm_running_statistics_momentum_and_eval_as_numpy():
    bn = nn.BatchNorm2d(3, momentum=0.25)
    rm, rv = np.zeros(3), np.ones(3)
    for step in range(3):
        x = arr(4, 3, 5, 5, seed=step) * 2 + 1
        y = bn(lz.tensor(x)).numpy()
        mean, var_unbiased, var = batch_stats(x)
        want = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
        rm, rv = 0.75 * rm + 0.25 * mean, 0.75 * rv + 0.25 * var_unbiased
        np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-5, atol=1e-6)
        assert bn.num_batches_tracked.item() == step + 1
    model = nn.Sequential(bn, nn.ReLU())
    model.eval()  # reaches the batch norm through the container
    assert not bn.training
    x = arr(2, 3, 5, 5, seed=9)
    want = np.maximum((x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5), 0)
    np.testing.assert_allclose(model(lz.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
    assert bn.num_batches_tracked.item() == 3  # eval updates nothing
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5, atol=1e-6)


def test_batch_norm_momentum_none_is_the_cumulative_average_and_never_recompiles():
    # PyTorch's momentum=None: factor 1/num_batches_tracked, so after k steps the running
    # statistics are the plain averages of the k batches'. Lazuli computes the factor from the
    # buffer inside the graph: each step is one execution, and steps after the second compile
    # nothing although the factor changes.
    bn = nn.BatchNorm1d(4, momentum=None)
    means, variances = [], []
    marks = []
    for step in range(5):
        x = arr(6, 4, 3, seed=step) + step
        bn(lz.tensor(x))
        lz.sync()
        marks.append((counter("UncachedCompile"), executions()))
        mean, var_unbiased, _ = batch_stats(x)
        means.append(mean)
        variances.append(var_unbiased)
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean(means, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), np.mean(variances, 0), rtol=1e-5,
                               atol=1e-6)
    assert bn.num_batches_tracked.item() == 5
    assert marks[4][0] == marks[1][0]  # steps 3-5 compiled nothing
    assert [b[1] - a[1] for a, b in zip(marks, marks[1:])] == [1, 1, 1, 1]  # nothing read


def test_batch_norm_without_running_stats_uses_the_batch_in_eval_too():
    bn = nn.BatchNorm2d(2, affine=False, track_running_stats=False).eval()
    assert bn.running_mean is None and "running_mean" not in bn.state_dict()
    assert list(bn.state_dict()) == [] and list(bn.parameters()) == []
    x = arr(3, 2, 4, 4)
    mean, _, var = batch_stats(x)
    want = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(bn(lz.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4)


def test_group_norm_and_rms_norm_modules_match_numpy():
    x = arr(2, 6, 3, 2)
    gn = nn.GroupNorm(3, 6)
    g = x.reshape(2, 3, -1)
    want = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(
        x.shape)
    np.testing.assert_allclose(gn(lz.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-4)
    rms = nn.RMSNorm((3, 2), eps=1e-6)
    want = x / np.sqrt((x * x).mean(axis=(2, 3), keepdims=True) + 1e-6)
    np.testing.assert_allclose(rms(lz.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)
    assert [n for n, _ in rms.named_parameters()] == ["weight"]
    assert tuple(rms.weight.shape) == (3, 2)


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect", bias=False), nn.GroupNorm(2, 4),
        nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16, 3))


def test_cnn_training_step_is_one_program_compiled_once():
    lz.manual_seed(0)
    model = small_cnn()
    opt = lz.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x, y = arr(4, 1, 8, 8), np.array([0, 1, 2, 1])
    marks, losses = [], []
    for _ in range(5):
        opt.zero_grad()
        loss = loss_fn(model(lz.tensor(x)), lz.tensor(y))
        loss.backward()
        opt.step()
        lz.sync()
        marks.append((counter("UncachedCompile"), executions()))
        losses.append(loss)
    assert marks[4][0] == marks[1][0]  # steps 3-5 compiled nothing
    assert [b[1] - a[1] for a, b in zip(marks, marks[1:])] == [1, 1, 1, 1]
    values = [v.item() for v in losses]
    assert values[-1] < values[0]  # it learns the four samples
    assert model[1].num_batches_tracked.item() == 5


def test_state_dict_round_trip_through_a_file_keeps_buffers(tmp_path):
    lz.manual_seed(0)
    model = small_cnn()
    for step in range(2):  # move the running statistics
        model(lz.tensor(arr(4, 1, 8, 8, seed=step)))
    lz.sync()
    lz.save(model.state_dict(), str(tmp_path / "cnn.safetensors"))
    lz.manual_seed(1)
    other = small_cnn()
    assert other.load_state_dict(lz.load(str(tmp_path / "cnn.safetensors"))) == ([], [])
    assert other[1].num_batches_tracked.item() == 2
    assert other[1].num_batches_tracked.dtype == lz.int64
    model.eval()
    other.eval()
    x = lz.tensor(arr(2, 1, 8, 8, seed=5))
    np.testing.assert_array_equal(other(x).numpy(), model(x).numpy())
    keys = list(model.state_dict())
    assert keys[:7] == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                        "1.running_var", "1.num_batches_tracked"]


def test_conv_initialization_bound_and_seed():
    lz.manual_seed(3)
    a = nn.Conv2d(8, 64, 3)
    lz.manual_seed(3)
    b = nn.Conv2d(8, 64, 3)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    bound = 1 / np.sqrt(8 * 9)  # kaiming_uniform_(a=sqrt(5)): 1/sqrt(fan_in), as the bias's
    for p in (a.weight.numpy(), a.bias.numpy()):
        assert 0.7 * bound < np.abs(p).max() <= bound * (1 + 1e-6)
    w = nn.ConvTranspose2d(8, 64, 3, groups=2).weight
    assert tuple(w.shape) == (8, 32, 3, 3)
    assert np.abs(w.numpy()).max() <= 1 / np.sqrt(32 * 9) * (1 + 1e-6)


def test_constructor_arguments_are_checked_as_torch():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="not supported for strided convolutions"):
        nn.Conv2d(4, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv1d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported'):
        nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="must be divisible by num_groups"):
        nn.GroupNorm(4, 6)


BAD_INPUTS = [
    ("Conv2d(3, 8, 3)", (2, 4, 5, 5), ["Conv2d(3, 8", "3 channels", "(2, 4, 5, 5)"]),
    ("Conv2d(3, 8, 3)", (2, 5), ["Conv2d(3, 8", "3-D (unbatched) or 4-D (batched)", "(2, 5)"]),
    ("Conv2d(3, 8, 3, padding=1, padding_mode='reflect')", (2, 4, 5, 5), ["3 channels"]),
    ("Conv1d(3, 8, 3)", (2, 3, 5, 5), ["Conv1d(3, 8", "2-D (unbatched) or 3-D", "(2, 3, 5, 5)"]),
    ("ConvTranspose2d(3, 8, 3)", (2, 8, 5, 5), ["ConvTranspose2d(3, 8", "3 channels"]),
    ("MaxPool2d(2)", (5, 5), ["MaxPool2d(kernel_size=2", "(5, 5)"]),
    ("AvgPool1d(2)", (1, 2, 3, 4), ["AvgPool1d(kernel_size=(2,)", "(1, 2, 3, 4)"]),
    ("AdaptiveAvgPool2d((None, 2))", (4, 4), ["AdaptiveAvgPool2d(output_size=(None, 2))"]),
    ("BatchNorm2d(3)", (2, 4, 5, 5), ["BatchNorm2d(3,", "3 channels", "(2, 4, 5, 5)"]),
    ("BatchNorm2d(3)", (2, 3, 5), ["BatchNorm2d(3,", "expected 4D input (got 3D input"]),
    ("BatchNorm1d(3)", (1, 3), ["BatchNorm1d(3,", "more than 1 value per channel", "(1, 3)"]),
    ("GroupNorm(2, 4)", (2, 6, 3), ["GroupNorm(2, 4", "(2, 6, 3)"]),
    ("RMSNorm(4)", (2, 3), ["RMSNorm((4,)", "(2, 3)"]),
]


@pytest.mark.parametrize("spec,shape,words", BAD_INPUTS, ids=[f"{s}-{sh}" for s, sh, _ in
                                                              BAD_INPUTS])
def test_bad_input_names_the_module_and_shapes_and_records_nothing(spec, shape, words):
    m = eval("nn." + spec)  # noqa: S307  (our own table)
    lz.sync_tensors(list(m.state_dict().values()))
    x = lz.zeros(*shape)
    lz.sync_tensors([x])
    gc.collect()
    pending = lz.debug.dump_graph(list(m.state_dict().values()))
    raises_without_leak(ValueError, lambda: m(x), *words)
    assert lz.debug.dump_graph(list(m.state_dict().values())) == pending  # no state touched
    if hasattr(m, "num_batches_tracked"):
        assert m.num_batches_tracked.item() == 0


def test_dtype_argument_makes_float64_parameters_and_buffers():
    conv = nn.Conv2d(2, 3, 3, dtype=lz.float64)
    bn = nn.BatchNorm2d(3, dtype=lz.float64)
    assert conv.weight.dtype == conv.bias.dtype == lz.float64
    assert bn.weight.dtype == bn.running_mean.dtype == bn.running_var.dtype == lz.float64
    assert bn.num_batches_tracked.dtype == lz.int64  # a count, whatever the dtype (as torch)
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 5))
    y = bn(conv(lz.tensor(x)))
    assert y.dtype == lz.float64
    want = np_conv2d(x, conv.weight.numpy(), conv.bias.numpy(), 1, 0)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * want.mean(axis=(0, 2, 3)),
                               rtol=1e-10, atol=1e-12)
