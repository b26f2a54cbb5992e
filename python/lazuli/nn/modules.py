"""lz.nn modules, PyTorch-style: a Module owns parameters (leaf tensors that require grad) and
sub-modules, found by attribute assignment."""
import collections
import math

from .. import _C
from ..autograd import no_grad
from . import functional as F


class Parameter:
    """lz.nn.Parameter(t): marks t as a parameter (requires grad) and returns it."""

    def __new__(cls, data, requires_grad=True):
        return data.requires_grad_(requires_grad)


class Module:
    def __init__(self):
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, _C.Tensor) and value.requires_grad and value.is_leaf:
            self._parameters[name] = value
        object.__setattr__(self, name, value)

    def register_parameter(self, name, value):
        if value is not None:
            value.requires_grad_()
        self._parameters[name] = value
        object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def children(self):
        return iter(self._modules.values())

    def named_children(self):
        return iter(self._modules.items())

    def modules(self):
        yield self
        for m in self._modules.values():
            yield from m.modules()

    def named_parameters(self, prefix=""):
        seen = set()
        for name, p in self._parameters.items():
            if p is not None and p._id not in seen:
                seen.add(p._id)
                yield prefix + name, p
        for mname, m in self._modules.items():
            for name, p in m.named_parameters(prefix + mname + "."):
                if p._id not in seen:
                    seen.add(p._id)
                    yield name, p

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def state_dict(self):
        """Names to the parameter tensors themselves (no copy, as PyTorch)."""
        return collections.OrderedDict(self.named_parameters())

    def load_state_dict(self, state_dict, strict=True):
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        with no_grad():
            for name, value in state_dict.items():
                if name not in own:
                    continue
                p = own[name]
                if not isinstance(value, _C.Tensor):
                    from .._tensor import tensor
                    value = tensor(value)
                if tuple(value.shape) != tuple(p.shape):
                    raise ValueError(f"load_state_dict: {name} has shape {tuple(value.shape)}, "
                                     f"the parameter {tuple(p.shape)}")
                p.copy_(value)
        return missing, unexpected

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = _C.zeros_like(p.grad)

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"  ({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")


def _param(shape, bound):
    return F._uniform(shape, bound).requires_grad_()


class Linear(Module):
    """y = x W^T + b, initialized as PyTorch: U(-1/sqrt(in), 1/sqrt(in)) from the device RNG."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = _param((out_features, in_features), bound)
        self.bias = _param((out_features,), bound) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


class SiLU(Module):
    def forward(self, x):
        return F.silu(x)


class Sequential(Module):
    def __init__(self, *layers):
        super().__init__()
        for i, layer in enumerate(layers):
            setattr(self, str(i), layer)

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class Embedding(Module):
    """A lookup table initialized N(0, 1), as PyTorch."""

    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = _C.randn(num_embeddings, embedding_dim).requires_grad_()

    def forward(self, indices):
        return F.embedding(indices, self.weight)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        if elementwise_affine:
            self.weight = _C.ones(*self.normalized_shape).requires_grad_()
            self.bias = _C.zeros(*self.normalized_shape).requires_grad_()
        else:
            self.weight = self.bias = None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


class CrossEntropyLoss(Module):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.weight = weight  # a buffer in PyTorch: not a parameter
        self.ignore_index = ignore_index
        self.reduction = F._check_reduction(reduction, "CrossEntropyLoss", size_average, reduce)
        self.label_smoothing = label_smoothing

    def forward(self, input, target):  # noqa: A002
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(Module):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__()
        self.weight = weight
        self.ignore_index = ignore_index
        self.reduction = F._check_reduction(reduction, "NLLLoss", size_average, reduce)

    def forward(self, input, target):  # noqa: A002
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):  # noqa: A002
        return F.mse_loss(input, target, self.reduction)
