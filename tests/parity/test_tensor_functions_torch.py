"""Tensor functions (norms, products, scatter, indexing, diagonals, shifts, arange) against PyTorch's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F

RNG = np.random.default_rng(11)


ROWS = np.concatenate([RNG.standard_normal((3, 5)), np.zeros((1, 5))])  # a zero row: norm's gradient


@pytest.mark.parametrize(
    ("p", "dim", "keepdim"), [(2, 1, False), (2, None, False), (1, 0, True), (3, 1, False)]
)
def test_norms(p, dim, keepdim) -> None:
    """Values and gradients, the zero row's too (0 for p=2 with PyTorch; p=1's sign is 0 at 0)."""
    rows = ROWS if p == 2 else RNG.standard_normal((4, 5))  # |x|^p of 0 has no defined gradient for p<1
    _check(
        {"x": rows},
        lambda x: x.norm(p, dim=dim, keepdim=keepdim),
        lambda x: x.norm(p, dim=dim, keepdim=keepdim),
    )
    _check(
        {"x": RNG.standard_normal((4, 5))},
        lambda x: verigrad.norm(x, math.inf, 1),
        lambda x: x.norm(math.inf, 1),
    )


def test_normalize_and_cosine_similarity() -> None:
    _check({"x": ROWS}, lambda x: F.normalize(x, dim=1), lambda x: TF.normalize(x, dim=1))
    other = RNG.standard_normal((4, 5))
    _check(
        {"a": ROWS[:3], "b": other[:3]},
        lambda a, b: F.cosine_similarity(a, b),
        lambda a, b: TF.cosine_similarity(a, b),
    )


def test_products_outer_bmm_mm() -> None:
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))
    _check({"a": a, "b": b}, lambda a, b: verigrad.bmm(a, b), lambda a, b: torch.bmm(a, b))
    _check({"a": a[0], "b": b[0]}, lambda a, b: a.mm(b), lambda a, b: a.mm(b))
    _check({"u": a[0, 0], "v": b[0, 0]}, lambda u, v: verigrad.outer(u, v), lambda u, v: torch.outer(u, v))


@pytest.mark.parametrize(
    "args", [(0, 1, 0.1), (-1.5, 2.3, 0.37), (5, 0, -0.5), (0.0, 3), (2.5,), (1, 2.0001, 0.25)]
)
def test_arange_with_float_bounds_gives_pytorchs_floats(args) -> None:
    """f32: PyTorch's bits (start + i * step in f64, rounded once). In f64 PyTorch's vectorized kernel
    forms some values another way (an ulp from start + i * step, which verigrad gives exactly)."""
    assert verigrad.arange(*args).numpy().tobytes() == torch.arange(*args).numpy().tobytes()
    ours, theirs = (
        verigrad.arange(*args, dtype=verigrad.f64).numpy(),
        torch.arange(*args, dtype=torch.float64),
    )
    theirs = theirs.numpy()
    assert ours.shape == theirs.shape
    if theirs.size:
        assert np.abs(ours - theirs).max() <= np.spacing(np.abs(theirs).max())  # one ulp of the largest


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_and_scatter_add(dim: int) -> None:
    """Values and gradients of both inputs, with an index smaller than x off the axis; scatter's positions
    written once (PyTorch leaves repeated ones unspecified), scatter_add's repeated, and a src larger than
    the index."""
    rng = np.random.default_rng(dim)
    shape, index_shape = (4, 5), (3, 4)
    rows = [rng.permutation(shape[dim])[: index_shape[dim]] for _ in range(index_shape[1 - dim])]
    unique, repeated = np.stack(rows, 1 - dim), rng.integers(0, shape[dim], index_shape)
    x = rng.standard_normal(shape)
    _check(
        {"x": x, "s": rng.standard_normal(index_shape)},
        lambda x, s: x.scatter(dim, verigrad.tensor(unique), s),
        lambda x, s: x.scatter(dim, torch.tensor(unique), s),
    )
    _check(
        {"x": x, "s": rng.standard_normal(index_shape)},
        lambda x, s: x.scatter_add(dim, verigrad.tensor(repeated), s),
        lambda x, s: x.scatter_add(dim, torch.tensor(repeated), s),
    )
    larger = rng.standard_normal((4, 4))  # values only: PyTorch cannot differentiate such a src
    np.testing.assert_allclose(
        verigrad.tensor(x).scatter_add(dim, verigrad.tensor(repeated), verigrad.tensor(larger)).numpy(),
        torch.tensor(x).scatter_add(dim, torch.tensor(repeated), torch.tensor(larger)).numpy(),
        rtol=1e-15,
        atol=1e-15,
    )
    _check(
        {"x": x},
        lambda x: x.scatter(dim, verigrad.tensor(unique), -2.5),
        lambda x: x.scatter(dim, torch.tensor(unique), -2.5),
    )


def test_fill_diagonal() -> None:
    for shape, wrap in [((4, 4), False), ((7, 3), True), ((7, 3), False), ((3, 6), True), ((3, 3, 3), False)]:
        ours, theirs = verigrad.zeros(*shape), torch.zeros(*shape)
        assert ours.fill_diagonal_(2.5, wrap=wrap) is ours
        theirs.fill_diagonal_(2.5, wrap=wrap)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_index_add_and_unique() -> None:
    index = np.array([0, 4, 0, 2])
    _check(
        {"x": RNG.standard_normal((5, 3)), "s": RNG.standard_normal((4, 3))},
        lambda x, s: x.index_add(0, verigrad.tensor(index), s, alpha=0.5),
        lambda x, s: x.index_add(0, torch.tensor(index), s, alpha=0.5),
    )
    _check(
        {"x": RNG.standard_normal((3, 5)), "s": RNG.standard_normal((3, 4))},
        lambda x, s: x.index_add(1, verigrad.tensor(index), s),
        lambda x, s: x.index_add(1, torch.tensor(index), s),
    )
    values = np.array([[3.0, 1.0, np.inf], [1.0, -0.5, 3.0], [3.0, 1.0, np.inf]])
    for dim in (None, 0, 1):
        ours = verigrad.tensor(values).unique(return_inverse=True, return_counts=True, dim=dim)
        theirs = torch.tensor(values).unique(return_inverse=True, return_counts=True, dim=dim)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    condition = values > 1
    for a, b in zip(verigrad.where(verigrad.tensor(condition)), torch.where(torch.tensor(condition))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_prod_gradient_with_zeros() -> None:
    """No zero, one zero and two zeros in a row: the gradient is PyTorch's in each."""
    x = RNG.standard_normal((3, 4))
    x[1, 2] = x[2, 0] = x[2, 3] = 0.0
    _check({"x": x}, lambda x: x.prod(1), lambda x: x.prod(1))
    _check({"x": x}, lambda x: verigrad.prod(x), lambda x: torch.prod(x))


