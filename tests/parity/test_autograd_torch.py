"""Composed programs whose gradients (and forward values) match PyTorch's in f64.

Each program is written twice, once per framework, side by side; the inputs, parameters and the
cotangent are shared.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gradients import ATOL, RTOL
from gradients import check_values_and_gradients as _check

import verigrad


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(2024)


def test_mlp_with_broadcast_bias(rng: np.random.Generator) -> None:
    arrays = {
        "x": rng.standard_normal((8, 5)),
        "w1": rng.standard_normal((16, 5)) / 2,
        "b1": rng.standard_normal(16),
        "w2": rng.standard_normal((3, 16)) / 4,
        "b2": rng.standard_normal(3),
    }

    def ours(x, w1, b1, w2, b2):
        h = (x @ w1.T + b1).relu()
        h = (h @ w2.T + b2).tanh()
        return (h * h).mean(axis=0)

    def theirs(x, w1, b1, w2, b2):
        h = (x @ w1.T + b1).relu()
        h = (h @ w2.T + b2).tanh()
        return (h * h).mean(dim=0)

    _check(arrays, ours, theirs)


def _log_softmax(x: verigrad.Tensor) -> verigrad.Tensor:
    shifted = x - x.amax(axis=-1, keepdim=True).detach()
    return shifted - shifted.exp().sum(axis=-1, keepdim=True).log()


def _softmax(x: verigrad.Tensor) -> verigrad.Tensor:
    e = (x - x.amax(axis=-1, keepdim=True).detach()).exp()
    return e / e.sum(axis=-1, keepdim=True)


def _cross_entropy(logits: verigrad.Tensor, target: verigrad.Tensor) -> verigrad.Tensor:
    onehot = (target.reshape(-1, 1) == verigrad.arange(logits.shape[-1])).double()
    return -(_log_softmax(logits) * onehot).sum(axis=-1).mean()


@pytest.mark.parametrize("built", ["ops", "primitives"])
def test_softmax_cross_entropy(rng: np.random.Generator, built: str) -> None:
    """The softmax and cross_entropy ops (with their own VJPs), and the same written in primitives."""
    target = rng.integers(0, 10, 6)
    arrays = {"x": rng.standard_normal((6, 7)), "w": rng.standard_normal((10, 7)) / 3}
    ops = verigrad.REGISTRY
    softmax = (lambda x: ops["softmax"](x, axis=-1)) if built == "ops" else _softmax
    cross_entropy = ops["cross_entropy"] if built == "ops" else _cross_entropy

    def ours(x, w):
        logits = x @ w.T
        probs = softmax(logits)
        loss = cross_entropy(logits, verigrad.from_numpy(target))
        return verigrad.stack(loss, (probs * probs).sum(), axis=0)

    def theirs(x, w):
        logits = x @ w.T
        probs = logits.softmax(-1)
        loss = F.cross_entropy(logits, torch.from_numpy(target))
        return torch.stack([loss, (probs * probs).sum()])

    _check(arrays, ours, theirs)


def test_small_cnn(rng: np.random.Generator) -> None:
    """conv2d, relu, max_pool2d, flatten, a linear layer and the loss: one training step's gradients."""
    target = rng.integers(0, 4, 2)
    arrays = {
        "x": rng.standard_normal((2, 3, 8, 8)),
        "k": rng.standard_normal((5, 3, 3, 3)) / 3,
        "kb": rng.standard_normal((5, 1, 1)),
        "w": rng.standard_normal((4, 5 * 4 * 4)) / 8,
    }
    ops = verigrad.REGISTRY

    def ours(x, k, kb, w):
        h = (ops["conv2d"](x, k, padding=1) + kb).relu()
        h = ops["max_pool2d"](h, kernel=2).flatten(1)
        return ops["cross_entropy"](h @ w.T, verigrad.from_numpy(target))

    def theirs(x, k, kb, w):
        h = (F.conv2d(x, k, padding=1) + kb).relu()
        h = F.max_pool2d(h, 2).flatten(1)
        return F.cross_entropy(h @ w.T, torch.from_numpy(target))

    _check(arrays, ours, theirs)


def test_causal_attention_block(rng: np.random.Generator) -> None:
    """layer_norm, q/k/v projections, a causal mask (where with -inf), softmax and a residual."""
    seq, d = 5, 8
    causal = np.tril(np.ones((seq, seq), dtype=bool))
    arrays = {
        "x": rng.standard_normal((2, seq, d)),
        "g": rng.uniform(0.5, 1.5, d),
        "b": rng.standard_normal(d) / 4,
        "wq": rng.standard_normal((d, d)) / 3,
        "wk": rng.standard_normal((d, d)) / 3,
        "wv": rng.standard_normal((d, d)) / 3,
    }
    ops = verigrad.REGISTRY

    def ours(x, g, b, wq, wk, wv):
        h = ops["layer_norm"](x, g, b, eps=1e-5)
        q, k, v = h @ wq, h @ wk, h @ wv
        scores = verigrad.where(verigrad.from_numpy(causal), q @ k.mT / d**0.5, -np.inf)
        return x + ops["softmax"](scores, axis=-1) @ v

    def theirs(x, g, b, wq, wk, wv):
        h = F.layer_norm(x, (d,), g, b, eps=1e-5)
        q, k, v = h @ wq, h @ wk, h @ wv
        scores = torch.where(torch.from_numpy(causal), q @ k.mT / d**0.5, -torch.inf)
        return x + scores.softmax(-1) @ v

    _check(arrays, ours, theirs)


