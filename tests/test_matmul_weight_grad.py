"""A matrix applied to a batch (a Linear's weight, x @ w and x @ w.T with x [B, T, K]) gets its gradient
from one product over the batch's rows, as the reference computes it: f64 sums rounded once, not B
products rounded apart and then summed."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg


@pytest.mark.parametrize("transposed", [False, True])
def test_weight_gradient_is_one_product_over_the_batch_rows(transposed):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16, 24)).astype(np.float32)
    g = rng.standard_normal((8, 16, 12)).astype(np.float32)
    w0 = rng.standard_normal((12, 24) if transposed else (24, 12)).astype(np.float32)
    with vg.backend("reference"):
        w = vg.tensor(w0, requires_grad=True)
        (vg.tensor(x) @ (w.T if transposed else w)).backward(vg.tensor(g))
    want = x.reshape(-1, 24).astype(np.float64).T @ g.reshape(-1, 12).astype(np.float64)
    want = (want.T if transposed else want).astype(np.float32)
    np.testing.assert_array_equal(w.grad.numpy(), want)


def test_a_batched_weight_keeps_its_batch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    w0 = rng.standard_normal((3, 5, 2)).astype(np.float32)
    with vg.backend("reference"):
        w = vg.tensor(w0, requires_grad=True)
        (vg.tensor(x) @ w).sum().backward()
    want = np.swapaxes(x.astype(np.float64), 1, 2) @ np.ones((3, 4, 2))
    np.testing.assert_array_equal(w.grad.numpy(), want.astype(np.float32))
