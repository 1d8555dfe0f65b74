"""median() and nanmedian() of every element: PyTorch shares the gradient evenly among the entries equal
to the median (among the NaNs where it is NaN), where the median along a dim gives it whole to the index
returned; the value keeps its bits (a -0.0, inf) whether or not the input requires grad."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

NAN, INF = float("nan"), float("inf")
CASES = [
    [1.0, 1.0, 2.0],
    [3.0, 1.0, 1.0, 2.0],
    [1.0, 1.0, 2.0, 2.0],
    [-0.0, 0.0, 1.0],
    [2.0, -0.0, -0.0],
    [INF, INF, 1.0],
    [-INF, -INF, 3.0],
    [NAN, 1.0, NAN],
    [5.0],
    [[2.0, 7.0, 2.0], [2.0, 9.0, 1.0]],
]


def _median(lib, name: str, values: list, dtype: str) -> tuple[float, bool, list]:
    x = lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)
    value = getattr(x, name)()
    (value * 3).backward()
    plain = float(getattr(x.detach(), name)())
    number = float(value.detach())
    assert np.array_equal(plain, number, equal_nan=True) and np.signbit(plain) == np.signbit(number)
    return number, bool(np.signbit(number)), x.grad.tolist()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["median", "nanmedian"])
@pytest.mark.parametrize("values", CASES, ids=str)
def test_gradient_is_shared_among_ties_as_pytorch(values: list, name: str, dtype: str) -> None:
    ours, theirs = _median(verigrad, name, values, dtype), _median(torch, name, values, dtype)
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1:] == theirs[1:]


def test_along_a_dim_the_returned_index_takes_it_all() -> None:
    for lib in (torch, verigrad):
        x = lib.tensor([[3.0, 1.0, 1.0, 2.0]], requires_grad=True)
        x.median(1).values.sum().backward()
        assert x.grad.tolist() == [[0.0, 0.0, 1.0, 0.0]]