def test_reduction_chain(rng: np.random.Generator) -> None:
    arrays = {"x": rng.standard_normal((4, 5, 6)), "s": rng.uniform(0.5, 2.0, (5, 1))}

    def ours(x, s):
        centred = x - x.mean(axis=(0, 2), keepdim=True)
        spread = (centred * centred).sum(axis=-1).sqrt() * s.reshape(5)
        peak = spread.amax(axis=1) - spread.amin(axis=1) + x.exp().sum(axis=(1, 2)).log()
        return peak / peak.sum()

    def theirs(x, s):
        centred = x - x.mean(dim=(0, 2), keepdim=True)
        spread = (centred * centred).sum(dim=-1).sqrt() * s.reshape(5)
        peak = spread.amax(dim=1) - spread.amin(dim=1) + x.exp().sum(dim=(1, 2)).log()
        return peak / peak.sum()

    _check(arrays, ours, theirs)


def test_indexing_and_movement(rng: np.random.Generator) -> None:
    idx = np.array([3, 0, 3, 1])  # a repeated index adds its gradients
    arrays = {"x": rng.standard_normal((5, 6)), "y": rng.standard_normal((2, 3, 4))}

    def ours(x, y):
        rows = x[verigrad.from_numpy(idx)]  # [4, 6]
        parts = [
            x[1:4, ::2].reshape(-1),
            x[-1] * x[:, 2].sum(),
            (rows[:, None, 1:5] * y[0, 1:3][None]).permute(2, 0, 1).reshape(-1),
            verigrad.concat(y[..., 0], y[:, :, -1].pad(((0, 0), (1, 2))), axis=1).reshape(-1),
            verigrad.stack(x[0, :4], y[1, 2], axis=1).flatten(),
            y.transpose(0, 2).contiguous()[1].reshape(-1),
        ]
        return verigrad.concat(*parts, axis=0)

    def theirs(x, y):
        rows = x[torch.from_numpy(idx)]
        parts = [
            x[1:4, ::2].reshape(-1),
            x[-1] * x[:, 2].sum(),
            (rows[:, None, 1:5] * y[0, 1:3][None]).permute(2, 0, 1).reshape(-1),
            torch.cat([y[..., 0], F.pad(y[:, :, -1], (1, 2))], dim=1).reshape(-1),
            torch.stack([x[0, :4], y[1, 2]], dim=1).flatten(),
            y.transpose(0, 2).contiguous()[1].reshape(-1),
        ]
        return torch.cat(parts, dim=0)

    _check(arrays, ours, theirs)


def test_shared_inputs_and_second_order(rng: np.random.Generator) -> None:
    """A tensor used several times sums its gradients; with create_graph the backward pass is itself
    differentiable: the gradient of (d loss/dw · v) matches PyTorch's Hessian-vector product."""
    x_np, w_np, v_np = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((4, 3))

    w = verigrad.from_numpy(w_np.copy()).requires_grad_(True)
    x, v = verigrad.from_numpy(x_np.copy()), verigrad.from_numpy(v_np.copy())
    loss = ((x @ w).sigmoid() * (x @ w) + w.sin().sum()).sum()
    loss.backward(create_graph=True)
    gw, w.grad = w.grad, None
    (gw * v).sum().backward()

    tw = torch.from_numpy(w_np.copy()).requires_grad_(True)
    tx, tv = torch.from_numpy(x_np.copy()), torch.from_numpy(v_np.copy())
    tloss = ((tx @ tw).sigmoid() * (tx @ tw) + tw.sin().sum()).sum()
    (tgw,) = torch.autograd.grad(tloss, tw, create_graph=True)
    (thvp,) = torch.autograd.grad((tgw * tv).sum(), tw)

    np.testing.assert_allclose(loss.numpy(), tloss.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gw.numpy(), tgw.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.grad.numpy(), thvp.numpy(), rtol=RTOL, atol=ATOL)


def _hooked_run(lib, x0: np.ndarray, remove_after_first: bool) -> tuple[list, list, list]:
    """The same program in both: hooks on a leaf and on an intermediate (one replacing the gradient, one
    watching it), retain_grad, two backward passes with a hook removed in between."""
    x = (verigrad.tensor(x0.copy()) if lib is verigrad else torch.from_numpy(x0.copy())).requires_grad_(True)
    y = x.exp() * 2
    y.retain_grad()
    seen: list = []
    watch = y.register_hook(lambda g: seen.append(g.detach().numpy().copy()))
    y.register_hook(lambda g: g * 3)
    x.register_hook(lambda g: g - 1)
    grads, retained = [], []
    for _ in range(2):
        (y * y).sum().backward(retain_graph=True)
        grads.append(x.grad.numpy().copy())
        retained.append(y.grad.numpy().copy())
        if remove_after_first:
            watch.remove()
    return seen, grads, retained


@pytest.mark.parametrize("remove", [False, True])
def test_tensor_hooks_and_retain_grad(rng: np.random.Generator, remove: bool) -> None:
    x0 = rng.standard_normal(5)
    ours, theirs = _hooked_run(verigrad, x0, remove), _hooked_run(torch, x0, remove)
    for a, b in zip(ours, theirs):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=RTOL, atol=ATOL)
