"""Calls PyTorch answers that verigrad refused (found by PyTorch's OpInfo suite), checked against
hand-computed values: integer fills and ranges that wrap, bool inputs of signbit, isfinite and logit,
tensordot's broadcast size 1, masked_scatter's larger mask, batch_norm of an empty vector."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad


def test_unsigned_fills_and_ranges_wrap_negative_numbers() -> None:
    assert verigrad.arange(-1, 2, 2, dtype=verigrad.uint8).tolist() == [255, 1]
    assert verigrad.arange(0, -8, -4, dtype=verigrad.uint8).tolist() == [0, 252]
    assert verigrad.arange(0, 300, 100, dtype=verigrad.int8).tolist() == [0, 100, -56]
    x = verigrad.tensor([5, 1, 6], dtype=verigrad.uint8)
    assert verigrad.full_like(x, -9).tolist() == [247] * 3
    assert verigrad.full((2,), -255, dtype=verigrad.uint8).tolist() == [1, 1]


@pytest.mark.parametrize(("value", "dtype"), [(300, "int8"), (-256, "uint8"), (2**31, "int32")])
def test_a_fill_the_dtype_cannot_hold_is_refused(value: int, dtype: str) -> None:
    with pytest.raises(ValueError, match=f"full: a value cannot be converted to {dtype[0]}"):
        verigrad.full((2,), value, dtype=getattr(verigrad, dtype))


def test_bools_have_no_sign_bit_are_finite_and_have_infinite_logits() -> None:
    t = verigrad.tensor([True, False])
    assert verigrad.signbit(t).tolist() == [False, False]
    assert verigrad.isfinite(t).tolist() == [True, True]
    assert verigrad.logit(t).tolist() == [math.inf, -math.inf]
    assert verigrad.logit(t).dtype is verigrad.float32
    np.testing.assert_allclose(verigrad.logit(t, eps=0.1).numpy(), [math.log(9), -math.log(9)], rtol=1e-6)


def test_tensordot_sums_a_size_one_against_a_larger_size() -> None:
    a = verigrad.tensor([[2.0], [3.0]])  # [2, 1] against [2, 2]: a's column broadcast, b summed along it
    b = verigrad.tensor([[1.0, 10.0], [100.0, 1000.0]])
    assert verigrad.tensordot(a, b, dims=([0, 1], [0, 1])).item() == 2 * 11 + 3 * 1100
    assert verigrad.tensordot(b, a, dims=([0, 1], [0, 1])).item() == 2 * 11 + 3 * 1100
    x, y = verigrad.ones(1, 1, 1), verigrad.ones(2, 1, 2)
    assert verigrad.tensordot(x, y, dims=([0, 1], [2, 0])).shape == (1, 1)


def test_masked_scatter_broadcasts_the_input_to_a_larger_mask() -> None:
    x = verigrad.zeros(3, requires_grad=True)
    mask = verigrad.eye(3, dtype=verigrad.bool)
    out = verigrad.masked_scatter(x, mask, verigrad.arange(9.0).reshape(3, 3))
    assert out.tolist() == [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]
    (out * verigrad.arange(9.0).reshape(3, 3)).sum().backward()
    assert x.grad.tolist() == [3.0 + 6.0, 1.0 + 7.0, 2.0 + 5.0]  # each column, less its diagonal
    with pytest.raises(verigrad.ShapeError):
        verigrad.zeros(3).masked_scatter_(mask, verigrad.arange(9.0))


def test_batch_norm_of_an_empty_vector_is_empty() -> None:
    x = verigrad.zeros(0, requires_grad=True)
    for training in (True, False):
        out = verigrad.nn.functional.batch_norm(x, verigrad.zeros(0), verigrad.ones(0), training=training)
        assert out.shape == (0,)


def test_a_batched_product_with_an_empty_inner_size_has_empty_gradients() -> None:
    x, y = verigrad.zeros(5, 5, 0, requires_grad=True), verigrad.zeros(0, 5, requires_grad=True)
    (x @ y).sum().backward()
    assert x.grad.shape == (5, 5, 0) and y.grad.shape == (0, 5)


def test_margin_losses_of_one_score() -> None:
    F = verigrad.nn.functional
    one, cls = verigrad.tensor(-3.0), verigrad.tensor(0)
    assert F.multi_margin_loss(one, cls).item() == 0.0  # no other class
    assert F.multilabel_margin_loss(verigrad.tensor(5.0), cls).item() == 0.0
    # one sample's loss is shaped as its target (PyTorch's)
    scores = verigrad.tensor([1.0, 2.0, 3.0])
    assert F.multi_margin_loss(scores, verigrad.tensor([0]), reduction="none").shape == (1,)
    assert F.multi_margin_loss(scores, cls, reduction="none").shape == ()
    assert F.multi_margin_loss(scores, cls).item() == pytest.approx((2.0 + 3.0) / 3)


def test_i64_transposed_convolutions_wrap_as_pytorchs_integer_kernel() -> None:
    F = verigrad.nn.functional
    x = verigrad.tensor(np.array([[[2**62, 2**62]]]))
    assert F.conv_transpose1d(x, verigrad.tensor(np.array([[[1, 1]]]))).tolist() == [
        [[2**62, -(2**63), 2**62]]
    ]
    with pytest.raises(TypeError, match="conv_transpose2d of i32: PyTorch has a kernel for float and i64"):
        F.conv_transpose1d(x.cast(verigrad.int32), verigrad.tensor(np.array([[[1, 1]]], dtype=np.int32)))


@pytest.mark.parametrize(
    ("stride", "padding", "output_padding", "dilation", "groups"),
    [(1, 0, 0, 1, 1), (2, 1, 1, 1, 2), ((2, 3), (1, 0), (0, 2), (1, 2), 1), (3, 2, 1, 2, 2)],
)
def test_i64_transposed_convolutions_equal_the_exact_float_ones(
    stride, padding, output_padding, dilation, groups
):
    F = verigrad.nn.functional
    rng = np.random.default_rng(0)
    x = rng.integers(-9, 10, (2, 4, 3, 5))
    w = rng.integers(-9, 10, (4, 3, 3, 2))  # [C_in, C_out / groups, kh, kw]
    b = rng.integers(-9, 10, 3 * groups)
    options = (stride, padding, output_padding, groups, dilation)
    got = F.conv_transpose2d(verigrad.tensor(x), verigrad.tensor(w), verigrad.tensor(b), *options)
    want = F.conv_transpose2d(
        verigrad.tensor(x.astype(np.float64)),
        verigrad.tensor(w.astype(np.float64)),
        verigrad.tensor(b.astype(np.float64)),
        *options,
    )
    assert got.dtype is verigrad.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy().astype(np.int64))
    x3 = verigrad.tensor(x[:, :, None])  # one depth slice: conv_transpose3d through the same kernel
    w3 = verigrad.tensor(w[:, :, None])
    got3 = F.conv_transpose3d(x3, w3, None, stride=1, groups=groups)
    want3 = F.conv_transpose3d(
        x3.cast(verigrad.float64), w3.cast(verigrad.float64), None, stride=1, groups=groups
    )
    np.testing.assert_array_equal(got3.numpy(), want3.numpy().astype(np.int64))
