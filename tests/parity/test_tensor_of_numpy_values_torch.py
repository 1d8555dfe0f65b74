"""torch.tensor of a list holding NumPy values (rewards a NumPy environment returned, a batch of NumPy
arrays): PyTorch promotes the leaves' dtypes, Python floats counting as f32, so one NumPy float64 makes
the tensor f64; verigrad made f32 of any list. The dtypes, and the values, are PyTorch's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import verigrad

F64, F32 = np.float64, np.float32
CASES = {
    "float64 scalars": [F64(0.1), F64(0.7)],
    "a float64 among floats": [F64(0.1), 2.5],
    "an int and a float64": [1, F64(0.3)],
    "a bool and a float64": [True, F64(0.3)],
    "float64 arrays": [np.full(2, 0.1), np.zeros(2)],
    "nested, one array": [[0.1, 0.2], np.full(2, 0.3)],
    "a tuple": (F64(0.1),),
    "float32 and float64": [F32(0.1), F64(0.2)],
    "float16 and a float": [np.float16(0.1), 0.2],
    "float32 arrays and floats": [np.full(2, 0.1, F32), [0.1, 0.2]],
    "floats": [0.1, 2.5],
    "int8 and an int": [np.int8(1), 2],
    "uint8 and int8": [np.uint8(1), np.int8(2)],
    "empty": [],
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("make", ["tensor", "as_tensor"])
def test_dtype_and_values_are_pytorchs(name: str, make: str) -> None:
    theirs = getattr(torch, make)(CASES[name])
    ours = getattr(verigrad, make)(CASES[name])
    assert str(theirs.dtype).removeprefix("torch.") == np.dtype(ours.numpy().dtype).name
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def _discounted(lib: Any, rewards: list, gamma: float = 0.99) -> Any:
    """REINFORCE's returns from the rewards a NumPy environment gave (np.float64 each)."""
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        returns.insert(0, running)
    returns = lib.tensor(returns)
    return (returns - returns.mean()) / (returns.std() + 1e-8)


def test_returns_of_numpy_rewards_are_pytorchs() -> None:
    rewards = list(np.random.default_rng(0).standard_normal(50) * 1e-3 + 1.0)
    theirs, ours = _discounted(torch, rewards), _discounted(verigrad, rewards)
    assert theirs.dtype == torch.float64 and ours.dtype == verigrad.float64
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-14)
