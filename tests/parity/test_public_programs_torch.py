"""Public-style PyTorch programs (tests/parity/programs/: the word language models, a VAE, a DCGAN, time
sequence prediction, super-resolution, a ResNet, ...) run unchanged with `torch` bound to PyTorch and
then to verigrad: verigrad starts from the state dict the PyTorch run began with, and gives the same
first-step loss and gradients, the same losses over the steps and the same outputs in evaluation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from programs import dcgan, resnet, super_resolution, time_sequence, vae, word_lstm, word_transformer
from test_programs_torch import _same_first_step, _same_losses

import verigrad

PROGRAMS = {
    "word_lstm": word_lstm,
    "word_transformer": word_transformer,
    "vae": vae,
    "dcgan": dcgan,
    "time_sequence": time_sequence,
    "super_resolution": super_resolution,
    "resnet": resnet,
}
# what else each program returns that must match: lists of numbers (compared as the losses are) and
# lists of arrays (eval outputs, compared as the first step's gradients are)
NUMBERS = ("val", "psnr", "acc", "lrs", "closure_losses", "gain")


def _dtype(result: dict[str, Any]) -> str:
    return "f64" if next(iter(result["grads0"].values())).dtype == np.float64 else "f32"


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def runs(request) -> tuple[str, dict, dict]:
    program = PROGRAMS[request.param]
    theirs = program.main(torch)
    ours = program.main(verigrad, theirs["state"])
    return request.param, theirs, ours


def test_first_step_and_losses_are_pytorchs(runs) -> None:
    _, theirs, ours = runs
    dtype = _dtype(theirs)
    assert sorted(ours["state"]) == sorted(theirs["state"]), "state_dict keys differ"
    _same_first_step(ours, theirs, dtype)
    assert len(theirs["losses"]) >= 8
    _same_losses(ours["losses"], theirs["losses"], dtype)
    for key in NUMBERS:
        if key in theirs:
            _same_losses(ours[key], theirs[key], dtype)


def test_eval_outputs_are_pytorchs(runs) -> None:
    _, theirs, ours = runs
    rtol = 1e-5 if _dtype(theirs) == "f32" else 1e-12
    assert len(ours["eval"]) == len(theirs["eval"])
    for got, want in zip(ours["eval"], theirs["eval"]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))
