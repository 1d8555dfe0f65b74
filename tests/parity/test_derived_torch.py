"""The PyTorch-named functions written with ops (verigrad/functions/, and the Tensor methods that
are one call into an op): values and gradients against PyTorch's in f64, with the values PyTorch
treats specially (NaN, infinities, ties with the bounds) among the inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

X = np.array([[-2.0, -1.0, -0.5, 0.0], [0.5, 1.0, 1.5, 3.0], [2.0, -3.0, 0.25, -0.75]])
BOUNDS = [(-1.0, 1.0), (None, 0.5), (-0.5, None), (1.0, -1.0)]  # the last: min > max gives max


@pytest.mark.parametrize(("low", "high"), BOUNDS)
def test_clamp(low, high) -> None:
    """The gradient passes on the bounds themselves (x == min), as PyTorch's does."""
    _check({"x": X}, lambda x: x.clamp(low, high), lambda x: x.clamp(low, high))
    _check({"x": X}, lambda x: verigrad.clip(x, min=low, max=high), lambda x: torch.clip(x, low, high))


def test_clamp_with_tensor_bounds_and_nan() -> None:
    # min > max in some places (all go to max), min == max in others (x outside: no gradient at all)
    low, high = np.array([-1.0, 0.0, 0.5, -3.0, 1.0, 0.25]), np.array([[1.0], [2.0], [0.25]])
    _check(
        {"x": np.concatenate([X, X[:, :2] * 3], axis=1), "low": low, "high": high},
        lambda x, low, high: x.clamp(low, high),
        lambda x, low, high: x.clamp(low, high),
    )
    values = np.array([np.nan, np.inf, -np.inf, 2.0])
    ours = verigrad.tensor(values).clamp(-1.0, 1.0).numpy()
    np.testing.assert_array_equal(ours, torch.tensor(values).clamp(-1.0, 1.0).numpy())


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_and_std(axis, correction, keepdim) -> None:
    def theirs(x, op):
        return getattr(torch, op)(x, dim=axis, correction=correction, keepdim=keepdim)

    _check({"x": X}, lambda x: x.var(axis, correction, keepdim), lambda x: theirs(x, "var"))
    _check(
        {"x": X},
        lambda x: verigrad.std(x, dim=axis, correction=correction, keepdim=keepdim),
        lambda x: theirs(x, "std"),
    )


def test_var_unbiased_flag() -> None:
    _check({"x": X}, lambda x: x.var(1, unbiased=False), lambda x: x.var(1, unbiased=False))
    _check({"x": X}, lambda x: x.std(dim=0, unbiased=True), lambda x: x.std(dim=0, unbiased=True))


@pytest.mark.parametrize("axis", [0, 1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp(axis, keepdim) -> None:
    big = X * 300  # exp overflows without the shift
    _check({"x": big}, lambda x: x.logsumexp(axis, keepdim), lambda x: x.logsumexp(axis, keepdim))
    infinite = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 2.0]])
    ours = verigrad.logsumexp(verigrad.tensor(infinite), 1).numpy()
    np.testing.assert_array_equal(ours, torch.logsumexp(torch.tensor(infinite), 1).numpy())


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
def test_argmin_ties_nan_and_extremes(dtype) -> None:
    if dtype.startswith("int"):
        info = np.iinfo(dtype)
        values = np.array([[3, info.min, 5, info.min], [info.max, 7, info.max, 7], [0, 0, -1, 4]], dtype)
    else:
        values = np.array([[3.0, -1.0, -1.0, 2.0], [np.nan, 1.0, -np.inf, 0.0], [0.0, -0.0, 5.0, 1.0]], dtype)
    ours, theirs = verigrad.tensor(values), torch.from_numpy(values)
    for axis in (None, 0, 1):
        for keepdim in (False, True):
            got = ours.argmin(axis, keepdim).numpy()
            want = torch.argmin(theirs, dim=axis, keepdim=keepdim if axis is not None else False).numpy()
            if axis is None and keepdim:
                continue  # PyTorch's keepdim with dim=None keeps every axis; NumPy's argmin has no such form
            np.testing.assert_array_equal(got, want, err_msg=f"axis {axis}")


