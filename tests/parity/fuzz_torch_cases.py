"""The differential fuzzer's corpus: each case is a call written once for both libraries (`t` is torch or
verigrad, `F` its nn.functional), the operand kinds it draws, and the dtypes those may take. A kind is a
shape family; the values are drawn from a pool with -0.0, inf, NaN and ties (`draw`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

FLOATS = ("float32", "float64")
# where PyTorch returns either zero of a tie between -0.0 and +0.0, depending on its vector path and dtype
TIES = frozenset(
    {
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "max",
        "min",
        "amax",
        "amin",
        "median",
        "nanmedian",
        "aminmax",
        "scatter_amax",
        "cummax",
        "cummin",
        "mode",
        "kthvalue",
        "topk",
        "sort",
    }
)
NUMERIC = ("float32", "float64", "int64")
ALL = ("float32", "float64", "int64", "bool")
INTS = ("int64", "bool")

# shape families: a case's operands drawn from the same family broadcast against each other
SHAPES = {
    "any": [(), (0,), (4,), (2, 3), (3, 1, 2)],
    "nd": [(4,), (2, 3), (3, 1, 2)],  # at least one dimension
    "mat": [(2, 3), (3, 3), (0, 3)],
}
BROADCAST = [((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2)), ((3,), ()), ((0, 2), (2,)), ((2, 3), (2, 3))]


@dataclass(frozen=True)
class Case:
    """One call: `call(t, *operands)`; `kind`: 'unary' (one operand of a SHAPES family), 'binary' (two
    that broadcast); `exact`: compare bits, else within a tolerance; `zero_signs`: compare the signs of
    zeros too (not where PyTorch's own choice between a tied -0.0 and +0.0 depends on its vector path)."""

    name: str
    call: Callable[..., Any]
    kind: str = "unary"
    dtypes: tuple[str, ...] = FLOATS
    shapes: str = "any"
    exact: bool = True
    zero_signs: bool = True


def draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values with ties, signed zeros and, for floats, inf and NaN now and then."""
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype == "int64":
        return np.asarray(rng.integers(-4, 5, size=shape), dtype=np.int64)
    pool = np.array([-0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 2.0, -1.5, np.inf, -np.inf, np.nan], dtype=dtype)
    values = rng.choice(pool, size=shape) if rng.random() < 0.5 else rng.normal(size=shape) * 3
    return np.asarray(values, dtype=dtype)


def _u(name: str, dtypes: tuple[str, ...] = FLOATS, exact: bool = True, **kw: Any) -> Case:
    """torch.<name>(x) and x.<name>() both."""
    return Case(name, lambda t, x: getattr(t, name)(x, **kw), dtypes=dtypes, exact=exact)


def _b(name: str, dtypes: tuple[str, ...] = ALL, exact: bool = True, label: str = "", **kw: Any) -> Case:
    call = lambda t, x, y: getattr(t, name)(x, y, **kw)
    return Case(label or name, call, kind="binary", dtypes=dtypes, exact=exact, zero_signs=name not in TIES)


def _m(
    label: str, fn: Callable[..., Any], dtypes: tuple[str, ...] = ALL, shapes: str = "any", **kw: Any
) -> Case:
    """A Tensor method or a call with numbers: fn(t, x)."""
    return Case(label, fn, dtypes=dtypes, shapes=shapes, **kw)


UNARY_EXACT = (
    [
        _u(n, ALL)
        for n in (
            "abs",
            "neg",
            "sign",
            "isnan",
            "isinf",
            "isfinite",
            "isposinf",
            "isneginf",
            "signbit",
            "square",
        )
    ]
    + [_u(n, NUMERIC) for n in ("floor", "ceil", "round", "trunc", "relu", "positive", "sgn")]
    + [_u(n, FLOATS) for n in ("frac", "reciprocal", "nan_to_num", "deg2rad", "rad2deg")]
    + [
        _u("logical_not", ALL),
        _u("bitwise_not", INTS),
        Case("round_decimals", lambda t, x: t.round(x, decimals=1)),
        Case("nan_to_num_values", lambda t, x: t.nan_to_num(x, nan=1.5, posinf=2.0)),
        _u("clone", ALL),
        _u("fix", NUMERIC),
    ]
)
UNARY_ROUNDED = [
    _u(n, ALL, exact=False)
    for n in (
        "exp",
        "expm1",
        "log",
        "log1p",
        "log2",
        "log10",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "tan",
        "tanh",
        "sigmoid",
        "erf",
        "erfc",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "exp2",
        "lgamma",
        "digamma",
        "erfinv",
        "i0",
        "sinc",
        "logit",
        "angle",
    )
]
BINARY = (
    [
        _b(n)
        for n in (
            "add",
            "sub",
            "mul",
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
            "maximum",
            "minimum",
            "logical_and",
            "logical_or",
            "logical_xor",
        )
    ]
    + [_b(n, NUMERIC) for n in ("floor_divide", "remainder", "fmod", "fmax", "fmin", "copysign")]
    + [
        _b("div", ALL, exact=False),
        _b("true_divide", ALL, exact=False),
        _b("pow", NUMERIC, exact=False),
        _b("atan2", NUMERIC, exact=False),
        _b("hypot", FLOATS, exact=False),
        _b("xlogy", NUMERIC, exact=False),
        _b("logaddexp", FLOATS, exact=False),
        _b("nextafter", FLOATS),
        _b("bitwise_and", INTS),
        _b("bitwise_or", INTS),
        _b("bitwise_xor", INTS),
        _b("gcd", ("int64",)),
        _b("lcm", ("int64",)),
        _b("div", NUMERIC, label="div_floor", rounding_mode="floor"),
        _b("div", NUMERIC, label="div_trunc", rounding_mode="trunc"),
        _b("add", ALL, label="add_alpha", exact=False, alpha=2),  # PyTorch fuses alpha's multiply-add
        _b("sub", NUMERIC, label="sub_alpha", exact=False, alpha=3),
        _b("isclose", FLOATS),
        _b("dist", FLOATS, exact=False),
    ]
)

SCALARS = [  # type promotion with Python numbers, the number on either side
    _m(f"{op}_{label}", (lambda op, s: lambda t, x: getattr(t, op)(x, s))(op, s), exact=op != "pow")
    for op in ("add", "sub", "mul", "div", "remainder", "floor_divide", "pow", "maximum", "eq", "lt", "fmod")
    for label, s in (("int", 2), ("float", 2.5), ("bool", True), ("negint", -3), ("zero", 0))
    if op != "maximum"
] + [
    _m("rsub_float", lambda t, x: 2.5 - x),
    _m("rtruediv_int", lambda t, x: 3 / x, exact=False),
    _m("rpow_float", lambda t, x: 2.0**x, exact=False),
    _m("rfloordiv", lambda t, x: 7 // x),
    _m("rmod_float", lambda t, x: 5.5 % x),
    _m("rmod_int", lambda t, x: -7 % x),
    _m("iadd_float", lambda t, x: x.clone().__iadd__(1.5)),
    _m("and_true", lambda t, x: x & True, dtypes=INTS),
]

CLAMPS = [
    _m(f"clamp_{i}", fn)
    for i, fn in enumerate(
        [
            lambda t, x: t.clamp(x, 0.5),
            lambda t, x: t.clamp(x, max=1),
            lambda t, x: t.clamp(x, -1, 2.5),
            lambda t, x: t.clamp(x, 2, -1),
            lambda t, x: t.clip(x, min=0),
            lambda t, x: x.clamp(min=-0.0),
            lambda t, x: t.clamp(x, t.tensor(0.5), t.tensor(1.0)),
            lambda t, x: x.clamp_min(1).clamp_max(2.5),
        ]
    )
]


def _reductions() -> list[Case]:
    out = []
    for name, dtypes in (
        ("sum", ALL),
        ("prod", ALL),
        ("mean", FLOATS),
        ("nansum", FLOATS),
        ("nanmean", FLOATS),
        ("amax", ALL),
        ("amin", ALL),
        ("logsumexp", FLOATS),
        ("count_nonzero", ALL),
        ("std", FLOATS),
        ("var", FLOATS),
        ("all", ALL),
        ("any", ALL),
        ("argmax", NUMERIC),
        ("argmin", NUMERIC),
        ("cumsum", ALL),
        ("cumprod", ALL),
        ("logcumsumexp", FLOATS),
        ("norm", FLOATS),
    ):
        exact = name not in (
            "mean",
            "nanmean",
            "logsumexp",
            "std",
            "var",
            "logcumsumexp",
            "norm",
            "sum",
            "nansum",
            "prod",
            "cumsum",
            "cumprod",
        )
        calls = {
            "all": lambda t, x, n=name: getattr(t, n)(x),
            "d0": lambda t, x, n=name: getattr(t, n)(x, 0),
            "dneg": lambda t, x, n=name: getattr(t, n)(x, dim=-1),
            "keep": lambda t, x, n=name: getattr(t, n)(x, dim=-1, keepdim=True),
            "method": lambda t, x, n=name: getattr(x, n)(-1),
        }
        if name in ("cumsum", "cumprod", "logcumsumexp", "count_nonzero", "norm"):
            calls.pop("keep")
        if name in ("cumsum", "cumprod", "logcumsumexp", "logsumexp"):
            calls.pop("all")  # PyTorch's take a dim
        if name == "norm":
            calls.pop("method")  # x.norm(-1) is p = -1
        for label, fn in calls.items():
            out.append(_m(f"{name}_{label}", fn, dtypes=dtypes, exact=exact, zero_signs=name not in TIES))
    for name in ("sum", "prod", "cumsum", "mean"):
        out.append(
            _m(
                f"{name}_dtype",
                lambda t, x, n=name: getattr(t, n)(x, -1, dtype=t.float64),
                NUMERIC,
                exact=False,
            )
        )
    out += [
        *[
            _m(n, fn, d, zero_signs=False)
            for n, fn, d in [
                ("max_all", lambda t, x: t.max(x), ALL),
                ("min_dim", lambda t, x: t.min(x, dim=-1), ALL),
                ("max_keep", lambda t, x: x.max(0, keepdim=True), ALL),
                ("median", lambda t, x: t.median(x), NUMERIC),
                ("median_dim", lambda t, x: t.median(x, -1), NUMERIC),
                ("nanmedian", lambda t, x: t.nanmedian(x), ALL),
                ("mode", lambda t, x: t.mode(x, -1), NUMERIC),
                ("cummax", lambda t, x: t.cummax(x, 0), NUMERIC),
                ("cummin", lambda t, x: t.cummin(x, -1), NUMERIC),
                ("aminmax", lambda t, x: t.aminmax(x), NUMERIC),
            ]
        ],
        _m("var_corr0", lambda t, x: t.var(x, 0, correction=0), FLOATS, exact=False),
        _m("std_unbiased", lambda t, x: x.std(unbiased=False), FLOATS, exact=False),
    ]
    return out


def _idx(t: Any, x: Any, high: int, size: tuple[int, ...]) -> Any:
    """Indices in [0, high) (PyTorch's rules decide whether an index past an empty dimension is refused)."""
    rng = np.random.default_rng(int(np.prod(size)) + high)
    return t.from_numpy(rng.integers(0, max(high, 1), size=size).astype(np.int64))


INDEXING = [
    _m("gather", lambda t, x: t.gather(x, -1, _idx(t, x, x.shape[-1], (*x.shape[:-1], 2))), shapes="nd"),
    _m("index_select", lambda t, x: t.index_select(x, 0, _idx(t, x, x.shape[0], (3,))), shapes="nd"),
    _m("take", lambda t, x: t.take(x, _idx(t, x, x.numel(), (2, 2))), shapes="nd"),
    _m("scatter", lambda t, x: t.zeros_like(x).scatter(0, _idx(t, x, x.shape[0], x.shape), x), shapes="nd"),
    _m(
        "scatter_add",
        lambda t, x: t.ones_like(x).scatter_add(-1, _idx(t, x, x.shape[-1], x.shape), x),
        NUMERIC,
        shapes="nd",
        exact=False,
    ),  # verigrad sums in f64 and rounds once
    _m(
        "scatter_amax",
        lambda t, x: t.zeros_like(x).scatter_reduce(0, _idx(t, x, x.shape[0], x.shape), x, "amax"),
        NUMERIC,
        shapes="nd",
        zero_signs=False,
    ),
    _m(
        "scatter_mean",
        lambda t, x: t.ones_like(x).scatter_reduce(
            0, _idx(t, x, x.shape[0], x.shape), x, "mean", include_self=False
        ),
        FLOATS,
        shapes="nd",
        exact=False,
    ),
    _m(
        "index_add",
        lambda t, x: x.index_add(0, _idx(t, x, x.shape[0], (x.shape[0],)), x, alpha=2),
        NUMERIC,
        shapes="nd",
        exact=False,
    ),
    _m("index_fill", lambda t, x: x.index_fill(-1, _idx(t, x, x.shape[-1], (1,)), -1), NUMERIC, shapes="nd"),
    _m("masked_fill", lambda t, x: x.masked_fill(x > 0, 7), NUMERIC),
    _m("masked_fill_nan", lambda t, x: x.masked_fill(x != x, 0.5), FLOATS),
    _m("masked_select", lambda t, x: t.masked_select(x, x < 1), NUMERIC),
    _m("where", lambda t, x: t.where(x > 0, x, -x), NUMERIC),
    _m("where_number", lambda t, x: t.where(x > 0, x, 0.5)),
    _m("where_ints", lambda t, x: t.where(x > 0, 1, 0), NUMERIC),
    _m("where_one", lambda t, x: t.where(x)),
    _m("nonzero", lambda t, x: t.nonzero(x)),
    _m("getitem_bool", lambda t, x: x[x > 0], NUMERIC),
    _m("getitem_neg", lambda t, x: x[..., -1], shapes="nd"),
    _m("getitem_list", lambda t, x: x[[0, -1]], shapes="nd"),
    _m("take_along_dim", lambda t, x: t.take_along_dim(x, t.argsort(x, -1), -1), NUMERIC, shapes="nd"),
]


def _found(x: Any, dim: int, result: Any) -> tuple[Any, Any]:
    """topk's or kthvalue's values, and x's values at its indices: which of tied entries PyTorch's
    selection returns is not documented (and not verigrad's), that the indices point at them is."""
    return result.values, x.gather(dim, result.indices)


ORDERING = [
    _m("sort", lambda t, x: t.sort(x, dim=-1, stable=True), NUMERIC),
    _m("sort_desc", lambda t, x: t.sort(x, dim=0, descending=True, stable=True), NUMERIC),
    _m("argsort", lambda t, x: t.argsort(x, dim=-1, stable=True), NUMERIC),
    _m("sort_plain", lambda t, x: x.sort(0).values, NUMERIC),
    _m("msort", lambda t, x: t.msort(x), NUMERIC),
    _m(
        "topk",
        lambda t, x: _found(x, -1, t.topk(x, min(2, x.shape[-1]), -1)),
        NUMERIC,
        shapes="nd",
        zero_signs=False,
    ),
    _m(
        "topk_small",
        lambda t, x: _found(x, 0, x.topk(1, 0, largest=False)),
        NUMERIC,
        shapes="nd",
        zero_signs=False,
    ),
    _m(
        "kthvalue",
        lambda t, x: _found(x, -1, t.kthvalue(x, 1, -1, keepdim=True)),
        NUMERIC,
        shapes="nd",
        zero_signs=False,
    ),
    _m("unique", lambda t, x: t.unique(x, return_inverse=True, return_counts=True), zero_signs=False),
    # (slices holding NaN: PyTorch's order follows its sort's internals)
    _m("unique_dim", lambda t, x: t.unique(t.nan_to_num(x), dim=0), shapes="nd", zero_signs=False),
    _m("unique_consecutive", lambda t, x: t.unique_consecutive(x, return_counts=True), zero_signs=False),
    _m("searchsorted", lambda t, x: t.searchsorted(t.tensor([-1.0, 0.0, 2.0], dtype=x.dtype), x), FLOATS),
    _m("bucketize", lambda t, x: t.bucketize(x, t.tensor([-1.0, 0.0, 2.0]), right=True), FLOATS),
    _m("argmax_ties", lambda t, x: t.argmax(x * 0), NUMERIC),
]

SHAPING = [
    _m("flip", lambda t, x: t.flip(x, (-1,)), shapes="nd"),
    _m("roll", lambda t, x: t.roll(x, -1, 0), shapes="nd"),
    _m("transpose", lambda t, x: x.transpose(0, -1), shapes="nd"),
    _m("flatten", lambda t, x: t.flatten(x)),
    _m("squeeze", lambda t, x: x.squeeze()),
    _m("unsqueeze", lambda t, x: x.unsqueeze(-1)),
    _m("cat", lambda t, x: t.cat([x, x], -1), shapes="nd"),
    _m("stack", lambda t, x: t.stack([x, x], -1)),
    _m("tril", lambda t, x: t.tril(x, -1), shapes="mat"),
    _m("triu", lambda t, x: x.triu(1), shapes="mat"),
    _m("diff", lambda t, x: t.diff(x, dim=-1), NUMERIC, shapes="nd"),
    _m("repeat_interleave", lambda t, x: x.repeat_interleave(2, dim=0), shapes="nd"),
    _m("chunk", lambda t, x: x.chunk(2, -1), shapes="nd"),
    _m("split", lambda t, x: t.split(x, 1, 0), shapes="nd"),
    _m("to_int", lambda t, x: x.to(t.int64), FLOATS),
    _m("to_bool", lambda t, x: x.bool()),
    _m("to_float", lambda t, x: x.float()),
    _m("type_as", lambda t, x: x.type_as(t.tensor([1]))),
    _m("item_sum", lambda t, x: x.sum().item(), NUMERIC, exact=False),
    _m("tolist", lambda t, x: t.tensor(x.tolist())),
]


def probability(t: Any, x: Any) -> Any:
    """The logistic function of x computed once in NumPy (double, rounded to x's dtype), so that both
    libraries get the same probabilities: PyTorch's f32 sigmoid is an ulp off near 1, and a loss's
    log(1 - p) turns that ulp into a relative 1e-5."""
    values = x.numpy()
    return t.from_numpy((1 / (1 + np.exp(-values.astype(np.float64)))).astype(values.dtype))


def _loss(name: str, reduction: str, label: str = "", **kw: Any) -> Case:
    def call(t: Any, x: Any, y: Any) -> Any:
        F = t.nn.functional
        if name == "binary_cross_entropy":
            return F.binary_cross_entropy(probability(t, x), probability(t, y), reduction=reduction, **kw)
        if name == "binary_cross_entropy_with_logits":  # probabilities as targets
            return F.binary_cross_entropy_with_logits(x, probability(t, y), reduction=reduction, **kw)
        return getattr(F, name)(x, y, reduction=reduction, **kw)

    return Case(label or f"{name}_{reduction}", call, kind="binary", exact=False)


LOSSES = [
    _loss(n, r)
    for n in (
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "soft_margin_loss",
        "kl_div",
    )
    for r in ("none", "mean", "sum")
] + [
    _loss("smooth_l1_loss", "mean", label="smooth_l1_loss_beta", beta=0.5),
    _loss("kl_div", "batchmean", log_target=True),
]


def _cross_entropy(t: Any, x: Any, **kw: Any) -> Any:
    target = _idx(t, x, x.shape[-1], x.shape[:1])
    return t.nn.functional.cross_entropy(x, target, **kw)


CLASSIFICATION = [
    _m(
        f"cross_entropy_{i}",
        (lambda kw: lambda t, x: _cross_entropy(t, x, **kw))(kw),
        FLOATS,
        shapes="mat",
        exact=False,
    )
    for i, kw in enumerate(
        [
            {},
            {"reduction": "sum"},
            {"reduction": "none"},
            {"label_smoothing": 0.1},
            {"ignore_index": 0},
            {"ignore_index": 1, "reduction": "sum"},
        ]
    )
] + [
    _m(
        "nll_loss",
        lambda t, x: t.nn.functional.nll_loss(x, _idx(t, x, x.shape[-1], x.shape[:1])),
        FLOATS,
        shapes="mat",
        exact=False,
    ),
    _m("softmax", lambda t, x: t.softmax(x, -1), FLOATS, shapes="nd", exact=False),
    _m(
        "log_softmax_dtype",
        lambda t, x: t.log_softmax(x, 0, dtype=t.float64),
        FLOATS,
        shapes="nd",
        exact=False,
    ),
]

CASES: list[Case] = (
    UNARY_EXACT
    + UNARY_ROUNDED
    + BINARY
    + SCALARS
    + CLAMPS
    + _reductions()
    + INDEXING
    + ORDERING
    + SHAPING
    + LOSSES
    + CLASSIFICATION
)
