"""Public-tutorial-style programs on what the other programs do not reach (tests/parity/programs/):
knowledge distillation (nn.ModuleDict, ParameterDict, ParameterList, module.apply, checkpointed blocks
sharing a Linear, KLDivLoss with log_target, accumulation with clip_grad_norm_ and OneCycleLR,
copy.deepcopy of a model and an optimizer, torch.save / torch.load in memory) and an SN-GAN
(parametrizations: spectral_norm, weight_norm, orthogonal, a custom one with right_inverse; the older
spectral_norm hook; parametrize.cached). Each runs on PyTorch, then on verigrad from the same state
dict: the same first step, losses, rates, evaluation and log, in f32 and f64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from programs import distillation, sngan
from test_programs_torch import _same_first_step, _same_losses

import verigrad

PROGRAMS = {"distillation": distillation, "sngan": sngan}


@pytest.fixture(scope="module", params=[f"{n}-{d}" for n in sorted(PROGRAMS) for d in ("f32", "f64")])
def runs(request) -> tuple[str, str, dict, dict]:
    name, dtype = request.param.split("-")
    program = PROGRAMS[name]
    theirs = program.main(torch, dtype=None if dtype == "f32" else torch.float64)
    ours = program.main(verigrad, theirs["state"], dtype=None if dtype == "f32" else verigrad.float64)
    return name, dtype, theirs, ours


def test_training_is_pytorchs(runs) -> None:
    _, dtype, theirs, ours = runs
    assert sorted(ours["state"]) == sorted(theirs["state"])
    _same_first_step(ours, theirs, dtype)
    assert len(theirs["losses"]) >= 20
    _same_losses(ours["losses"], theirs["losses"], dtype)
    np.testing.assert_allclose(ours["lrs"], theirs["lrs"], rtol=1e-15, atol=0)
    assert ours.get("log") == theirs.get("log")


def test_evaluation_is_pytorchs(runs) -> None:
    _, dtype, theirs, ours = runs
    rtol = 1e-5 if dtype == "f32" else 1e-12
    assert len(ours["eval"]) == len(theirs["eval"])
    for got, want in zip(ours["eval"], theirs["eval"]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))


def test_the_programs_are_not_vacuous(runs) -> None:
    """The distillation learns; the GAN's parametrized weights are what they claim; the state holds the
    parametrizations' and the older hook's entries, the tied weight under both names."""
    name, _, theirs, _ = runs
    assert all(np.ptp(e) > 0 for e in theirs["eval"])
    if name == "distillation":
        assert np.mean(theirs["losses"][-4:]) < np.mean(theirs["losses"][6:10])
        assert "s.blocks.0.shared.weight" in theirs["state"] and "s.blocks.1.shared.weight" in theirs["state"]
        assert theirs["log"][2] == 14  # parameters: the shared Linear once
    else:
        orthogonal = theirs["eval"][2]
        np.testing.assert_allclose(orthogonal @ orthogonal.T, np.eye(len(orthogonal)), atol=1e-5)
        for key in ("d.2.weight_orig", "d.2.weight_u", "d.0.parametrizations.weight.0._u"):
            assert key in theirs["state"], key