def test_all_any_isnan_isinf_isfinite() -> None:
    values = np.array([[0.0, np.nan, 1.0], [np.inf, -np.inf, 0.0], [-0.0, 2.0, 3.0]])
    ours, theirs = verigrad.tensor(values), torch.from_numpy(values)
    for name in ("isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(getattr(ours, name)().numpy(), getattr(theirs, name)().numpy())
    for name in ("all", "any"):
        for axis in (None, 0, 1):
            got = getattr(ours, name)(axis).numpy()
            want = getattr(theirs, name)() if axis is None else getattr(theirs, name)(dim=axis)
            np.testing.assert_array_equal(got, want.numpy(), err_msg=f"{name} axis {axis}")
    ints = np.array([[0, 3], [-2, 5]])
    assert verigrad.tensor(ints).isfinite().numpy().all() and not verigrad.tensor(ints).isinf().numpy().any()


@pytest.mark.parametrize("diagonal", [-1, 0, 2])
def test_tril_and_triu(diagonal) -> None:
    batch = np.random.default_rng(1).standard_normal((2, 3, 4))
    _check({"x": batch}, lambda x: x.tril(diagonal), lambda x: x.tril(diagonal))
    _check({"x": batch}, lambda x: verigrad.triu(x, diagonal), lambda x: torch.triu(x, diagonal))


def test_masked_fill_and_where_style_helpers() -> None:
    mask = np.array([True, False, True, False])
    _check(
        {"x": X},
        lambda x: x.masked_fill(verigrad.tensor(mask), -7.5) * 2,
        lambda x: x.masked_fill(torch.from_numpy(mask), -7.5) * 2,
    )
    _check({"x": X + 5}, lambda x: x.reciprocal(), lambda x: x.reciprocal())


@pytest.mark.parametrize("dims", [0, 1, (0, 1)])
def test_flip(dims) -> None:
    _check({"x": X}, lambda x: x.flip(dims), lambda x: x.flip(dims))


@pytest.mark.parametrize("sizes", [(2, 1), (1, 3), (2, 2, 1), (3, 1, 2)])
def test_repeat(sizes) -> None:
    _check({"x": X}, lambda x: x.repeat(*sizes), lambda x: x.repeat(*sizes))


@pytest.mark.parametrize(
    "how", [("split", 2, 1), ("split", [1, 3], 1), ("split", 1, 0), ("chunk", 3, 1), ("chunk", 2, 0)]
)
def test_split_and_chunk(how) -> None:
    name, arg, axis = how

    def ours(x):
        return verigrad.concat(
            *[p * (i + 1) for i, p in enumerate(getattr(x, name)(arg, dim=axis))], axis=axis
        )

    def theirs(x):
        return torch.cat([p * (i + 1) for i, p in enumerate(getattr(x, name)(arg, dim=axis))], dim=axis)

    _check({"x": X}, ours, theirs)
    pieces = getattr(verigrad.tensor(X), name)(arg, axis)
    assert [p.shape for p in pieces] == [
        tuple(p.shape) for p in getattr(torch.from_numpy(X), name)(arg, axis)
    ]


def test_index_select_clone_and_in_place() -> None:
    index = np.array([2, 0, 2])
    _check(
        {"x": X},
        lambda x: x.index_select(0, verigrad.tensor(index)).clone(),
        lambda x: x.index_select(0, torch.from_numpy(index)).clone(),
    )
    ours, theirs = verigrad.tensor(X.copy()), torch.from_numpy(X.copy())
    with verigrad.no_grad():
        ours.mul_(2).add_(1.5, alpha=2).sub_(verigrad.tensor(X), alpha=0.5).div_(3).clamp_(-1, 1)
    theirs.mul_(2).add_(1.5, alpha=2).sub_(torch.from_numpy(X), alpha=0.5).div_(3).clamp_(-1, 1)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-15)


