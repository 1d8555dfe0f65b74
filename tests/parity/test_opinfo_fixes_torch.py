"""Regression tests of the silent differences from PyTorch that its OpInfo suite (tools/opinfo_sweep.py)
found: each case runs on PyTorch and on verigrad with the same inputs and must give the same answer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def _same(ours: verigrad.Tensor, theirs: torch.Tensor) -> None:
    assert ours.dtype == getattr(verigrad, str(theirs.dtype).removeprefix("torch."))
    assert tuple(ours.shape) == tuple(theirs.shape)
    torch.testing.assert_close(torch.from_numpy(np.array(ours.detach().numpy(), copy=True)), theirs.detach())


def _both(fn, *args, **kwargs) -> None:
    """fn(lib, *args, **kwargs) on both libraries, dtypes given by name."""
    theirs = fn(torch, *args, **{k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()})
    ours = fn(verigrad, *args, **{k: getattr(verigrad, v) if k == "dtype" else v for k, v in kwargs.items()})
    _same(ours, theirs)


SPACES = [
    (0, 1.2, 2),  # an integer dtype truncates end: 10 ** 1, not 10 ** 1.2
    (-3, 4, 7),
    (-2.5, 10.7, 50),
    (4.3, -3, 50),
    (1.2, 1.2, 1),
    (-3, 2, 1),
    (0, 0, 0),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "int16"])
@pytest.mark.parametrize(("start", "end", "steps"), SPACES)
def test_linspace_rounds_as_pytorch(dtype, start, end, steps):
    _both(lambda t, *a, **k: t.linspace(*a, **k), start, end, steps, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("base", [10.0, 2.0, 1.1, 5.0])
@pytest.mark.parametrize(("start", "end", "steps"), SPACES)
def test_logspace_rounds_as_pytorch(dtype, base, start, end, steps):
    _both(lambda t, *a, **k: t.logspace(*a, **k), start, end, steps, base, dtype=dtype)


def test_linspace_and_logspace_take_0d_tensors():
    for fn in ("linspace", "logspace"):
        theirs = getattr(torch, fn)(torch.tensor(-2.0), torch.tensor(2.2), 9, dtype=torch.float64)
        ours = getattr(verigrad, fn)(verigrad.tensor(-2.0), verigrad.tensor(2.2), 9, dtype=verigrad.float64)
        _same(ours, theirs)


def test_diff_n0_is_a_copy_without_prepend_and_bool_diff_is_inequality():
    x = np.random.default_rng(0).standard_normal((5, 5))
    pre, app = np.ones((1, 5)), np.zeros((2, 5))
    for n in (0, 1, 3):
        t = torch.tensor(x, requires_grad=True)
        v = verigrad.tensor(x, requires_grad=True)
        theirs = torch.diff(t, n, 0, torch.tensor(pre), torch.tensor(app))
        ours = verigrad.diff(v, n, 0, verigrad.tensor(pre), verigrad.tensor(app))
        _same(ours, theirs)
        theirs.sum().backward()
        ours.sum().backward()
        _same(v.grad, t.grad)
    b = np.array([[True, False, False, True], [False, False, True, True]])
    _same(verigrad.diff(verigrad.tensor(b)), torch.diff(torch.tensor(b)))
    _same(verigrad.diff(verigrad.tensor(b), dim=0), torch.diff(torch.tensor(b), dim=0))
