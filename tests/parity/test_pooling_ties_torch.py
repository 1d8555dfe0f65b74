"""Max pooling routes each window's gradient to its first maximum, as PyTorch does, on inputs full of
ties (ReLU outputs): the digits CNN's parity with PyTorch depends on it."""

from __future__ import annotations

import numpy as np
import torch

import verigrad


def test_max_pool_ties_match_torch() -> None:
    rng = np.random.default_rng(7)
    x = np.maximum(rng.integers(-2, 3, (2, 3, 7, 8)), 0).astype(np.float64)  # ReLU-like, many ties
    for kernel, stride, padding in ((2, 2, 0), (3, 1, 1), (3, 2, 1)):
        for layout in ("NCHW", "NHWC"):
            xl = x if layout == "NCHW" else x.transpose(0, 2, 3, 1)
            leaf = verigrad.tensor(xl, requires_grad=True)
            out = verigrad.ops.max_pool2d(leaf, kernel=kernel, stride=stride, padding=padding, layout=layout)
            g = rng.uniform(-1, 1, out.shape)
            (out * verigrad.tensor(g)).sum().backward()
            tx = torch.from_numpy(x.copy()).requires_grad_(True)
            tout = torch.nn.functional.max_pool2d(tx, kernel, stride, padding)
            tg = g if layout == "NCHW" else g.transpose(0, 3, 1, 2)
            (tout * torch.from_numpy(np.ascontiguousarray(tg))).sum().backward()
            grad = tx.grad.numpy() if layout == "NCHW" else tx.grad.numpy().transpose(0, 2, 3, 1)
            np.testing.assert_allclose(leaf.grad.numpy(), grad, rtol=1e-15, atol=1e-15)
