"""`einsum` against NumPy's on both backends, with symbolic sizes, and its refusals (PyTorch's values and
gradients: tests/parity/test_derived_torch.py)."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import ShapeError

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit: the letters that appear once, sorted
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->i", [(4,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk", [(2, 7, 3, 4), (4, 5)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
    ("ij,jk,il->l", [(2, 3), (3, 4), (2, 5)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bjk->bik", [(1, 3, 4), (3, 4, 5)]),  # a batch of 1 broadcasts
    ("i j , j k -> k i", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize(("equation", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_numpy(backend, equation, shapes) -> None:
    rng = np.random.default_rng(len(equation))
    arrays = [rng.standard_normal(s) for s in shapes]
    with verigrad.backend(backend):
        got = verigrad.einsum(equation, *[verigrad.tensor(a) for a in arrays])
    want = np.einsum(equation.replace(" ", ""), *arrays)
    assert got.shape == want.shape and got.dtype is verigrad.f64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    ints = [np.arange(np.prod(s, dtype=int)).reshape(s) % 7 - 3 for s in shapes]  # integers: exact
    got = verigrad.einsum(equation, [verigrad.tensor(a) for a in ints])
    np.testing.assert_array_equal(got.numpy(), np.einsum(equation.replace(" ", ""), *ints))


def test_einsum_with_symbolic_sizes() -> None:
    B, T, D = verigrad.dims("B T D")
    q, k = verigrad.spec([B, T, D]), verigrad.spec([B, T, D])
    assert verigrad.check(lambda q, k: verigrad.einsum("btd,bsd->bts", q, k), q, k) == verigrad.spec(
        [B, T, T]
    )
    assert verigrad.check(lambda q: verigrad.einsum("btd->d", q), q) == verigrad.spec([D])


def test_einsum_refusals() -> None:
    a, b = verigrad.ones(2, 3), verigrad.ones(4, 5)
    with pytest.raises(ShapeError, match="cannot broadcast"):
        verigrad.einsum("ij,jk->ik", a, b)
    with pytest.raises(ShapeError, match="'ijk' names 3 axes of an operand with 2"):
        verigrad.einsum("ijk->i", a)
    with pytest.raises(ValueError, match="names 2 operands, 1 given"):
        verigrad.einsum("ij,jk", a)
    with pytest.raises(ShapeError, match="'i' in 'ii' must have one size for a diagonal, got 3, 2"):
        verigrad.einsum("ii->i", verigrad.ones(3, 2))
    with pytest.raises(ValueError, match="output 'iz' must name each input letter at most once"):
        verigrad.einsum("ij->iz", a)
    with pytest.raises(ValueError, match="the letters a-z, A-Z and '\\.\\.\\.', got 'i_'"):
        verigrad.einsum("i_->i", a)
    with pytest.raises(TypeError, match="an equation and one or more tensors"):
        verigrad.einsum("ij->i", np.ones((2, 3)))


def test_upper_case_subscripts_are_letters_too() -> None:
    # PyTorch's: A-Z are subscripts beside a-z (an implicit output sorts them first), `...` still works
    a, b = verigrad.arange(6).reshape(2, 3), verigrad.arange(12).reshape(3, 4)
    assert verigrad.einsum("iA,AB", a, b).tolist() == (a @ b).mT.tolist()  # implicit: "Bi", upper first
    assert verigrad.einsum("Ab,bC->AC", a, b).tolist() == (a @ b).tolist()
    assert verigrad.einsum("...A,AB->...B", a, b).tolist() == (a @ b).tolist()
    assert verigrad.einsum("ij,Ab->ijAb", a, verigrad.ones(4, 5, dtype=verigrad.int64)).shape == (2, 3, 4, 5)


def test_an_integer_operand_summed_alone_makes_the_product_i64() -> None:
    # "...ik,...j->ij" sums k of the first operand first: an i32 sum is i64, and so is the product with
    # the other i32 operand (PyTorch's), not a refused i64 @ i32
    x = verigrad.tensor([[[0, -6, 3], [-5, 9, 2]]], dtype=verigrad.int32)
    y = verigrad.tensor([-8, 6, 9], dtype=verigrad.int32)
    out = verigrad.einsum("...ik, ...j -> ij", x, y)
    assert out.dtype is verigrad.int64
    assert out.tolist() == [[24, -18, -27], [-48, 36, 54]]


def test_a_letter_repeated_in_an_operand_takes_its_diagonal() -> None:
    m = verigrad.arange(9.0).reshape(3, 3)  # [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert verigrad.einsum("ii->i", m).tolist() == [0.0, 4.0, 8.0]
    assert verigrad.einsum("ii", m).item() == 12.0  # implicit: the trace
    assert verigrad.einsum("ij,ii->j", m, m).tolist() == [
        0 * 0 + 4 * 3 + 8 * 6,
        0 + 4 * 4 + 8 * 7,
        0 + 4 * 5 + 8 * 8,
    ]
    t = verigrad.arange(18.0).reshape(3, 3, 2)  # t[i, i, j] = 6i + 2i + j
    assert verigrad.einsum("iij->j", t).tolist() == [0 + 8 + 16, 1 + 9 + 17]
    cube = verigrad.arange(27.0).reshape(3, 3, 3)
    assert verigrad.einsum("iii->i", cube).tolist() == [0.0, 13.0, 26.0]
    assert verigrad.einsum("iji->j", cube).tolist() == [0 + 10 + 20, 3 + 13 + 23, 6 + 16 + 26]
    x = verigrad.arange(9.0).reshape(3, 3).requires_grad_()
    verigrad.einsum("ii->i", x).sum().backward()
    assert x.grad.tolist() == np.eye(3).tolist()  # the diagonal's gradient goes to the diagonal alone
