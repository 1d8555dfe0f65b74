"""Silent differences found by PyTorch's OpInfo suite (tools/opinfo_sweep.py), fourth round: each test fails
on the code before its fix and checks hand-computed values (no torch here)."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends.cpu.matmul import exact_mode


@pytest.fixture
def cpu():
    with vg.backend("cpu"):
        yield


def test_matmul_of_one_layout_in_f32_then_f64_answers_in_f64(cpu) -> None:
    # The eager C path remembered a product's plan by its operands' shapes and strides: an empty operand's
    # (3, 0) strides, and a broadcast one's zero strides, are those of either dtype, so an f64 product ran
    # the f32 plan after an f32 one and wrote half of its result (lu_solve's f64 gradient with an empty B).
    for _ in range(3):
        for dtype in (vg.float32, vg.float64):
            vg.full((3, 3), 6.0, dtype=dtype).numpy()  # memory the next result may reuse
            got = vg.zeros(3, 0, dtype=dtype) @ vg.zeros(0, 3, dtype=dtype)
            assert got.dtype == dtype
            np.testing.assert_array_equal(got.numpy(), np.zeros((3, 3)))


def test_exact_matmul_of_broadcast_operands_in_f32_then_f64(cpu) -> None:
    with exact_mode():
        for _ in range(3):
            for dtype in (vg.float32, vg.float64):
                a = vg.full((1, 1), 2.0, dtype=dtype).expand(3, 3)
                b = vg.full((1, 1), 3.0, dtype=dtype).expand(3, 3)
                np.testing.assert_array_equal((a @ b).numpy(), np.full((3, 3), 18.0))


def test_lu_solve_gradient_with_an_empty_right_hand_side_is_zero(cpu) -> None:
    lu = np.array([[-1.24, -0.16, -0.38], [0.24, -1.11, 0.02], [-0.34, 0.59, -0.91]])
    pivots = vg.from_numpy(np.array([3, 3, 3], np.int32))
    for dtype in (vg.float32, vg.float64, vg.float32, vg.float64):
        b = vg.zeros(3, 0, dtype=dtype).requires_grad_(True)
        data = vg.from_numpy(lu).to(dtype).requires_grad_(True)
        x = vg.lu_solve(b, data, pivots)
        _, g = vg.autograd.grad([x], [b, data], [vg.zeros(3, 0, dtype=dtype)])
        np.testing.assert_array_equal(g.numpy(), np.zeros((3, 3)))


def test_gather_of_an_empty_index_takes_any_dtype_and_shape() -> None:
    x = vg.arange(5.0).requires_grad_(True)
    out = vg.gather(x, 0, vg.zeros(2, 0, dtype=vg.uint8))
    assert tuple(out.shape) == (2, 0) and out.dtype == vg.float32
    (g,) = vg.autograd.grad([out], [x], [vg.zeros(2, 0)])
    np.testing.assert_array_equal(g.numpy(), np.zeros(5))


def test_gather_of_a_0d_input_reads_it_as_a_vector_of_one() -> None:
    x = vg.tensor(3.0).requires_grad_(True)
    out = vg.gather(x, 0, vg.tensor([0, 0]))
    np.testing.assert_array_equal(out.numpy(), [3.0, 3.0])
    (g,) = vg.autograd.grad([out], [x], [vg.tensor([1.0, 2.0])])
    assert g.shape == () and float(g) == 3.0
    assert vg.gather(x, 0, vg.tensor(0)).shape == ()
    with pytest.raises(IndexError, match="index 1 is out of range"):
        vg.gather(x, 0, vg.tensor([1]))
    with pytest.raises(vg.ShapeError, match="0-d or 1-D index"):
        vg.gather(x, 0, vg.tensor([[0]]))


def test_take_along_dim_counts_a_negative_index_from_the_end_once() -> None:
    x = vg.arange(5.0)
    np.testing.assert_array_equal(vg.take_along_dim(x, vg.tensor([-1, -5]), 0).numpy(), [4.0, 0.0])
    np.testing.assert_array_equal(vg.take_along_dim(x, vg.tensor([-2])).numpy(), [3.0])
    with pytest.raises(IndexError, match="index -6 is out of range for take_along_dim's dimension 0 of"):
        vg.take_along_dim(x, vg.tensor([-6]), 0)


def test_take_along_dims_error_names_the_index_given_not_the_wrapped_one() -> None:
    x = vg.arange(6.0).reshape(2, 3)
    with pytest.raises(IndexError, match="index -7 is out of range for take_along_dim's flattened input of"):
        vg.take_along_dim(x, vg.tensor([0, -7]))
    with pytest.raises(IndexError, match="index 3 is out of range for take_along_dim's dimension 1 of size"):
        vg.take_along_dim(x, vg.tensor([[3], [0]]), -1)


def test_layer_norm_takes_a_negative_eps() -> None:
    x = vg.tensor([[1.0, 3.0]], dtype=vg.float64)  # variance 1: rsqrt(1 - 0.5) = sqrt(2)
    out = vg.nn.functional.layer_norm(x, (2,), eps=-0.5)
    np.testing.assert_allclose(out.numpy(), [[-(2**0.5), 2**0.5]], rtol=1e-15)
    assert np.isnan(vg.nn.functional.layer_norm(x, (2,), eps=-2.0).numpy()).all()


def test_group_norm_of_an_empty_batch() -> None:
    x = vg.zeros(0, 6, 5).requires_grad_(True)
    out = vg.nn.functional.group_norm(x, 3, vg.ones(6), vg.zeros(6))
    assert tuple(out.shape) == (0, 6, 5)
    (g,) = vg.autograd.grad([out], [x], [vg.zeros(0, 6, 5)])
    assert tuple(g.shape) == (0, 6, 5)


def _qr_loss(a: np.ndarray, mode: str) -> float:
    """A fixed linear function of Q and R (NumPy's QR: LAPACK's signs, as verigrad's)."""
    q, r = np.linalg.qr(a, mode=mode)
    return float(
        (q * np.arange(q.size).reshape(q.shape)).sum() + (r * np.arange(r.size).reshape(r.shape)).sum()
    )


def test_qr_gradient_of_a_wide_matrix_matches_finite_differences() -> None:
    a = np.array([[2.0, -1.0, 0.5, 1.0, 0.3], [0.4, 1.5, -0.7, 2.0, -1.2], [1.1, 0.2, 1.8, -0.6, 0.9]])
    for mode in ("reduced", "complete"):
        x = vg.from_numpy(a.copy()).requires_grad_(True)
        q, r = vg.linalg.qr(x, mode=mode)
        wq = vg.from_numpy(np.arange(q.numel(), dtype=np.float64).reshape(tuple(q.shape)))
        wr = vg.from_numpy(np.arange(r.numel(), dtype=np.float64).reshape(tuple(r.shape)))
        ((q * wq).sum() + (r * wr).sum()).backward()
        numeric = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            step = np.zeros_like(a)
            step[i] = 1e-6
            numeric[i] = (_qr_loss(a + step, mode) - _qr_loss(a - step, mode)) / 2e-6
        np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-6)


