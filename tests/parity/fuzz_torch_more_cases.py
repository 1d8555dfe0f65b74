"""More of the differential fuzzer's corpus (fuzz_torch_cases.py has the Case record and the first part):
type promotion between tensors of two dtypes and with 0-d tensors, nn.functional's activations and
normalizations, products, factories' dtype rules, in-place methods and `out=`."""

from __future__ import annotations

from typing import Any

from fuzz_torch_cases import ALL, FLOATS, NUMERIC, TIES, Case, _idx, probability

# dtype pairs ("a+b": the first operand's, the second's) for the mixed-dtype binary cases
PAIRS = (
    "int64+float32",
    "bool+float64",
    "float32+float64",
    "int64+bool",
    "bool+int64",
    "float64+int64",
    "float32+bool",
)


def _mixed(name: str, exact: bool = True, **kw: Any) -> Case:
    def call(t: Any, x: Any, y: Any) -> Any:
        return getattr(t, name)(x, y, **kw)

    return Case(f"mixed_{name}", call, kind="binary", dtypes=PAIRS, exact=exact, zero_signs=name not in TIES)


def _zero_d(name: str) -> Case:
    """A tensor and a 0-d tensor of another dtype: PyTorch's dimensioned operand's category decides."""

    def call(t: Any, x: Any) -> Any:
        return (
            getattr(t, name)(x, t.tensor(2.5, dtype=t.float64)),
            getattr(t, name)(x, t.tensor(3)),
            getattr(t, name)(t.tensor(True), x),
        )

    return Case(f"zero_d_{name}", call, dtypes=ALL, exact=name not in ("div", "pow"))


PROMOTION = [
    *[
        _mixed(n)
        for n in ("add", "sub", "mul", "maximum", "minimum", "eq", "lt", "where_like", "remainder")
        if n != "where_like"
    ],
    _mixed("div", exact=False),
    _mixed("floor_divide"),
    _mixed("pow", exact=False),
    _mixed("atan2", exact=False),
    *[_zero_d(n) for n in ("add", "mul", "sub", "div", "maximum", "pow", "eq", "remainder")],
    Case("where_mixed", lambda t, x, y: t.where(x != 0, x, y), kind="binary", dtypes=PAIRS),
    Case("cat_mixed", lambda t, x, y: t.cat([x.reshape(-1), y.reshape(-1)]), kind="binary", dtypes=PAIRS),
    Case("clamp_mixed", lambda t, x, y: t.clamp(x, min=y), kind="binary", dtypes=PAIRS),
    Case("lerp", lambda t, x, y: t.lerp(x, y, 0.25), kind="binary", exact=False),
    Case("addcmul", lambda t, x, y: t.addcmul(x, y, y, value=0.5), kind="binary", exact=False),
    Case("addcdiv", lambda t, x, y: t.addcdiv(x, y, y + 3, value=2), kind="binary", exact=False),
]


def _act(name: str, exact: bool = False, label: str = "", **kw: Any) -> Case:
    call = lambda t, x: getattr(t.nn.functional, name)(x, **kw)
    return Case(f"F.{label or name}", call, exact=exact, zero_signs=name != "softshrink")


ACTIVATIONS = [
    _act(n)
    for n in (
        "gelu",
        "silu",
        "softplus",
        "elu",
        "selu",
        "celu",
        "leaky_relu",
        "logsigmoid",
        "softsign",
        "tanhshrink",
        "mish",
        "hardswish",
        "hardsigmoid",
        "softmin",
        "log_softmax",
        "relu6",
    )
] + [
    _act("gelu", label="gelu_tanh", approximate="tanh"),
    _act("softplus", label="softplus_beta", beta=2.0, threshold=5.0),
    _act("elu", label="elu_alpha", alpha=0.5),
    _act("leaky_relu", label="leaky_relu_02", negative_slope=0.2),
    _act("hardtanh", min_val=-0.5, max_val=0.5, exact=True),
    _act("softshrink", lambd=0.5),
    _act("hardshrink", lambd=0.5, exact=True),
    _act("threshold", threshold=0.5, value=-1.0, exact=True),
    _act("relu", exact=True),
    _act("dropout", training=False, exact=True),
    _act("normalize", dim=-1),
    _act("softmax", dim=0),
    _act("glu", dim=-1),
    Case("F.one_hot", lambda t, x: t.nn.functional.one_hot(x.abs(), 5), dtypes=("int64",)),
    Case("F.pad", lambda t, x: t.nn.functional.pad(x, (1, 2), value=-0.0), dtypes=ALL, shapes="nd"),
    Case("F.pad_reflect", lambda t, x: t.nn.functional.pad(x, (1, 1), mode="reflect"), shapes="mat"),
    Case("F.layer_norm", lambda t, x: t.nn.functional.layer_norm(x, x.shape[-1:]), shapes="nd", exact=False),
    Case(
        "F.cosine_similarity",
        lambda t, x, y: t.nn.functional.cosine_similarity(x, y, dim=-1),
        kind="binary",
        exact=False,
    ),
]


