"""Where verigrad once gave another result than PyTorch without an error: the named tuples of max, min and
the other functions PyTorch returns (values, indices) from, scatter's repeated positions, var and std
with no degrees of freedom left, the dtypes of bool maxima and triangles, and the calls PyTorch refuses."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients as _check

import verigrad

NAN = np.nan
# ties (first occurrence wins), NaN (propagates, its first index), and infinities
X = np.array([[1.0, 5.0, 5.0, -2.0], [NAN, 3.0, NAN, 0.0], [-np.inf, 2.0, np.inf, 2.0]])
FINITE = np.array([[1.0, 5.0, 5.0, -2.0], [0.5, 3.0, 3.0, 0.0], [-4.0, 2.0, 7.0, 2.0]])
DISTINCT = np.array([[1.0, 5.0, 4.0, -2.0], [0.5, 3.0, 2.5, 0.0], [-4.0, 2.0, 7.0, 1.0]])  # topk's ties vary


def _same(ours, theirs) -> None:
    """One tensor, or a named tuple of them with PyTorch's field names, equal to PyTorch's."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, verigrad.Tensor), f"a tensor expected, got {type(ours).__name__}"
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=0)
        assert ours.shape == tuple(theirs.shape)
        assert ours.dtype.name == {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64",
                                   torch.bool: "bool"}[theirs.dtype]  # fmt: skip
        return
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    if hasattr(theirs, "_fields"):  # PyTorch's named tuples (var_mean's is a plain tuple)
        assert getattr(ours, "_fields", None) == theirs._fields
    for name in getattr(theirs, "_fields", ()):
        _same(getattr(ours, name), getattr(theirs, name))
    for mine, want in zip(ours, theirs):
        _same(mine, want)


def _both(x: np.ndarray) -> tuple[verigrad.Tensor, torch.Tensor]:
    return verigrad.tensor(x), torch.from_numpy(x.copy())


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_and_min_along_a_dim_give_values_and_indices(name, dim, keepdim) -> None:
    ours, theirs = _both(X)
    want = getattr(torch, name)(theirs, dim, keepdim)
    _same(getattr(verigrad, name)(ours, dim, keepdim), want)
    _same(getattr(ours, name)(dim, keepdim), want)
    _same(getattr(ours, name)(dim=dim, keepdim=keepdim), getattr(theirs, name)(dim=dim, keepdim=keepdim))
    assert getattr(ours, name)(dim)[1].dtype.name == "i64"  # x.max(1)[1] reads the indices


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_of_all_elements_and_of_two_tensors(name) -> None:
    ours, theirs = _both(X)
    _same(getattr(ours, name)(), getattr(theirs, name)())
    _same(getattr(verigrad, name)(ours), getattr(torch, name)(theirs))
    other = np.full_like(X, 2.0)
    _same(getattr(ours, name)(verigrad.tensor(other)), getattr(theirs, name)(torch.from_numpy(other)))
    _same(
        getattr(verigrad, name)(ours, verigrad.tensor(other)),
        getattr(torch, name)(theirs, torch.tensor(other)),
    )


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_gradient_goes_to_the_picked_index(name) -> None:
    _check({"x": FINITE}, lambda x: getattr(x, name)(1).values, lambda x: getattr(x, name)(1).values)
    _check(
        {"x": FINITE},
        lambda x: getattr(verigrad, name)(x, 0, True)[0],
        lambda x: getattr(torch, name)(x, 0, True)[0],
    )
    # with no dim, ties share the gradient (PyTorch's evenly distributed one), as amax / amin do
    _check({"x": FINITE}, lambda x: getattr(x, name)(), lambda x: getattr(x, name)())


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("dim", [0, -1, (0, 1), ()])
def test_amax_and_amin_give_values_only(name, dim) -> None:
    ours, theirs = _both(X)
    _same(getattr(ours, name)(dim), getattr(theirs, name)(dim))
    _same(getattr(verigrad, name)(ours, dim, True), getattr(torch, name)(theirs, dim, True))
    _check({"x": FINITE}, lambda x: getattr(x, name)(dim), lambda x: getattr(x, name)(dim))


