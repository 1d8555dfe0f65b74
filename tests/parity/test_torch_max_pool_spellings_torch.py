"""torch.max_pool1d/2d/3d and torch.max_pool1d_with_indices (torch's arguments, stride=[] the kernel's
size) against PyTorch's, one helper making all four."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import verigrad

RNG = np.random.default_rng(7)


@pytest.mark.parametrize(
    "name, shape", [("max_pool1d", (2, 3, 9)), ("max_pool2d", (2, 3, 7, 6)), ("max_pool3d", (1, 2, 5, 4, 6))]
)
@pytest.mark.parametrize("args", [(2,), (3, [], 1, 1, True), (2, 1, 0, 2, False)])
def test_torch_max_pool_spellings(name: str, shape: tuple, args: tuple) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    ours = getattr(verigrad, name)(verigrad.from_numpy(x), *args)
    theirs = getattr(torch, name)(torch.from_numpy(x), *args)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert getattr(verigrad, name).__name__ == name
    assert list(inspect.signature(getattr(verigrad, name)).parameters)[:6] == [
        "input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
    ]  # fmt: skip


@pytest.mark.parametrize("args", [(2,), (3, [], 1, 1, True)])
def test_torch_max_pool1d_with_indices(args: tuple) -> None:
    x = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    values, indices = verigrad.max_pool1d_with_indices(verigrad.from_numpy(x), *args)
    t_values, t_indices = torch.max_pool1d_with_indices(torch.from_numpy(x), *args)
    np.testing.assert_array_equal(values.numpy(), t_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), t_indices.numpy())