PRODUCTS = [
    Case("matmul", lambda t, x: t.matmul(x, x.transpose(-1, -2)), shapes="mat", exact=False),
    Case(
        "matmul_vec",
        lambda t, x: t.matmul(x, t.ones(x.shape[-1], dtype=x.dtype)),
        dtypes=NUMERIC,
        shapes="mat",
        exact=False,
    ),
    Case("mm_int", lambda t, x: t.mm(x, x.T), dtypes=("int64",), shapes="mat"),
    Case("bmm", lambda t, x: t.bmm(x[None], x.T[None]), shapes="mat", exact=False),
    Case("dot", lambda t, x: t.dot(x.reshape(-1), x.reshape(-1)), dtypes=NUMERIC, exact=False),
    Case("outer", lambda t, x: t.outer(x.reshape(-1), x.reshape(-1)), dtypes=ALL),
    Case("einsum", lambda t, x: t.einsum("ij,kj->ik", x, x), shapes="mat", exact=False),
    Case("tensordot", lambda t, x: t.tensordot(x, x, dims=([1], [1])), shapes="mat", exact=False),
    Case("trace", lambda t, x: t.trace(x), dtypes=NUMERIC, shapes="mat"),
    Case("diag", lambda t, x: t.diag(x, 1), dtypes=ALL, shapes="mat"),
    Case("diagonal", lambda t, x: t.diagonal(x, -1), dtypes=ALL, shapes="mat"),
    Case("kron", lambda t, x: t.kron(x, x), dtypes=NUMERIC, shapes="mat"),
    Case(
        "cross", lambda t, x: t.linalg.cross(x, x.flip(0), dim=-1), dtypes=NUMERIC, shapes="mat", exact=False
    ),
]

FACTORIES = [  # the dtypes PyTorch infers, each drawn value as the fill
    Case(
        "full_like", lambda t, x: (t.full_like(x, 2.5), t.full_like(x, True), t.full_like(x, 7)), dtypes=ALL
    ),
    Case("zeros_like_dtype", lambda t, x: t.zeros_like(x, dtype=t.int64), dtypes=ALL),
    Case(
        "new_full", lambda t, x: (x.new_full((2,), 3), x.new_tensor([1.5, 2]), x.new_ones(1, 2)), dtypes=ALL
    ),
    Case(
        "arange",
        lambda t, x: (t.arange(3), t.arange(0.5, 2), t.arange(5, dtype=x.dtype), t.arange(0, 1, 0.25)),
        dtypes=NUMERIC,
    ),
    Case("linspace", lambda t, x: (t.linspace(0, 1, 5), t.linspace(-1, 1, 3, dtype=x.dtype)), dtypes=FLOATS),
    Case(
        "tensor_infer",
        lambda t, x: (t.tensor([1, 2.5]), t.tensor([True, 2]), t.tensor(3), t.tensor([])),
        dtypes=ALL,
    ),
    Case(
        "full",
        lambda t, x: (
            t.full((2,), 1),
            t.full((2,), 1.5),
            t.full((1,), False),
            t.full((2,), 2, dtype=x.dtype),
        ),
        dtypes=ALL,
    ),
    Case("eye", lambda t, x: (t.eye(2, 3), t.eye(2, dtype=x.dtype)), dtypes=ALL),
    Case("tril_indices", lambda t, x: (t.tril_indices(3, 3), t.triu_indices(3, 4, 1)), dtypes=("int64",)),
    Case(
        "sum_bool",
        lambda t, x: (x.bool().sum(), x.bool().sum(dtype=t.float32), x.bool().float().mean()),
        dtypes=ALL,
    ),
]


def _inplace(label: str, fn: Any, dtypes: tuple[str, ...] = FLOATS, exact: bool = True) -> Case:
    """An in-place method on a copy, its result and the copy itself (both must be PyTorch's)."""

    def call(t: Any, x: Any) -> Any:
        y = x.clone()
        return fn(y), y

    return Case(label, call, dtypes=dtypes, exact=exact)


