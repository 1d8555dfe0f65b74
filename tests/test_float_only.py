"""Functions PyTorch computes on floats only refuse integer and bool tensors before any work, naming the
function and the dtype (linalg's decompositions, solvers and vecdot)."""

from __future__ import annotations

import pytest

import verigrad

L = verigrad.linalg
CALLS = [
    ("vecdot", lambda m, v: L.vecdot(v, v)),
    ("det", lambda m, v: L.det(m)),
    ("slogdet", lambda m, v: L.slogdet(m)),
    ("inv", lambda m, v: L.inv(m)),
    ("solve", lambda m, v: L.solve(m, v)),
    ("cholesky", lambda m, v: L.cholesky(m)),
    ("qr", lambda m, v: L.qr(m)),
    ("eigh", lambda m, v: L.eigh(m)),
    ("svdvals", lambda m, v: L.svdvals(m)),
    ("pinv", lambda m, v: L.pinv(m)),
    ("lstsq", lambda m, v: L.lstsq(m, m)),
    ("matrix_rank", lambda m, v: L.matrix_rank(m)),
    ("lu_factor", lambda m, v: L.lu_factor(m)),
    ("householder_product", lambda m, v: L.householder_product(m, v)),
]


@pytest.mark.parametrize("dtype", ["int64", "int8", "bool"])
@pytest.mark.parametrize("call", [c for _, c in CALLS], ids=[i for i, _ in CALLS])
def test_linalg_refuses_integers(call, dtype: str) -> None:
    m = verigrad.tensor([[4, 1, 2], [1, 5, 3], [2, 3, 6]], dtype=getattr(verigrad, dtype))
    v = verigrad.tensor([1, 2, 3], dtype=getattr(verigrad, dtype))
    with pytest.raises(verigrad.DTypeError, match=f"expected a floating point tensor, got {m.dtype.name}"):
        call(m, v)


def test_vecdot_takes_one_float_dtype() -> None:
    x = verigrad.tensor([1.0, 2.0, 3.0])
    assert L.vecdot(x, x).item() == 14.0
    with pytest.raises(
        verigrad.DTypeError, match=r"linalg\.vecdot: x and y must have the same dtype, got f32 and f64"
    ):
        L.vecdot(x, x.double())


F = verigrad.nn.functional
REFUSED = [
    ("leaky_relu", lambda v: F.leaky_relu(v)),
    ("gelu", lambda v: F.gelu(v)),
    ("softplus", lambda v: F.softplus(v)),
    ("hypot", lambda v: verigrad.hypot(v, v)),
    ("logaddexp", lambda v: verigrad.logaddexp(v, v)),
    ("lerp", lambda v: verigrad.lerp(v, v, 0.5)),
    ("pdist", lambda v: F.pdist(v.reshape(3, 1))),
    ("smooth_l1_loss", lambda v: F.smooth_l1_loss(v, v)),
    (
        "embedding_bag's weight",
        lambda v: F.embedding_bag(verigrad.arange(3), v.reshape(3, 1), verigrad.arange(1)),
    ),
]


@pytest.mark.parametrize("call", [c for _, c in REFUSED], ids=[i for i, _ in REFUSED])
def test_float_functions_refuse_integers(call) -> None:
    with pytest.raises(verigrad.DTypeError, match="expected a floating point tensor, got i64"):
        call(verigrad.tensor([1, 2, 3]))


def test_addcdiv_refuses_integer_division_and_addcmul_bools() -> None:
    i = verigrad.tensor([1, 2, 3])
    with pytest.raises(verigrad.DTypeError, match="addcdiv: integer division"):
        verigrad.addcdiv(i * 1.0, i, i)
    assert verigrad.addcdiv(i * 1.0, i, i * 2.0, value=2).tolist() == [2.0, 3.0, 4.0]
    b = verigrad.tensor([True, False])
    with pytest.raises(verigrad.DTypeError, match="addcmul of bool tensors"):
        verigrad.addcmul(b, b, b)


@pytest.mark.parametrize(
    ("what", "call"),
    [
        ("trace", lambda b: verigrad.trace(b.reshape(1, 1))),
        ("median", lambda b: verigrad.median(b)),
        ("topk", lambda b: verigrad.topk(b, 1)),
        ("kthvalue", lambda b: verigrad.kthvalue(b, 1)),
        (
            "pad: mode 'reflect'",
            lambda b: verigrad.nn.functional.pad(b.reshape(1, 1, 1), (0, 0), mode="reflect"),
        ),
    ],
)
def test_bool_tensors_refused_where_pytorch_has_no_bool_kernel(what: str, call) -> None:
    with pytest.raises(verigrad.DTypeError, match=f"{what} of a bool tensor is not supported"):
        call(verigrad.tensor([True]))


@pytest.mark.parametrize("dim", [0, -1])
def test_median_and_topk_of_a_0d_tensor_take_dim_0(dim: int) -> None:
    """A 0-d tensor's median, nanmedian and topk along dim 0 (or -1) are the value itself at index 0 (the bool
    check sits beside the scalar-as-vector wrapper, not inside it)."""
    x = verigrad.tensor(2.5)
    for value, index in (verigrad.median(x, dim), verigrad.nanmedian(x, dim), verigrad.topk(x, 1, dim)):
        assert value.item() == 2.5 and index.item() == 0 and value.ndim == 0