def test_qr_gradient_of_a_tall_matrix_in_complete_mode_is_refused() -> None:
    x = vg.ones(4, 2, dtype=vg.float64).requires_grad_(True)
    q, _ = vg.linalg.qr(x + vg.eye(4, 2, dtype=vg.float64), mode="complete")
    with pytest.raises(NotImplementedError, match="mode='complete' is not defined"):
        q.sum().backward()


def test_grid_sample_of_a_volume_is_trilinear() -> None:
    # input[d, h, w] = 100 d + 10 h + w: linear, so trilinear interpolation is exact at any position
    volume = vg.from_numpy(
        (np.arange(2)[:, None, None] * 100 + np.arange(3)[:, None] * 10 + np.arange(4)).astype(float)
    )
    x = volume.reshape(1, 1, 2, 3, 4).requires_grad_(True)
    # align_corners: x = -1 .. 1 over w = 0 .. 3, y over h = 0 .. 2, z over d = 0 .. 1
    grid = vg.tensor([[[[[-1.0, -1.0, -1.0], [1.0 / 3, 0.5, 0.0], [1.0, 1.0, 1.0]]]]], dtype=vg.float64)
    out = vg.nn.functional.grid_sample(x, grid, align_corners=True)
    assert tuple(out.shape) == (1, 1, 1, 1, 3)
    np.testing.assert_allclose(out.numpy().ravel(), [0.0, 50 + 15 + 2, 123.0], rtol=1e-14)
    (g,) = vg.autograd.grad([out], [x], [vg.ones(1, 1, 1, 1, 3, dtype=vg.float64)])
    assert abs(float(g.sum()) - 3.0) < 1e-14  # each output's weights sum to one
    nearest = vg.nn.functional.grid_sample(x, grid, mode="nearest", align_corners=True)
    # (w, h, d) = (2, 1.5, 0.5): halves round to even, h to 2 and d to 0
    np.testing.assert_array_equal(nearest.numpy().ravel(), [0.0, 2 + 20 + 0, 123.0])


