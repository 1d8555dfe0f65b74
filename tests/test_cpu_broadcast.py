"""The cpu backend's broadcast_to: the reference's view (values, shape, strides, dtype, read-only, sharing
the input's memory) from strides remembered per layout."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def kernel():
    return cpu.cpu.native(REGISTRY["broadcast_to"], verigrad.f32)


@needs_cc
@pytest.mark.parametrize(
    ("shape", "to"),
    [
        ((), (64, 64)),
        ((3, 1), (3, 4)),
        ((4,), (2, 4)),
        ((1, 1), (0, 5)),
        ((0,), (3, 0)),
        ((2, 1, 3), (4, 2, 5, 3)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_the_references_view_on_the_first_and_later_calls(shape, to, dtype):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype)
    for _ in range(3):  # the first call takes the reference's view, the later ones the remembered strides
        got, expected = kernel()(x, to), np.broadcast_to(x, to)
        assert got.shape == expected.shape == to and got.dtype == expected.dtype
        assert got.strides == expected.strides and got.tobytes() == expected.tobytes()
        assert not got.flags.writeable and (got.size == 0 or np.shares_memory(got, x))


@needs_cc
def test_a_strided_input_and_a_bad_shape_go_to_the_reference():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]  # not contiguous
    got = kernel()(x, (2, 3, 2))
    assert got.strides == np.broadcast_to(x, (2, 3, 2)).strides and got.tolist() == [x.tolist()] * 2
    with pytest.raises(ValueError):
        kernel()(np.ones(3, np.float32), (4,))


@needs_cc
def test_the_gradient_of_a_sum_is_ones_of_the_inputs_shape():
    x = verigrad.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    for _ in range(2):
        x.grad = None
        (x * 2).sum().backward()
        assert x.grad.numpy().tolist() == [[2.0] * 3] * 2