EDGES = np.array([[-30.0, -2.0, -1.0, -0.5, 0.0], [1e-9, 0.5, 1.0, 6.0, 25.0]])  # bounds and thresholds


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (lambda x: F.leaky_relu(x, 0.2), lambda x: torch.nn.functional.leaky_relu(x, 0.2)),
        (lambda x: nn.ELU(alpha=0.7)(x), lambda x: torch.nn.ELU(alpha=0.7)(x)),
        (lambda x: F.softplus(x), lambda x: torch.nn.functional.softplus(x)),
        (
            lambda x: nn.Softplus(beta=2.0, threshold=5.0)(x),
            lambda x: torch.nn.Softplus(beta=2.0, threshold=5.0)(x),
        ),
        (lambda x: F.hardtanh(x, -0.5, 1.0), lambda x: torch.nn.functional.hardtanh(x, -0.5, 1.0)),
        (lambda x: nn.ReLU6()(x), lambda x: torch.nn.ReLU6()(x)),
        (lambda x: nn.Mish()(x), lambda x: torch.nn.Mish()(x)),
        (lambda x: x.expm1() + (x.abs() + 0.25).log1p(), lambda x: x.expm1() + (x.abs() + 0.25).log1p()),
    ],
)
def test_activations_at_their_kinks(ours, theirs) -> None:
    """Values and gradients at the bounds themselves (hardtanh passes none there, leaky_relu the slope
    at 0) and past softplus' threshold."""
    _check({"x": EDGES}, ours, theirs)


def test_one_hot_and_pytorchs_pad_order() -> None:
    classes = np.array([[0, 3], [2, 2]])
    got = F.one_hot(verigrad.tensor(classes), 5).numpy()
    np.testing.assert_array_equal(got, torch.nn.functional.one_hot(torch.from_numpy(classes), 5).numpy())
    np.testing.assert_array_equal(
        F.one_hot(verigrad.tensor(classes)).numpy(),
        torch.nn.functional.one_hot(torch.from_numpy(classes)).numpy(),
    )
    for widths in [(1, 2), (0, 1, 2, 0), (1, 1, 0, 2, 3, 0)]:
        _check(
            {"x": np.random.default_rng(2).standard_normal((2, 3, 4))},
            lambda x, w=widths: F.pad(x, w, value=-1.5),
            lambda x, w=widths: torch.nn.functional.pad(x, w, value=-1.5),
        )


@pytest.mark.parametrize(
    "equation",
    ["bij,bjk->bik", "bhqd,bhkd->bhqk", "ij->", "i,j->ij", "...ij,jk", "ij,jk,il->l", "abc,cd,de->abe"],
)
def test_einsum(equation) -> None:
    shapes = {
        "bij,bjk->bik": [(2, 3, 4), (2, 4, 5)],
        "bhqd,bhkd->bhqk": [(2, 3, 4, 5), (2, 3, 6, 5)],
        "ij->": [(3, 4)],
        "i,j->ij": [(3,), (4,)],
        "...ij,jk": [(2, 7, 3, 4), (4, 5)],
        "ij,jk,il->l": [(2, 3), (3, 4), (2, 5)],
        "abc,cd,de->abe": [(2, 3, 4), (4, 5), (5, 6)],
    }[equation]
    rng = np.random.default_rng(4)
    arrays = {f"x{i}": rng.standard_normal(s) for i, s in enumerate(shapes)}
    _check(
        arrays,
        lambda **xs: verigrad.einsum(equation, *xs.values()),
        lambda **xs: torch.einsum(equation, *xs.values()),
    )


