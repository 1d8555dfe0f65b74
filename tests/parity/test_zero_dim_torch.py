"""0-d tensors and empty axes against PyTorch: reductions with dim 0 / -1 / None and keepdim, the
functions along one dim, squeeze / unsqueeze / flatten / .T, nonzero, meshgrid, sort / topk / argsort;
reductions over no elements (values, dtypes, shapes, gradients, and the errors PyTorch raises)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad
from tests.parity.gradients import check_values_and_gradients

SCALAR = np.array(-1.25)


def _same(ours, theirs) -> None:
    """Values (NaN where PyTorch has NaN), shape and dtype of one result, or of each in a tuple."""
    if isinstance(theirs, tuple | list):
        assert isinstance(ours, tuple | list) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b)
        return
    expected = theirs.detach().numpy()
    assert ours.shape == tuple(theirs.shape)
    assert ours.numpy().dtype == expected.dtype
    np.testing.assert_array_equal(ours.numpy(), expected)


# (name, the dims PyTorch's function takes: prod one dim, logsumexp no dim=None)
REDUCTIONS = [
    (name, dim)
    for name in ("sum", "mean", "prod", "amax", "amin", "logsumexp", "std", "var")
    for dim in (0, -1, None, (0,), ())
    if not (name == "prod" and isinstance(dim, tuple)) and not (name == "logsumexp" and dim is None)
]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize(("name", "dim"), REDUCTIONS)
def test_float_reductions_of_a_scalar(name: str, dim, keepdim: bool) -> None:
    def call(lib):
        def f(x):
            fn = getattr(lib, name)
            return fn(x) if dim is None else fn(x, dim, keepdim=keepdim)

        return f

    check_values_and_gradients({"x": SCALAR.copy()}, call(verigrad), call(torch))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
def test_index_reductions_of_a_scalar(dim: int, keepdim: bool) -> None:
    for lib_name in ("max", "min"):
        ours = getattr(verigrad.from_numpy(SCALAR.copy()), lib_name)(dim, keepdim=keepdim)
        theirs = getattr(torch.from_numpy(SCALAR.copy()), lib_name)(dim, keepdim=keepdim)
        _same(tuple(ours), tuple(theirs))
    for lib_name in ("argmax", "argmin"):
        for d in (dim, None):
            ours = getattr(verigrad.from_numpy(SCALAR.copy()), lib_name)(d, keepdim=keepdim)
            theirs = getattr(torch.from_numpy(SCALAR.copy()), lib_name)(d, keepdim=keepdim)
            _same(ours, theirs)
    for lib_name in ("all", "any"):
        for value in (0.0, 2.0):
            ours = getattr(verigrad.tensor(value), lib_name)(dim, keepdim=keepdim)
            theirs = getattr(torch.tensor(value), lib_name)(dim, keepdim=keepdim)
            _same(ours, theirs)


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp"])
def test_functions_along_a_dim_of_a_scalar(name: str, dim: int) -> None:
    check_values_and_gradients(
        {"x": SCALAR.copy()},
        lambda x: getattr(verigrad, name)(x, dim),
        lambda x: getattr(torch, name)(x, dim),
    )


@pytest.mark.parametrize("dim", [0, -1])
def test_running_extremes_sort_and_topk_of_a_scalar(dim: int) -> None:
    ours, theirs = verigrad.from_numpy(SCALAR.copy()), torch.from_numpy(SCALAR.copy())
    _same(tuple(ours.cummax(dim)), tuple(theirs.cummax(dim)))
    _same(tuple(ours.cummin(dim)), tuple(theirs.cummin(dim)))
    _same(tuple(ours.sort(dim)), tuple(theirs.sort(dim)))
    _same(tuple(ours.sort(dim, descending=True)), tuple(theirs.sort(dim, descending=True)))
    _same(ours.argsort(dim), theirs.argsort(dim))
    _same(verigrad.argsort(ours, dim=dim, stable=True), torch.argsort(theirs, dim=dim, stable=True))
    _same(tuple(ours.topk(1, dim)), tuple(theirs.topk(1, dim)))


def test_shaping_a_scalar() -> None:
    ours, theirs = verigrad.from_numpy(SCALAR.copy()), torch.from_numpy(SCALAR.copy())
    for dim in (0, -1):
        _same(ours.squeeze(dim), theirs.squeeze(dim))
        _same(ours.unsqueeze(dim), theirs.unsqueeze(dim))
        _same(ours.flatten(dim, dim), theirs.flatten(dim, dim))
    _same(ours.squeeze(), theirs.squeeze())
    _same(ours.squeeze((0,)), theirs.squeeze((0,)))
    _same(ours.flatten(), theirs.flatten())
    _same(verigrad.flatten(ours), torch.flatten(theirs))
    _same(ours.T, theirs.T)
    _same(ours.unfold(0, 1, 1), theirs.unfold(0, 1, 1))


@pytest.mark.parametrize("value", [0.0, 3.0])
def test_nonzero_of_a_scalar(value: float) -> None:
    ours, theirs = verigrad.tensor(value), torch.tensor(value)
    _same(ours.nonzero(), theirs.nonzero())
    _same(verigrad.nonzero(ours, as_tuple=True), torch.nonzero(theirs, as_tuple=True))
    _same(verigrad.argwhere(ours), torch.argwhere(theirs))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_of_scalars_and_vectors(indexing: str) -> None:
    cases = [
        (np.array(2.0), np.arange(3.0)),
        (np.arange(2.0), np.array(5.0), np.arange(4.0)),
        (np.array(1.0),),
        (np.arange(2.0), np.arange(3.0)),
    ]
    for arrays in cases:
        ours = verigrad.meshgrid(*(verigrad.from_numpy(a.copy()) for a in arrays), indexing=indexing)
        theirs = torch.meshgrid(*(torch.from_numpy(a.copy()) for a in arrays), indexing=indexing)
        _same(ours, theirs)


@pytest.mark.parametrize("bad", [1, -2])
def test_a_scalar_refuses_other_dims_as_torch(bad: int) -> None:
    calls = [
        lambda lib, x: x.sum(bad),
        lambda lib, x: lib.softmax(x, bad),
        lambda lib, x: lib.cumsum(x, bad),
        lambda lib, x: x.squeeze(bad),
        lambda lib, x: x.argmax(bad),
        lambda lib, x: x.max(bad),
        lambda lib, x: lib.logcumsumexp(x, bad),
        lambda lib, x: x.flatten(bad),
    ]
    for call in calls:
        with pytest.raises(IndexError):
            call(torch, torch.tensor(1.0))
        with pytest.raises(IndexError):  # verigrad's AxisError: a ShapeError and an IndexError
            call(verigrad, verigrad.tensor(1.0))


# reductions over no elements ------------------------------------------------------------------------
EMPTY = np.zeros((0, 3))


@pytest.mark.parametrize(
    ("name", "dim"),
    [(name, dim) for name in ("sum", "mean", "std", "var") for dim in (0, (0, 1), None)]
    + [("prod", 0), ("prod", None), ("logsumexp", 0), ("logsumexp", (0, 1))],
)
def test_float_reductions_over_no_elements(name: str, dim) -> None:
    def call(lib):
        return lambda x: getattr(lib, name)(x) if dim is None else getattr(lib, name)(x, dim)

    ours = call(verigrad)(verigrad.from_numpy(EMPTY.copy()))
    theirs = call(torch)(torch.from_numpy(EMPTY.copy()))
    _same(ours, theirs)


@pytest.mark.parametrize("dim", [0, None])
def test_all_any_count_over_no_elements(dim) -> None:
    ours, theirs = verigrad.from_numpy(EMPTY.copy()) > 0, torch.from_numpy(EMPTY.copy()) > 0
    for name in ("all", "any", "count_nonzero"):
        if dim is None:
            _same(getattr(ours, name)(), getattr(theirs, name)())
        else:
            _same(getattr(ours, name)(dim), getattr(theirs, name)(dim))


def test_extremes_over_no_elements_raise_as_torch() -> None:
    calls = [
        lambda x: x.amax(0),
        lambda x: x.amin(0),
        lambda x: x.max(0),
        lambda x: x.argmax(0),
        lambda x: x.max(),
        lambda x: x.argmax(),
    ]
    for call in calls:
        with pytest.raises((IndexError, RuntimeError)):
            call(torch.from_numpy(EMPTY.copy()))
        with pytest.raises(ValueError):  # verigrad's ShapeError
            call(verigrad.from_numpy(EMPTY.copy()))
    # along the axis that is not empty, there is nothing to refuse
    _same(verigrad.from_numpy(EMPTY.copy()).amax(1), torch.from_numpy(EMPTY.copy()).amax(1))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_normalizing_along_an_axis_of_a_tensor_with_no_elements(shape: tuple) -> None:
    for name in ("softmax", "log_softmax", "cumsum", "logcumsumexp"):
        ours = getattr(verigrad, name)(verigrad.zeros(*shape, dtype="f64"), 1)
        theirs = getattr(torch, name)(torch.zeros(*shape, dtype=torch.float64), 1)
        _same(ours, theirs)


def test_median_of_no_elements() -> None:
    for name in ("median", "nanmedian"):
        _same(getattr(verigrad.zeros(0), name)(), getattr(torch.zeros(0), name)())
    with pytest.raises(IndexError):
        torch.zeros(0, 3).median(0)
    with pytest.raises(ValueError, match="median of an empty dimension"):
        verigrad.zeros(0, 3).median(0)


def test_squeeze_several_dims() -> None:
    ours, theirs = verigrad.zeros(1, 2, 1, 1), torch.zeros(1, 2, 1, 1)
    for dims in ((0, 2), (1,), (), (-1, 0), [2, 3], 0, 1):
        _same(ours.squeeze(dims), theirs.squeeze(dims))
        _same(verigrad.squeeze(ours, dim=dims), torch.squeeze(theirs, dim=dims))
    with pytest.raises(RuntimeError):
        theirs.squeeze((0, 0))
    with pytest.raises(ValueError, match="name an axis twice"):
        ours.squeeze((0, 0))


ZERO = np.array(0)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib, x, v: x.gather(0, lib.from_numpy(ZERO.copy())) * v,
        lambda lib, x, v: x.scatter(-1, lib.from_numpy(ZERO.copy()), v),
        lambda lib, x, v: x.scatter_add(0, lib.from_numpy(ZERO.copy()), v),
        lambda lib, x, v: x.index_fill(0, lib.from_numpy(ZERO.copy()), v),
        lambda lib, x, v: x.index_add(0, lib.tensor([0]), v),
        lambda lib, x, v: x.index_copy(-1, lib.tensor([0]), v),
        lambda lib, x, v: lib.take_along_dim(x, lib.from_numpy(ZERO.copy())) * v,
        lambda lib, x, v: x.transpose(0, -1) * v,
        lambda lib, x, v: x.index_select(0, lib.tensor([0])) * v,
        lambda lib, x, v: x.index_select(-1, lib.from_numpy(ZERO.copy())) * v,
    ],
)
def test_indexing_functions_of_a_scalar(call) -> None:
    check_values_and_gradients(
        {"x": SCALAR.copy(), "v": np.array(0.75)},
        lambda x, v: call(verigrad, x * 1.0, v),
        lambda x, v: call(torch, x * 1.0, v),
    )


def test_indexing_functions_of_a_scalar_refuse_what_torch_refuses() -> None:
    for lib in (torch, verigrad):
        with pytest.raises(IndexError):
            lib.take_along_dim(lib.tensor(2.5), lib.tensor(0), 0)
        with pytest.raises((RuntimeError, ValueError)):
            lib.tensor(2.5).index_select(0, lib.tensor([0, 0]))


@pytest.mark.parametrize("dims", [(), []])
def test_an_empty_dim_list_reduces_all_or_none_as_torch(dims) -> None:
    """PyTorch's sum, mean, std, var, norm, count_nonzero, amax over dim=() reduce all; all / any none."""
    calls = [
        lambda lib, x: x.sum(dims),
        lambda lib, x: x.sum(dim=dims, keepdim=True),
        lambda lib, x: lib.sum(x, dims),
        lambda lib, x: x.mean(dim=dims),
        lambda lib, x: x.norm(dim=dims),
        lambda lib, x: x.amax(dims),
    ]
    for call in calls:
        check_values_and_gradients(
            {"x": np.arange(6.0).reshape(2, 3) - 2.5}, lambda x: call(verigrad, x), lambda x: call(torch, x)
        )
    x = np.arange(6.0).reshape(2, 3) - 2.5  # std and var: values (PyTorch's gradient over dim=() is inf)
    _same(verigrad.from_numpy(x).std(dims), torch.from_numpy(x).std(dims))
    _same(verigrad.from_numpy(x).var(dim=dims), torch.from_numpy(x).var(dim=dims))
    for name in ("count_nonzero", "any", "all"):
        ours = getattr(verigrad.from_numpy(np.eye(2)), name)(dims)
        theirs = getattr(torch.from_numpy(np.eye(2)), name)(dims)
        _same(ours, theirs)
