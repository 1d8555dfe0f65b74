"""Programs written the way outside PyTorch users write them, on what the other programs do not reach
(tests/parity/programs/): a packed char-RNN stepped by fractional-epoch warm restarts, a padded
Transformer classifier that adds a parameter group midway and pools over padded positions in inference,
a tabular MLP with two optimizers, integer label arithmetic and a non-strict checkpoint. Each runs on
PyTorch, then on verigrad from the same state dict: the same first step, losses, rates, evaluation outputs
and what it decodes or logs, in f32 and f64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from programs import char_rnn, padded_encoder, tabular_mlp
from test_programs_torch import _same_first_step, _same_losses
from test_public_programs_torch import _without

import verigrad

PROGRAMS = {"char_rnn": char_rnn, "padded_encoder": padded_encoder, "tabular_mlp": tabular_mlp}
# the key projection's bias shifts every key's score alike: its gradient is 0 in exact arithmetic, its f32
# value rounding (held to the f64 run below)
ZERO_IN_EXACT_ARITHMETIC = {"padded_encoder": ("keys.bias",)}


@pytest.fixture(scope="module", params=[f"{n}-{d}" for n in sorted(PROGRAMS) for d in ("f32", "f64")])
def runs(request) -> tuple[str, str, dict, dict]:
    name, dtype = request.param.split("-")
    program = PROGRAMS[name]
    theirs = program.main(torch, dtype=None if dtype == "f32" else torch.float64)
    ours = program.main(verigrad, theirs["state"], dtype=None if dtype == "f32" else verigrad.float64)
    return name, dtype, theirs, ours


def test_training_is_pytorchs(runs) -> None:
    name, dtype, theirs, ours = runs
    assert sorted(ours["state"]) == sorted(theirs["state"])
    assert sorted(ours["grads0"]) == sorted(theirs["grads0"])
    zero = ZERO_IN_EXACT_ARITHMETIC.get(name, ())
    _same_first_step(_without(ours, zero), _without(theirs, zero), dtype)
    if dtype == "f64":
        top = max(float(np.abs(g).max()) for g in theirs["grads0"].values())
        for n in zero:
            assert np.abs(ours["grads0"][n]).max() <= 1e-12 * top, n
    assert len(theirs["losses"]) >= 12
    _same_losses(ours["losses"], theirs["losses"], dtype)
    np.testing.assert_allclose(ours["lrs"], theirs["lrs"], rtol=1e-15, atol=0)
    for key in ("val", "acc"):
        if key in theirs:
            _same_losses(ours[key], theirs[key], dtype)
    for key in ("decoded", "log"):
        if key in theirs:
            assert ours[key] == theirs[key], key


def test_evaluation_is_pytorchs(runs) -> None:
    _, dtype, theirs, ours = runs
    rtol = 1e-5 if dtype == "f32" else 1e-12
    assert len(ours["eval"]) == len(theirs["eval"])
    for got, want in zip(ours["eval"], theirs["eval"]):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))


def test_the_programs_learn(runs) -> None:
    """Not vacuous: each program's loss falls, and its evaluation is not constant."""
    _, _, theirs, _ = runs
    assert np.mean(theirs["losses"][-4:]) < np.mean(theirs["losses"][:4])
    assert all(np.ptp(e) > 0 for e in theirs["eval"])


def test_padded_encoder_pools_over_pytorchs_zeros() -> None:
    """What the padded encoder's evaluation depends on: PyTorch's inference output is 0 at the padding."""
    model = padded_encoder.build(torch).eval()
    ids = torch.tensor([[3, 4, 0], [5, 0, 0]])
    with torch.inference_mode():
        h = model.encoder(model.embed(ids), src_key_padding_mask=ids == 0)
    assert (h[ids == 0] == 0).all() and (h[ids != 0] != 0).all()