@pytest.mark.parametrize(
    "how",
    ["plain", "causal", "causal square (the attention op)", "bool mask", "float mask", "scale", "3-D"],
)
def test_scaled_dot_product_attention(how) -> None:
    rng = np.random.default_rng(6)
    length = 6 if how == "causal square (the attention op)" else 4
    shape = (2, 3) if how != "3-D" else (2,)
    arrays = {
        "q": rng.standard_normal((*shape, length, 5)),
        "k": rng.standard_normal((*shape, 6, 5)),
        "v": rng.standard_normal((*shape, 6, 7)),
    }
    mask = rng.random((length, 6)) > 0.3
    mask[:, 0] = True  # no row left without a key
    kwargs = {
        "causal": {"is_causal": True},
        "causal square (the attention op)": {"is_causal": True},
        "scale": {"scale": 0.3},
    }.get(how, {})

    def ours(q, k, v):
        extra = {"bool mask": verigrad.tensor(mask), "float mask": verigrad.tensor(np.where(mask, 0.5, -2.0))}
        return F.scaled_dot_product_attention(q, k, v, attn_mask=extra.get(how), **kwargs)

    def theirs(q, k, v):
        extra = {
            "bool mask": torch.from_numpy(mask),
            "float mask": torch.from_numpy(np.where(mask, 0.5, -2.0)),
        }
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=extra.get(how), **kwargs)

    _check(arrays, ours, theirs)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_topk_and_gather(descending) -> None:
    x = np.random.default_rng(8).permutation(24).reshape(4, 6) / 7.0  # distinct: the same order as PyTorch's
    _check({"x": x}, lambda x: x.sort(1, descending)[0] * 2, lambda x: x.sort(1, descending)[0] * 2)
    _check(
        {"x": x},
        lambda x: x.topk(3, dim=0, largest=not descending)[0],
        lambda x: x.topk(3, dim=0, largest=not descending)[0],
    )
    index = np.random.default_rng(9).integers(0, 6, (4, 5))
    _check(
        {"x": x},
        lambda x: x.gather(1, verigrad.tensor(index)),
        lambda x: x.gather(1, torch.from_numpy(index)),
    )
    ours, theirs = (
        verigrad.tensor(x).sort(0, descending=descending),
        torch.from_numpy(x).sort(0, descending=descending),
    )
    np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    np.testing.assert_array_equal(
        verigrad.tensor(x).topk(2).indices.numpy(), torch.from_numpy(x).topk(2).indices.numpy()
    )


@pytest.mark.parametrize(("repeats", "dim"), [(2, 1), (3, 0), (2, None)])
def test_repeat_interleave_and_nearest_upsampling(repeats, dim) -> None:
    _check(
        {"x": X},
        lambda x: x.repeat_interleave(repeats, dim=dim),
        lambda x: x.repeat_interleave(repeats, dim=dim),
    )
    images = np.random.default_rng(3).standard_normal((1, 2, 3, 4))
    _check(
        {"x": images},
        lambda x: nn.Upsample(scale_factor=(repeats, 2))(x),
        lambda x: torch.nn.functional.interpolate(x, scale_factor=(repeats, 2), mode="nearest"),
    )


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_through_zeros(dim) -> None:
    """Running products with no zero, one, two and a zero first in a row: values and the first gradient
    equal PyTorch's (its backward treats the first zero of a row apart, as verigrad's)."""
    x = np.random.default_rng(11).uniform(0.5, 1.5, (4, 6))
    x[1, 2] = x[2, 1] = x[2, 4] = x[3, 0] = x[3, 1] = 0.0
    _check({"x": x}, lambda x: x.cumprod(dim), lambda x: x.cumprod(dim))
    _check({"x": x}, lambda x: verigrad.cumprod(x, dim=dim), lambda x: torch.cumprod(x, dim=dim))
    counts = np.array([[1, 2, 0, 3]])
    assert verigrad.tensor(counts).cumprod(1).numpy().tolist() == [[1, 2, 0, 0]]


ACTIVATIONS = [
    ("hardsigmoid", {}),
    ("hardswish", {}),
    ("selu", {}),
    ("celu", {"alpha": 0.5}),  # PyTorch's celu backward rounds alpha to f32 (0.7 would be off by 3e-8)
    ("softsign", {}),
    ("logsigmoid", {}),
    ("glu", {"dim": 1}),
]


@pytest.mark.parametrize(("name", "settings"), ACTIVATIONS)
def test_more_activations(name, settings) -> None:
    """Values and gradients of F.<name> and of its module, as PyTorch's (inputs away from the kinks)."""
    x = np.random.default_rng(12).uniform(-6, 6, (3, 8))
    x[np.abs(np.abs(x) - 3) < 0.05] += 0.2  # hardsigmoid's and hardswish's kinks at +-3
    theirs = getattr(torch.nn.functional, name)
    if name in ("hardsigmoid", "hardswish"):
        _hard_activation_gradient(name, x)
        return
    _check({"x": x}, lambda x: getattr(F, name)(x, **settings), lambda x: theirs(x, **settings))
    module = {"hardsigmoid": "Hardsigmoid", "hardswish": "Hardswish", "selu": "SELU", "celu": "CELU"}
    module |= {"softsign": "Softsign", "logsigmoid": "LogSigmoid", "glu": "GLU"}
    ours_m, theirs_m = getattr(nn, module[name])(**settings), getattr(torch.nn, module[name])(**settings)
    _check({"x": x}, lambda x: ours_m(x), lambda x: theirs_m(x))


