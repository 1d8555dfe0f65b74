"""torch.hann_window, hamming_window, blackman_window, bartlett_window and kaiser_window against torch 2.13:
the same operations in the same order, so the values are PyTorch's to the last bit or two (its vectorised
cos and i0 round differently from verigrad's on a few points: bartlett, which has none, bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

WINDOWS = [
    ("hann_window", {}),
    ("hamming_window", {}),
    ("hamming_window", {"alpha": 0.5, "beta": 0.4}),
    ("blackman_window", {}),
    ("bartlett_window", {}),
    ("kaiser_window", {}),
    ("kaiser_window", {"beta": 5.0}),
]
# last-bit differences of cos: a few ulps of 1 (the windows' largest value); kaiser's sqrt(1 - r^2) and i0
# amplify both sides' last bits (each within 1e-6 of the f64 window in f32, the same size: measured)
ULPS = {"float32": 4 * 2.0**-24, "float64": 8 * 2.0**-53}
KAISER_ULPS = {"float32": 16 * 2.0**-24, "float64": 32 * 2.0**-53}


@pytest.mark.parametrize("name,kwargs", WINDOWS, ids=[f"{w[0]}{i}" for i, w in enumerate(WINDOWS)])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 64, 401])
@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_window_against_torch(name, kwargs, n, periodic, dtype):
    theirs = getattr(torch, name)(n, periodic=periodic, dtype=getattr(torch, dtype), **kwargs).numpy()
    ours = getattr(verigrad, name)(n, periodic=periodic, dtype=getattr(verigrad, dtype), **kwargs).numpy()
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    if name == "bartlett_window":
        np.testing.assert_array_equal(ours, theirs)
    else:
        atol = (KAISER_ULPS if name == "kaiser_window" else ULPS)[dtype]
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=atol)


def test_window_defaults_and_refusals():
    for t in (torch, verigrad):
        assert t.hann_window(4).dtype == t.float32 and t.hann_window(4, requires_grad=True).requires_grad
        with pytest.raises((RuntimeError, ValueError)):
            t.hann_window(-1)
        with pytest.raises((RuntimeError, TypeError)):
            t.hann_window(4, dtype=t.int64)
    np.testing.assert_array_equal(verigrad.hann_window(6).numpy(), torch.hann_window(6).numpy())
