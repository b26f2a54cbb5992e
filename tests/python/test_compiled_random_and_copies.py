"""The cpu backend compiles the random ops (fused into their consumers), cat and slice_scatter,
from Python.

A dropout training step on lz tensors runs no reference kernel for its draws
(`fallback::rng_uniform` and `fallback::rng_advance` stay 0) and agrees with the reference backend
(to float rounding: the matrix products differ; a different mask would not come close); the draws
themselves are the reference's bit for bit. cat and slice assignment (slice_scatter) run no
reference kernel and give the reference's values bit for bit.
"""
import numpy as np
import pytest

import lazuli as lz

from conftest import counter, fallback_counts, on_backend, train_steps

pytestmark = pytest.mark.skipif(lz.backend() != "cpu",
                                reason="tests the cpu backend (LAZULI_BACKEND=cpu, the default)")

RANDOM_OPS = ("rng_uniform", "rng_normal", "rng_advance")


def reference_kernels(ops):
    return fallback_counts(ops)


def dropout_training(steps=3):
    """Losses and final weights of a few SGD steps of an MLP with dropout."""
    rng = np.random.default_rng(0)

    def batch(_):
        return (lz.tensor(rng.standard_normal((16, 12)).astype(np.float32)),
                lz.tensor(rng.integers(0, 5, 16)))

    return train_steps(lambda: lz.nn.Sequential(lz.nn.Linear(12, 32), lz.nn.ReLU(),
                                                lz.nn.Dropout(0.3), lz.nn.Linear(32, 5)),
                       batch, lz.optim.SGD, steps, seed=11)


def test_dropout_training_step_runs_no_reference_random_kernel_and_matches_the_reference():
    losses, weights = dropout_training()
    assert counter("ExecutedNode::rng_uniform") > 0
    assert reference_kernels(RANDOM_OPS) == {}
    ref_losses, ref_weights = on_backend("interp", dropout_training)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for k in weights:
        np.testing.assert_allclose(weights[k], ref_weights[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("dtype", [lz.float32, lz.float64])
def test_draws_match_the_reference_bit_for_bit(dtype):
    def draw():
        lz.manual_seed(5)
        return [lz.rand(17, 9, dtype=dtype).numpy(), lz.randn(4, 33, dtype=dtype).numpy(),
                (lz.rand(6, 5, dtype=dtype).transpose(0, 1) * 2).numpy()]

    got = draw()
    assert reference_kernels(RANDOM_OPS) == {}
    for g, r in zip(got, on_backend("interp", draw)):
        np.testing.assert_array_equal(g, r)


COPY_OPS = ("cat", "slice_scatter")


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_cat_and_slice_assignment_match_the_reference_bit_for_bit(dtype):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((4, 6)) * 4).astype(dtype)
    b = (rng.standard_normal((4, 3)) * 4).astype(dtype)
    c = (rng.standard_normal((2, 6)) * 4).astype(dtype)

    def program():
        x, y, z = lz.tensor(a), lz.tensor(b), lz.tensor(c)
        joined = lz.cat([x, y, x[:, :0]], 1)
        stacked = lz.cat([x.transpose(0, 1)[:, :2], z.transpose(0, 1)], 1)
        out = x.clone()
        out[1:-1, ::2] = z[:, 1::2] if dtype == np.bool_ else z[:, 1::2] + z[:, ::2]
        out[-1:, 10:] = x[:1, 10:]  # an empty window
        return [t.numpy() for t in (joined, stacked, out)]

    got = program()
    assert reference_kernels(COPY_OPS) == {}
    for g, r in zip(got, on_backend("interp", program)):
        np.testing.assert_array_equal(g, r)
