"""Lowering entries: convolution and pooling, forward and backward (part of the table in
lowering.py), through lz.nn.functional and lz.nn.grad (C++ lz::nn). One or two spatial dims.
Batch norm, group norm and adaptive average pooling reach Lazuli through their decompositions
(lowering.py) into means and variances."""
import torch

import lazuli as lz
import lazuli.nn.functional as F
from lazuli.nn import grad as G

from .lowering import FLOATS, aten, lower


def _conv_when(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):  # noqa: A002
    if weight.ndim not in (3, 4):
        return f"{weight.ndim - 2}-D convolution"
    return None


@lower(aten.convolution.default, dtypes=FLOATS, when=_conv_when,
       note="1-D and 2-D; float32 through oneDNN, float64 on the reference kernels")
def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):  # noqa: A002
    if transposed:
        f = F.conv_transpose1d if weight.ndim == 3 else F.conv_transpose2d
        return f(input, weight, bias, stride, padding, output_padding, groups, dilation)
    f = F.conv1d if weight.ndim == 3 else F.conv2d
    return f(input, weight, bias, stride, padding, dilation, groups)


def _conv_backward_when(grad_output, input, weight, bias_sizes, stride, padding, dilation,  # noqa: A002
                        transposed, output_padding, groups, output_mask):
    return _conv_when(input, weight, None, stride, padding, dilation, transposed, output_padding,
                      groups)


@lower(aten.convolution_backward.default, dtypes=FLOATS, when=_conv_backward_when,
       note="1-D and 2-D; the masked-out gradients are not computed")
def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,  # noqa: A002
                          transposed, output_padding, groups, output_mask):
    gi = gw = gb = None
    if transposed:  # y = conv_transpose(x, w) is the input gradient of conv(y_shape, w)
        # An output padding of at least the stride gives conv(y_shape, w) output_padding // stride
        # more positions per dim than x has: x's gradient drops them, and as conv's output
        # gradient x is extended by zeros to them.
        spatial = weight.ndim - 2
        grow = [output_padding[i] // stride[i] for i in range(spatial)]
        if output_mask[0]:
            f = F.conv1d if weight.ndim == 3 else F.conv2d
            gi = f(grad_output, weight, None, stride, padding, dilation, groups)
            if any(grow):
                gi = gi[(slice(None), slice(None)) + tuple(slice(0, n) for n in input.shape[2:])]
        if output_mask[1]:
            dy = input
            if any(grow):
                dy = F.pad(input, [p for g in reversed(grow) for p in (0, g)])
            gw = G.conv2d_weight(grad_output, tuple(weight.shape), dy, stride, padding, dilation,
                                 groups)
    else:
        if output_mask[0]:
            gi = G.conv2d_input(tuple(input.shape), weight, grad_output, stride, padding, dilation,
                                groups)
        if output_mask[1]:
            gw = G.conv2d_weight(input, tuple(weight.shape), grad_output, stride, padding,
                                 dilation, groups)
    if output_mask[2]:
        gb = lz.sum(grad_output, [0] + list(range(2, grad_output.ndim)))
    return gi, gw, gb


def _pool_when(x, kernel_size, *args, **kwargs):
    if len(kernel_size) not in (1, 2) and not isinstance(kernel_size, int):
        return f"{len(kernel_size)}-D pooling"
    return None


@lower(aten.max_pool2d_with_indices.default, dtypes=FLOATS, when=_pool_when,
       note="indices are flat offsets in each plane, as eager's")
def _max_pool2d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool2d(x, kernel_size, stride if stride else None, padding, dilation, ceil_mode,
                        True)


def _max_pool_backward_when(grad_output, *args):
    return None if grad_output.dtype.is_floating_point else f"gradient of dtype {grad_output.dtype}"


@lower(aten.max_pool2d_with_indices_backward.default, dtypes=FLOATS | {torch.int64},
       when=_max_pool_backward_when, note="a scatter_add of the gradient at the int64 indices")
def _max_pool2d_with_indices_backward(grad_output, x, kernel_size, stride, padding, dilation,
                                      ceil_mode, indices):
    lead = x.shape[:-2]
    planes = 1
    for s in lead:
        planes *= s
    in_plane = x.shape[-2] * x.shape[-1]
    out_plane = grad_output.shape[-2] * grad_output.shape[-1]
    g = lz.zeros(planes, in_plane, dtype=grad_output.dtype)
    g = lz.scatter_add(g, 1, indices.reshape(planes, out_plane),
                       grad_output.reshape(planes, out_plane))
    return g.reshape(x.shape)


@lower(aten.avg_pool2d.default, dtypes=FLOATS, when=_pool_when)
def _avg_pool2d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    return F.avg_pool2d(x, kernel_size, stride if stride else None, padding, ceil_mode,
                        count_include_pad, divisor_override)


@lower(aten.avg_pool2d_backward.default, dtypes=FLOATS, when=_pool_when)
def _avg_pool2d_backward(grad_output, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override):
    return lz._C._nn.avg_pool_input_grad(grad_output, tuple(x.shape), kernel_size,
                                         stride if stride else None, padding, ceil_mode,
                                         count_include_pad, divisor_override)
