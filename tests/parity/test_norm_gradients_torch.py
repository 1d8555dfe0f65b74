"""vector_norm / norm of any p as PyTorch's at zero elements and zero vectors: the same values, and
gradient 0 there (the power's own derivative is infinite or NaN at 0)."""

import numpy as np
import pytest
import torch

import verigrad as vg

VECTORS = [[0.0, 0.0, 0.0], [0.0, 1.5, -2.0], [3.0, -1.0, 0.25], [[0.0, 2.0], [0.0, 0.0]]]


@pytest.mark.parametrize("p", [3, 0.5, 1.5, -1.0, -2.5])
@pytest.mark.parametrize("dim", [None, -1])
@pytest.mark.parametrize("values", VECTORS, ids=range(len(VECTORS)))
def test_p_norm_values_and_gradients_at_zero(values, p, dim):
    x = vg.tensor(values, dtype=vg.float64, requires_grad=True)
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    got, want = vg.linalg.vector_norm(x, ord=p, dim=dim), torch.linalg.vector_norm(t, ord=p, dim=dim)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=0)
    assert not np.isnan(x.grad.numpy()).any()
