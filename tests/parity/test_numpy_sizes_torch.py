"""NumPy integers as sizes (`x.view(-1, np.prod(x.shape[1:]))`, sizes read from a NumPy array): PyTorch
takes them; verigrad raised an AttributeError where a -1 size was inferred from them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import verigrad

CALLS = {
    "view -1, np.prod": lambda t: t.view(-1, np.prod(t.shape[1:])),
    "view np.int64, -1": lambda t: t.view(np.int64(3), -1),
    "view of a tuple": lambda t: t.view((np.int64(6), -1)),
    "reshape -1, np.int32": lambda t: t.reshape(-1, np.int32(4)),
    "reshape function": lambda t: t.reshape((np.int64(-1),)),
    "transposed reshape": lambda t: t.transpose(0, 2).reshape(np.int64(4), -1),
}


@pytest.mark.parametrize("name", CALLS)
def test_numpy_sizes_are_taken_as_pytorch(name: str) -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    results: list[Any] = [CALLS[name](lib.from_numpy(x)) for lib in (torch, verigrad)]
    assert tuple(results[1].shape) == tuple(results[0].shape)
    np.testing.assert_array_equal(results[1].numpy(), results[0].numpy())