CALLS = [  # (name, args, kwargs): each a function of torch and a Tensor method
    ("max", (1,), {}),
    ("min", (0,), {"keepdim": True}),
    ("median", (1,), {}),
    ("nanmedian", (0,), {}),
    ("mode", (1,), {}),
    ("mode", (), {}),
    ("kthvalue", (2, 1), {}),
    ("sort", (1,), {}),
    ("topk", (2, 1), {}),
    ("cummax", (1,), {}),
    ("cummin", (0,), {}),
    ("aminmax", (), {"dim": 1}),
    ("aminmax", (), {}),
    ("var_mean", (1,), {}),  # plain tuples, and no Tensor methods, in PyTorch
    ("std_mean", (0,), {}),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), CALLS)
def test_every_function_pytorch_returns_a_tuple_from(name, args, kwargs) -> None:
    """The same named tuple (fields, values, indices) as PyTorch's, as a function and as a method."""
    ours, theirs = _both(DISTINCT)
    want = getattr(torch, name)(theirs, *args, **kwargs)
    _same(getattr(verigrad, name)(ours, *args, **kwargs), want)
    if hasattr(theirs, name):
        _same(getattr(ours, name)(*args, **kwargs), want)


def test_mode_takes_the_smallest_most_frequent_and_its_last_index() -> None:
    values = np.array([[1.0, 2.0, 2.0, 1.0, 3.0], [4.0, 4.0, 4.0, 0.0, 0.0], [7.0, 6.0, 5.0, 6.0, 7.0]])
    ours, theirs = _both(values)
    for dim, keepdim in [(1, False), (0, True), (-1, True)]:
        _same(verigrad.mode(ours, dim, keepdim), torch.mode(theirs, dim, keepdim))
    ints = np.array([[1, 1, 2], [2, 2, 1]])
    _same(verigrad.tensor(ints).mode(0), torch.tensor(ints).mode(0))
    _check({"x": values}, lambda x: x.mode(1).values, lambda x: x.mode(1).values)


