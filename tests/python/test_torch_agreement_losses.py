"""cross_entropy / nll_loss / gelu against PyTorch (the spec): ignore_index, weight, reduction,
probability targets, (N, C, d...) and unbatched inputs, label smoothing. Expected values and
gradients are PyTorch 2's for the same inputs, written out so no test needs torch; gradients are
also checked against central finite differences."""
import numpy as np
import pytest

import lazuli as lz
from lazuli import nn
from lazuli.nn import functional as F
from conftest import raises_without_leak

X = [[0.126, -0.132, 0.64], [0.105, -0.536, 0.362], [1.304, 0.947, -0.704], [-1.265, -0.623, 0.041]]
Y = [2, -100, 0, 1]  # the second target is PyTorch's default ignore_index
W = [0.5, 2.0, 1.5]
P = [[0.665, 0.021, 0.314], [0.195, 0.724, 0.081], [0.167, 0.813, 0.02], [0.07, 0.531, 0.399]]
X3 = [[[0.903, 0.094], [-0.743, -0.922], [-0.458, 0.22]], [[-1.01, -0.209], [-0.159, 0.541], [0.215, 0.355]]]
Y3 = [[0, 2], [-100, 1]]


def f64(a):
    return lz.tensor(np.asarray(a, dtype=np.float64))


def leaf(a):
    return f64(a).requires_grad_()


def loss_and_grad(fn, x, **kw):
    t = leaf(x)
    loss = fn(t, **kw)
    loss.sum().backward()
    return loss.numpy(), t.grad.numpy()


def numeric_grad(fn, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (fn(f64(hi)).sum().item() - fn(f64(lo)).sum().item()) / (2 * eps)
    return g


# (kwargs, PyTorch's loss, PyTorch's gradient of loss.sum()) for the class targets Y.
CLASS_CASES = [
    ({}, 0.8577055021116573,
     [[0.09677092085733653, 0.07476475206097508, -0.17153567291831157], [0, 0, 0],
      [-0.15158415849545132, 0.12718307403750917, 0.024401084457942205],
      [0.05056897993350469, -0.23723823166228442, 0.1866692517287797]]),
    ({"weight": W}, 0.9687654172246168,
     [[0.1088672859645036, 0.08411034606859696, -0.1929776320331005], [0, 0, 0],
      [-0.05684405943579425, 0.04769365276406594, 0.009150406671728327],
      [0.07585346990025704, -0.3558573474934266, 0.2800038775931696]]),
    ({"reduction": "sum"}, 2.573116506334972,
     [[0.2903127625720096, 0.22429425618292526, -0.5146070187549348], [0, 0, 0],
      [-0.454752475486354, 0.3815492221125275, 0.07320325337382662],
      [0.15170693980051408, -0.7117146949868532, 0.5600077551863392]]),
    ({"reduction": "none"}, [0.7227964455282843, 0.0, 0.6065154140048893, 1.2438046468017983], None),
    ({"weight": W, "reduction": "none"},
     [1.0841946682924264, 0.0, 0.30325770700244464, 2.4876092936035965],
     [[0.4354691438580144, 0.33644138427438786, -0.771910528132402], [0, 0, 0],
      [-0.227376237743177, 0.19077461105626375, 0.03660162668691331],
      [0.30341387960102817, -1.4234293899737065, 1.1200155103726783]]),
    ({"label_smoothing": 0.1}, 0.8980277243338795,
     [[0.08565980974622542, 0.06365364094986396, -0.14931345069608937], [0, 0, 0],
      [-0.1293619362732291, 0.11607196292639807, 0.013289973346831097],
      [0.03945786882239359, -0.2150160094400622, 0.17555814061766864]]),
    ({"label_smoothing": 0.2, "weight": W}, 1.0274201008686916,
     [[0.09811467960973688, 0.04890789393373928, -0.1470225735434761], [0, 0, 0],
      [-0.01745874591439234, 0.03025820368542125, -0.012799457771028899],
      [0.06246323857357325, -0.29880019099386484, 0.23633695242029165]]),
    ({"label_smoothing": 0.2, "reduction": "sum"}, 2.8150498396683052, None),
    ({"label_smoothing": 0.2, "reduction": "none"},
     [0.8085297788616176, 0.0, 0.764182080671556, 1.2423379801351315],
     [[0.22364609590534296, 0.1576275895162586, -0.3812736854216014], [0, 0, 0],
      [-0.3214191421530207, 0.31488255544586086, 0.006536586707159953],
      [0.08504027313384742, -0.5783813616535199, 0.4933410885196725]]),
]


def _kw(kw):
    return {k: (f64(v) if k == "weight" else v) for k, v in kw.items()}


@pytest.mark.parametrize("kw, want_loss, want_grad", CLASS_CASES, ids=lambda c: str(c)[:40])
def test_cross_entropy_with_class_targets_matches_pytorch(kw, want_loss, want_grad):
    y = lz.tensor(Y)
    loss, grad = loss_and_grad(lambda t, **k: F.cross_entropy(t, y, **k), X, **_kw(kw))
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12, atol=1e-14)
    if want_grad is not None:
        np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-14)
    fd = numeric_grad(lambda t: F.cross_entropy(t, y, **_kw(kw)), X)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)