INPLACE = [
    _inplace("add_", lambda y: y.add_(1.5)),
    _inplace("mul_", lambda y: y.mul_(-1)),
    _inplace("clamp_", lambda y: y.clamp_(min=0)),
    _inplace("masked_fill_", lambda y: y.masked_fill_(y > 0, 0)),
    _inplace("zero_", lambda y: y.zero_(), dtypes=ALL),
    _inplace("fill_", lambda y: y.fill_(-0.0), dtypes=ALL),
    _inplace("neg_", lambda y: y.neg_(), dtypes=NUMERIC),
    _inplace("abs_", lambda y: y.abs_(), dtypes=NUMERIC),
    _inplace("div_int_", lambda y: y.div_(2), dtypes=("int64",)),
    _inplace("add_int_float", lambda y: y.add_(1.5), dtypes=("int64",)),
    _inplace("floor_divide_", lambda y: y.floor_divide_(2), dtypes=NUMERIC),
    _inplace("exp_", lambda y: y.exp_(), exact=False),
    _inplace("setitem", lambda y: y.__setitem__(y > 1, -0.0)),
    _inplace("index_put", lambda y: y.reshape(-1).__setitem__(0, 2.5) if y.numel() else None, NUMERIC),
]

OUT = [
    Case("out_add", lambda t, x: t.add(x, 1, out=t.empty_like(x)), dtypes=NUMERIC),
    Case("out_sum", lambda t, x: t.sum(x, 0, out=t.empty(0)), dtypes=FLOATS, exact=False),
]

