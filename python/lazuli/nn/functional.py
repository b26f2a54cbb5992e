"""lz.nn.functional: the usual functional ops, written in Lazuli's primitives, so their gradients
come from the primitives' rules and they fuse like any other graph."""

import math
import numbers

from .. import _C
from .. import amp as _amp
from .._origin import user_op

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


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
    """GELU; approximate="tanh" is PyTorch's tanh approximation, written in primitives."""
    if approximate == "none":
        return _C.gelu(x)
    if approximate != "tanh":
        raise ValueError(f"F.gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    x = _tensor(x, "gelu", "input")
    inner = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
    return x * (_C.tanh(inner) + 1.0) * 0.5


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


@user_op("one_hot")
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


def _shift(x, dim):
    # Keeps exp in range; the shift cancels in the value, so no gradient flows through it.
    return x - _C.detach(_C.amax(x, dim, True))


def log_softmax(x, dim=-1):
    s = _shift(_tensor(x, "log_softmax", "input"), _int(dim, "log_softmax", "dim"))
    return s - _C.log(_C.sum(_C.exp(s), dim, True))


def softmax(x, dim=-1):
    dim = _int(dim, "softmax", "dim")
    e = _C.exp(_shift(_tensor(x, "softmax", "input"), dim))
    return e / _C.sum(e, dim, True)


def linear(x, weight, bias=None):
    _tensor(x, "linear", "input")
    _tensor(weight, "linear", "weight")
    if bias is not None:
        _tensor(bias, "linear", "bias")
    y = _C.matmul(x, weight.transpose(0, 1))
    return y if bias is None else y + _amp._bias(bias)


def dropout(x, p=0.5, training=True):
    """Zeroes elements with probability p and scales the rest by 1/(1-p). The mask comes from the
    device RNG (lz.rand), so every step draws a new mask without changing the graph."""
    _tensor(x, "dropout", "input")
    if not 0.0 <= _number(p, "dropout", "p") <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = (_C.rand(*x.shape) >= p).to(x.dtype)
    return x * keep * (1.0 / (1.0 - p))


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
    n = len(normalized_shape)
    if tuple(x.shape[x.ndim - n:]) != normalized_shape:
        raise ValueError(f"layer_norm: the input's last dims {tuple(x.shape)} do not match "
                         f"normalized_shape {normalized_shape}")
    dims = tuple(range(x.ndim - n, x.ndim))
    mean = _C.mean(x, dims, True)
    centered = x - mean
    var = _C.mean(centered * centered, dims, True)
    y = centered * _C.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _reduce(loss, reduction, name):
    if reduction == "mean":
        return _C.mean(loss)
    if reduction == "sum":
        return _C.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _class_layout(input, target, fn):
    """(input, target, squeeze) with the class dim at 1 and at least one batch dim: PyTorch's
    (C,) input with a () target is one unbatched sample (squeeze: its loss is 0-d again)."""
    if input.ndim == 0:
        raise ValueError(f"{fn}: expects an input with a class dim, got a 0-d tensor")
    if input.ndim == 1:
        return input.unsqueeze(0), target.unsqueeze(0), True
    return input, target, False


def _check_weight(weight, n_classes, fn):
    if weight is None:
        return
    _tensor(weight, fn, "weight")
    if tuple(weight.shape) != (n_classes,):
        raise ValueError(f"{fn}: weight must have shape ({n_classes},) (one per class), got "
                         f"{tuple(weight.shape)}")


def _class_weighted_loss(log_probs, target, weight, ignore_index, fn):
    """Per-element -w[t] * log_probs[t] (0 where target == ignore_index) and the weights used,
    for log_probs (N, C, d...) and class indices (N, d...)."""
    if tuple(target.shape) != (log_probs.shape[0],) + tuple(log_probs.shape[2:]):
        hint = ""
        if log_probs.ndim >= 3 and tuple(target.shape) == tuple(log_probs.shape[:-1]):
            # A language model's [B, T, V] logits with [B, T] targets (PyTorch refuses them too).
            hint = (" (the class dim is dim 1, as in PyTorch: pass [B, T, C] logits as "
                    "input.transpose(1, 2), or input.reshape(-1, C) with target.reshape(-1))")
        raise ValueError(f"{fn}: expects input (N, C, d...) and target (N, d...), got "
                         f"{tuple(log_probs.shape)} and {tuple(target.shape)}{hint}")
    if target.dtype not in (_C.dtype.int64, _C.dtype.int32):
        raise TypeError(f"{fn}: target must hold class indices (int64), got {target.dtype}")
    n_classes = log_probs.shape[1]
    _C._check_index_bounds(target, n_classes, fn, allow_negative=False, ignore_index=ignore_index)
    keep = target != ignore_index
    # Ignored targets read class 0 (any valid index) and get weight 0.
    safe = _C.where(keep, target, 0)
    picked = _C.gather(log_probs, 1, safe.unsqueeze(1)).squeeze(1)
    if weight is None:
        w = keep.to(log_probs.dtype)
    else:
        w_t = _C.index_select(weight.to(log_probs.dtype), 0, safe.reshape(-1)).reshape(*safe.shape)
        w = _C.where(keep, w_t, 0.0)
    return -picked * w, w


def _nll(log_probs, target, weight, ignore_index, reduction, fn):
    loss, w = _class_weighted_loss(log_probs, target, weight, ignore_index, fn)
    if reduction == "mean":  # a weighted mean over the targets not ignored, as PyTorch
        return _C.sum(loss) / _C.sum(w)
    return _reduce(loss, reduction, fn)


def _check_reduction(reduction, fn, size_average=None, reduce=None):
    """The reduction, with PyTorch's deprecated size_average/reduce flags mapped as it maps them."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


@user_op("nll_loss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
             reduce=None, reduction="mean"):
    """Negative log likelihood of log-probabilities (N, C, d...) or (C,) at class indices
    (N, d...) or (); PyTorch's weight, ignore_index and reduction."""
    _tensor(input, "nll_loss", "input")
    _tensor(target, "nll_loss", "target")
    ignore_index = _int(ignore_index, "nll_loss", "ignore_index")
    reduction = _check_reduction(reduction, "nll_loss", size_average, reduce)
    log_probs, tgt, squeeze = _class_layout(_amp._float32(input), target, "nll_loss")
    _check_weight(weight, log_probs.shape[1], "nll_loss")
    loss = _nll(log_probs, tgt, weight, ignore_index, reduction, "nll_loss")
    return loss.reshape(()) if squeeze and reduction == "none" else loss


@user_op("cross_entropy")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """PyTorch's cross_entropy: class indices (with weight, ignore_index, label_smoothing) or,
    when target has the input's shape, class probabilities."""
    fn = "cross_entropy"
    _tensor(input, fn, "input")
    _tensor(target, fn, "target")
    ignore_index = _int(ignore_index, fn, "ignore_index")
    label_smoothing = float(_number(label_smoothing, fn, "label_smoothing"))
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{fn}: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    reduction = _check_reduction(reduction, fn, size_average, reduce)
    input, target = _amp._float32(input), _amp._float32(target)  # noqa: A001
    logits, tgt, squeeze = _class_layout(input, target, fn)
    n_classes = logits.shape[1]
    _check_weight(weight, n_classes, fn)
    log_probs = log_softmax(logits, 1)
    # Weight broadcast over the class dim of (N, C, d...).
    w_c = None if weight is None else weight.to(log_probs.dtype).reshape(
        n_classes, *([1] * (log_probs.ndim - 2)))
    if tuple(target.shape) == tuple(input.shape):  # class probabilities
        if not tgt.dtype.is_floating_point:
            raise TypeError(f"{fn}: a target of the input's shape holds class probabilities and "
                            f"must be floating point, got {tgt.dtype}")
        if ignore_index >= 0:
            raise ValueError(f"{fn}: ignore_index is not supported for class-probability targets")
        if label_smoothing > 0.0:
            tgt = tgt * (1.0 - label_smoothing) + label_smoothing / n_classes
        terms = log_probs * tgt if w_c is None else log_probs * tgt * w_c
        loss = -_C.sum(terms, 1)
        if reduction == "mean":  # over the samples, not the weights (PyTorch)
            loss = _C.sum(loss) / float(loss.numel())
        elif reduction == "sum":
            loss = _C.sum(loss)
        return loss.reshape(()) if squeeze and reduction == "none" else loss
    loss, w = _class_weighted_loss(log_probs, tgt, weight, ignore_index, fn)
    if reduction == "mean":
        out = _C.sum(loss) / _C.sum(w)
    else:
        out = _reduce(loss, reduction, fn)
    if label_smoothing > 0.0:
        # PyTorch's form: (1 - e) * nll + e / C * (the loss against a uniform target).
        keep = tgt != ignore_index
        smooth = -_C.sum(log_probs if w_c is None else log_probs * w_c, 1)
        smooth = _C.where(keep, smooth, 0.0)
        if reduction == "mean":
            smooth = _C.sum(smooth) / _C.sum(w)
        else:
            smooth = _reduce(smooth, reduction, fn)
        out = out * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)
    return out.reshape(()) if squeeze and reduction == "none" else out


