"""Silent differences a sweep over ops, dtypes and special values found, each now PyTorch's: relu, relu6 and
hardtanh keep -0.0 (their gradient still 0 at the limits), threshold passes NaN, lerp uses PyTorch's two
formulas (lerp(inf, 0, 0.5) is inf), ldexp's and xlogy's result dtypes, logical_and/or/xor refuse numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

SPECIAL = [-0.0, 0.0, -1.5, 2.5, np.nan, np.inf, -np.inf, -1e-30, 3.0, 6.5, -7.0]


def both(array: np.ndarray) -> tuple[verigrad.Tensor, torch.Tensor]:
    return verigrad.from_numpy(array.copy()), torch.from_numpy(array.copy())


def bits(ours: verigrad.Tensor, theirs: torch.Tensor) -> None:
    """The same dtype, shape, values and signs of zero."""
    want = theirs.detach().numpy()
    got = ours.detach().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [11, 1100])  # PyTorch's short and vectorized paths
@pytest.mark.parametrize(
    "call",
    [lambda F, x: F.relu(x), lambda F, x: F.relu6(x), lambda F, x: F.hardtanh(x, 0.0, 6.0),
     lambda F, x: F.hardtanh(x), lambda F, x: F.threshold(x, 0.5, -1.0),
     lambda F, x: F.threshold(x, -0.0, 7.0)],
)  # fmt: skip
def test_activations_keep_signed_zeros_and_nan(dtype, n, call):
    x = np.resize(np.array(SPECIAL, dtype=dtype), n)
    ours, theirs = both(x)
    bits(call(verigrad.nn.functional, ours), call(torch.nn.functional, theirs))


@pytest.mark.parametrize("limits", [(-1.0, 1.0), (0.0, 6.0)])
def test_hardtanh_gradient_is_zero_at_the_limits_and_nan(limits):
    x = np.array([-1.0, 1.0, 0.0, 6.0, -0.0, 0.5, 7.0, np.nan])
    ours, theirs = both(x)
    ours.requires_grad_(True), theirs.requires_grad_(True)
    verigrad.nn.functional.hardtanh(ours, *limits).sum().backward()
    torch.nn.functional.hardtanh(theirs, *limits).sum().backward()
    bits(ours.grad, theirs.grad)


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.5, 0.7, 1.0, 1.5, -0.7, 3.3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lerp_is_torchs_formula(weight, dtype):
    rng = np.random.default_rng(48)
    start = np.append(rng.standard_normal(200), [np.inf, -np.inf, 1.0]).astype(dtype)
    end = np.append(rng.standard_normal(200), [0.0, 5.0, np.inf]).astype(dtype)
    (s, ts), (e, te) = both(start), both(end)
    ours, theirs = verigrad.lerp(s, e, weight), torch.lerp(ts, te, weight)
    tol = 1e-6 if dtype == np.float32 else 1e-15  # PyTorch's vectorized kernel fuses its multiply-add
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=tol, atol=tol)
    np.testing.assert_array_equal(np.isnan(ours.numpy()), np.isnan(theirs.numpy()))
    w = np.resize(np.array([weight, 0.2, 0.9, -0.6], dtype=dtype), start.shape)
    tensor_w = verigrad.lerp(s, e, verigrad.from_numpy(w.copy()))
    np.testing.assert_allclose(
        tensor_w.numpy(), torch.lerp(ts, te, torch.from_numpy(w.copy())).numpy(), rtol=tol, atol=tol
    )


def test_lerp_gradients():
    rng = np.random.default_rng(49)
    a, b, w = rng.standard_normal(6), rng.standard_normal(6), np.array([0.1, 0.5, 0.9, -0.6, 1.2, 0.49])
    grads = []
    for lib in (verigrad, torch):
        leaves = [lib.from_numpy(v.copy()).requires_grad_(True) for v in (a, b, w)]
        lib.lerp(*leaves).sum().backward()
        lib.lerp(leaves[0], leaves[1], 0.7).sum().backward()
        grads.append([t.grad.numpy() for t in leaves])
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "x_dtype, x_shape, e_dtype, e_shape",
    [(np.float32, (3,), np.float64, (3,)), (np.float64, (3,), np.float32, (3,)),
     (np.float64, (), np.int32, (2, 3)), (np.int64, (3,), np.int64, (3,)), (np.float32, (3,), np.float64, ()),
     (np.float32, (2, 3), np.int64, (3,))],
)  # fmt: skip
def test_ldexp_dtypes_and_values(x_dtype, x_shape, e_dtype, e_shape):
    rng = np.random.default_rng(50)
    x = np.asarray(rng.standard_normal(x_shape) * 3, dtype=x_dtype)
    e = np.asarray(rng.uniform(-3, 3, e_shape), dtype=e_dtype)
    (ox, tx), (oe, te) = both(x), both(e)
    bits(verigrad.ldexp(ox, oe), torch.ldexp(tx, te))


def test_ldexp_refuses_a_bool_exponent_of_a_float_only():
    with pytest.raises(NotImplementedError):
        torch.ldexp(torch.ones(2), torch.ones(2, dtype=torch.bool))
    with pytest.raises(verigrad.DTypeError, match="bool exponent"):
        verigrad.ldexp(verigrad.ones(2), verigrad.ones(2, dtype=verigrad.bool))
    e = np.array([True, False, True])
    for x in (np.array([True, False, True]), np.array([3, -2, 5]), np.array([3, 2, 250], dtype=np.uint8)):
        (ox, tx), (oe, te) = both(x), both(e)
        bits(verigrad.ldexp(ox, oe), torch.ldexp(tx, te))


@pytest.mark.parametrize("name", ["xlogy", "special.xlog1py", "special.xlogy"])
def test_xlogy_promotes_a_0d_operand_as_torch(name):
    def fn(lib):
        return (
            lib.special.xlog1py if name == "special.xlog1py" else (lib.special if "." in name else lib).xlogy
        )

    x64 = np.array(2.0)
    y32 = np.random.default_rng(51).uniform(0.5, 2.0, (2, 3)).astype(np.float32)
    (ox, tx), (oy, ty) = both(x64), both(y32)
    for args in ((ox, oy), (oy, ox)):
        theirs = fn(torch)(*((tx, ty) if args[0] is ox else (ty, tx)))
        ours = fn(verigrad)(*args)
        assert ours.dtype.name == "f32" == {torch.float32: "f32"}[theirs.dtype]
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    assert fn(verigrad)(2, oy).dtype.name == "f32"


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_functions_refuse_numbers(name):
    ours, theirs = both(np.array([0.0, 1.5, -2.0]))
    for number in (2, 1.5, True):
        with pytest.raises(TypeError, match="must be Tensor") as want:
            getattr(torch, name)(theirs, number)
        with pytest.raises(TypeError) as got:
            getattr(verigrad, name)(ours, number)
        assert str(got.value) == str(want.value)
    (mask, tmask) = both(np.array([True, False, True]))
    bits(getattr(ours, name)(mask), getattr(theirs, name)(tmask))


@pytest.mark.parametrize("values", [np.array([1, 2, 4]), np.array([True, False])])
def test_nanmean_refuses_an_integer_input_even_with_a_float_dtype(values):
    ours, theirs = both(values)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.nanmean(theirs, dtype=torch.float64)
    with pytest.raises(verigrad.DTypeError, match="nanmean takes a float tensor"):
        verigrad.nanmean(ours, dtype=verigrad.float64)
    floats, tfloats = both(np.array([1.0, np.nan, 4.0], dtype=np.float32))
    bits(verigrad.nanmean(floats, dtype=verigrad.float64), torch.nanmean(tfloats, dtype=torch.float64))
