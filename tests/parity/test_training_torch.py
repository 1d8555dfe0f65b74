"""Training the digits CNN in verigrad and in PyTorch: the same weights after 20 steps.

`verigrad.models.digits_cnn()` and the equivalent `torch.nn.Sequential` start from the same weights
(verigrad's initial state_dict copied into torch), see the same fixed sequence of batches of the
shipped 8x8 digits and take 20 steps of the same optimizer. The weights must agree to 1e-10 in f64
and 1e-4 in f32 after every step; the losses likewise. ReLU outputs are full of zeros, so many max
pooling windows hold tied maxima: the gradient must go where PyTorch sends it (the first maximum in
window order), or the weights part ways at the first step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import verigrad
from verigrad.cli.trainer import training_step
from verigrad.data import DataLoader, load_digits
from verigrad.models import digits_cnn, digits_cnn_torch
from verigrad.nn import CrossEntropyLoss
from verigrad.optim import SGD, Adam, AdamW

STEPS = 20
BATCH = 32
TOLERANCE = {"f64": 1e-10, "f32": 1e-4}
TORCH_DTYPES = {"f64": torch.float64, "f32": torch.float32}

# id -> (verigrad class, torch class, keyword arguments both accept)
OPTIMIZERS: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    "sgd-momentum": (SGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "sgd-nesterov-weight-decay": (
        SGD,
        torch.optim.SGD,
        {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3},
    ),
    "adam": (Adam, torch.optim.Adam, {"lr": 1e-2}),
    "adamw": (AdamW, torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 1e-2}),
}


def torch_cnn(dtype: torch.dtype) -> torch.nn.Sequential:
    """digits_cnn() for 8x8 images in PyTorch, with the same layer indices (so the same state names)."""
    return digits_cnn_torch(torch).to(dtype)


def batches(dtype: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """The fixed sequence of STEPS batches: the shipped digits, shuffled with seed 0, in `dtype`."""
    images, labels = load_digits()
    loader = DataLoader(images, labels, batch_size=BATCH, shuffle=True, seed=0, drop_last=True, dtype=dtype)
    out = []
    for xb, yb in loader:
        out.append((xb.numpy().copy(), yb.numpy().copy()))
        if len(out) == STEPS:
            return out
    raise AssertionError("the digits hold fewer than STEPS batches")


def twin_models(dtype: str) -> tuple[verigrad.nn.Module, torch.nn.Sequential]:
    """A verigrad CNN and a torch CNN holding the same initial weights."""
    verigrad.manual_seed(0)
    ours = digits_cnn(dtype=dtype)
    theirs = torch_cnn(TORCH_DTYPES[dtype])
    state = ours.state_dict()
    assert sorted(state) == sorted(theirs.state_dict()), "the two models name their weights differently"
    theirs.load_state_dict({name: torch.from_numpy(t.numpy().copy()) for name, t in state.items()})
    return ours, theirs


def assert_same_weights(ours: verigrad.nn.Module, theirs: torch.nn.Module, tol: float, when: str) -> None:
    expected = theirs.state_dict()
    for name, value in ours.state_dict().items():
        assert value.dtype.np == expected[name].numpy().dtype, f"{name}: dtype {value.dtype.name}"
        np.testing.assert_allclose(
            value.numpy(), expected[name].numpy(), rtol=0, atol=tol, err_msg=f"{name}, {when}"
        )


@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_twenty_training_steps_match_torch(optimizer: str, dtype: str) -> None:
    ours_cls, torch_cls, kwargs = OPTIMIZERS[optimizer]
    tol = TOLERANCE[dtype]
    ours, theirs = twin_models(dtype)
    initial = {name: t.numpy().copy() for name, t in ours.state_dict().items()}
    opt = ours_cls(ours.parameters(), **kwargs)
    torch_opt = torch_cls(theirs.parameters(), **kwargs, foreach=False)
    train_step = training_step(ours, opt, CrossEntropyLoss())
    for step, (x, y) in enumerate(batches(dtype)):
        loss = train_step(verigrad.from_numpy(x.copy()), verigrad.from_numpy(y.copy()))

        torch_loss = torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(y))
        torch_opt.zero_grad()
        torch_loss.backward()
        torch_opt.step()

        assert loss.dtype.name == dtype
        np.testing.assert_allclose(float(loss), torch_loss.item(), rtol=tol, atol=0, err_msg=f"step {step}")
        assert_same_weights(ours, theirs, tol, f"after step {step + 1}")
    # the weights moved far beyond the tolerance, so agreeing is not agreeing on the initial weights
    moved = max(np.abs(t.numpy() - initial[name]).max() for name, t in ours.state_dict().items())
    assert moved > 1e3 * tol


def test_first_step_gradients_match_torch_in_f64() -> None:
    """The gradient of every weight on the first batch, before any optimizer is involved."""
    ours, theirs = twin_models("f64")
    x, y = batches("f64")[0]
    CrossEntropyLoss()(ours(verigrad.from_numpy(x.copy())), verigrad.from_numpy(y.copy())).backward()
    torch.nn.functional.cross_entropy(theirs(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    torch_grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        expected = torch_grads[name].grad.numpy()
        assert p.grad is not None, f"{name} has no gradient"
        np.testing.assert_allclose(p.grad.numpy(), expected, rtol=1e-10, atol=1e-12, err_msg=name)


def test_the_batches_put_tied_maxima_in_pooling_windows() -> None:
    """The comparison above covers tie routing only if ties occur: count 2x2 pooling windows, after the
    first ReLU, whose maximum appears more than once."""
    ours, _ = twin_models("f64")
    x, _ = batches("f64")[0]
    with verigrad.no_grad():
        activations = ours[1](ours[0](verigrad.from_numpy(x.copy()))).numpy()
    n, c, h, w = activations.shape
    windows = activations.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    windows = windows.reshape(n, c, h // 2, w // 2, 4)
    ties = (windows == windows.max(axis=-1, keepdims=True)).sum(axis=-1) > 1
    assert ties.sum() > 100, f"only {ties.sum()} windows with tied maxima"
