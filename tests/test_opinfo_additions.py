"""PyTorch's functions and methods that its OpInfo suite found missing (sum_to_size, empty_strided,
new_empty_strided, zero_, Tensor.H): hand-computed values and errors."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad.errors import ShapeError


def test_sum_to_size_sums_the_broadcast_axes():
    x = verigrad.tensor(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(x.sum_to_size(1, 3).numpy(), [[3.0, 5.0, 7.0]])
    np.testing.assert_array_equal(x.sum_to_size((2, 1)).numpy(), [[3.0], [12.0]])
    np.testing.assert_array_equal(x.sum_to_size([3]).numpy(), [3.0, 5.0, 7.0])
    assert x.sum_to_size(2, 3) is x  # nothing to sum: the tensor itself, as PyTorch's
    assert float(x.sum_to_size(())) == 15.0


def test_sum_to_size_widens_integers_where_it_sums():
    x = verigrad.ones(2, 3, dtype=verigrad.int32)
    assert x.sum_to_size(1, 3).dtype is verigrad.int64
    assert x.sum_to_size(2, 3).dtype is verigrad.int32
    assert verigrad.ones(3, dtype=verigrad.bool).sum_to_size(()).dtype is verigrad.int64
    assert verigrad.tensor(1, dtype=verigrad.uint8).sum_to_size(()).dtype is verigrad.int64


def test_sum_to_size_refuses_a_size_that_does_not_broadcast():
    x = verigrad.ones(2, 3)
    for size in [(2,), (3, 3), (1, 2, 3)]:
        with pytest.raises(ShapeError, match="is not expandable to"):
            x.sum_to_size(size)
    with pytest.raises(TypeError, match="size must be ints"):
        x.sum_to_size(2.0, 3)


def test_sum_to_size_gradient_is_broadcast_back():
    x = verigrad.ones(2, 3).requires_grad_(True)
    (g,) = verigrad.autograd.grad([x.sum_to_size(1, 3)], [x], [verigrad.tensor([[1.0, 2.0, 3.0]])])
    np.testing.assert_array_equal(g.numpy(), [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])


def test_empty_strided_checks_the_strides():
    t = verigrad.empty_strided((2, 3), (1, 2), dtype=verigrad.float64)
    assert t.shape == (2, 3) and t.dtype is verigrad.float64
    assert verigrad.ones(4, dtype=verigrad.int8).new_empty_strided((3, 0), (0, 1)).dtype is verigrad.int8
    with pytest.raises(ValueError, match="empty_strided: stride must give one non-negative int"):
        verigrad.empty_strided((2, 3), (1,))
    with pytest.raises(ValueError, match="empty_strided"):
        verigrad.ones(2).new_empty_strided((2,), (-1,))


def test_zero_function_writes_in_place():
    x = verigrad.ones(3)
    assert verigrad.zero_(x) is x
    np.testing.assert_array_equal(x.numpy(), [0.0, 0.0, 0.0])


def test_H_is_a_matrix_transpose():
    x = verigrad.tensor(np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(x.H.numpy(), np.arange(6).reshape(2, 3).T)
    assert float(verigrad.tensor(2.0).H) == 2.0
    with pytest.raises(ShapeError, match="only supported on matrices"):
        verigrad.ones(3).H  # noqa: B018


def test_fractional_max_pool2d_with_zero_samples_is_a_plain_max_pool():
    """u = 0: windows start at trunc(j a), a = (4 - 2) / (2 - 1) = 2: the 2x2 pool of stride 2."""
    x = verigrad.tensor(np.array([[1, 5, 2, 0], [3, 4, 8, 8], [0, 0, 1, 9], [7, 7, 2, 3]], np.float32))
    out, idx = verigrad.nn.functional.fractional_max_pool2d(
        x.reshape(1, 1, 4, 4), 2, output_size=2, return_indices=True, _random_samples=verigrad.zeros(1, 1, 2)
    )
    np.testing.assert_array_equal(out.numpy(), [[[[5, 8], [7, 9]]]])
    np.testing.assert_array_equal(idx.numpy(), [[[[1, 6], [12, 11]]]])  # 8 twice: the first


def test_fractional_max_pool_errors():
    F = verigrad.nn.functional
    x = verigrad.ones(1, 1, 4, 4)
    with pytest.raises(ValueError, match="requires specifying either an output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(ShapeError, match="pool height 2 too large relative to input height 4"):
        F.fractional_max_pool2d(x, 2, output_size=4)
    with pytest.raises(ShapeError, match=r"_random_samples must be \[N, C, 2\]"):
        F.fractional_max_pool2d(x, 2, output_size=2, _random_samples=verigrad.ones(2))
    with pytest.raises(verigrad.errors.DTypeError, match="float"):
        F.fractional_max_pool3d(verigrad.ones(1, 1, 4, 4, 4, dtype=verigrad.int64), 2, output_size=2)


def test_random_fills_have_their_distributions():
    verigrad.manual_seed(0)
    n = 200_000
    x = verigrad.empty(n, dtype=verigrad.float64)
    assert abs(float(x.exponential_(2.0).mean()) - 0.5) < 0.01
    g = verigrad.empty(n, dtype=verigrad.int64).geometric_(0.25)
    assert g.dtype is verigrad.int64 and int(g.min()) >= 1 and abs(float(g.double().mean()) - 4.0) < 0.05
    c = x.cauchy_(3.0, 0.5).numpy()
    assert abs(np.median(c) - 3.0) < 0.01 and abs(np.quantile(c, 0.75) - 3.5) < 0.02
    ln = np.log(x.log_normal_(0.5, 0.25).numpy())
    assert abs(ln.mean() - 0.5) < 0.005 and abs(ln.std() - 0.25) < 0.005


def test_random_fills_check_their_parameters():
    x = verigrad.ones(3)
    for call, match in [
        (lambda: x.exponential_(0.0), "lambd > 0"),
        (lambda: x.geometric_(1.0), r"p in \(0, 1\)"),
        (lambda: x.cauchy_(0.0, -1.0), "sigma > 0"),
        (lambda: x.log_normal_(0.0, 0.0), "std > 0"),
        (lambda: verigrad.normal(0.0, -1.0, (2,)), "std >= 0.0"),
        (lambda: verigrad.normal(verigrad.zeros(2), verigrad.tensor([1.0, -1.0])), "std >= 0.0"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()
    with pytest.raises(verigrad.errors.DTypeError, match="float tensors"):
        verigrad.normal(verigrad.zeros(2, dtype=verigrad.int64), 1.0)


def test_normal_shapes_dtypes_and_gradients():
    assert verigrad.normal(0.3, 1.6, [2, 3], dtype=verigrad.float64).dtype is verigrad.float64
    assert verigrad.normal(verigrad.zeros(1, 2, 3), verigrad.ones(5, 2, 3)).shape == (5, 2, 3)
    mean = verigrad.zeros(4).requires_grad_(True)
    std = verigrad.full((4,), 2.0).requires_grad_(True)
    verigrad.manual_seed(1)
    y = verigrad.normal(mean, std)
    dm, ds = verigrad.autograd.grad([y], [mean, std], [verigrad.ones(4)])
    np.testing.assert_array_equal(dm.numpy(), np.ones(4))
    np.testing.assert_allclose(ds.numpy(), y.detach().numpy() / 2.0)  # d/dstd of std * z is z


def test_svd_lowrank_of_a_rank_one_matrix():
    """A = 3 u v^T with unit u, v: S = [3], U V^T = u v^T whatever the draws."""
    u, v = np.array([0.6, 0.8, 0.0]), np.array([0.0, 1.0])
    U, S, V = verigrad.svd_lowrank(verigrad.tensor(3.0 * np.outer(u, v)), q=1)
    np.testing.assert_allclose(S.numpy(), [3.0], rtol=1e-12)
    np.testing.assert_allclose((U @ V.mT).numpy(), np.outer(u, v), atol=1e-12)
    with pytest.raises(ValueError, match=r"q must be an int in \[0, min\(m, n\) = 2\]"):
        verigrad.svd_lowrank(verigrad.ones(3, 2), q=3)


def test_zeta_of_0d_tensors():
    """The object ufunc answers a Python float of 0-d operands: still an array, of the operands' dtype."""
    out = verigrad.special.zeta(verigrad.tensor(2.0), verigrad.tensor(1.0))
    assert out.shape == () and out.dtype is verigrad.float32
    np.testing.assert_allclose(float(out), np.pi**2 / 6, rtol=1e-6)
    assert np.isnan(float(verigrad.special.zeta(verigrad.tensor(-8.5, dtype=verigrad.float64), 2.0)))


def test_resize_keeps_the_first_elements_in_place():
    x = verigrad.tensor(np.arange(6.0).reshape(2, 3))
    assert x.resize_(3, 2) is x and x.shape == (3, 2)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(3, 2))
    x.resize_((4,))
    np.testing.assert_array_equal(x.numpy(), [0.0, 1.0, 2.0, 3.0])
    x.resize_(2, 3)  # past the elements it has: zeros here (PyTorch's are uninitialised)
    np.testing.assert_array_equal(x.numpy()[0], [0.0, 1.0, 2.0])
    y = verigrad.ones(5, dtype=verigrad.int16)
    assert (
        verigrad.resize_as_(y, verigrad.zeros(1, 1, 1)) is y
        and y.shape == (1, 1, 1)
        and y.dtype is verigrad.int16
    )


def test_resize_refuses_what_pytorch_refuses():
    with pytest.raises(RuntimeError, match="require grad"):
        verigrad.ones(3).requires_grad_(True).resize_(3)
    with pytest.raises(ValueError, match="non-negative ints"):
        verigrad.ones(3).resize_(-1)
