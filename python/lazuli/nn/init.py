"""lz.nn.init: PyTorch's parameter initializers, with its formulas and fan computation.

Each fills its tensor in place under no_grad (so a parameter stays the same leaf tensor and an
optimizer keeps referring to it) and returns it. Random values come from the device RNG
(lz.rand / lz.randn), so they follow lz.manual_seed; the draws themselves differ from PyTorch's.
"""
import math
import numbers

from .. import _C
from ..autograd import no_grad

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
]


def _check_tensor(tensor, fn):
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"nn.init.{fn}(): expects a Tensor, got {type(tensor).__name__}")


def _check_float(tensor, fn):
    _check_tensor(tensor, fn)
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"nn.init.{fn}(): expects a floating-point tensor, got {tensor.dtype}")


def _fill(tensor, value):
    with no_grad():
        tensor.copy_(value)
    return tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """fan_in = size(1) * receptive field, fan_out = size(0) * receptive field, where the
    receptive field is the product of the dims after the first two (a conv kernel's)."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    return tensor.shape[1] * receptive_field_size, tensor.shape[0] * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills tensor with values from U(a, b)."""
    _check_float(tensor, "uniform_")
    u = _C.rand(*tensor.shape, dtype=tensor.dtype)
    return _fill(tensor, u * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills tensor with values from N(mean, std^2)."""
    _check_float(tensor, "normal_")
    return _fill(tensor, _C.randn(*tensor.shape, dtype=tensor.dtype) * std + mean)


def _erfinv(y):
    """erf^-1 on (-1, 1), M. Giles' single-precision approximation ("Approximating the erfinv
    function", GPU Computing Gems, 2011), written in lazuli ops; about 1e-7 relative error."""
    w = -_C.log((1.0 - y) * (1.0 + y))
    small = w - 2.5
    p1 = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p1 = small * p1 + c
    large = _C.sqrt(w) - 3.0
    p2 = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p2 = large * p2 + c
    return _C.where(w < 5.0, p1, p2) * y


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fills tensor with values from N(mean, std^2) truncated to [a, b] (absolute bounds), by
    PyTorch's method: the inverse normal CDF of a uniform draw between the bounds' CDFs."""
    _check_float(tensor, "trunc_normal_")

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    # The inverse CDF is computed in float64: near the bounds float32 loses the tails.
    u = _C.rand(*tensor.shape, dtype=_C.dtype.float64) * (2 * hi - 2 * lo) + (2 * lo - 1)
    x = _erfinv(u) * (std * math.sqrt(2.0)) + mean
    return _fill(tensor, _C.clamp(x, a, b).to(tensor.dtype))


def constant_(tensor, val):
    _check_tensor(tensor, "constant_")
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0 if tensor.dtype.is_floating_point else 1)


def zeros_(tensor):
    _check_tensor(tensor, "zeros_")
    with no_grad():
        tensor.zero_()
    return tensor


def eye_(tensor):
    """The identity matrix, in a 2-D tensor."""
    _check_tensor(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, _C.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)."""
    _check_float(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check_float(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std)


def _kaiming_std(tensor, a, mode, nonlinearity, fn):
    _check_float(tensor, fn)
    if not isinstance(a, numbers.Real):
        raise TypeError(f"nn.init.{fn}(): a must be a number, got {type(a).__name__}")
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015); gain from
    nonlinearity and a (leaky_relu's negative slope)."""
    if isinstance(tensor, _C.Tensor) and 0 in tensor.shape:
        return tensor  # PyTorch warns and leaves an empty tensor alone
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    if isinstance(tensor, _C.Tensor) and 0 in tensor.shape:
        return tensor
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_")
    return normal_(tensor, 0.0, std)