EDGES = [  # dims and dtypes at their edges: 0-d inputs, dim=(), integer inputs PyTorch refuses
    Case("mean_int", lambda t, x: t.mean(x), dtypes=ALL, exact=False),
    Case(
        "sum_dim_empty_tuple",
        lambda t, x: (x.sum(dim=()), x.amax(dim=())),
        dtypes=NUMERIC,
        exact=False,
        zero_signs=False,
    ),
    Case("sum_dims", lambda t, x: x.sum(dim=(0, -1), keepdim=True), dtypes=ALL, shapes="nd", exact=False),
    Case("mean_dims", lambda t, x: x.mean((-1, 0)), shapes="nd", exact=False),
    Case("var_one", lambda t, x: (x[:1].var(), x[:1].std(0)), shapes="nd", exact=False),
    Case("softmax_int", lambda t, x: t.softmax(x, -1), dtypes=("int64", "bool")),
    Case("argmax_nan", lambda t, x: (t.argmax(x), t.argmin(x, dim=0), x.max(0).indices), dtypes=FLOATS),
    Case("all_dtype", lambda t, x: (t.all(x, dim=-1), t.any(x, -1, keepdim=True)), dtypes=ALL, shapes="nd"),
    Case(
        "prod_int_dtype",
        lambda t, x: (x.prod(0), x.cumprod(0), x.sum(0)),
        dtypes=("bool", "int64"),
        shapes="nd",
    ),
    Case("std_mean", lambda t, x: t.std_mean(x, dim=-1), shapes="nd", exact=False),
    Case("var_mean_corr", lambda t, x: t.var_mean(x, 0, correction=2), shapes="nd", exact=False),
    Case("logsumexp_dims", lambda t, x: t.logsumexp(x, (0, -1)), shapes="nd", exact=False),
    Case("flip_neg", lambda t, x: (x.flip(-1), t.fliplr(x), t.flipud(x)), dtypes=ALL, shapes="mat"),
    Case(
        "squeeze_dim", lambda t, x: (x.squeeze(0), x.squeeze(-1), x.unsqueeze(0).squeeze((0, 1))), dtypes=ALL
    ),
    Case("expand", lambda t, x: x.expand(2, *x.shape), dtypes=ALL),
    Case("repeat", lambda t, x: x.repeat(2, *([1] * x.dim())), dtypes=ALL),
    Case("movedim", lambda t, x: t.movedim(x, 0, -1), dtypes=ALL, shapes="nd"),
    Case("view_as", lambda t, x: x.reshape(-1).view(x.shape), dtypes=ALL),
    Case("nan_reductions", lambda t, x: (t.nansum(x, 0), t.nanmean(x, -1)), shapes="nd", exact=False),
    Case("count_dims", lambda t, x: t.count_nonzero(x, dim=(0, -1)), dtypes=ALL, shapes="nd"),
    Case(
        "bincount",
        lambda t, x: (t.bincount(x.reshape(-1).abs()), t.bincount(x.reshape(-1).abs(), minlength=9)),
        dtypes=("int64",),
    ),
    Case(
        "histc",
        lambda t, x: t.histc(t.nan_to_num(x, posinf=0.0, neginf=0.0), bins=4, min=-2, max=2),
        exact=False,
    ),
    Case("bucketize_int", lambda t, x: t.bucketize(x, t.tensor([-1, 0, 2])), dtypes=("int64",)),
    Case("isin", lambda t, x: t.isin(x, x.reshape(-1)[:2]), dtypes=NUMERIC),
    Case("sign_ops", lambda t, x: (t.copysign(x, -1.0), t.signbit(-x), t.sgn(x)), dtypes=FLOATS),
    Case("float_power", lambda t, x: t.float_power(x, 2), dtypes=NUMERIC),
    Case("true_divide_int", lambda t, x: (x / 2, x // 2, x % -3, -x % 3), dtypes=("int64",)),
    Case("div_neg_zero", lambda t, x: (x / -0.0, x // -0.0, t.fmod(x, -0.0)), dtypes=FLOATS),
]


def _F(t: Any) -> Any:
    return t.nn.functional


def _classes(t: Any, x: Any) -> Any:
    return _idx(t, x, x.shape[-1], x.shape[:1])


def _weights(t: Any, x: Any) -> Any:
    return t.arange(1.0, x.shape[-1] + 1, dtype=x.dtype)


LOSS_OPTIONS = [  # the losses' options public training scripts use
    Case(
        "ce_probs", lambda t, x: _F(t).cross_entropy(x, t.softmax(x.flip(0), -1)), shapes="mat", exact=False
    ),
    Case(
        "ce_probs_smooth",
        lambda t, x: _F(t).cross_entropy(x, t.softmax(x.flip(0), -1), label_smoothing=0.2, reduction="none"),
        shapes="mat",
        exact=False,
    ),
    Case(
        "ce_weight",
        lambda t, x: _F(t).cross_entropy(x, _classes(t, x), weight=_weights(t, x)),
        shapes="mat",
        exact=False,
    ),
    Case(
        "ce_weight_smooth",
        lambda t, x: _F(t).cross_entropy(x, _classes(t, x), weight=_weights(t, x), label_smoothing=0.3),
        shapes="mat",
        exact=False,
    ),
    Case(
        "ce_weight_ignore",
        lambda t, x: _F(t).cross_entropy(x, _classes(t, x), weight=_weights(t, x), ignore_index=1),
        shapes="mat",
        exact=False,
    ),
    Case(
        "nll_weight_sum",
        lambda t, x: _F(t).nll_loss(x, _classes(t, x), weight=_weights(t, x), reduction="sum"),
        shapes="mat",
        exact=False,
    ),
    Case(
        "ce_one_sample",
        lambda t, x: _F(t).cross_entropy(x[0], _idx(t, x, x.shape[-1], ())),
        shapes="mat",
        exact=False,
    ),
    Case(
        "bce_pos_weight",
        lambda t, x, y: _F(t).binary_cross_entropy_with_logits(
            x, probability(t, y), pos_weight=t.tensor(2.0, dtype=x.dtype)
        ),
        kind="binary",
        exact=False,
    ),
    Case(
        "bce_weight",
        lambda t, x, y: _F(t).binary_cross_entropy(
            probability(t, x), probability(t, y), weight=probability(t, y)
        ),
        kind="binary",
        exact=False,
    ),
    Case("huber_delta", lambda t, x, y: _F(t).huber_loss(x, y, delta=0.5), kind="binary", exact=False),
    Case("poisson_nll", lambda t, x, y: _F(t).poisson_nll_loss(x, y.abs()), kind="binary", exact=False),
    Case(
        "poisson_nll_full",
        lambda t, x, y: _F(t).poisson_nll_loss(x.abs(), y.abs(), log_input=False, full=True),
        kind="binary",
        exact=False,
    ),
    Case(
        "gaussian_nll",
        lambda t, x, y: _F(t).gaussian_nll_loss(x, y, t.ones_like(x) * 0.5),
        kind="binary",
        exact=False,
    ),
    Case(
        "margin_ranking",
        lambda t, x, y: _F(t).margin_ranking_loss(x, y, t.sign(y)),
        kind="binary",
        exact=False,
    ),
    Case(
        "hinge_embedding",
        lambda t, x, y: _F(t).hinge_embedding_loss(x, t.sign(y)),
        kind="binary",
        exact=False,
    ),
    Case(
        "multilabel_soft_margin",
        lambda t, x: _F(t).multilabel_soft_margin_loss(x, (x > 0).to(x.dtype)),
        shapes="mat",
        exact=False,
    ),
    Case(
        "mse_mixed",
        lambda t, x, y: _F(t).mse_loss(x, y),
        kind="binary",
        dtypes=("float64+float32",),
        exact=False,
    ),
    Case(
        "l1_mixed",
        lambda t, x, y: _F(t).l1_loss(x, y),
        kind="binary",
        dtypes=("float32+float64",),
        exact=False,
    ),
]

MORE_CASES: list[Case] = PROMOTION + ACTIVATIONS + PRODUCTS + FACTORIES + INPLACE + OUT + EDGES + LOSS_OPTIONS