def _hard_activation_gradient(name: str, x: np.ndarray) -> None:
    """PyTorch's hardsigmoid and hardswish backward multiply by 1/6 rounded to f32 (3e-8 off), so their
    gradients are held to the exact derivative, and to PyTorch's within that rounding; values as PyTorch's."""
    ours = verigrad.from_numpy(x.copy()).requires_grad_(True)
    theirs = torch.from_numpy(x.copy()).requires_grad_(True)
    out, expected = getattr(F, name)(ours), getattr(torch.nn.functional, name)(theirs)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    out.sum().backward()
    expected.sum().backward()
    inside = np.abs(x) < 3
    exact = np.where(inside, 1 / 6, 0.0) if name == "hardsigmoid" else np.where(inside, x / 3 + 0.5, x >= 3)
    np.testing.assert_allclose(ours.grad.numpy(), exact, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=4e-8, atol=1e-12)


@pytest.mark.parametrize("channels", [1, 4])
def test_prelu(channels) -> None:
    """nn.PReLU with one slope or one per channel: values, and the gradients of input and slopes."""
    x, w = np.random.default_rng(13).standard_normal((2, 4, 3)), np.linspace(0.1, 0.4, channels)
    _check({"x": x, "w": w}, lambda x, w: F.prelu(x, w), lambda x, w: torch.nn.functional.prelu(x, w))
    ours, theirs = nn.PReLU(channels, dtype="f64"), torch.nn.PReLU(channels, dtype=torch.float64)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    np.testing.assert_array_equal(ours.weight.numpy(), theirs.weight.detach().numpy())  # init 0.25


def test_pointwise_helpers_and_dimension_moves() -> None:
    """lerp, addcmul, addcdiv, frac, deg2rad, rad2deg, movedim, swapaxes and unflatten as PyTorch's."""
    rng = np.random.default_rng(14)
    a, b, c = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4)), rng.uniform(1, 2, (2, 3, 4))
    three = {"a": a * 3, "b": b, "c": c}
    _check(three, lambda a, b, c: verigrad.lerp(a, b, c), lambda a, b, c: torch.lerp(a, b, c))
    _check(three, lambda a, b, c: a.addcmul(b, c, value=0.5), lambda a, b, c: a.addcmul(b, c, value=0.5))
    _check(
        three,
        lambda a, b, c: verigrad.addcdiv(a, b, c, value=-2),
        lambda a, b, c: torch.addcdiv(a, b, c, value=-2),
    )
    two = {"a": a * 3, "b": b}
    for same in (
        lambda a, b: a.frac() * b,
        lambda a, b: a.deg2rad() + b.rad2deg(),
        lambda a, b: a.movedim((0, 2), (2, 0)) * 2 + b.movedim(1, 0).movedim(0, 1).movedim((0, 2), (2, 0)),
        lambda a, b: a.movedim(0, -1) + b.movedim(0, -1),
        lambda a, b: a.swapaxes(0, 2) * 3 + b.swapdims(2, 0),
        lambda a, b: a.unflatten(2, (2, -1)) - b.unflatten(-1, (-1, 2)),
    ):
        _check(two, same, same)
    with pytest.raises(ValueError, match="movedim"):
        verigrad.tensor(a).movedim((0, 1), 2)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_order_statistics(dim) -> None:
    """kthvalue, median and nanmedian: values (and their gradients) and indices as PyTorch's, NaN rows
    included (median gives NaN there, nanmedian skips it)."""
    x = np.random.default_rng(15).permutation(np.arange(20.0)).reshape(4, 5) / 3
    with_nan = x.copy()
    with_nan[1, 2] = with_nan[3, 0] = np.nan
    ours_t, theirs_t = verigrad.tensor(with_nan), torch.from_numpy(with_nan)
    for name in ("median", "nanmedian"):
        if dim is None:
            np.testing.assert_array_equal(getattr(ours_t, name)().numpy(), getattr(theirs_t, name)().numpy())
            _check({"x": x}, lambda x, n=name: getattr(x, n)() * 2, lambda x, n=name: getattr(x, n)() * 2)
            continue
        ours, theirs = getattr(ours_t, name)(dim), getattr(theirs_t, name)(dim)
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
        _check(
            {"x": x}, lambda x, n=name: getattr(x, n)(dim).values, lambda x, n=name: getattr(x, n)(dim).values
        )
    if dim is not None:
        for k in (1, 3):
            ours, theirs = (
                verigrad.kthvalue(ours_t, k, dim, keepdim=True),
                torch.kthvalue(theirs_t, k, dim, keepdim=True),
            )
            np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
            np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
        _check({"x": x}, lambda x: x.kthvalue(2, dim).values, lambda x: x.kthvalue(2, dim).values)
        with pytest.raises(ValueError, match="kthvalue"):
            verigrad.tensor(x).kthvalue(9, dim)


