"""verigrad.autograd.gradcheck / gradgradcheck against torch's: the same verdict on correct gradients and
on a custom Function whose backward is wrong (first or second derivative), f64 inputs, several outputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import verigrad

RNG = np.random.default_rng(47)


def _functions(lib):
    class HalfGradient(lib.autograd.Function):  # x**2 with backward x (should be 2x)
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    class FlatSecond(lib.autograd.Function):  # x**3 with a right first derivative, as a constant in x
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * (x * x).detach()

    return {
        "matmul tanh": lambda x, w: (x @ w).tanh(),
        "two outputs": lambda x, w: (x.sum(0) * w[:, 0], (x * x).mean()),
        "softmax": lambda x, w: (x @ w).softmax(-1),
        "wrong backward": lambda x, w: HalfGradient.apply(x) + w.sum(),
        "wrong second derivative": lambda x, w: FlatSecond.apply(x).sum() * w,
    }


NAMES = list(_functions(torch))


def _verdicts(lib, name):
    x = lib.from_numpy(RNG.standard_normal((3, 4)).copy()).requires_grad_(True)
    w = lib.from_numpy(RNG.standard_normal((4, 2)).copy()).requires_grad_(True)
    fn = _functions(lib)[name]
    return (
        lib.autograd.gradcheck(fn, (x, w), raise_exception=False),
        lib.autograd.gradgradcheck(fn, (x, w), raise_exception=False),
    )


@pytest.mark.parametrize("name", NAMES)
def test_same_verdicts_as_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _verdicts(verigrad, name) == _verdicts(torch, name)


def test_expected_verdicts_and_errors():
    from verigrad.autograd.gradcheck import GradcheckError  # as `from torch.autograd.gradcheck import ...`

    assert _verdicts(verigrad, "matmul tanh") == (True, True)
    assert _verdicts(verigrad, "wrong backward")[0] is False
    assert _verdicts(verigrad, "wrong second derivative") == (True, False)
    x = verigrad.randn(3, dtype=verigrad.float64, requires_grad=True)
    wrong = _functions(verigrad)["wrong backward"]
    with pytest.raises(GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        verigrad.autograd.gradcheck(lambda x: wrong(x, verigrad.zeros(1, dtype=verigrad.float64)), (x,))
    with pytest.warns(UserWarning, match="not a double precision"):
        verigrad.autograd.gradcheck(lambda x: x * 2, (verigrad.ones(2, requires_grad=True),), eps=1e-2)
    with pytest.raises(ValueError, match="at least one input"):
        verigrad.autograd.gradcheck(lambda x: x * 2, (verigrad.ones(2, dtype=verigrad.float64),))
