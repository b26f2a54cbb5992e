"""lz.nn modules, PyTorch-style: a Module owns parameters (leaf tensors that require grad) and
sub-modules, found by attribute assignment."""
import collections
import collections.abc
import math

from .. import _C
from ..autograd import no_grad
from . import functional as F


class Parameter:
    """lz.nn.Parameter(t): marks t as a parameter (requires grad) and returns it."""

    def __new__(cls, data, requires_grad=True):
        return data.requires_grad_(requires_grad)


class _IncompatibleKeys(
        collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """load_state_dict's result, as PyTorch's: (missing_keys, unexpected_keys)."""


class StateDictError(RuntimeError, KeyError):
    """A strict load_state_dict with missing or unexpected keys, or a shape mismatch: a
    RuntimeError as in PyTorch, and a KeyError as Lazuli raised before."""

    __str__ = RuntimeError.__str__


def _check_attr_name(kind, name):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if not name:
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got {name!r}')


class Module:
    """PyTorch's nn.Module: parameters (leaf tensors that require grad), buffers
    (register_buffer: state that is not trained, such as running statistics) and sub-modules,
    found by attribute assignment. Each also lives as a plain attribute, so reading one costs
    what reading any attribute costs."""

    def __init__(self):
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes")
        if name in self._buffers and (value is None or isinstance(value, _C.Tensor)):
            self._buffers[name] = value  # a new value for a buffer stays a buffer, as PyTorch
            object.__setattr__(self, name, value)
            return
        if name in self._parameters and value is None:
            self._parameters[name] = None
            object.__setattr__(self, name, None)
            return
        # A replaced module or parameter keeps its place in the order (ModuleList, state_dict).
        kind = None
        if isinstance(value, Module):
            kind = self._modules
        elif isinstance(value, _C.Tensor) and value.requires_grad and value.is_leaf:
            kind = self._parameters
        for d in (self._parameters, self._modules, self._buffers):
            if d is not kind:
                d.pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        if kind is not None:
            kind[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        object.__delattr__(self, name)

    def _check_new_attr(self, kind, name):
        _check_attr_name(kind, name)
        if hasattr(self, name) and name not in self._parameters and name not in self._buffers \
                and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Adds a parameter (made to require grad), or None (a declared, absent parameter)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_new_attr("parameter", name)
        if param is not None and not isinstance(param, _C.Tensor):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(a Tensor or None required)")
        if param is not None:
            param.requires_grad_()
        self._buffers.pop(name, None)
        self._modules.pop(name, None)
        self._parameters[name] = param
        object.__setattr__(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a buffer: a tensor of the module's state that is not a parameter (it gets no
        gradient, the optimizer does not see it). Persistent buffers are in state_dict."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_new_attr("buffer", name)
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(a Tensor or None required)")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)
        object.__setattr__(self, name, tensor)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_new_attr("module", name)
        self._parameters.pop(name, None)
        self._buffers.pop(name, None)
        self._modules[name] = module
        object.__setattr__(self, name, module)

    register_module = add_module

    def get_submodule(self, target):
        """The sub-module at a dotted path ("body.0"); "" is the module itself."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- traversal, as PyTorch: depth-first, each module (and tensor) once ----
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, members, prefix, recurse, remove_duplicate):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mprefix, m in mods:
            for name, t in members(m).items():
                if t is None:
                    continue
                if remove_duplicate:
                    if t._id in seen:
                        continue
                    seen.add(t._id)
                yield mprefix + ("." if mprefix else "") + name, t

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._parameters, prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers, prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """fn(m) for every sub-module, then for this one (PyTorch's order); returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    # ---- state ----
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Names to the parameter and persistent buffer tensors themselves (no copy), each
        module's parameters, then its buffers, then its sub-modules', as PyTorch orders them;
        a tensor shared by two modules appears under both names."""
        if destination is None:
            destination = collections.OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def _state_tensors(self):
        """(name, tensor) for every entry state_dict() has, shared tensors under each name."""
        return list(self.state_dict().items())

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies the values of state_dict into the parameters and persistent buffers (in place,
        so optimizers keep referring to the same tensors). Returns (missing_keys,
        unexpected_keys); with strict, either raises StateDictError (a RuntimeError and a
        KeyError), as does a shape mismatch, before anything is copied."""
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}")
        own = self._state_tensors()
        own_keys = {k for k, _ in own}
        missing = [k for k, _ in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own_keys]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        values = {}
        for name, t in own:
            if name not in state_dict:
                continue
            value = state_dict[name]
            if not isinstance(value, _C.Tensor):
                from .._tensor import tensor
                value = tensor(value)
            if tuple(value.shape) != tuple(t.shape):
                errors.append(f"size mismatch for {name}: copying a param with shape "
                              f"{tuple(value.shape)} from checkpoint, the shape in current model "
                              f"is {tuple(t.shape)}.")
            values[name] = value
        if errors:
            raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                                 + "\n\t".join(errors))
        with no_grad():
            for name, t in own:
                if name in values:
                    t.copy_(values[name])
        return _IncompatibleKeys(missing, unexpected)

    def train(self, mode=True):
        """Sets training mode here and, through each child's train(), below (so a module that
        overrides train() sees the call); returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        object.__setattr__(self, "training", mode)
        for m in self.children():
            m.train(mode)
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


class _InplaceActivation(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class SiLU(_InplaceActivation):
    def forward(self, x):
        return F.silu(x, self.inplace)


class Hardswish(_InplaceActivation):
    def forward(self, x):
        return F.hardswish(x, self.inplace)


class Hardsigmoid(_InplaceActivation):
    def forward(self, x):
        return F.hardsigmoid(x, self.inplace)


class Sequential(Module):
    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], collections.OrderedDict):
            for name, layer in layers[0].items():
                self.add_module(name, layer)
        else:
            for i, layer in enumerate(layers):
                self.add_module(str(i), layer)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return type(self)(collections.OrderedDict(list(self._modules.items())[i]))
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules, registered under "0", "1", ... (renumbered after a deletion or an
    insertion, as PyTorch)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, i):
        n = len(self._modules)
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"ModuleList indices must be integers or slices, not "
                            f"{type(i).__name__}")
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range")
        return i + n if i < 0 else i

    def _reset(self, mods):
        for name in list(self._modules):
            delattr(self, name)
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return type(self)(list(self._modules.values())[i])
        return self._modules[str(self._index(i))]

    def __setitem__(self, i, module):
        setattr(self, str(self._index(i)), module)

    def __delitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            del mods[i]
        else:
            del mods[self._index(i)]
        self._reset(mods)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend should be called with an iterable of modules, "
                            f"got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._reset(mods)

    def pop(self, i=-1):
        m = self[i]
        del self[i]
        return m

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(); iterate over it instead")


class ModuleDict(Module):
    """An ordered dict of modules, each registered under its key."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        if key not in self._modules:
            raise KeyError(key)
        delattr(self, key)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def clear(self):
        for key in list(self._modules):
            delattr(self, key)

    def pop(self, key):
        m = self[key]
        del self[key]
        return m

    def update(self, modules):
        if isinstance(modules, (collections.abc.Mapping, ModuleDict)):
            for key, m in modules.items():
                self[key] = m
            return
        for j, pair in enumerate(modules):
            if len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(pair)}; "
                                 f"2 is required")
            self[pair[0]] = pair[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(); index it instead")


class Identity(Module):
    """Returns its input; takes and ignores any arguments, as PyTorch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size` (a tuple of ints, one of them may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"Unflatten: dim must be an int, got {type(dim).__name__}")
        if not isinstance(unflattened_size, (tuple, list)) or not all(
                isinstance(s, int) and not isinstance(s, bool) for s in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, got "
                            f"{unflattened_size!r}")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        d = self.dim + x.ndim if self.dim < 0 else self.dim
        if not 0 <= d < x.ndim:
            raise IndexError(f"Unflatten: dim {self.dim} is out of range for a {x.ndim}-D input")
        return x.reshape(*x.shape[:d], *self.unflattened_size, *x.shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


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
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        y = F.dropout(x, self.p, self.training)
        return x.copy_(y) if self.inplace and y is not x else y

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Module):
    """Zeroes whole channels of (N, C, H, W) or (C, H, W) inputs in training mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout2d: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return F.dropout2d(x, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class CrossEntropyLoss(Module):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.register_buffer("weight", weight)  # in state_dict, never trained (as PyTorch)
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
        self.register_buffer("weight", weight)
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