def test_kron_rot90_diff_cross() -> None:
    rng = np.random.default_rng(16)
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    _check({"a": a, "b": b}, lambda a, b: verigrad.kron(a, b), lambda a, b: torch.kron(a, b))
    _check({"a": a, "b": b[0]}, lambda a, b: a.kron(b), lambda a, b: a.kron(b))
    for k, dims in [(1, (0, 1)), (2, (1, 0)), (3, (0, -1)), (-1, (0, 1)), (4, (0, 1))]:
        _check({"a": a}, lambda a: verigrad.rot90(a, k, dims) * 2, lambda a: torch.rot90(a, k, dims) * 2)
    _check({"c": c}, lambda c: c.diff(), lambda c: c.diff())
    _check(
        {"c": c, "p": c[:, :1], "q": c[:, :2]},
        lambda c, p, q: verigrad.diff(c, 2, 1, prepend=p, append=q),
        lambda c, p, q: torch.diff(c, 2, 1, prepend=p, append=q),
    )
    d = rng.standard_normal((4, 3))
    _check({"c": c, "d": d}, lambda c, d: verigrad.cross(c, d), lambda c, d: torch.linalg.cross(c, d))
    _check({"c": c.T, "d": d.T}, lambda c, d: c.cross(d, dim=0), lambda c, d: torch.linalg.cross(c, d, dim=0))
    with pytest.raises(ValueError, match="3 components"):
        verigrad.cross(verigrad.tensor(b), verigrad.tensor(b))