def mse_loss(input, target, reduction="mean"):  # noqa: A002  (PyTorch's spelling)
    _tensor(input, "mse_loss", "input")
    _tensor(target, "mse_loss", "target")
    d = _amp._float32(input) - _amp._float32(target)
    return _reduce(d * d, reduction, "mse_loss")


@user_op("embedding")
def embedding(indices, weight):
    _tensor(indices, "embedding", "input")
    _tensor(weight, "embedding", "weight")
    flat = indices.reshape(-1)
    out = _C.index_select(weight, 0, flat)
    return out.reshape(*indices.shape, weight.shape[1])


def _uniform(shape, bound, dtype=None):
    """U(-bound, bound) from the device RNG."""
    u = _C.rand(*shape) if dtype is None else _C.rand(*shape).to(dtype)
    return (u * 2.0 - 1.0) * bound




# Convolution, pooling and normalization: one implementation, in C++ (lz::nn, include/lazuli/nn.h).
from .._C._nn import (  # noqa: E402,F401
    conv1d, conv2d, conv_transpose1d, conv_transpose2d, max_pool1d, max_pool2d, avg_pool1d,
    avg_pool2d, adaptive_avg_pool1d, adaptive_avg_pool2d, batch_norm, group_norm, rms_norm,
)

# Attention (issue 13): one implementation, in C++ (lz::nn::scaled_dot_product_attention).
from .._C._nn import scaled_dot_product_attention  # noqa: E402,F401
