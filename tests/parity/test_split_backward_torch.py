"""The gradient of pieces cut from one tensor (split, chunk, the q, k and v of one projection), against
PyTorch's split backward bit for bit, signed zeros included."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def _grad(lib, x: np.ndarray, cut, ws: list[np.ndarray]) -> np.ndarray:
    t = lib.tensor(x, requires_grad=True)
    total = None
    for piece, w in zip(cut(t), ws):
        term = (piece * lib.tensor(w)).sum()
        total = term if total is None else total + term
    total.backward()
    return t.grad.numpy()


@pytest.mark.parametrize(
    "shape, cut",
    [
        ((2, 5, 12), lambda t: t.split(4, dim=2)),
        ((2, 5, 12), lambda t: t.split([5, 0, 7], dim=-1)),
        ((7, 3), lambda t: t.chunk(3, dim=0)),
        ((4, 9), lambda t: t.split(4, dim=1)[::-1]),  # used in another order
    ],
)
def test_split_gradient_is_pytorchs(shape, cut):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    pieces = cut(torch.tensor(x))
    ws = [rng.standard_normal(tuple(p.shape)).astype(np.float32) for p in pieces]
    for w in ws:
        w.flat[::2] = -0.0  # PyTorch's concatenated gradient keeps these -0.0
    ours, theirs = _grad(verigrad, x, cut, ws), _grad(torch, x, cut, ws)
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))
