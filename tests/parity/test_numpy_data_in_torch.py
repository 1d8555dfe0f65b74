"""NumPy arrays into tensors as PyTorch takes them: from_numpy shares the array's memory (strided views
too), a negative stride (a flipped view) is refused by from_numpy, tensor, as_tensor, asarray and the
legacy constructors, as PyTorch refuses it (an empty one is taken), and an array of strings is no tensor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

MAKERS: dict[str, Callable[[Any, np.ndarray], Any]] = {
    "from_numpy": lambda t, a: t.from_numpy(a),
    "tensor": lambda t, a: t.tensor(a),
    "as_tensor": lambda t, a: t.as_tensor(a),
    "as_tensor f32": lambda t, a: t.as_tensor(a, dtype=t.float32),
    "asarray": lambda t, a: t.asarray(a),
    "Tensor": lambda t, a: t.Tensor(a),
    "FloatTensor": lambda t, a: t.FloatTensor(a),
}


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize(
    "flipped", [np.arange(4.0)[::-1], np.arange(6.0).reshape(2, 3)[:, ::-1]], ids=["1-D", "cols"]
)
def test_a_negative_stride_is_refused(make: str, flipped: np.ndarray) -> None:
    for lib in (torch, verigrad):
        with pytest.raises(ValueError, match="negative"):
            MAKERS[make](lib, flipped)


def test_an_empty_array_with_a_negative_stride_is_taken() -> None:
    empty = np.zeros((2, 0))[::-1]
    assert tuple(verigrad.from_numpy(empty).shape) == tuple(torch.from_numpy(empty).shape) == (2, 0)


@pytest.mark.parametrize("view", [slice(None), slice(None, None, 2)], ids=["whole", "every other"])
def test_from_numpy_shares_memory(view: slice) -> None:
    base = np.arange(6.0)
    ours, theirs = verigrad.from_numpy(base[view]), torch.from_numpy(base[view])
    base[0] = 9.0
    ours[-1] = -1.0  # a write through the tensor reaches the array
    assert ours.tolist() == theirs.tolist() and base[view][-1] == -1.0
    assert ours.stride() == theirs.stride()


@pytest.mark.parametrize("make", ["Tensor", "FloatTensor"])
def test_the_legacy_constructors_refuse_strings(make: str) -> None:
    for lib in (torch, verigrad):
        with pytest.raises(TypeError):
            MAKERS[make](lib, np.array(["1", "2"]))
