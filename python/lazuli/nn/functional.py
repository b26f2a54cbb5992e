"""lz.nn.functional: the usual functional ops. Each has one implementation, in C++ (lz::nn,
include/lazuli/nn.h), written in Lazuli's primitives, so its gradient comes from the primitives'
rules and it fuses like any other graph. The functions here keep PyTorch's signatures and
argument messages, and forward."""

import numbers

from .. import _C


# Argument checks in PyTorch's words, so a mistake names this function, not a primitive inside it.
def _tensor(x, fn, arg):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"F.{fn}(): argument '{arg}' must be Tensor, not {type(x).__name__}")
    return x


def _int(v, fn, arg):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"F.{fn}(): argument '{arg}' must be int, not {type(v).__name__}")
    return int(v)


def _number(v, fn, arg):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"F.{fn}(): argument '{arg}' must be a number, not {type(v).__name__}")
    return v


def relu(x):
    return _C.relu(x)


def gelu(x, approximate="none"):
    """GELU; approximate="tanh" is PyTorch's tanh approximation."""
    return _C._nn.gelu(x, approximate)


def sigmoid(x):
    return _C.sigmoid(x)


def tanh(x):
    return _C.tanh(x)


def _maybe_inplace(x, y, inplace):
    """PyTorch's inplace=True: the result written into x (a view writes through), x returned."""
    return x.copy_(y) if inplace else y


def silu(input, inplace=False):  # noqa: A002  (PyTorch's spelling)
    return _maybe_inplace(input, _C._nn.silu(input), inplace)


def hardswish(input, inplace=False):  # noqa: A002
    """x * relu6(x + 3) / 6; at the kinks PyTorch's gradient (0 at -3, 1 at 3)."""
    return _maybe_inplace(input, _C._nn.hardswish(input), inplace)


def hardsigmoid(input, inplace=False):  # noqa: A002
    """relu6(x + 3) / 6; the gradient is 1/6 strictly inside (-3, 3), 0 elsewhere (PyTorch's)."""
    return _maybe_inplace(input, _C._nn.hardsigmoid(input), inplace)


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zeroes whole channels (dim 1 of (N, C, ...); a 3-D input is read as (N, C, L), as PyTorch
    reads it) with probability p and scales the rest by 1/(1-p); the mask is from the device RNG."""
    y = _C._nn.dropout2d(input, p, training)
    if not training or p == 0:
        return input  # the input itself, as PyTorch
    return _maybe_inplace(input, y, inplace)


def one_hot(tensor, num_classes=-1):
    """int64 class indices (...) to int64 one-hot rows (..., num_classes); num_classes=-1 reads
    the largest index (a value read, as in PyTorch). A bad index raises naming one_hot."""
    return _C._nn.one_hot(tensor, num_classes)


def pad(input, pad, mode="constant", value=None):  # noqa: A002
    """PyTorch's F.pad: pad = (left, right) of the last dim, then of the dim before, ...;
    negative values crop. Modes: constant (value, default 0), reflect, replicate, circular (these
    three pad the last 1-3 dims of a batched or unbatched input). Gradients flow to the input."""
    return _C._nn.pad(input, pad, mode, value)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """PyTorch's F.interpolate on (N, C, spatial...) inputs: nearest, nearest-exact (3-5-D),
    linear (3-D), bilinear (4-D), trilinear (5-D), with size or scale_factor, align_corners and
    recompute_scale_factor; source positions and weights as PyTorch's CPU kernels compute them."""
    if antialias:
        raise ValueError("F.interpolate(): antialias=True is not supported by Lazuli")
    return _C._nn.interpolate(input, size, scale_factor, mode, align_corners,
                              recompute_scale_factor)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode, align_corners)


def log_softmax(x, dim=-1):
    return _C._nn.log_softmax(_tensor(x, "log_softmax", "input"), _int(dim, "log_softmax", "dim"))


def softmax(x, dim=-1):
    return _C._nn.softmax(_tensor(x, "softmax", "input"), _int(dim, "softmax", "dim"))


def linear(x, weight, bias=None):
    _tensor(x, "linear", "input")
    _tensor(weight, "linear", "weight")
    if bias is not None:
        _tensor(bias, "linear", "bias")
    return _C._nn.linear(x, weight, bias)


def dropout(x, p=0.5, training=True):
    """Zeroes elements with probability p and scales the rest by 1/(1-p). The mask comes from the
    device RNG (lz.rand), so every step draws a new mask without changing the graph."""
    _tensor(x, "dropout", "input")
    y = _C._nn.dropout(x, _number(p, "dropout", "p"), bool(training))
    return x if not training or p == 0 else y  # the input itself, as PyTorch


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    _tensor(x, "layer_norm", "input")
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(f"F.layer_norm(): argument 'normalized_shape' must be int or tuple of ints, "
                        f"not {type(normalized_shape).__name__}")
    normalized_shape = tuple(_int(d, "layer_norm", "normalized_shape") for d in normalized_shape)
    for arg, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _tensor(t, "layer_norm", arg)
    return _C._nn.layer_norm(x, normalized_shape, weight, bias, eps)


def _check_reduction(reduction, fn, size_average=None, reduce=None):
    """The reduction, with PyTorch's deprecated size_average/reduce flags mapped as it maps them."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _loss_args(fn, input, target, weight, ignore_index):  # noqa: A002
    _tensor(input, fn, "input")
    _tensor(target, fn, "target")
    if weight is not None:
        _tensor(weight, fn, "weight")
    return _int(ignore_index, fn, "ignore_index")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
             reduce=None, reduction="mean"):
    """Negative log likelihood of log-probabilities (N, C, d...) or (C,) at class indices
    (N, d...) or (); PyTorch's weight, ignore_index and reduction."""
    ignore_index = _loss_args("nll_loss", input, target, weight, ignore_index)
    reduction = _check_reduction(reduction, "nll_loss", size_average, reduce)
    return _C._nn.nll_loss(input, target, weight, ignore_index, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """PyTorch's cross_entropy: class indices (with weight, ignore_index, label_smoothing) or,
    when target has the input's shape, class probabilities."""
    fn = "cross_entropy"
    ignore_index = _loss_args(fn, input, target, weight, ignore_index)
    label_smoothing = float(_number(label_smoothing, fn, "label_smoothing"))
    reduction = _check_reduction(reduction, fn, size_average, reduce)
    return _C._nn.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def mse_loss(input, target, reduction="mean"):  # noqa: A002  (PyTorch's spelling)
    _tensor(input, "mse_loss", "input")
    _tensor(target, "mse_loss", "target")
    return _C._nn.mse_loss(input, target, _check_reduction(reduction, "mse_loss"))


def embedding(indices, weight):
    _tensor(indices, "embedding", "input")
    _tensor(weight, "embedding", "weight")
    return _C._nn.embedding(indices, weight)


def _uniform(shape, bound, dtype=None):
    """U(-bound, bound) from the device RNG."""
    u = _C.rand(*shape) if dtype is None else _C.rand(*shape).to(dtype)
    return (u * 2.0 - 1.0) * bound


# Convolution, pooling and normalization: one implementation, in C++ (lz::nn, include/lazuli/nn.h).
from .._C._nn import (  # noqa: E402,F401
    conv1d, conv2d, conv_transpose1d, conv_transpose2d, max_pool1d, max_pool2d, avg_pool1d,
    avg_pool2d, adaptive_avg_pool1d, adaptive_avg_pool2d, batch_norm, group_norm, rms_norm,
)

# Attention: one implementation, in C++ (lz::nn::scaled_dot_product_attention).
from .._C._nn import scaled_dot_product_attention  # noqa: E402,F401