def test_mask_selection_and_lerp() -> None:
    x = RNG.standard_normal((4, 3))
    mask = x[:, 0] > 0
    _check({"x": x}, lambda x: x[verigrad.tensor(mask)] * 2, lambda x: x[torch.tensor(mask)] * 2)
    _check({"x": x}, lambda x: x[x > 0], lambda x: x[x > 0])
    end = RNG.standard_normal((4, 3))
    _check({"a": x, "b": end}, lambda a, b: a.lerp(b, 0.3), lambda a, b: a.lerp(b, 0.3))
    ours, theirs = verigrad.tensor(x.copy()), torch.tensor(x.copy())
    ours[ours < 0] = ours[ours < 0] * 3
    theirs[theirs < 0] = theirs[theirs < 0] * 3
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_array_equal(ours.nonzero().numpy(), theirs.nonzero().numpy())


@pytest.mark.parametrize("offset", [0, 1, -2, 5])
def test_diagonals_trace_and_meshgrid(offset) -> None:
    x = RNG.standard_normal((3, 4))
    _check({"x": x}, lambda x: x.diagonal(offset), lambda x: x.diagonal(offset))
    _check(
        {"x": RNG.standard_normal((2, 3, 4))},
        lambda x: x.diagonal(offset, 2, 1),
        lambda x: x.diagonal(offset, 2, 1),
    )
    _check({"v": x[0]}, lambda v: verigrad.diag(v, offset), lambda v: torch.diag(v, offset))
    _check({"x": x[:, :3]}, lambda x: x.trace(), lambda x: x.trace())
    for indexing in ("ij", "xy"):
        ours = verigrad.meshgrid(
            verigrad.arange(3), verigrad.arange(2), verigrad.arange(4), indexing=indexing
        )
        theirs = torch.meshgrid(torch.arange(3), torch.arange(2), torch.arange(4), indexing=indexing)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for ours, theirs in zip(
        verigrad.std_mean(verigrad.tensor(x), dim=1), torch.std_mean(torch.tensor(x), dim=1)
    ):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def test_shifts_slices_products_and_distances() -> None:
    x, m1, m2 = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 5)), RNG.standard_normal((5, 4))
    for ours, theirs in [
        (lambda x: x.roll(1, 1), lambda x: x.roll(1, 1)),
        (lambda x: x.roll((1, -2), (0, 1)), lambda x: x.roll((1, -2), (0, 1))),
        (lambda x: x.roll(5), lambda x: x.roll(5)),
        (lambda x: x.narrow(1, 1, 2), lambda x: x.narrow(1, 1, 2)),
        (lambda x: x.unbind(1)[2], lambda x: x.unbind(1)[2]),
        (lambda x: verigrad.square(x) + verigrad.log2(x.abs()) - x.abs().log10(),
         lambda x: torch.square(x) + torch.log2(x.abs()) - x.abs().log10()),
        (lambda x: x.masked_select(x > 0), lambda x: x.masked_select(x > 0)),
        (lambda x: verigrad.cdist(x, x[:2] * 2), lambda x: torch.cdist(x, x[:2] * 2)),
        (lambda x: verigrad.cdist(x, x[:2] * 2, p=1.0), lambda x: torch.cdist(x, x[:2] * 2, p=1.0)),
    ]:  # fmt: skip
        _check({"x": x}, ours, theirs)
    _check(
        {"x": x, "a": m1, "b": m2},
        lambda x, a, b: verigrad.addmm(x, a, b, beta=0.5, alpha=2.0),
        lambda x, a, b: torch.addmm(x, a, b, beta=0.5, alpha=2.0),
    )
    _check(
        {"x": x[None], "a": m1[None], "b": m2[None]},
        lambda x, a, b: verigrad.baddbmm(x, a, b),
        lambda x, a, b: torch.baddbmm(x, a, b),
    )
    _check(
        {"x": m1, "w": m2.T, "b": RNG.standard_normal(4)},
        lambda x, w, b: F.linear(x, w, b),
        lambda x, w, b: TF.linear(x, w, b),
    )


