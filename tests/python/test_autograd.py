"""Autograd from Python: composite ops' gradients against hand-derived formulas (numpy), the
leaf/non-leaf rules, grad mode, and the errors of include/lazuli/autograd.h."""
import numpy as np
import pytest

import lazuli as lz
from lazuli.nn import functional as F
from conftest import executions


def leaf(a):
    return lz.tensor(np.asarray(a, dtype=np.float64)).requires_grad_()


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_gradient_matches_the_jacobian_formula(rng):
    x = rng.standard_normal((3, 5))
    w = rng.standard_normal((3, 5))
    t = leaf(x)
    (F.softmax(t, dim=1) * lz.tensor(w)).sum().backward()
    s = np_softmax(x, 1)
    expected = s * (w - (w * s).sum(axis=1, keepdims=True))  # J^T w, J = diag(s) - s s^T
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_log_softmax_gradient(rng):
    x = rng.standard_normal((4, 6))
    w = rng.standard_normal((4, 6))
    t = leaf(x)
    (F.log_softmax(t, dim=-1) * lz.tensor(w)).sum().backward()
    expected = w - np_softmax(x, 1) * w.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_cross_entropy_gradient_is_softmax_minus_one_hot_over_n(rng):
    x = rng.standard_normal((5, 4))
    y = np.array([0, 3, 1, 1, 2])
    t = leaf(x)
    loss = F.cross_entropy(t, lz.tensor(y))
    loss.backward()
    p = np_softmax(x, 1)
    expected_loss = -np.log(p[np.arange(5), y]).mean()
    onehot = np.eye(4)[y]
    np.testing.assert_allclose(loss.item(), expected_loss, rtol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(), (p - onehot) / 5, rtol=1e-10, atol=1e-12)


def test_mse_gradient(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ta, tb = leaf(a), leaf(b)
    F.mse_loss(ta, tb).backward()
    np.testing.assert_allclose(ta.grad.numpy(), 2 * (a - b) / a.size, rtol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), -2 * (a - b) / a.size, rtol=1e-12)


def test_layer_norm_gradient_matches_the_closed_form(rng):
    x = rng.standard_normal((3, 6))
    w = rng.standard_normal((3, 6))
    gamma, beta = rng.standard_normal(6), rng.standard_normal(6)
    tx, tg, tb = leaf(x), leaf(gamma), leaf(beta)
    eps = 1e-5
    (F.layer_norm(tx, 6, tg, tb, eps) * lz.tensor(w)).sum().backward()
    mu = x.mean(1, keepdims=True)
    var = x.var(1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + eps)
    dxhat = w * gamma
    n = x.shape[1]
    dx = (dxhat - dxhat.mean(1, keepdims=True) - xhat * (dxhat * xhat).mean(1, keepdims=True)) / np.sqrt(var + eps)
    np.testing.assert_allclose(tx.grad.numpy(), dx, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(tg.grad.numpy(), (w * xhat).sum(0), rtol=1e-10)
    np.testing.assert_allclose(tb.grad.numpy(), w.sum(0), rtol=1e-10)
    assert n == 6


def test_var_and_logsumexp_gradients(rng):
    x = rng.standard_normal((2, 5))
    t = leaf(x)
    (t.var(1).sum() + lz.logsumexp(t, 1).sum()).backward()
    expected = 2 * (x - x.mean(1, keepdims=True)) / 4 + np_softmax(x, 1)
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-10)


def test_gradients_accumulate_and_can_be_cleared():
    w = leaf([1.0, 2.0])
    (w * w).sum().backward()
    (w * 3).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [5.0, 7.0])
    w.grad = None
    assert w.grad is None


def test_requires_grad_and_is_leaf():
    w = leaf([1.0, 2.0])
    y = w * 2
    c = lz.tensor([1.0, 2.0])
    assert w.requires_grad and w.is_leaf
    assert y.requires_grad and not y.is_leaf
    assert not c.requires_grad and c.is_leaf
    assert not (y > 0).requires_grad
    c.requires_grad = True
    assert c.requires_grad and c.is_leaf
    with pytest.raises(lz.Error):
        y.requires_grad = False
    with pytest.raises(lz.Error):
        lz.tensor([1, 2]).requires_grad_()


def test_no_grad_context_and_decorator():
    w = leaf([1.0])
    assert lz.is_grad_enabled()
    with lz.no_grad():
        assert not lz.is_grad_enabled()
        assert not (w * 2).requires_grad
        with lz.enable_grad():
            assert (w * 2).requires_grad
    assert lz.is_grad_enabled()

    @lz.no_grad()
    def f():
        return w * 2
    assert not f().requires_grad
    assert lz.is_grad_enabled()


def test_errors_are_lz_errors_with_clear_messages():
    w = leaf([1.0, 2.0])
    with pytest.raises(lz.Error, match="does not require grad"):
        lz.tensor([1.0]).sum().backward()
    with pytest.raises(lz.Error, match="only for scalar outputs"):
        (w * 2).backward()
    loss = (w * w).sum()
    loss.backward()
    with pytest.raises(lz.Error, match="second time"):
        loss.backward()
    with pytest.raises(lz.Error, match="a leaf tensor that requires grad is used in an in-place operation"):
        w += 1
    with pytest.raises(lz.Error):
        w[0] = 3.0
    assert isinstance(lz.Error("x"), RuntimeError)


def test_retain_graph_allows_a_second_backward():
    w = leaf([1.0, 2.0])
    loss = (w * w).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), [4.0, 8.0])


def test_backward_with_a_gradient_argument():
    w = leaf([1.0, 2.0])
    (w * 3).backward(lz.tensor([1.0, 10.0], dtype=lz.float64))
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 30.0])


def test_detach_stops_gradients():
    w = leaf([1.0, 2.0])
    (w * w.detach()).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 2.0])
    assert not w.detach().requires_grad


def test_backward_records_and_runs_nothing():
    w = leaf([1.0, 2.0])
    loss = (w.exp() * w).sum()
    before = executions()
    loss.backward()
    assert executions() == before
    assert lz.debug.tensor_state(w.grad) == "ir"


def test_printing_the_loss_before_backward_keeps_the_graph():
    w = leaf([1.0, 2.0])
    loss = (w * w).sum()
    assert loss.item() == 5.0
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])


def test_indexing_and_embedding_gradients():
    table = leaf(np.arange(12.0).reshape(4, 3))
    out = F.embedding(lz.tensor([[1, 1], [3, 0]]), table)
    out.sum().backward()
    np.testing.assert_allclose(table.grad.numpy(), np.array([[1] * 3, [2] * 3, [0] * 3, [1] * 3], dtype=float))