def test_the_default_ignore_index_ignores_minus_100_and_averages_over_the_rest():
    # Before: "gather: index -100". The loss is the mean over the three other rows.
    loss = F.cross_entropy(f64(X), lz.tensor(Y))
    each = F.cross_entropy(f64(X), lz.tensor([2, 0, 0, 1]), reduction="none").numpy()
    assert loss.item() == pytest.approx(each[[0, 2, 3]].mean(), rel=1e-12)
    # A target that is neither a class nor the ignore_index still raises, naming the loss.
    raises_without_leak(IndexError, lambda: F.cross_entropy(f64(X), lz.tensor([2, -1, 0, 1])),
                        "cross_entropy: index -1 is out of range for size 3")
    # Every target ignored: 0 / 0, nan (PyTorch too).
    assert np.isnan(F.cross_entropy(f64(X), lz.tensor([-100] * 4)).item())


def test_ignore_index_can_be_a_class():
    # torch: F.nll_loss(x, [2, 5, 0, 1], ignore_index=5) == F.nll_loss(x, [2, -100, 0, 1])
    got = F.nll_loss(f64(X), lz.tensor([2, 5, 0, 1]), ignore_index=5).item()
    assert got == pytest.approx(-0.4403333333333334, rel=1e-12)
    assert F.nll_loss(f64(X), lz.tensor(Y)).item() == pytest.approx(-0.4403333333333334, rel=1e-12)
    got = F.nll_loss(f64(X), lz.tensor([2, 1, 0, 1]), ignore_index=1).item()
    assert got == pytest.approx(-(0.64 + 1.304) / 2, rel=1e-12)


# (kwargs, PyTorch's loss, PyTorch's gradient) for the probability targets P.
SOFT_CASES = [
    ({}, 1.1303700495562516,
     [[-0.0936718093569976, 0.050823564045731316, 0.042848245311266325],
      [0.0399084393011961, -0.13429780218569767, 0.09438936288450157],
      [0.09456188112841149, -0.10786269447186811, 0.013300813343456654],
      [0.02042673495012852, -0.06067867374671332, 0.040251938796584785]]),
    ({"weight": W}, 1.7173041530972013,
     [[-0.021760139811341478, 0.03691019840066582, -0.015150058589324325],
      [0.12341861831509389, -0.28414743624355804, 0.1607288179284641],
      [0.21623951722287177, -0.24057378203381458, 0.02433426481094285],
      [0.05555477910794291, -0.14330306633755244, 0.0877482872296095]]),
    ({"reduction": "none"}, [1.0808184455282843, 1.4799366918900343, 0.9369164140048893, 1.0238086468017982],
     None),
    ({"label_smoothing": 0.3, "reduction": "sum"}, 4.6492719982250055,
     [[-0.2751872374279904, 0.10959425618292526, 0.16559298124506533],
      [0.11813375720478442, -0.4199912087427906, 0.3018574515380063],
      [0.32834752451364596, -0.28755077788747246, -0.04079674662617338],
      [0.002706939800514074, -0.18341469498685323, 0.18070775518633914]]),
]


@pytest.mark.parametrize("kw, want_loss, want_grad", SOFT_CASES, ids=lambda c: str(c)[:40])
def test_cross_entropy_with_probability_targets_matches_pytorch(kw, want_loss, want_grad):
    p = f64(P)
    loss, grad = loss_and_grad(lambda t, **k: F.cross_entropy(t, p, **k), X, **_kw(kw))
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
    if want_grad is not None:
        np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-14)


def test_probability_targets_refuse_a_class_ignore_index_and_int_targets_of_the_input_shape():
    raises_without_leak(ValueError, lambda: F.cross_entropy(f64(X), f64(P), ignore_index=1),
                        "ignore_index is not supported")
    raises_without_leak(TypeError, lambda: F.cross_entropy(f64(X), lz.zeros(4, 3, dtype=lz.int64)),
                        "cross_entropy", "floating point")