def test_counting_functions() -> None:
    """argwhere, bincount, histc and unique_consecutive (eager: their sizes depend on the values)."""
    x = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    np.testing.assert_array_equal(
        verigrad.bincount(verigrad.tensor(x)).numpy(), torch.bincount(torch.tensor(x)).numpy()
    )
    w = np.linspace(0, 1, 8)
    ours, theirs = (
        verigrad.bincount(verigrad.tensor(x), verigrad.tensor(w), 6),
        torch.bincount(torch.tensor(x), torch.tensor(w), 6),
    )
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ours.dtype.name == "f64"
    y = np.random.default_rng(17).standard_normal(200).astype(np.float32)
    for args in [(7,), (5, -1.0, 1.0), (3, 2.0, 2.0)]:
        np.testing.assert_array_equal(
            verigrad.histc(verigrad.tensor(y), *args).numpy(), torch.histc(torch.tensor(y), *args).numpy()
        )
    m = np.array([[1, 2], [1, 2], [3, 4], [1, 2]])
    for value, kw in [(x, {}), (m, {"dim": 0}), (m.T.copy(), {"dim": 1})]:
        ours = verigrad.unique_consecutive(verigrad.tensor(value), True, True, **kw)
        theirs = torch.unique_consecutive(torch.tensor(value), True, True, **kw)
        for u, t in zip(ours, theirs):
            np.testing.assert_array_equal(u.numpy(), t.numpy())
    np.testing.assert_array_equal(
        verigrad.argwhere(verigrad.tensor(m) > 1).numpy(), torch.argwhere(torch.tensor(m) > 1).numpy()
    )
    with pytest.raises(ValueError, match="non-negative integers"):
        verigrad.bincount(verigrad.tensor([-1, 2]))


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_running_extremes(name) -> None:
    """cummax/cummin: values, indices (ties and NaN take over, as PyTorch's) and the values' gradients."""
    x = np.array([[1.0, 3.0, 3.0, 2.0, 5.0, np.nan, 7.0, np.nan], [2.0, 1.0, 1.0, 0.0, 4.0, 0.0, -1.0, 6.0]])
    for dim in (0, 1, -1):
        ours, theirs = getattr(verigrad.tensor(x), name)(dim), getattr(torch.from_numpy(x), name)(dim)
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    y = np.random.default_rng(18).standard_normal((4, 6))
    _check(
        {"y": y}, lambda y: getattr(verigrad, name)(y, 1).values, lambda y: getattr(torch, name)(y, 1).values
    )
    assert getattr(verigrad.tensor(2.0), name)(0).indices.item() == 0


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_ties_zeros_and_a_smaller_index(reduce, include_self) -> None:
    """Values and the gradients of input and src as PyTorch's where several src values tie for the
    maximum (or minimum) with the input's, where some are zero (prod: one zero at a position, two, and
    the input's), and with an index smaller than src and than the input off the axis."""
    x = np.array([[2.0, 1.0, 0.0, 5.0], [3.0, 0.0, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    src = np.array([[2.0, 2.0, 0.0, 0.5, 7.0], [3.0, 0.0, 0.0, 3.0, 1.0]])
    idx = np.array([[0, 0, 2, 1], [1, 1, 2, 1]])  # two rows, four columns: smaller than both
    ours = verigrad.tensor(x).scatter_reduce(
        1, verigrad.tensor(idx), verigrad.tensor(src), reduce, include_self=include_self
    )
    theirs = torch.from_numpy(x).scatter_reduce(
        1, torch.from_numpy(idx), torch.from_numpy(src), reduce, include_self=include_self
    )
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    src = src[:, :4]  # PyTorch differentiates a src shaped as the index only
    _check(
        {"x": x, "src": src},
        lambda x, src: x.scatter_reduce(1, verigrad.tensor(idx), src, reduce, include_self=include_self),
        lambda x, src: x.scatter_reduce(1, torch.from_numpy(idx), src, reduce, include_self=include_self),
    )
    ints = verigrad.tensor(np.array([[5, 1, 2]])).scatter_reduce(
        1,
        verigrad.tensor(np.array([[0, 0]])),
        verigrad.tensor(np.array([[4, 7]])),
        reduce,
        include_self=include_self,
    )
    expected = torch.tensor([[5, 1, 2]]).scatter_reduce(
        1, torch.tensor([[0, 0]]), torch.tensor([[4, 7]]), reduce, include_self=include_self
    )
    np.testing.assert_array_equal(ints.numpy(), expected.numpy())


def test_index_fill_sum_dtype_grad_fn_and_no_cuda() -> None:
    x = np.arange(12.0).reshape(3, 4)
    _check(
        {"x": x},
        lambda x: x.index_fill(1, verigrad.tensor([0, 2]), -1.5) * x,
        lambda x: x.index_fill(1, torch.tensor([0, 2]), -1.5) * x,
    )
    filled = verigrad.tensor(x)
    filled.index_fill_(0, [2], 7.0)
    np.testing.assert_array_equal(
        filled.numpy(), torch.tensor(x).index_fill(0, torch.tensor([2]), 7.0).numpy()
    )
    f32 = verigrad.tensor(x.astype(np.float32))
    assert f32.sum(dtype=verigrad.f64).dtype.name == "f64" and f32.mean(1, dtype="f64").dtype.name == "f64"
    leaf = verigrad.tensor([1.0], requires_grad=True)
    assert leaf.grad_fn is None and (leaf * 2).grad_fn is not None
    for thing in (leaf, nn.Linear(2, 2)):
        assert thing.cpu() is thing
        with pytest.raises(ValueError, match="no 'cuda' device"):
            thing.cuda()
