"""lz.nn.functional: the usual functional ops, written in Lazuli's primitives, so their gradients
come from the primitives' rules and they fuse like any other graph."""

import numbers

from .. import _C
from .._origin import user_op


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


def gelu(x):
    return _C.gelu(x)


def sigmoid(x):
    return _C.sigmoid(x)


def tanh(x):
    return _C.tanh(x)


def silu(x):
    return _tensor(x, "silu", "input") * _C.sigmoid(x)


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
    return y if bias is None else y + bias


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


@user_op("nll_loss")
def nll_loss(log_probs, target, reduction="mean"):
    """Negative log likelihood of log-probabilities [N, C] at class indices [N]."""
    _tensor(log_probs, "nll_loss", "input")
    _tensor(target, "nll_loss", "target")
    if log_probs.ndim != 2 or target.ndim != 1 or target.shape[0] != log_probs.shape[0]:
        raise ValueError(f"nll_loss: expects input [N, C] and target [N], got {tuple(log_probs.shape)} "
                         f"and {tuple(target.shape)}")
    if target.dtype not in (_C.dtype.int64, _C.dtype.int32):
        raise TypeError(f"nll_loss: target must hold class indices (int64), got {target.dtype}")
    _C._check_index_bounds(target, log_probs.shape[1], "nll_loss", allow_negative=False)
    picked = _C.gather(log_probs, 1, target.unsqueeze(1)).reshape(-1)
    return _reduce(-picked, reduction, "nll_loss")


@user_op("cross_entropy")
def cross_entropy(logits, target, reduction="mean"):
    _tensor(logits, "cross_entropy", "input")
    _tensor(target, "cross_entropy", "target")
    return nll_loss(log_softmax(logits, 1), target, reduction)


def mse_loss(input, target, reduction="mean"):  # noqa: A002  (PyTorch's spelling)
    _tensor(input, "mse_loss", "input")
    _tensor(target, "mse_loss", "target")
    d = input - target
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


