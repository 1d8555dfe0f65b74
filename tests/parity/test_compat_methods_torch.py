"""Tensor methods PyTorch programs call that verigrad lacked (x.svd(), x.qr(), x.cholesky(), x.pinverse(),
x.lu(), x.lu_solve(), x.hardshrink(), x.prelu(), the queries of what a strided tensor is not), and the
functions whose operands PyTorch requires to be tensors (torch.maximum(x, 2.0) raises a TypeError there:
verigrad answered silently); each against torch on the same inputs, in f32 and f64."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients

import verigrad

RNG = np.random.default_rng(44)
DTYPES = [np.float32, np.float64]


def both(array: np.ndarray) -> tuple[verigrad.Tensor, torch.Tensor]:
    return verigrad.from_numpy(array.copy()), torch.from_numpy(array.copy())


def close(ours: verigrad.Tensor, theirs: torch.Tensor, tol: float = 1e-5) -> None:
    want = theirs.detach().numpy()
    assert ours.dtype.name == {np.float32: "f32", np.float64: "f64"}.get(want.dtype.type, ours.dtype.name)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), want, rtol=tol, atol=tol)


def torch_quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.qr, torch.lu: deprecated in torch, still there
        return fn(*args, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
@pytest.mark.parametrize("some", [True, False])
def test_svd_and_qr_methods(dtype, shape, some):
    ours, theirs = both(RNG.standard_normal(shape).astype(dtype))
    u, s, v = ours.svd(some=some)
    tu, ts, tv = theirs.svd(some=some)
    assert u.shape == tu.shape and v.shape == tv.shape  # V, not Vh: [..., n, n] or [..., n, k]
    close(s, ts)
    k = s.shape[-1]  # singular vectors are unique up to sign: the product is what is compared
    close((u[..., :k] * s.unsqueeze(-2)) @ v[..., :k].mT, theirs)
    q, r = ours.qr(some=some)
    tq, tr = torch_quiet(theirs.qr, some=some)
    close(q, tq), close(r, tr)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_pinverse_lu_methods(dtype, upper):
    a = RNG.standard_normal((2, 3, 3))
    spd = (a @ a.transpose(0, 2, 1) + 3 * np.eye(3)).astype(dtype)
    ours, theirs = both(spd)
    close(ours.cholesky(upper=upper), theirs.cholesky(upper=upper))
    close(ours.pinverse(), theirs.pinverse())
    close(ours.pinverse(rcond=0.5), theirs.pinverse(rcond=0.5))
    (lu, piv), (tlu, tpiv) = ours.lu(), torch_quiet(theirs.lu)
    close(lu, tlu)
    np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
    assert len(ours.lu(get_infos=True)) == 3
    b, tb = both(RNG.standard_normal((2, 3, 2)).astype(dtype))
    close(b.lu_solve(lu, piv), torch_quiet(tb.lu_solve, tlu, tpiv), tol=1e-4)


def test_method_gradients_are_torchs():
    a = RNG.standard_normal((4, 3))
    check_values_and_gradients({"a": a}, lambda a: a.pinverse(), lambda a: a.pinverse())
    check_values_and_gradients({"a": a}, lambda a: a.svd()[1], lambda a: a.svd()[1])
    check_values_and_gradients({"a": a}, lambda a: a.hardshrink(0.3), lambda a: a.hardshrink(0.3))
    w = RNG.uniform(0.1, 0.5, 3)
    x = RNG.standard_normal((2, 3, 4))
    check_values_and_gradients({"x": x, "w": w}, lambda x, w: x.prelu(w), lambda x, w: x.prelu(w))


@pytest.mark.parametrize("dtype", DTYPES)
def test_hardshrink_and_prelu_edges(dtype):
    x = np.array([-1.0, -0.5, -0.25, 0.0, 0.5, 0.75, np.nan], dtype=dtype)
    ours, theirs = both(x)
    close(ours.hardshrink(), theirs.hardshrink())  # NaN passes, as PyTorch's
    close(ours.hardshrink(lambd=0.6), theirs.hardshrink(lambd=0.6))
    # softshrink's zeros: PyTorch's sign of them depends on its code path (-0.0 on short tensors)
    close(verigrad.nn.functional.softshrink(ours), torch.nn.functional.softshrink(theirs))
    empty, tempty = both(np.zeros((0, 3), dtype=dtype))
    close(empty.hardshrink(), tempty.hardshrink())
    scalar, tscalar = both(np.array(-2.0, dtype=dtype))
    w, tw = both(np.array([0.25], dtype=dtype))
    close(scalar.prelu(w), tscalar.prelu(tw))


def test_strided_tensor_queries_and_removed_methods():
    ours, theirs = both(RNG.standard_normal((3, 3)))
    for name in ("is_sparse", "is_sparse_csr", "is_quantized", "is_nested", "is_mkldnn", "is_xla"):
        assert getattr(ours, name) is getattr(theirs, name) is False
    assert ours.is_shared() is theirs.is_shared() is False
    assert ours.to_dense() is ours and ours.share_memory_() is ours
    assert ours.to_dense(verigrad.float32).dtype is verigrad.float32
    for name in ("lstsq", "solve", "symeig", "eig"):
        with pytest.raises(RuntimeError, match="removed"):
            getattr(theirs, name)(*([theirs] if name in ("lstsq", "solve") else []))
        with pytest.raises(RuntimeError, match="removed"):
            getattr(ours, name)(*([ours] if name in ("lstsq", "solve") else []))


# torch.<name>(tensor, number): PyTorch's TypeError; each name with two tensors gives torch's values
OPERAND_NAMES = ["maximum", "minimum", "fmax", "fmin", "atan2", "arctan2", "hypot", "logaddexp", "logaddexp2",
                 "nextafter", "heaviside", "ldexp", "igamma", "igammac", "isclose", "dist"]  # fmt: skip


def _error(fn) -> str:
    try:
        fn()
    except TypeError as e:
        return str(e)
    raise AssertionError("no TypeError")


@pytest.mark.parametrize("name", OPERAND_NAMES)
def test_operands_must_be_tensors_as_in_torch(name):
    ours, theirs = both(RNG.uniform(0.5, 2.0, (2, 3)))
    for number in (2.0, 2, True, None):
        assert _error(lambda: getattr(verigrad, name)(ours, number)) == _error(
            lambda: getattr(torch, name)(theirs, number)
        )
        assert _error(lambda: getattr(ours, name)(number)) == _error(lambda: getattr(theirs, name)(number))
    refusal = _error(lambda: getattr(torch, name)(2.0, theirs))
    assert _error(lambda: getattr(verigrad, name)(2.0, ours)) == refusal


@pytest.mark.parametrize("name", OPERAND_NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_operand_functions_with_tensors_are_torchs(name, dtype):
    a, b = RNG.uniform(0.5, 2.0, (2, 3)).astype(dtype), RNG.uniform(0.5, 2.0, (3,)).astype(dtype)
    (x, tx), (y, ty) = both(a), both(b)
    if name == "ldexp":
        y, ty = both(np.array([1, -2, 3]))
    if name == "dist":
        y, ty = both(a[::-1].copy())
    keyword = "values" if name == "heaviside" else "other"
    want = getattr(torch, name)(tx, ty)
    close(getattr(verigrad, name)(x, y), want)
    close(getattr(x, name)(y), want)
    close(getattr(verigrad, name)(input=x, **{keyword: y}), getattr(torch, name)(input=tx, **{keyword: ty}))


def test_in_place_forms_refuse_numbers_too():
    ours, theirs = both(RNG.standard_normal((2, 3)))
    for name in ("hypot_", "atan2_", "ldexp_"):
        with pytest.raises(TypeError, match="must be Tensor"):
            getattr(theirs, name)(2.0)
        with pytest.raises(TypeError, match="must be Tensor"):
            getattr(ours, name)(2.0)
