"""Convolution modules, as torch.nn's: Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d.

Constructor arguments, defaults, attributes (tuples, as torch stores them), initialization
(kaiming_uniform_ with a=sqrt(5) for the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias),
state_dict keys and repr follow PyTorch. The work is lz.nn.functional's (one C++ op each); these
modules add the shape checks that name the module, and the padding modes, which pad with F.pad
first as torch does. A bad input raises before anything is recorded.
"""
import math
import numbers

from .. import _C
from . import functional as F
from . import init
from .modules import Module


def _ntuple(v, n, arg, owner):
    """An int for every spatial dim, or a tuple/list of n ints (torch's _single/_pair)."""
    if isinstance(v, (tuple, list)):
        if len(v) != n or not all(isinstance(e, numbers.Integral) and not isinstance(e, bool)
                                  for e in v):
            raise ValueError(f"{owner}: {arg} must be an int or a tuple of {n} ints, got {v!r}")
        return tuple(int(e) for e in v)
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{owner}: {arg} must be an int or a tuple of {n} ints, got "
                        f"{type(v).__name__}")
    return (int(v),) * n


def _new_param(shape, dtype):
    t = _C.zeros(*shape) if dtype is None else _C.zeros(*shape, dtype=dtype)
    return t.requires_grad_()


def _check_device(device, owner):
    if device is not None and str(device) != "cpu":
        raise ValueError(f"{owner}: device={device!r} is not supported (Lazuli tensors live on "
                         f"its own device; leave device=None)")


def check_rank_and_channels(module, x, spatial, channels):
    """x is (N, C, *spatial) or unbatched (C, *spatial) with C == channels, else ValueError naming
    the module and the shapes (nothing recorded)."""
    if not isinstance(x, _C.Tensor):
        raise TypeError(f"{type(module).__name__}: expected a Tensor input, got "
                        f"{type(x).__name__}")
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{module!r}: expected a {spatial + 1}-D (unbatched) or "
                         f"{spatial + 2}-D (batched) input, got input of shape {tuple(x.shape)}")
    c = x.shape[x.ndim - spatial - 1]
    if c != channels:
        raise ValueError(f"{module!r}: expected input with {channels} channels (dim "
                         f"{x.ndim - spatial - 1}), got input of shape {tuple(x.shape)} with "
                         f"{c}")


class _ConvNd(Module):
    _spatial = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 output_padding, groups, bias, padding_mode, device, dtype):
        super().__init__()
        name, n = type(self).__name__, self._spatial
        _check_device(device, name)
        for arg, v in (("in_channels", in_channels), ("out_channels", out_channels),
                       ("groups", groups)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"{name}: {arg} must be an int, got {type(v).__name__}")
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        kernel_size = _ntuple(kernel_size, n, "kernel_size", name)
        stride = _ntuple(stride, n, "stride", name)
        dilation = _ntuple(dilation, n, "dilation", name)
        if isinstance(padding, str):
            if self._transposed:
                raise ValueError(f"{name}: padding must be an int or a tuple of ints, got "
                                 f"{padding!r}")
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _ntuple(padding, n, "padding", name)
        valid_modes = ("zeros", "reflect", "replicate", "circular")
        if padding_mode not in valid_modes:
            raise ValueError(f"padding_mode must be one of {set(valid_modes)}, but got "
                             f"padding_mode='{padding_mode}'")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride, self.padding, self.dilation = (kernel_size, stride,
                                                                      padding, dilation)
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, n, "output_padding", name)
        self.groups, self.padding_mode = int(groups), padding_mode
        # F.pad's argument for the padding modes: last dim first, (left, right) each.
        if isinstance(padding, str):
            pads = [0, 0] * n
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(n - 1, -1, -1)):
                    total = d * (k - 1)
                    pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
        else:
            pads = [p for p in reversed(padding) for _ in range(2)]
        self._reversed_padding_repeated_twice = pads
        if self._transposed:
            shape = (in_channels, out_channels // groups) + kernel_size
        else:
            shape = (out_channels, in_channels // groups) + kernel_size
        self.weight = _new_param(shape, dtype)
        if bias:
            self.bias = _new_param((out_channels,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """PyTorch's: kaiming_uniform_(a=sqrt(5)) for the weight (a bound of 1/sqrt(fan_in)),
        U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias, fan_in from the weight's shape."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0,
                         groups, bias, padding_mode, device, dtype)

    def forward(self, input):  # noqa: A002  (PyTorch's spelling)
        check_rank_and_channels(self, input, self._spatial, self.in_channels)
        fn = F.conv1d if self._spatial == 1 else F.conv2d
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return fn(padded, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                  self.groups)


class Conv1d(_Conv):
    """Conv1d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode='zeros', device=None, dtype=None) on (N, C, L) or (C, L)."""
    _spatial = 1


class Conv2d(_Conv):
    """Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
    bias=True, padding_mode='zeros', device=None, dtype=None) on (N, C, H, W) or (C, H, W)."""
    _spatial = 2


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):  # noqa: A002
        """The output padding that gives output_size (the spatial sizes, or the whole shape), as
        PyTorch chooses it; ValueError for a size no output padding gives."""
        n = self._spatial
        if output_size is None:
            return self.output_padding
        output_size = [int(s) for s in output_size]
        non_spatial = 2 if input.ndim == n + 2 else 1
        if len(output_size) == non_spatial + n:
            output_size = output_size[non_spatial:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have "
                             f"{n} or {non_spatial + n} elements (got {len(output_size)})")
        min_sizes, max_sizes = [], []
        for d in range(n):
            size = ((input.shape[d + non_spatial] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            min_sizes.append(size)
            max_sizes.append(size + self.stride[d] - 1)
        for size, lo, hi in zip(output_size, min_sizes, max_sizes):
            if size < lo or size > hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {min_sizes} to {max_sizes} (for an input of "
                                 f"{tuple(input.shape[non_spatial:])})")
        return tuple(s - lo for s, lo in zip(output_size, min_sizes))

    def forward(self, input, output_size=None):  # noqa: A002
        check_rank_and_channels(self, input, self._spatial, self.in_channels)
        output_padding = self._output_padding(input, output_size)
        fn = F.conv_transpose1d if self._spatial == 1 else F.conv_transpose2d
        return fn(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                  self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros'); forward(input,
    output_size=None). The weight is (in_channels, out_channels / groups, k)."""
    _spatial = 1


class ConvTranspose2d(_ConvTranspose):
    """ConvTranspose2d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros'); forward(input,
    output_size=None). The weight is (in_channels, out_channels / groups, kh, kw)."""
    _spatial = 2
