"""Eager dispatch against PyTorch: the small ops of benchmarks/eager.py, each called again and again
through the plans it keeps (across dtypes and shapes taking turns), and a few training steps of a small
GPT written once against the PyTorch API, give PyTorch's values, dtypes, shapes and gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from programs import gpt

import verigrad
import verigrad.nn.functional as vg_F

OPS = {
    "add": lambda t, F, x, y: x + y,
    "mul": lambda t, F, x, y: x * y,
    "sub": lambda t, F, x, y: x - y,
    "div by scalar": lambda t, F, x, y: x / 3.0,
    "relu": lambda t, F, x, y: t.relu(x),
    "exp": lambda t, F, x, y: t.exp(x),
    "tanh": lambda t, F, x, y: t.tanh(x),
    "sum": lambda t, F, x, y: x.sum(),
    "mean": lambda t, F, x, y: x.mean(),
    "sum(dim)": lambda t, F, x, y: x.sum(dim=1),
    "matmul": lambda t, F, x, y: x @ y,
    "reshape": lambda t, F, x, y: x.reshape(-1, 2 * x.shape[1]),
    "transpose": lambda t, F, x, y: x.transpose(0, 1),
    "getitem slice": lambda t, F, x, y: x[:, 1:5],
    "softmax": lambda t, F, x, y: F.softmax(x, dim=-1),
    "cat": lambda t, F, x, y: t.cat([x, y], dim=0),
}


def _check(ours: Any, theirs: Any, rtol: float) -> None:
    """Same shape and dtype; values within rtol of the largest (sums run in another order than PyTorch's:
    where they cancel, an element's own size says nothing of the rounding)."""
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == {torch.float32: "f32", torch.float64: "f64"}[theirs.dtype]
    expected = theirs.detach().numpy()
    scale = float(np.abs(expected).max()) if expected.size else 0.0
    np.testing.assert_allclose(ours.numpy(), expected, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("name", OPS)
def test_small_ops_through_their_plans_give_pytorchs_values_and_gradients(name: str) -> None:
    """Each op is called on f64 8x8, f32 8x8 and f64 6x6 operands in turn, three rounds: the second and
    third calls of each come from the plans the first made."""
    fn, rng = OPS[name], np.random.default_rng(3)
    cases = [(np.float64, 8), (np.float32, 8), (np.float64, 6)]
    arrays = {(dt, n): (rng.standard_normal((n, n)).astype(dt), rng.standard_normal((n, n)).astype(dt))
              for dt, n in cases}  # fmt: skip
    for _ in range(3):
        for dt, n in cases:
            a, b = arrays[(dt, n)]
            rtol = 1e-12 if dt == np.float64 else 1e-5
            x, y = verigrad.tensor(a, requires_grad=True), verigrad.tensor(b, requires_grad=True)
            tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
            ours, theirs = fn(verigrad, vg_F, x, y), fn(torch, torch.nn.functional, tx, ty)
            _check(ours, theirs, rtol)
            (ours * ours).sum().backward()
            (theirs * theirs).sum().backward()
            for v, t in ((x, tx), (y, ty)):
                assert (v.grad is None) == (t.grad is None)
                if t.grad is not None:
                    _check(v.grad, t.grad, rtol)
            with verigrad.no_grad():
                assert not fn(verigrad, vg_F, x, y).requires_grad


def test_eager_gpt_training_steps_give_pytorchs_losses_and_weights() -> None:
    cfg = gpt.Config(vocab_size=32, block_size=8, n_embd=16, n_head=2, manual_mask=True)
    state = gpt.initial_state(cfg)
    theirs, ours = gpt.build(torch, cfg).double(), gpt.build(verigrad, cfg).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    ours.load_state_dict({k: verigrad.tensor(v) for k, v in state.items()})
    rng = np.random.default_rng(0)
    idx, target = rng.integers(0, 32, (3, 8)), rng.integers(0, 32, (3, 8))
    runs = []
    for t, F, model in ((verigrad, vg_F, ours), (torch, torch.nn.functional, theirs)):
        optimizer = t.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(3):
            logits, _ = model(t.tensor(idx))
            loss = F.cross_entropy(logits.view(-1, 32), t.tensor(target).view(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        runs.append((losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}))
    (our_losses, our_state), (their_losses, their_state) = runs
    # f64 throughout; the matrix products sum in another order than PyTorch's, and Adam divides by the
    # root of small second moments: after three steps the weights agree to 1e-10 (1e-12 absolute)
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-12)
    assert our_state.keys() == their_state.keys()
    for k in their_state:
        np.testing.assert_allclose(our_state[k], their_state[k], rtol=1e-10, atol=1e-12, err_msg=k)
