"""Pooling modules, as torch.nn's: MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d.

Attributes keep what the constructor was given, as PyTorch keeps them (AvgPool1d makes tuples, as
PyTorch's does); stride=None means the kernel size. The work is lz.nn.functional's; a bad input
raises, naming the module and the input's shape, before anything is recorded.
"""
import numbers

from .. import _C
from . import functional as F
from .modules import Module


def _check_rank(module, x, spatial):
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{type(module).__name__}: expected a Tensor input, got "
                        f"{type(x).__name__}")
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{module!r}: expected a {spatial + 1}-D (unbatched) or "
                         f"{spatial + 2}-D (batched) input, got input of shape {tuple(x.shape)}")


class _MaxPoolNd(Module):
    _spatial = 0

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):  # noqa: A002
        _check_rank(self, input, self._spatial)
        fn = F.max_pool1d if self._spatial == 1 else F.max_pool2d
        return fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                  ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """MaxPool1d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False); with return_indices, forward returns (values, indices)."""
    _spatial = 1


class MaxPool2d(_MaxPoolNd):
    """MaxPool2d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
    ceil_mode=False); with return_indices, forward returns (values, indices): flat offsets
    within each input plane, as PyTorch's."""
    _spatial = 2


class _AvgPoolNd(Module):
    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class AvgPool1d(_AvgPoolNd):
    """AvgPool1d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):  # noqa: A002
        _check_rank(self, input, 1)
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
    divisor_override=None)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):  # noqa: A002
        _check_rank(self, input, 2)
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _AdaptiveAvgPoolNd(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """AdaptiveAvgPool1d(output_size): (N, C, L) or (C, L) to length output_size."""

    def forward(self, input):  # noqa: A002
        _check_rank(self, input, 1)
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """AdaptiveAvgPool2d(output_size): an int (square) or (H, W); a None entry keeps that dim of
    the input, as PyTorch's."""

    def forward(self, input):  # noqa: A002
        _check_rank(self, input, 2)
        size = self.output_size
        if isinstance(size, (tuple, list)):
            if len(size) != 2:
                raise ValueError(f"{self!r}: output_size must be an int or a pair, got {size!r}")
            size = tuple(input.shape[input.ndim - 2 + i] if s is None else s
                         for i, s in enumerate(size))
        elif size is None or not isinstance(size, numbers.Integral):
            raise TypeError(f"{self!r}: output_size must be an int or a pair of ints/None, got "
                            f"{size!r}")
        return F.adaptive_avg_pool2d(input, size)
