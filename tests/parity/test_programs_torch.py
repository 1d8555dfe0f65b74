"""Whole programs written against PyTorch's API (tests/parity/programs/), run once on PyTorch and once on
verigrad from the same NumPy state dict: the first step's loss and gradients, the losses of every step,
what the programs compute after training (greedy tokens, test loss and accuracy) are PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from programs import gpt, mnist_cnn

import verigrad

# (relative tolerance of the first step's loss and gradients, absolute tolerance of the later losses)
TOLERANCE = {"f32": (1e-6, 1e-5), "f64": (1e-12, 1e-12)}


def _dtype(framework: Any, name: str) -> Any:
    return None if name == "f32" else framework.float64  # f32 as the programs are written


def _same_first_step(ours: dict, theirs: dict, dtype: str) -> None:
    rtol, _ = TOLERANCE[dtype]
    np.testing.assert_allclose(ours["loss0"], theirs["loss0"], rtol=rtol, atol=0, err_msg="loss at step 0")
    assert list(ours["grads0"]) == list(theirs["grads0"]), "named_parameters differ"
    for name, want in theirs["grads0"].items():
        got = ours["grads0"][name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        # relative to the largest entry: entries near zero carry the rounding of the large ones
        scale = float(np.abs(want).max())
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=f"d loss / d {name}")


def _same_losses(ours: list[float], theirs: list[float], dtype: str) -> None:
    _, atol = TOLERANCE[dtype]
    assert len(ours) == len(theirs)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=atol, err_msg="losses over the steps")


@pytest.mark.parametrize("manual_mask", [False, True], ids=["sdpa", "manual_mask"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_gpt_trains_and_generates_as_on_pytorch(dtype: str, manual_mask: bool) -> None:
    cfg = gpt.Config(manual_mask=manual_mask)
    theirs = gpt.main(torch, _dtype(torch, dtype), cfg=cfg)
    ours = gpt.main(verigrad, _dtype(verigrad, dtype), cfg=cfg)
    assert "head.weight" not in theirs["grads0"]  # tied: listed once, as tok.weight
    _same_first_step(ours, theirs, dtype)
    _same_losses(ours["losses"], theirs["losses"], dtype)
    np.testing.assert_allclose(ours["lrs"], theirs["lrs"], rtol=1e-15, atol=0)
    assert theirs["losses"][-1] < theirs["losses"][0] - 0.5  # it learned something worth comparing
    assert ours["generated"] == theirs["generated"]


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    images, labels = verigrad.data.load_digits()
    return images[:520], labels[:520]  # 320 to train on (10 batches an epoch), 200 to test on


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_mnist_cnn_trains_and_tests_as_on_pytorch(dtype: str, digits) -> None:
    images, labels = digits
    theirs = mnist_cnn.main(torch, images, labels, _dtype(torch, dtype))
    ours = mnist_cnn.main(verigrad, images, labels, _dtype(verigrad, dtype))
    assert len(theirs["losses"]) == 20
    _same_first_step(ours, theirs, dtype)
    _same_losses(ours["losses"], theirs["losses"], dtype)
    _same_losses(ours["test_losses"], theirs["test_losses"], dtype)
    assert ours["correct"] == theirs["correct"]
    np.testing.assert_allclose(ours["lrs"], theirs["lrs"], rtol=1e-15, atol=0)
