"""Integer functions against PyTorch where its integer kernels wrap: lcm past the dtype's range (every
integer dtype) and the trapezoidal rules on integers past 2^53 (with x, dx and the default spacing)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

INTEGERS = ["int8", "uint8", "int16", "int32", "int64"]


def _same(ours: verigrad.Tensor, theirs: torch.Tensor) -> None:
    assert ours.dtype is getattr(verigrad, str(theirs.dtype)[6:])
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("dtype", INTEGERS)
def test_lcm_of_the_whole_range(dtype: str) -> None:
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 400, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 400, endpoint=True).astype(dtype)
    b[:50] = rng.integers(0, 12, 50)  # small factors: products near the range's edge
    ours = verigrad.lcm(verigrad.from_numpy(a), verigrad.from_numpy(b))
    _same(ours, torch.lcm(torch.from_numpy(a), torch.from_numpy(b)))


Y = np.array([[2**53 + 1, 2**62 + 3, -(2**61) - 7, 2**55 + 5, 3], [1, 5, 2**53 + 1, 9, -(2**62)]])
CALLS = [
    ("x", lambda t, y: t.trapezoid(y, y)),
    ("x_1d", lambda t, y: t.trapezoid(y, y[0], dim=1)),
    ("default", lambda t, y: t.trapezoid(y)),
    ("dx", lambda t, y: t.trapezoid(y, dx=3)),
    ("dx_float", lambda t, y: t.trapezoid(y, dx=0.1, dim=0)),
    ("cumulative_x", lambda t, y: t.cumulative_trapezoid(y, y)),
    ("cumulative", lambda t, y: t.cumulative_trapezoid(y)),
    ("cumulative_dx", lambda t, y: t.cumulative_trapezoid(y, dx=2.5, dim=0)),
]


@pytest.mark.parametrize("call", [c for _, c in CALLS], ids=[i for i, _ in CALLS])
def test_trapezoid_of_large_integers(call) -> None:
    _same(call(verigrad, verigrad.from_numpy(Y)), call(torch, torch.from_numpy(Y)))


M = np.array([[2**40 + 1, 3], [5, -(2**35)]])
SCALED = [
    ("addcmul", lambda t, m: t.addcmul(m, m, m, value=0.5)),
    ("addcmul_negative", lambda t, m: t.addcmul(m, m, m, value=-1.7)),
    ("addcmul_bool", lambda t, m: t.addcmul(m, m > 0, m, value=2.9)),
    ("addcmul_float", lambda t, m: t.addcmul(m * 1.0, m, m, value=0.5)),
    ("index_add", lambda t, m: t.index_add(m, 0, t.tensor([0, 0]), m, alpha=1.7)),
    ("index_add_negative", lambda t, m: t.index_add(m, 1, t.tensor([1]), m[:, :1], alpha=-2.5)),
    ("addmv", lambda t, m: t.addmv(m[0], m, m[1], beta=0.5, alpha=2.5)),
    ("addmm", lambda t, m: t.addmm(m, m, m, beta=1.5, alpha=-0.5)),
    ("addbmm", lambda t, m: t.addbmm(m, m[None], m[None], beta=2.5)),
]


@pytest.mark.parametrize("call", [c for _, c in SCALED], ids=[i for i, _ in SCALED])
def test_float_multipliers_of_integer_results(call) -> None:
    _same(call(verigrad, verigrad.from_numpy(M)), call(torch, torch.from_numpy(M)))