def test_values_only_helpers() -> None:
    special = np.array([np.nan, np.inf, -np.inf, 1.5, 0.0, -0.0], np.float32)
    np.testing.assert_array_equal(
        verigrad.tensor(special).nan_to_num().numpy(), torch.tensor(special).nan_to_num().numpy()
    )
    np.testing.assert_array_equal(
        verigrad.tensor(special).nan_to_num(1.0, 2.0, -2.0).numpy(),
        torch.tensor(special).nan_to_num(1.0, 2.0, -2.0).numpy(),
    )
    a, b = special, np.array([np.nan, np.inf, np.inf, 1.5 + 1e-6, 1e-9, 0.0], np.float32)
    for equal_nan in (False, True):
        np.testing.assert_array_equal(
            verigrad.isclose(verigrad.tensor(a), verigrad.tensor(b), equal_nan=equal_nan).numpy(),
            torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=equal_nan).numpy(),
        )
    counts = np.array([[0, 1, 2], [0, 0, 3]])
    assert verigrad.count_nonzero(verigrad.tensor(counts)).item() == 3
    np.testing.assert_array_equal(
        verigrad.tensor(counts).count_nonzero(dim=1).numpy(),
        torch.tensor(counts).count_nonzero(dim=1).numpy(),
    )
    for offset in (-1, 0, 2):
        np.testing.assert_array_equal(
            verigrad.tril_indices(4, 3, offset).numpy(), torch.tril_indices(4, 3, offset).numpy()
        )
        np.testing.assert_array_equal(
            verigrad.triu_indices(3, 5, offset).numpy(), torch.triu_indices(3, 5, offset).numpy()
        )
    np.testing.assert_allclose(
        verigrad.logspace(-1, 2, 7).numpy(), torch.logspace(-1, 2, 7).numpy(), rtol=2e-7
    )
    assert verigrad.logspace(0, 1, 3, base=2.0).dtype.name == "f32"
    boundaries, values = np.array([1.0, 2.0, 2.0, 5.0]), np.array([[0.5, 2.0], [2.5, 9.0]])
    for right in (False, True):
        np.testing.assert_array_equal(
            verigrad.bucketize(verigrad.tensor(values), verigrad.tensor(boundaries), right=right).numpy(),
            torch.bucketize(torch.tensor(values), torch.tensor(boundaries), right=right).numpy(),
        )
