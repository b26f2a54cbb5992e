"""Normalization modules, as torch.nn's: BatchNorm1d, BatchNorm2d, GroupNorm, RMSNorm.

BatchNorm keeps running_mean, running_var and num_batches_tracked as buffers (in state_dict, in
PyTorch's order and dtypes). In training mode it normalizes with the batch's statistics and
updates the running ones inside the step's graph: nothing is read back, so a training step is
one program, compiled once. momentum=None is PyTorch's cumulative average (factor
1 / num_batches_tracked), computed from the num_batches_tracked buffer inside the graph too, where
PyTorch reads it as a Python number. eval() normalizes with the running statistics, unless
track_running_stats=False (then there are none, and the batch's are used in both modes).
"""
import numbers

from .. import _C
from .._tensor import tensor as _tensor
from ..autograd import no_grad
from . import functional as F
from .modules import Module


def _zeros(shape, dtype):
    return _C.zeros(*shape) if dtype is None else _C.zeros(*shape, dtype=dtype)


def _ones(shape, dtype):
    return _C.ones(*shape) if dtype is None else _C.ones(*shape, dtype=dtype)


class _BatchNorm(Module):
    _ranks = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        name = type(self).__name__
        if device is not None and str(device) != "cpu":
            raise ValueError(f"{name}: device={device!r} is not supported; leave device=None")
        if isinstance(num_features, bool) or not isinstance(num_features, numbers.Integral):
            raise TypeError(f"{name}: num_features must be an int, got "
                            f"{type(num_features).__name__}")
        if momentum is not None and (isinstance(momentum, bool)
                                     or not isinstance(momentum, numbers.Real)):
            raise TypeError(f"{name}: momentum must be a number or None, got {momentum!r}")
        self.num_features, self.eps, self.momentum = int(num_features), eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = _ones((num_features,), dtype).requires_grad_()
            if bias:
                self.bias = _zeros((num_features,), dtype).requires_grad_()
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _zeros((num_features,), dtype))
            self.register_buffer("running_var", _ones((num_features,), dtype))
            self.register_buffer("num_batches_tracked", _tensor(0))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            with no_grad():
                self.weight.fill_(1)
                if self.bias is not None:
                    self.bias.zero_()

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def _check_input(self, x, batch_stats):
        if not isinstance(x, _C.Tensor):
            raise TypeError(f"{type(self).__name__}: expected a Tensor input, got "
                            f"{type(x).__name__}")
        if x.ndim not in self._ranks:
            want = " or ".join(f"{r}D" for r in self._ranks)
            raise ValueError(f"{self!r}: expected {want} input (got {x.ndim}D input of shape "
                             f"{tuple(x.shape)})")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{self!r}: expected input with {self.num_features} channels "
                             f"(dim 1), got input of shape {tuple(x.shape)}")
        if batch_stats and x.numel() // self.num_features <= 1:
            raise ValueError(f"{self!r}: expected more than 1 value per channel when training, "
                             f"got input of shape {tuple(x.shape)}")

    def forward(self, input):  # noqa: A002
        # PyTorch's rules: training uses the batch's statistics; eval uses the running ones,
        # or the batch's when the module tracks none.
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        self._check_input(input, batch_stats)
        update = self.training and self.track_running_stats
        momentum = 0.0 if self.momentum is None else self.momentum
        if update and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
        if update and self.momentum is None and self.num_batches_tracked is not None:
            y = F.batch_norm(input, None, None, self.weight, self.bias, True, 0.0, self.eps)
            self._update_cumulative(input)
            return y
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            batch_stats, momentum, self.eps)

    def _update_cumulative(self, x):
        """running = running + (batch - running) / num_batches_tracked, the variance unbiased
        (PyTorch's momentum=None), with the factor computed from the buffer in the graph."""
        with no_grad():
            c = self.num_features
            dims = (0,) + tuple(range(2, x.ndim))
            n = x.numel() // c
            mean = x.mean(dims)
            centered = x - mean.reshape(1, c, *([1] * (x.ndim - 2)))
            var = (centered * centered).mean(dims) * (n / (n - 1))
            for buf, stat in ((self.running_mean, mean), (self.running_var, var)):
                if buf is not None:
                    f = 1.0 / self.num_batches_tracked.to(buf.dtype)
                    buf.copy_(buf * (1.0 - f) + stat.to(buf.dtype) * f)


class BatchNorm1d(_BatchNorm):
    """BatchNorm1d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    *, bias=True) over (N, C) or (N, C, L)."""
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
    *, bias=True) over (N, C, H, W)."""
    _ranks = (4,)


class GroupNorm(Module):
    """GroupNorm(num_groups, num_channels, eps=1e-5, affine=True, *, bias=True) over
    (N, C, ...): statistics per sample and group of C / num_groups channels."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None,
                 *, bias=True):
        super().__init__()
        if device is not None and str(device) != "cpu":
            raise ValueError(f"GroupNorm: device={device!r} is not supported; leave device=None")
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = (num_groups, num_channels,
                                                                     eps, affine)
        if affine:
            self.weight = _ones((num_channels,), dtype).requires_grad_()
            if bias:
                self.bias = _zeros((num_channels,), dtype).requires_grad_()
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.affine:
            with no_grad():
                self.weight.fill_(1)
                if self.bias is not None:
                    self.bias.zero_()

    def forward(self, input):  # noqa: A002
        if not isinstance(input, _C.Tensor):
            raise TypeError(f"GroupNorm: expected a Tensor input, got {type(input).__name__}")
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise ValueError(f"{self!r}: expected input (N, {self.num_channels}, ...), got input "
                             f"of shape {tuple(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """RMSNorm(normalized_shape, eps=None, elementwise_affine=True): x / sqrt(mean(x^2) + eps)
    over the last dims; eps=None is the machine epsilon of the input's dtype, as PyTorch."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if device is not None and str(device) != "cpu":
            raise ValueError(f"RMSNorm: device={device!r} is not supported; leave device=None")
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(d) for d in normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = _ones(self.normalized_shape, dtype).requires_grad_()
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        if self.elementwise_affine:
            with no_grad():
                self.weight.fill_(1)

    def forward(self, x):
        if not isinstance(x, _C.Tensor):
            raise TypeError(f"RMSNorm: expected a Tensor input, got {type(x).__name__}")
        k = len(self.normalized_shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != self.normalized_shape:
            raise ValueError(f"{self!r}: the input's last dims must be {self.normalized_shape}, "
                             f"got input of shape {tuple(x.shape)}")
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
