"""Every lazuli function that PyTorch also has as a Tensor method is a method here too, and the
method computes what the function computes (`t.softmax`, `t.masked_fill`, ...)."""
import numpy as np
import pytest

import lazuli as lz
from lazuli.nn import functional as F

# (method call, equivalent function call) on x = a [3, 4] float tensor, m = a [3, 4] bool mask.
PAIRS = [
    ("softmax", lambda x, m: x.softmax(-1), lambda x, m: F.softmax(x, -1)),
    ("softmax_dtype", lambda x, m: x.softmax(0, dtype=lz.float64), lambda x, m: F.softmax(x.double(), 0)),
    ("log_softmax", lambda x, m: x.log_softmax(1), lambda x, m: F.log_softmax(x, 1)),
    ("where", lambda x, m: x.where(m, 0.5), lambda x, m: lz.where(m, x, 0.5)),
    ("masked_fill", lambda x, m: x.masked_fill(m, 1.0), lambda x, m: lz.masked_fill(x, m, 1.0)),
    ("tril", lambda x, m: x.tril(1), lambda x, m: lz.tril(x, 1)),
    ("triu", lambda x, m: x.triu(), lambda x, m: lz.triu(x)),
    ("flip", lambda x, m: x.flip(0), lambda x, m: lz.flip(x, (0,))),
    ("flip_tuple", lambda x, m: x.flip((0, 1)), lambda x, m: lz.flip(x, [0, 1])),
    ("roll", lambda x, m: x.roll(1, 0), lambda x, m: lz.roll(x, 1, 0)),
    ("clamp", lambda x, m: x.clamp(lz.zeros(4)), lambda x, m: lz.clamp(x, lz.zeros(4))),
    ("clip", lambda x, m: x.clip(max=lz.zeros(4)), lambda x, m: lz.clip(x, max=lz.zeros(4))),
    ("norm", lambda x, m: x.norm(1, 0), lambda x, m: lz.norm(x, 1, 0)),
]


@pytest.mark.parametrize("method, function", [pytest.param(a, b, id=n) for n, a, b in PAIRS])
def test_method_computes_what_the_function_computes(method, function):
    x = lz.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    m = x > 0
    got, want = method(x, m), function(x, m)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_uniform_and_normal_fill_in_place_from_the_device_rng():
    lz.manual_seed(0)
    x = lz.zeros(10000)
    assert x.uniform_(-2.0, 3.0) is x
    v = x.numpy()
    assert v.min() >= -2.0 and v.max() < 3.0 and abs(v.mean() - 0.5) < 0.05
    x.normal_(1.0, 2.0)
    v = x.numpy()
    assert abs(v.mean() - 1.0) < 0.1 and abs(v.std() - 2.0) < 0.1


def test_every_lazuli_function_torch_has_as_a_method_is_a_method():
    torch = pytest.importorskip("torch")
    functions = [n for n in dir(lz) if not n.startswith("_") and callable(getattr(lz, n))
                 and not isinstance(getattr(lz, n), type)]
    functions += [n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n))]
    missing = sorted({n for n in functions if hasattr(torch.Tensor, n) and not hasattr(lz.Tensor, n)})
    assert missing == []
