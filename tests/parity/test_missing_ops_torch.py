"""Functions PyTorch's OpInfo suite found missing from verigrad (`tools/opinfo_sweep.py --list-missing`),
against torch on the same inputs: values, dtypes and gradients in f64, and the dtypes of integer calls."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients

import verigrad

RNG = np.random.default_rng(11)
X = RNG.standard_normal((3, 4))
MASK = np.array([[True, False, True, True], [False, False, False, False], [True, True, False, True]])
ROW_MASK = np.array([True, False, True, False])  # broadcast over rows

# (id, function of (module, x) written once for both libraries)
MASKED = [
    ("sum", lambda t, x: t.masked.sum(x, 1, mask=t.from_numpy(MASK))),
    ("sum_all_keepdim", lambda t, x: t.masked.sum(x, keepdim=True, mask=t.from_numpy(ROW_MASK))),
    ("prod", lambda t, x: t.masked.prod(x, 0, mask=t.from_numpy(MASK))),
    ("amax", lambda t, x: t.masked.amax(x, 1, mask=t.from_numpy(MASK))),
    ("amin", lambda t, x: t.masked.amin(x, (0, 1), keepdim=True, mask=t.from_numpy(MASK))),
    ("mean", lambda t, x: t.masked.mean(x, 1, mask=t.from_numpy(MASK))),
    ("var", lambda t, x: t.masked.var(x, 1, mask=t.from_numpy(MASK))),
    ("std_correction", lambda t, x: t.masked.std(x, 0, correction=0, keepdim=True, mask=t.from_numpy(MASK))),
    ("norm", lambda t, x: t.masked.norm(x, 3.0, 1, mask=t.from_numpy(MASK))),
    ("norm_ninf", lambda t, x: t.masked.norm(x, -math.inf, 1, mask=t.from_numpy(MASK))),
    ("logsumexp", lambda t, x: t.masked.logsumexp(x, 1, mask=t.from_numpy(MASK))),
    ("softmax", lambda t, x: t.masked.softmax(x, 0, mask=t.from_numpy(MASK))),
    ("log_softmax", lambda t, x: t.masked.log_softmax(x, 0, mask=t.from_numpy(MASK))),
    ("softmin", lambda t, x: t.masked.softmin(x, 0, mask=t.from_numpy(MASK))),
    ("normalize", lambda t, x: t.masked.normalize(x, 2.0, 1, mask=t.from_numpy(MASK))),
    ("cumsum", lambda t, x: t.masked.cumsum(x, 1, mask=t.from_numpy(MASK))),
    ("cumprod", lambda t, x: t.masked.cumprod(x, 1, mask=t.from_numpy(MASK))),
    ("median", lambda t, x: t.masked.median(x, 1, mask=t.from_numpy(MASK))),
    ("logaddexp", lambda t, x: t.masked.logaddexp(x, x.flip(0), input_mask=t.from_numpy(MASK))),
]


@pytest.mark.parametrize("fn", [f for _, f in MASKED], ids=[i for i, _ in MASKED])
def test_masked_reductions_against_torch(fn):
    # fully masked-out rows answer the identity (0, 1, -inf, nan, ...), as PyTorch's
    check_values_and_gradients({"x": X}, lambda x: fn(verigrad, x), lambda x: fn(torch, x))


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
def test_masked_integer_dtypes_against_torch(name, dtype):
    # sum and prod of small integers answer int64, argmax and argmin the input's dtype (PyTorch's)
    if dtype == "bool" and name in ("amax", "argmax", "argmin"):
        return
    x = RNG.integers(0, 5, (3, 4)).astype(dtype)
    for shape in [(3, 4), ()]:
        a = x.reshape(-1)[:1].reshape(()) if shape == () else x
        m = MASK if shape else np.array(True)
        ours = getattr(verigrad.masked, name)(verigrad.from_numpy(a.copy()), mask=verigrad.from_numpy(m))
        theirs = getattr(torch.masked, name)(torch.from_numpy(a.copy()), mask=torch.from_numpy(m))
        assert ours.dtype == getattr(verigrad, str(theirs.dtype).removeprefix("torch.")), (ours.dtype, theirs)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_masked_errors():
    x = verigrad.from_numpy(X)
    with pytest.raises(ValueError, match=r"masked\.mean"):
        verigrad.masked.mean(x.to(verigrad.int64), mask=verigrad.from_numpy(MASK))
    with pytest.raises(verigrad.ShapeError, match=r"masked\.sum"):
        verigrad.masked.sum(x, mask=verigrad.from_numpy(MASK[None]))
