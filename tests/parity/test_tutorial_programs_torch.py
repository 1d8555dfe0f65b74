"""More public-style programs run unchanged on PyTorch and on verigrad (tests/parity/programs/): the CNN of
PyTorch's CIFAR-10 tutorial, a minGPT-style character GPT (parameter groups by module type, a registered
tril mask, ignore_index, top-k sampling), a bidirectional LSTM classifier over packed sequences and a
WGAN-GP (the gradient penalty through autograd.grad with create_graph, requires_grad toggled). From
the state dict the PyTorch run began with: the same first-step loss and gradients, losses over the steps,
evaluation outputs, and what the programs decode or count."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from programs import cifar_tutorial, lstm_sentiment, mingpt, wgan_gp
from test_programs_torch import _same_first_step, _same_losses

import verigrad

PROGRAMS = {
    "cifar_tutorial": cifar_tutorial,
    "mingpt": mingpt,
    "lstm_sentiment": lstm_sentiment,
    "wgan_gp": wgan_gp,
}


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_runs_as_on_pytorch(name: str, dtype: str) -> None:
    program = PROGRAMS[name]
    theirs = program.main(torch, dtype=None if dtype == "f32" else torch.float64)
    ours = program.main(verigrad, theirs["state"], dtype=None if dtype == "f32" else verigrad.float64)
    assert sorted(ours["state"]) == sorted(theirs["state"])
    _same_first_step(ours, theirs, dtype)
    _same_losses(ours["losses"], theirs["losses"], dtype)
    for key in ("running", "acc", "wasserstein"):
        if key in theirs:
            _same_losses(ours[key], theirs[key], dtype)
    if "decoded" in theirs:
        assert ours["decoded"] == theirs["decoded"]
    rtol = 1e-5 if dtype == "f32" else 1e-12
    assert len(ours["eval"]) == len(theirs["eval"])
    for got, want in zip(ours["eval"], theirs["eval"]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))
