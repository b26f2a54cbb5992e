"""Lowering entries: the _foreach_* ops of the optimizers' multi-tensor (foreach=True) paths, and
lerp/addcmul/addcdiv (part of the table in lowering.py).

PyTorch has no decompositions for the foreach ops, so each entry applies its elementwise op to the
lists, element by element: a list argument (Tensor[] or Scalar[]) gives its i-th element, any other
argument is shared. Formulas follow eager's CPU kernels, so rounding matches: lerp takes the branch
on |weight| < 0.5, addcmul is self + (value * t1) * t2 and addcdiv self + (value * t1) / t2.
"""
import lazuli as lz

from . import lowering_pointwise as pw
from .lowering import FLOATS, aten, lower
from .lowering_shape import _copy


def _lerp(a, end, weight):
    diff = lz.sub(end, a)
    if not isinstance(weight, lz.Tensor):
        if abs(weight) < 0.5:
            return lz.add(a, lz.mul(diff, weight))
        return lz.sub(end, lz.mul(diff, 1.0 - weight))
    low = lz.add(a, lz.mul(weight, diff))
    high = lz.sub(end, lz.mul(diff, lz.sub(1.0, weight)))
    return lz.where(lz.lt(lz.abs(weight), 0.5), low, high)


def _addcmul(a, t1, t2, value=1):
    return lz.add(a, lz.mul(lz.mul(t1, value), t2))


def _addcdiv(a, t1, t2, value=1):
    return lz.add(a, lz.div(lz.mul(t1, value), t2))


@lower(aten.lerp.Scalar, aten.lerp.Tensor, note="eager's two-branch formula")
def _lerp_entry(a, end, weight):
    return _lerp(a, end, weight)


@lower(aten.addcmul.default)
def _addcmul_entry(a, t1, t2, *, value=1):
    return _addcmul(a, t1, t2, value)


@lower(aten.addcdiv.default)
def _addcdiv_entry(a, t1, t2, *, value=1):
    return _addcdiv(a, t1, t2, value)


def _foreach(fn, tensor_scalars=False):
    """The entry of a foreach overload whose elementwise function is `fn`."""

    def apply(*args, **kwargs):
        n = len(next(a for a in args if isinstance(a, (list, tuple))))
        out = []
        for i in range(n):
            ai = [a[i] if isinstance(a, (list, tuple)) else a for a in args]
            if tensor_scalars:  # addcmul.Tensor: a 1-D tensor holding one value per element
                ai[-1] = ai[-1].select(0, i)
            out.append(fn(*ai, **kwargs))
        return out

    return apply


def _register(name, fn, overloads, **kwargs):
    packet = getattr(aten, name)
    for o in overloads:
        lower(getattr(packet, o), dtypes=FLOATS, **kwargs)(_foreach(fn, o == "Tensor" and name in (
            "_foreach_addcmul", "_foreach_addcdiv")))


_register("_foreach_add", pw._add, ("Scalar", "List", "ScalarList", "Tensor"))
_register("_foreach_sub", pw._sub, ("Scalar", "List", "ScalarList"))
_register("_foreach_mul", pw._mul, ("Scalar", "List", "ScalarList", "Tensor"))
_register("_foreach_div", pw._div, ("Scalar", "List", "ScalarList", "Tensor"))
_register("_foreach_pow", pw._pow, ("List", "Scalar", "ScalarList", "ScalarAndTensor"),
          note="float exponents")
_register("_foreach_maximum", pw._maximum, ("Scalar", "List", "ScalarList"))
_register("_foreach_clamp_min", pw._clamp_min, ("Scalar", "List", "ScalarList"))
_register("_foreach_lerp", _lerp, ("List", "Scalar", "ScalarList"))
_register("_foreach_addcmul", _addcmul, ("Scalar", "ScalarList", "Tensor"))
_register("_foreach_addcdiv", _addcdiv, ("Scalar", "ScalarList", "Tensor"))
_register("_foreach_copy", lambda a, src, non_blocking=False: _copy(a, src), ("default",))
for _name, _fn in (("_foreach_neg", lz.neg), ("_foreach_sqrt", lz.sqrt),
                   ("_foreach_reciprocal", lz.reciprocal), ("_foreach_abs", lz.abs),
                   ("_foreach_exp", lz.exp), ("_foreach_sign", lz.sign)):
    _register(_name, _fn, ("default",))
