"""verigrad.ops.aten, PyTorch's torch.ops.aten operators that programs call directly: hand-computed values,
gradients and errors."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad.errors import ShapeError

aten = verigrad.ops.aten


def test_max_pool2d_with_indices_backward_adds_each_gradient_at_its_position():
    x = verigrad.zeros(1, 1, 3, 3)
    # kernel 2, stride 1 on 3x3: a 2x2 output; the centre (flat 4) is the maximum of every window
    idx = verigrad.tensor([[[[4, 4], [4, 8]]]])
    g = verigrad.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    out = aten.max_pool2d_with_indices_backward.default(g, x, [2, 2], [1, 1], [0, 0], [1, 1], False, idx)
    want = np.zeros((1, 1, 3, 3), np.float32)
    want[0, 0, 1, 1], want[0, 0, 2, 2] = 6.0, 4.0
    np.testing.assert_array_equal(out.numpy(), want)
    assert out.dtype is verigrad.float32


def test_max_pool2d_with_indices_backward_gradients():
    """g's gradient is the cotangent read at the positions; the input only gives the shape (zero)."""
    x = verigrad.tensor(np.arange(9.0).reshape(1, 3, 3)).requires_grad_(True)
    g = verigrad.tensor([[[1.0, 2.0], [3.0, 4.0]]], dtype=verigrad.float64).requires_grad_(True)
    idx = verigrad.tensor([[[4, 5], [7, 8]]])
    out = aten.max_pool2d_with_indices_backward(g, x, 2, 1, 0, 1, False, idx)  # the packet: its default
    assert out.requires_grad
    cot = verigrad.tensor(np.arange(9.0).reshape(1, 3, 3) * 10)
    dg, dx = verigrad.autograd.grad([out], [g, x], [cot])
    np.testing.assert_array_equal(dg.numpy(), [[[40.0, 50.0], [70.0, 80.0]]])
    np.testing.assert_array_equal(dx.numpy(), np.zeros((1, 3, 3)))


def test_max_pool2d_with_indices_backward_checks_before_any_work():
    x, idx = verigrad.zeros(1, 1, 4, 4), verigrad.zeros(1, 1, 2, 2, dtype=verigrad.int64)
    g = verigrad.ones(1, 1, 2, 2)
    backward = aten.max_pool2d_with_indices_backward.default
    with pytest.raises(ShapeError, match=r"grad_output must be the pooled shape \[1, 1, 3, 3\]"):
        backward(g, x, 2, 1, 0, 1, False, idx)
    with pytest.raises(ShapeError, match="self must be"):
        backward(g, verigrad.zeros(4, 4), 2, 2, 0, 1, False, idx)
    with pytest.raises(ShapeError, match="padding"):
        backward(g, x, 2, 2, 2, 1, False, idx)
    with pytest.raises(IndexError, match="16"):
        backward(g, x, 2, 2, 0, 1, False, verigrad.full((1, 1, 2, 2), 16))
    with pytest.raises(verigrad.errors.DTypeError):
        backward(g.double(), x, 2, 2, 0, 1, False, idx)


def test_an_aten_operator_verigrad_lacks_is_named():
    with pytest.raises(AttributeError, match=r"verigrad\.ops\.aten has no operator 'addmm'"):
        aten.addmm  # noqa: B018
    with pytest.raises(AttributeError, match="no overload 'out'"):
        aten.max_pool2d_with_indices_backward.out  # noqa: B018


def test_safe_softmax_is_zero_where_a_row_is_all_minus_infinity_and_so_is_its_gradient():
    inf = float("inf")
    x = verigrad.tensor([[-inf, -inf, -inf], [0.0, np.log(3.0), -inf]]).requires_grad_(True)
    out = aten._safe_softmax.default(x, 1)
    np.testing.assert_allclose(out.detach().numpy(), [[0.0, 0.0, 0.0], [0.25, 0.75, 0.0]], rtol=1e-6)
    (grad,) = verigrad.autograd.grad([out], [x], [verigrad.ones(2, 3)])
    np.testing.assert_array_equal(grad.numpy()[0], np.zeros(3))  # no NaN from the masked row
    # the other row: softmax's VJP out (g - sum(g out)) in f64, rounded once (its f32 outputs sum to 1 only
    # within a rounding, so the exact gradient of ones is a few 1e-8, not the 0 of an f32 sum)
    row = out.detach().numpy()[1].astype(np.float64)
    np.testing.assert_array_equal(grad.numpy()[1], (row * (1.0 - row.sum())).astype(np.float32))
    assert aten._safe_softmax(x.detach(), -1, dtype=verigrad.float64).dtype is verigrad.float64
    with pytest.raises(verigrad.errors.DTypeError, match="_safe_softmax"):
        aten._safe_softmax.default(verigrad.tensor([[1, 2]]), 1)


def test_slice_clamps_its_bounds_as_aten():
    x = verigrad.arange(10)
    np.testing.assert_array_equal(aten.slice.Tensor(x, 0, None, None, 2).numpy(), [0, 2, 4, 6, 8])
    np.testing.assert_array_equal(aten.slice.Tensor(x, 0, -3).numpy(), [7, 8, 9])
    assert aten.slice.Tensor(x, 0, 20, -30).shape == (0,)
    y = verigrad.zeros(2, 5, 3)
    assert aten.slice.Tensor(y, -2, 1, -1).shape == (2, 3, 3)
    with pytest.raises(ValueError, match="step must be a positive integer"):
        aten.slice.Tensor(x, 0, 0, 5, 0)
    with pytest.raises(ShapeError, match="0-d"):
        aten.slice.Tensor(verigrad.tensor(1.0))