def test_cross_entropy_over_extra_dims_matches_pytorch():
    x3, y3 = f64(X3), lz.tensor(Y3)
    assert F.cross_entropy(x3, y3).item() == pytest.approx(0.6646343733811886, rel=1e-12)
    each = F.cross_entropy(x3, y3, reduction="none")
    assert each.shape == (2, 2)
    np.testing.assert_allclose(each.numpy(), [[0.3710281656669824, 0.7888185995495015],
                                              [0.0, 0.8340563549270819]], rtol=1e-12)
    assert F.nll_loss(x3, y3, weight=f64(W)).item() == pytest.approx(-0.46587500000000004, rel=1e-12)
    fd = numeric_grad(lambda t: F.cross_entropy(t, y3), X3)
    _, grad = loss_and_grad(lambda t: F.cross_entropy(t, y3), X3)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)


def test_unbatched_input_is_one_sample():
    x = f64(X[0])
    loss = F.cross_entropy(x, lz.tensor(2))
    assert loss.item() == pytest.approx(0.7227964455282843, rel=1e-12)
    assert F.cross_entropy(x, lz.tensor(2), reduction="none").shape == ()
    assert F.cross_entropy(x, f64(P[0])).item() == pytest.approx(1.0808184455282843, rel=1e-12)
    assert F.nll_loss(x, lz.tensor(0)).item() == pytest.approx(-0.126)


def test_loss_argument_errors_name_the_loss():
    x, y = f64(X), lz.tensor([2, 0, 0, 1])
    raises_without_leak(ValueError, lambda: F.cross_entropy(x, y, reduction="avg"), "cross_entropy", "'avg'")
    raises_without_leak(ValueError, lambda: F.cross_entropy(x, y, weight=f64([1.0, 2.0])),
                        "cross_entropy", "weight", "(3,)")
    raises_without_leak(ValueError, lambda: F.cross_entropy(x, y, label_smoothing=1.5), "label_smoothing")
    raises_without_leak(ValueError, lambda: F.nll_loss(x, lz.tensor([0, 1])), "nll_loss", "(4, 3)", "(2,)")
    raises_without_leak(IndexError, lambda: F.nll_loss(x, lz.tensor([0, 3, 0, 0])), "nll_loss", "index 3")


def test_deprecated_size_average_and_reduce_map_as_in_pytorch():
    x, y = f64(X), lz.tensor([2, 0, 0, 1])
    total = F.cross_entropy(x, y, reduction="sum").item()
    assert F.cross_entropy(x, y, size_average=False).item() == pytest.approx(total)
    assert F.cross_entropy(x, y, reduce=False).shape == (4,)
    assert F.nll_loss(x, y, None, True).item() == pytest.approx(F.nll_loss(x, y).item())


def test_loss_modules_take_pytorchs_arguments():
    x, y = f64(X), lz.tensor(Y)
    m = nn.CrossEntropyLoss(weight=f64(W), label_smoothing=0.2)
    assert m(x, y).item() == pytest.approx(1.0274201008686916, rel=1e-12)
    assert nn.CrossEntropyLoss(reduction="sum")(x, y).item() == pytest.approx(2.573116506334972, rel=1e-12)
    logp = F.log_softmax(x, 1)
    assert nn.NLLLoss()(logp, y).item() == pytest.approx(0.8577055021116573, rel=1e-12)
    assert nn.NLLLoss(ignore_index=0)(logp, lz.tensor([2, 0, 0, 1])).item() == pytest.approx(
        (0.7227964455282843 + 1.2438046468017983) / 2, rel=1e-12)


# ---- gelu(approximate="tanh") ---------------------------------------------------------------------

GELU_X = [-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0]
GELU_TANH = [-0.0036373920817729943, -0.15880800939172324, -0.15428599017485606, 0.0,
             0.34571400982514394, 0.8411919906082768, 2.996362607918227]  # PyTorch's values


def test_gelu_tanh_approximation_matches_pytorch():
    np.testing.assert_allclose(F.gelu(f64(GELU_X), approximate="tanh").numpy(), GELU_TANH, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(nn.GELU(approximate="tanh")(f64(GELU_X)).numpy(), GELU_TANH, rtol=1e-12, atol=1e-15)
    exact = F.gelu(f64(GELU_X)).numpy()
    assert not np.allclose(exact, GELU_TANH, rtol=1e-9)  # the two forms differ
    np.testing.assert_allclose(nn.GELU()(f64(GELU_X)).numpy(), exact)
    fd = numeric_grad(lambda t: F.gelu(t, approximate="tanh"), GELU_X)
    _, grad = loss_and_grad(lambda t: F.gelu(t, approximate="tanh"), GELU_X)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)
    raises_without_leak(ValueError, lambda: F.gelu(f64(GELU_X), approximate="fast"), "gelu", "'fast'")
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU(approximate="erf")
