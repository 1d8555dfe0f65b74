"""histc against PyTorch on values that sit on or near bin edges (multiples of 1/3, 1/7 and 1/10 over
ranges of thirds and sevenths), f32 and f64, given ranges and x's own: the same counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histc_counts_equal_pytorchs(dtype) -> None:
    rng = np.random.default_rng(0)
    for i in range(200):
        x = (rng.integers(-20, 20, int(rng.integers(1, 50))) / rng.choice([1, 3, 7, 10])).astype(dtype)
        bins = int(rng.integers(1, 13))
        low, high = (
            (0.0, 0.0) if i % 3 == 0 else (float(rng.integers(-5, 0)) / 3, float(rng.integers(1, 5)) / 7)
        )
        ours = verigrad.histc(verigrad.from_numpy(x), bins=bins, min=low, max=high)
        theirs = torch.histc(torch.from_numpy(x), bins=bins, min=low, max=high)
        np.testing.assert_array_equal(
            ours.numpy(), theirs.numpy(), err_msg=f"{x.tolist()} {bins} {low} {high}"
        )
        assert ours.numpy().dtype == theirs.numpy().dtype
