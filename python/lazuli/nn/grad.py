"""The gradients of convolutions, as torch.nn.grad: the input gradient for an input of a given
size, and the weight gradient for a weight of a given size (lz::nn::conv_input_grad and
conv_weight_grad in C++)."""
from .. import _C


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _C._nn.conv_input_grad(input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _C._nn.conv_input_grad(input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    return _C._nn.conv_weight_grad(input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    return _C._nn.conv_weight_grad(input, weight_size, grad_output, stride, padding, dilation, groups)