@pytest.mark.parametrize("name", ["max", "min", "mode", "sort", "median", "nanmedian", "cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, -1, 1, -2])
def test_dims_of_a_0d_tensor_as_pytorch(name, dim) -> None:
    """A 0-d tensor takes dim 0 and -1 (as a 1-element vector); any other dim is refused."""
    ours, theirs = verigrad.tensor(2.5), torch.tensor(2.5, dtype=torch.float64).float()
    try:
        want = getattr(torch, name)(theirs, dim)
    except IndexError:
        with pytest.raises(verigrad.ShapeError, match="out of range"):
            getattr(verigrad, name)(ours, dim)
        return
    _same(getattr(verigrad, name)(ours, dim), want)


@pytest.mark.parametrize("dim", [0, -1, 1])
def test_topk_and_kthvalue_of_a_0d_tensor(dim) -> None:
    ours, theirs = verigrad.tensor(2.5), torch.tensor(2.5)
    for call in (lambda m, x: m.topk(x, 1, dim), lambda m, x: m.kthvalue(x, 1, dim)):
        try:
            want = call(torch, theirs)
        except IndexError:
            with pytest.raises(verigrad.ShapeError):
                call(verigrad, ours)
            continue
        _same(call(verigrad, ours), want)


def test_scatter_repeated_positions_keep_the_last_write() -> None:
    """PyTorch on the CPU: the last value along dim wins; every src gets the gradient at its position."""
    ours = verigrad.zeros(1, 4).scatter(1, verigrad.tensor([[0, 0, 1, 1]]), verigrad.tensor([[1.0, 2, 3, 4]]))
    _same(ours, torch.zeros(1, 4).scatter(1, torch.tensor([[0, 0, 1, 1]]), torch.tensor([[1.0, 2, 3, 4]])))
    x = np.arange(15.0).reshape(3, 5) / 7
    src = np.arange(1.0, 13.0).reshape(3, 4) * 0.5
    for dim, index in [
        (0, np.array([[0, 1, 2, 0], [0, 1, 0, 0]])),
        (1, np.array([[3, 3, 0], [1, 1, 1], [4, 0, 4]])),
        (-1, np.array([[2, 2, 2, 2]])),
    ]:
        # an index smaller than src: src read as far as the index reaches
        ours = verigrad.tensor(x).scatter(dim, verigrad.tensor(index), verigrad.tensor(src))
        _same(ours, torch.from_numpy(x).scatter(dim, torch.from_numpy(index), torch.from_numpy(src)))
        reached = src[tuple(slice(0, n) for n in index.shape)]  # PyTorch's backward takes no larger src
        _check(
            {"x": x, "src": reached},
            lambda x, src, dim=dim, index=index: x.scatter(dim, verigrad.tensor(index), src),
            lambda x, src, dim=dim, index=index: x.scatter(dim, torch.from_numpy(index), src),
        )
        _check(
            {"x": x},
            lambda x, dim=dim, index=index: x.scatter(dim, verigrad.tensor(index), value=-1.5),
            lambda x, dim=dim, index=index: x.scatter(dim, torch.from_numpy(index), value=-1.5),
        )
    ints = np.array([[5, 6, 7, 8]])
    _same(
        verigrad.zeros(1, 3, dtype="i64").scatter(1, verigrad.tensor([[2, 0, 2, 0]]), verigrad.tensor(ints)),
        torch.zeros(1, 3, dtype=torch.int64).scatter(1, torch.tensor([[2, 0, 2, 0]]), torch.from_numpy(ints)),
    )


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize(
    ("values", "correction"),
    [
        ([1.0, 2.0, 3.0], 3),
        ([1.0, 2.0, 3.0], 5),
        ([5.0, 5.0], 2),
        ([5.0, 5.0], 3),
        ([4.0], 1),
        ([1.0, 2.0, 3.0], 2.5),
    ],
)
def test_var_and_std_with_no_degrees_of_freedom_left(name, values, correction) -> None:
    """count - correction <= 0: inf where the squares sum to more than 0, NaN where to 0 (not negative)."""
    rows = np.array([values, values[::-1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        want = getattr(torch, name)(torch.from_numpy(rows), dim=1, correction=correction)
        want_mean = getattr(torch, f"{name}_mean")(torch.from_numpy(rows), dim=1, correction=correction)
    ours = verigrad.tensor(rows)
    _same(getattr(verigrad, name)(ours, dim=1, correction=correction), want)
    _same(getattr(ours, name)(1, correction), want)
    _same(getattr(verigrad, f"{name}_mean")(ours, dim=1, correction=correction), want_mean)


def test_bool_maximum_minimum_and_triangles_stay_bool() -> None:
    a, b = np.array([True, False, True, False]), np.array([False, False, True, True])
    (ta, tb), (va, vb) = (torch.from_numpy(a), torch.from_numpy(b)), (verigrad.tensor(a), verigrad.tensor(b))
    for name in ("maximum", "minimum"):
        _same(getattr(verigrad, name)(va, vb), getattr(torch, name)(ta, tb))
        _same(getattr(va, name)(vb), getattr(ta, name)(tb))
        _same(
            getattr(verigrad, name)(va, verigrad.tensor([1, 2, 0, 3])),
            getattr(torch, name)(ta, torch.tensor([1, 2, 0, 3])),
        )
    _same(va.max(vb), ta.max(tb))
    _same(verigrad.where(va, va, vb), torch.where(ta, ta, tb))
    m = np.array([[True, True, False], [True, True, True]])
    for name in ("tril", "triu"):
        for diagonal in (0, 1, -1):
            _same(
                getattr(verigrad, name)(verigrad.tensor(m), diagonal),
                getattr(torch, name)(torch.from_numpy(m), diagonal),
            )
            _same(getattr(verigrad.tensor(m), name)(diagonal), getattr(torch.from_numpy(m), name)(diagonal))


def test_calls_pytorch_refuses_are_refused() -> None:
    with pytest.raises(NotImplementedError):
        torch.linspace(0, 1, 3, dtype=torch.bool)
    with pytest.raises(verigrad.DTypeError, match="bool"):
        verigrad.linspace(0, 1, 3, dtype="bool")
    for name in ("cummax", "cummin"):
        with pytest.raises(IndexError):
            getattr(torch, name)(torch.tensor(1.0), 1)
        with pytest.raises(verigrad.ShapeError, match="out of range"):
            getattr(verigrad, name)(verigrad.tensor(1.0), 1)
    with pytest.raises(TypeError):
        torch.tensor(X).max(dim=(0, 1))
    with pytest.raises(TypeError, match="amax"):
        verigrad.tensor(X).max(dim=(0, 1))
    for dtype in (torch.int64, torch.int32, torch.bool):
        with pytest.raises(RuntimeError):
            torch.frac(torch.tensor([1, 2], dtype=dtype))
    for dtype in ("i64", "i32", "bool"):
        with pytest.raises(verigrad.DTypeError, match="frac takes a floating tensor"):
            verigrad.frac(verigrad.tensor([1, 2], dtype=dtype))


REDUCTIONS = [
    "sum",
    "mean",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "prod",
    "var",
    "std",
    "logsumexp",
    "all",
    "any",
]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dim", [0, -1, 1, -2])
def test_reductions_of_a_0d_tensor_take_dim_0_and_minus_1(name, dim) -> None:
    """PyTorch reduces a 0-d tensor over dim 0 or -1 (to itself) and refuses any other dim."""
    value = np.array(1.5)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # var of one element
            want = getattr(torch, name)(torch.from_numpy(value), dim)
            kept = getattr(torch.from_numpy(value), name)(dim, True)
    except IndexError:
        with pytest.raises(verigrad.ShapeError, match="out of range"):
            getattr(verigrad, name)(verigrad.tensor(value), dim)
        return
    _same(getattr(verigrad, name)(verigrad.tensor(value), dim), want)
    _same(getattr(verigrad.tensor(value), name)(dim, True), kept)
    if want.dtype == torch.float64 and name not in ("var", "std"):
        _check({"x": value}, lambda x: getattr(x, name)(dim), lambda x: getattr(x, name)(dim))


def test_arithmetic_of_two_bools_as_pytorch() -> None:
    """bool + bool and bool * bool stay bool (or, and); a bool with a number promotes; -, %, fmod of two
    bools and -bool are refused, as PyTorch's."""
    a, b = [True, True, False, False], [True, False, True, False]
    ta, tb, va, vb = torch.tensor(a), torch.tensor(b), verigrad.tensor(a), verigrad.tensor(b)
    for fn in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x + True, lambda x, y: x * 1.5,
               lambda x, y: x + 2, lambda x, y: y * x.long()):  # fmt: skip
        want, got = fn(ta, tb), fn(va, vb)
        assert (
            str(want.dtype).removeprefix("torch.")
            == {"bool": "bool", "i64": "int64", "f32": "float32"}[got.dtype.name]
        )
        assert got.numpy().tolist() == want.numpy().tolist()
    for fn in (lambda x, y: x - y, lambda x, y: x % y, lambda x, y: x.fmod(y), lambda x, y: -x):
        with pytest.raises(RuntimeError):
            fn(ta, tb)
        with pytest.raises(verigrad.DTypeError, match="bool"):
            fn(va, vb)


def test_data_is_a_tensor_sharing_the_storage_without_history() -> None:
    """`p.data` writes through to p and is not recorded, as in PyTorch's hand-written SGD steps."""
    start = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    results = []
    for lib in (verigrad, torch):
        p = lib.tensor(start.copy(), requires_grad=True)
        (p * p).sum().backward()
        d = p.data
        assert isinstance(d, lib.Tensor) and not d.requires_grad and d.grad_fn is None
        p.data.add_(p.grad, alpha=-0.5)  # a step of SGD by hand
        p.data.mul_(2.0)
        (p * 3.0).sum().backward()  # still a leaf with its gradient, the writes above not recorded
        results.append((p.detach().numpy().copy(), p.grad.numpy().copy(), p.is_leaf))
        p.data = lib.zeros(4, dtype=lib.float64)  # assigning .data replaces the values and the shape
        assert tuple(p.shape) == (4,) and p.requires_grad
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert results[0][2] and results[1][2]
    with pytest.raises(TypeError):
        verigrad.zeros(2).data = np.zeros(2)  # PyTorch too accepts only a tensor


def test_python_floats_reach_a_wider_dtype_in_one_rounding() -> None:
    """`tensor(0.3, dtype=float64)` and `fill_(0.3)` on f64 hold the double 0.3, not its f32 rounding."""
    for lib in (verigrad, torch):
        x = lib.zeros(3, dtype=lib.float64)
        x.fill_(0.3)
        x[0] = 0.1
        values = [lib.tensor(0.3, dtype=lib.float64).item(), lib.tensor([0.7], dtype=lib.float64).tolist()[0]]
        assert values == [0.3, 0.7] and x.tolist() == [0.1, 0.3, 0.3]
        assert lib.zeros(2, dtype=lib.int64).fill_(1.7).tolist() == [1, 1]
        assert lib.tensor([0.3], dtype=lib.float16).tolist() == [np.float16(0.3)]


def test_in_place_ops_refuse_a_result_of_a_higher_category() -> None:
    """`int_tensor.add_(1.5)` raises in PyTorch (it truncated here); an int result into floats is fine."""
    for lib in (verigrad, torch):
        x = lib.tensor([1, 2])
        for write in (lambda: x.add_(1.5), lambda: x.mul_(0.5), lambda: x.div_(2), lambda: x.sqrt_()):
            with pytest.raises((RuntimeError, TypeError)):
                write()
        with pytest.raises((RuntimeError, TypeError)):
            lib.tensor([True, False]).add_(1)
        x += 1
        y = lib.tensor([1.0, 2.0], dtype=lib.float64)
        y.add_(lib.tensor([1, 1]))
        assert x.tolist() == [2, 3] and y.tolist() == [2.0, 3.0]


def test_view_refuses_what_needs_a_copy() -> None:
    for lib in (verigrad, torch):
        x = lib.arange(12.0).reshape(3, 4)
        for make in (lambda: x.t().view(-1), lambda: x[:, :2].view(6)):
            with pytest.raises(RuntimeError):
                make()
        assert tuple(x.t().view(4, 3).shape) == (4, 3) and tuple(x[1:].view(8).shape) == (8,)
        assert x.view(lib.int32).dtype == lib.int32 and tuple(x.view_as(lib.ones(2, 6)).shape) == (2, 6)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin", "prod"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients_with_fewer_index_rows_than_the_input(reduce, include_self) -> None:
    """The index reaches every row of x while having fewer rows itself (amax's backward failed there)."""
    rng = np.random.default_rng(11)
    x, src, index = rng.standard_normal((3, 4)), rng.standard_normal((2, 3)), np.array([[0, 1, 2], [1, 0, 2]])
    _check(
        {"x": x, "src": src},
        lambda x, src: x.scatter_reduce(0, verigrad.tensor(index), src, reduce, include_self=include_self),
        lambda x, src: x.scatter_reduce(0, torch.tensor(index), src, reduce, include_self=include_self),
    )
