"""lz.nn.utils: gradient clipping, as torch.nn.utils, written with Lazuli ops. Everything is lazy:
the total norm is a tensor recorded into the step's graph and the gradients are scaled in place,
with no value read (so no graph cut) unless error_if_nonfinite=True asks for one. max_norm and the
other numbers enter the graph as device scalars: changing them never recompiles."""
import math
import types
import warnings

from .. import _C
from .. import linalg as _linalg
from ..autograd import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _tensor_list(tensors, fn, what):
    if isinstance(tensors, _C.Tensor):
        return [tensors]
    out = list(tensors)
    for t in out:
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"{fn}: {what} must be tensors, got {type(t).__name__}")
    return out


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The p-norm of all elements of ``tensors`` taken together (the norm of their norms), as a
    0-d tensor. ``error_if_nonfinite=True`` reads the norm (a value read) and raises RuntimeError
    when it is nan or infinite. ``foreach`` is accepted for PyTorch compatibility (the ops fuse
    into the step's program either way)."""
    fn = "get_total_norm"
    tensors = _tensor_list(tensors, fn, "tensors")
    norm_type = float(norm_type)
    if not tensors:
        return _C.zeros(())
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise TypeError(f"{fn}: expected floating-point tensors, got {t.dtype}")
    with no_grad():
        norms = [_linalg.vector_norm(t, norm_type) for t in tensors]
        dtype = norms[0].dtype
        for n in norms[1:]:
            dtype = _C.result_type(_C.zeros((), dtype=dtype), n)  # float64 if any is
        total = _linalg.vector_norm(_C.stack([n.to(dtype) for n in norms], 0), norm_type)
    if error_if_nonfinite and bool((total != total) | (total.abs() == math.inf)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` "
                           f"is non-finite, so it cannot be clipped. To disable this error and "
                           f"scale the gradients by the non-finite norm anyway, set "
                           f"`error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales each parameter's .grad in place by min(max_norm / (total_norm + 1e-6), 1)."""
    params = _tensor_list(parameters, "clip_grads_with_norm_", "parameters")
    grads = [p.grad for p in params if p.grad is not None]
    max_norm = float(max_norm)
    if not grads:
        return
    with no_grad():
        coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clips the gradient norm of ``parameters`` (a tensor or an iterable of tensors) in place, as
    torch.nn.utils.clip_grad_norm_: the norm of all gradients together, then every gradient
    multiplied by min(max_norm / (norm + 1e-6), 1). Returns the total norm (before clipping) as a
    0-d tensor, lazily: nothing runs until the step's barrier."""
    if isinstance(parameters, _C.Tensor):
        params = [parameters]
    else:
        generator = isinstance(parameters, types.GeneratorType)
        params = _tensor_list(parameters, "clip_grad_norm_", "parameters")
        if generator and not params:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                          stacklevel=2)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps each parameter's .grad in place to [-clip_value, clip_value]."""
    params = _tensor_list(parameters, "clip_grad_value_", "parameters")
    clip_value = float(clip_value)
    with no_grad():
        for p in params:
            if p.grad is not None:
                p.grad.clamp_(-clip_value, clip_value)
