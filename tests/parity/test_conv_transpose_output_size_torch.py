"""ConvTranspose{1,2,3}d called with `output_size` (a U-Net's decoder matching its skip connection:
`self.up(x, output_size=skip.size())`): the output padding reaching that size, as PyTorch's, with the
batch and channel sizes given or not, unbatched inputs too; a size out of reach raises as PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import verigrad

CASES = [
    (1, (2, 3, 5), {"stride": 3, "padding": 1}, [15]),
    (1, (3, 5), {"stride": 2}, [12]),
    (2, (2, 3, 4, 5), {"stride": 2, "padding": 1}, [8, 10]),
    (2, (2, 3, 4, 5), {"stride": (2, 3), "dilation": 2}, (2, 4, 11, 17)),
    (2, (3, 4, 5), {"stride": 2}, [9, 12]),
    (3, (1, 3, 2, 3, 2), {"stride": 2, "padding": (0, 1, 0)}, [6, 5, 5]),
]


def _run(lib: Any, n: int, shape: tuple, kwargs: dict, size: Any, state: dict | None) -> tuple:
    lib.manual_seed(0)
    layer = getattr(lib.nn, f"ConvTranspose{n}d")(3, 4, 3, **kwargs)
    if state is not None:
        layer.load_state_dict({k: verigrad.from_numpy(v.copy()) for k, v in state.items()})
    x = lib.from_numpy(np.random.default_rng(1).standard_normal(shape).astype(np.float32))
    x.requires_grad_(True)
    out = layer(x, output_size=size)
    (out * out).sum().backward()
    kept = {k: v.detach().numpy().copy() for k, v in layer.state_dict().items()}
    return out.detach().numpy(), x.grad.numpy(), layer.weight.grad.numpy(), kept


@pytest.mark.parametrize("n,shape,kwargs,size", CASES)
def test_output_size_is_reached_as_pytorch(n: int, shape: tuple, kwargs: dict, size: Any) -> None:
    theirs = _run(torch, n, shape, kwargs, size, None)
    ours = _run(verigrad, n, shape, kwargs, size, theirs[-1])
    assert ours[0].shape == theirs[0].shape
    for got, want in zip(ours[:3], theirs[:3]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size", [[6, 10], [7, 11], [8, 9, 10]])
def test_a_size_out_of_reach_raises_as_pytorch(size: list) -> None:
    for lib in (torch, verigrad):
        layer = lib.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1)
        with pytest.raises(ValueError, match=r"output_size|output size"):
            layer(lib.zeros(2, 3, 4, 5), output_size=size)


def test_a_skip_connections_size_is_matched() -> None:
    """The U-Net pattern: an odd-sized skip connection reached from the downsampled features."""
    for lib in (torch, verigrad):
        down = lib.nn.Conv2d(3, 3, 3, stride=2, padding=1)
        up = lib.nn.ConvTranspose2d(3, 3, 3, stride=2, padding=1)
        skip = lib.zeros(1, 3, 9, 7)
        assert tuple(up(down(skip), output_size=skip.size()).shape) == (1, 3, 9, 7)
        assert tuple(up(down(skip)).shape) == (1, 3, 9, 7)
        assert tuple(up(down(lib.zeros(1, 3, 10, 8)), output_size=[10, 8]).shape) == (1, 3, 10, 8)