def test_grid_sample_bicubic_weights_and_border_taps() -> None:
    # a row [0, 1, 8, 27] (x^3) read at x = 1.5: Keys' weights at t = 0.5 are (-3, 19, 19, -3) / 32
    image = vg.tensor([[[[0.0, 1.0, 8.0, 27.0]] * 4]], dtype=vg.float64)
    grid = vg.tensor([[[[0.0, 0.0]]]], dtype=vg.float64)  # align_corners: x = 1.5, y = 1.5
    out = vg.nn.functional.grid_sample(image, grid, mode="bicubic", align_corners=True)
    np.testing.assert_allclose(float(out.reshape(())), (-3 * 0 + 19 * 1 + 19 * 8 - 3 * 27) / 32, rtol=1e-14)
    # at x = 0 the tap at -1 reads the border (0) with padding 'border', 0 with 'zeros': the same here;
    # at x = 3 the tap at 4 reads 27 ('border') or 0 ('zeros'): weights at t = 0 are (0, 1, 0, 0)
    edge = vg.tensor([[[[1.0, 0.0]]]], dtype=vg.float64)
    for padding in ("border", "zeros"):
        out = vg.nn.functional.grid_sample(
            image, edge, mode="bicubic", padding_mode=padding, align_corners=True
        )
        np.testing.assert_allclose(float(out.reshape(())), 27.0, rtol=1e-14)
    with pytest.raises(vg.ShapeError, match="bicubic takes a 4-D input"):
        vg.nn.functional.grid_sample(vg.zeros(1, 1, 2, 2, 2), vg.zeros(1, 1, 1, 1, 3), mode="bicubic")


def test_bilinear_interpolate_of_u8_rounds_as_pytorchs_uint8_kernel() -> None:
    # the middle output reads 0 and 255 with weights 1/2 each: 127.5, rounded half up in fixed point
    x = vg.tensor([[[[0, 255]]]], dtype=vg.uint8)
    out = vg.nn.functional.interpolate(x, size=(1, 3), mode="bilinear")
    assert out.dtype == vg.uint8
    np.testing.assert_array_equal(out.numpy(), [[[[0, 128, 255]]]])
    y = vg.tensor([[[[10, 20, 30], [40, 50, 60]]]], dtype=vg.uint8)
    out = vg.nn.functional.interpolate(y, size=(3, 2), mode="bilinear", align_corners=True)
    np.testing.assert_array_equal(out.numpy(), [[[[10, 30], [25, 45], [40, 60]]]])
    with pytest.raises(NotImplementedError, match="mode 'bicubic' of a u8 tensor is not implemented"):
        vg.nn.functional.interpolate(y, size=(3, 2), mode="bicubic")
