"""verigrad.testing.check_op: the registry's suites on any op, built-in or a user's. Each test defines its
ops inside it, under names of its own (the registry is the process's)."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad import Tensor
from verigrad.backends.active import lookup
from verigrad.library import custom_op
from verigrad.ops import Sample
from verigrad.testing import OpSuiteFailure, check_op

SAMPLES = [Sample((np.linspace(-2, 2, 12).reshape(3, 4),), {"k": 2.0}), Sample((np.array(0.5),), {"k": -1.0})]


def _scaled_sin(name: str, *, wrong_vjp: bool = False, wrong_fake: bool = False):
    """sin(x) * k in NumPy (in the input's dtype), with a fake and a backward (each made wrong on demand)."""

    @custom_op(name, mutates_args=())
    def op(x: Tensor, k: float) -> Tensor:
        a = x.numpy()
        return vg.from_numpy((np.sin(a) * a.dtype.type(k)).astype(a.dtype))

    @op.register_fake
    def _(x, k):
        return x.new_empty(x.shape[:1]) if wrong_fake else vg.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.k = inputs[1]

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.sin() if wrong_vjp else x.cos()) * ctx.k, None

    op.register_autograd(backward, setup_context=setup_context)
    return op


@pytest.mark.parametrize("name", ["exp", "add", "matmul", "where", "sum"])
def test_passes_on_built_ins(name):
    counts = check_op(vg.REGISTRY[name])
    assert counts["reference"] > 0 and counts["symbolic"] > 0
    assert counts["gradient"] > 0 or not vg.REGISTRY[name].differentiable


def test_passes_on_a_good_custom_op():
    counts = check_op(_scaled_sin("vgtest::check_good"), samples=SAMPLES)
    assert counts == {"reference": 2, "gradient": 2, "symbolic": 2, "kernels": 0}


def test_an_op_without_samples_is_refused():
    with pytest.raises(OpSuiteFailure, match="vgtest::check_none has no samples"):
        check_op(_scaled_sin("vgtest::check_none"))


def test_a_wrong_vjp_is_named():
    op = _scaled_sin("vgtest::check_vjp", wrong_vjp=True)
    with pytest.raises(OpSuiteFailure, match=r"vgtest::check_vjp, sample 0 \(float64\[3, 4\].*gradient"):
        check_op(op, samples=SAMPLES)


def test_a_wrong_shape_rule_is_named():
    op = _scaled_sin("vgtest::check_shape", wrong_fake=True)
    with pytest.raises(OpSuiteFailure, match=r"vgtest::check_shape, sample 0 .*reference.*shape"):
        check_op(op, samples=SAMPLES)


def test_a_symbolic_shape_rule_that_disagrees_is_named():
    """A rule right on concrete sizes but wrong over symbols (it reads a size as 3 when it is a symbol)."""

    @custom_op("vgtest::check_symbolic", mutates_args=())
    def op(x: Tensor) -> Tensor:
        return vg.from_numpy(x.numpy()[:, :3].copy())

    @op.register_fake
    def _(x):
        return x.new_empty((x.shape[0], 3 if isinstance(x.shape[1], int) else x.shape[1]))

    with pytest.raises(OpSuiteFailure, match=r"vgtest::check_symbolic, sample 0 .*symbolic.*over symbols"):
        check_op(op, samples=[Sample((np.ones((2, 5)),))])


def test_a_kernel_off_by_one_ulp_is_named():
    op = _scaled_sin("vgtest::check_ulp")

    def kernel(x, k):
        exact = (np.sin(x) * x.dtype.type(k)).astype(x.dtype)
        return np.nextafter(exact, np.inf)

    lookup("cpu").register("vgtest::check_ulp", kernel, "f32")
    message = r"vgtest::check_ulp, kernel for f32 \(exact\): fail: sample 0.*other bits than the reference"
    with pytest.raises(OpSuiteFailure, match=message):
        check_op(op, samples=SAMPLES)
