"""Small silent differences from PyTorch, bit by bit: the sign of the NaN that var / std / var_mean give
over no elements, state_dict's `_metadata` (saved, and handed to the load pre-hooks), f16 rsqrt and xlogy
rounded once from f32, autograd graph nodes' names and next_functions, `x.to(True)` read as PyTorch's, and
Python numbers refused where PyTorch wants a tensor (distributions' log_prob / cdf values among them)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad


def _bits(call: Callable[[Any], Any], lib: Any) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = call(lib)
    results = result if isinstance(result, tuple) else (result,)
    return [np.asarray(r.detach().numpy()) for r in results]


def _same_bits(call: Callable[[Any], Any]) -> None:
    for ours, theirs in zip(_bits(call, verigrad), _bits(call, torch), strict=True):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours.view(f"u{ours.itemsize}"), theirs.view(f"u{theirs.itemsize}"))


EMPTY_VARIANCES = {
    "var of no elements": lambda lib: lib.tensor([]).var(),
    "std of no elements": lambda lib: lib.tensor([]).std(),
    "var along an empty dim": lambda lib: lib.zeros(2, 0).var(1),
    "f16 std along an empty dim": lambda lib: lib.zeros(2, 0, dtype=lib.float16).std(1, keepdim=True),
    "var_mean along an empty dim": lambda lib: lib.var_mean(lib.zeros(3, 0), 1),
    "std_mean of no elements": lambda lib: lib.std_mean(lib.tensor([])),
    "var of one element (0 / 0)": lambda lib: lib.tensor([[1.0]]).var(1),
}


@pytest.mark.parametrize("name", EMPTY_VARIANCES)
def test_variance_over_nothing_is_a_positive_nan(name: str) -> None:
    _same_bits(EMPTY_VARIANCES[name])


def _model(lib: Any) -> Any:
    return lib.nn.Sequential(
        lib.nn.Linear(2, 2), lib.nn.Sequential(lib.nn.BatchNorm1d(2), lib.nn.InstanceNorm1d(2))
    )


@pytest.mark.parametrize("prefix", ["", "net."])
def test_state_dict_metadata(prefix: str) -> None:
    def metadata(lib: Any) -> dict:
        return {k: dict(v) for k, v in _model(lib).state_dict(prefix=prefix)._metadata.items()}

    assert metadata(verigrad) == metadata(torch)


def test_load_pre_hooks_receive_the_saved_metadata() -> None:
    def seen(lib: Any) -> list:
        model, found = _model(lib), []
        model[1][0]._register_load_state_dict_pre_hook(lambda *args: found.append(dict(args[2])))
        state = model.state_dict()
        state._metadata["1.0"]["version"] = 1  # an older checkpoint, as version-migration code reads it
        model.load_state_dict(state)
        return found

    assert seen(verigrad) == seen(torch) == [{"version": 1}]


def _all_f16(multiple: int = 32) -> np.ndarray:
    """Every finite f16, cut to a multiple of `multiple` elements (PyTorch's vectorised body; its scalar
    tail, the last n mod 32 of each thread's share on AVX2, rounds rsqrt's square root to f16 first)."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]
    return finite[: len(finite) // multiple * multiple]


def test_f16_rsqrt_is_rounded_once_from_f32() -> None:
    _same_bits(lambda lib: lib.rsqrt(lib.tensor(_all_f16())))


@pytest.mark.parametrize("op", ["xlogy", "xlog1py"])
def test_f16_xlogy_rounds_the_log_to_f16(op: str) -> None:
    x = _all_f16()
    y = np.random.default_rng(0).permutation(x)
    _same_bits(lambda lib: getattr(lib.special, op)(lib.tensor(x), lib.tensor(y)))


@pytest.mark.parametrize("op", ["xlogy", "xlog1py"])
def test_f32_xlogy_rounds_the_log_to_f32(op: str) -> None:
    """PyTorch multiplies by logf(y) (log1pf): the product rounded in f64 once differed in a quarter of the
    elements; what is left is where the C library's routine and NumPy's round differently."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(20000) * np.exp(rng.uniform(-20, 20, 20000))).astype(np.float32)
    y = np.abs(rng.standard_normal(20000) * np.exp(rng.uniform(-30, 30, 20000))).astype(np.float32)
    ours, theirs = (
        getattr(lib.special, op)(lib.tensor(x), lib.tensor(y)).numpy() for lib in (verigrad, torch)
    )
    assert np.count_nonzero(ours != theirs) < len(x) // 50


@pytest.mark.parametrize("alpha", [0.3, -0.1, 1000.5, 2.0**-25])
@pytest.mark.parametrize("op", ["add", "sub"])
def test_f16_alpha_is_taken_as_an_f16(op: str, alpha: float) -> None:
    """PyTorch's vectorised loop (a multiple of 32 elements, one thread's share) rounds alpha to f16, then
    alpha * y + x once; with alpha kept in f32, 15% of the elements were 1 ulp off for alpha = 0.3."""
    rng = np.random.default_rng(2)
    x, y = (rng.standard_normal(4096).astype(np.float16) for _ in range(2))
    _same_bits(lambda lib: getattr(lib, op)(lib.tensor(x), lib.tensor(y), alpha=alpha))


GRAPHS = {
    "mm": lambda lib, a, v: a @ a.detach().t(),
    "mv": lambda lib, a, v: a @ v,
    "dot": lambda lib, a, v: v @ v,
    "sum": lambda lib, a, v: a.sum(),
    "sum along a dim": lambda lib, a, v: a.sum(0),
    "mean keepdim": lambda lib, a, v: a.mean(1, keepdim=True),
    "max": lambda lib, a, v: a.max(),
    "amin": lambda lib, a, v: a.amin(0),
    "cat": lambda lib, a, v: lib.cat([a, a]),
    "view": lambda lib, a, v: a.view(12),
    "expand": lambda lib, a, v: v.expand(3, 4),
    "add alpha": lambda lib, a, v: lib.add(a, a, alpha=2),
    "sub alpha": lambda lib, a, v: lib.sub(a, a, alpha=2),
    "clone": lambda lib, a, v: a.clone(),
    "to f64": lambda lib, a, v: a.double(),
    "where (a mask)": lambda lib, a, v: lib.where(a > 0, a, 0.0),
    "gather (an index)": lambda lib, a, v: a.gather(1, lib.tensor([[0], [1], [2]])),
    "sub of a number": lambda lib, a, v: a - 1,
}


def _graph(lib: Any, name: str) -> tuple:
    a, v = lib.ones(3, 4, requires_grad=True), lib.ones(4, requires_grad=True)
    node = GRAPHS[name](lib, a, v).grad_fn
    return node.name(), [(None if n is None else n.name(), i) for n, i in node.next_functions]


@pytest.mark.parametrize("name", GRAPHS)
def test_graph_node_names_and_next_functions(name: str) -> None:
    assert _graph(verigrad, name) == _graph(torch, name)


def test_custom_function_keeps_its_integer_inputs_in_next_functions() -> None:
    def graph(lib: Any) -> list:
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any, index: Any) -> Any:
                return x * 2

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g * 2, None

        out = Twice.apply(lib.ones(3, requires_grad=True), lib.tensor([1, 2]))
        return [(None if n is None else n.name(), i) for n, i in out.grad_fn.next_functions]

    assert graph(verigrad) == graph(torch)


NUMPY_BOOL_DIMS = {
    "softmax": lambda x, d: x.softmax(d),
    "unsqueeze": lambda x, d: x.unsqueeze(d),
    "flip": lambda x, d: x.flip(d),
    "cumsum": lambda x, d: x.cumsum(d),
    "transpose": lambda x, d: x.transpose(d, 0),
    "select": lambda x, d: x.select(d, 0),
    "sum": lambda x, d: x.sum(d),
    "mean": lambda x, d: x.mean(dim=d),
}


@pytest.mark.parametrize("name", NUMPY_BOOL_DIMS)
def test_a_numpy_bool_is_no_dim(name: str) -> None:
    """PyTorch refuses np.True_ as a dim with a TypeError (several ops read it as dim 1 here)."""
    for lib in (torch, verigrad):
        with pytest.raises(TypeError, match=r"dim|argument"):
            NUMPY_BOOL_DIMS[name](lib.ones(2, 3), np.bool_(True))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0])
def test_f16_normalizations_are_computed_in_f32_as_torch(scale: float) -> None:
    """F.rms_norm and F.layer_norm of f16 are computed in f32 and rounded once, as PyTorch's: in f16
    arithmetic the squares of values near 1e-3 underflow (rms_norm was up to 0.03 off there), and about
    half of the results were other bits at every scale."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((64, 96)) * scale).astype(np.float16)
    w, b = rng.standard_normal((2, 96)).astype(np.float16)

    def ours(lib: Any, fn: str, *args: np.ndarray) -> np.ndarray:
        tensors = [lib.from_numpy(a) for a in args]
        out = getattr(lib.nn.functional, fn)(tensors[0], (96,), *tensors[1:])
        return np.asarray(out.detach().numpy())

    assert ours(verigrad, "rms_norm", x, w).dtype == np.float16
    np.testing.assert_array_equal(ours(verigrad, "rms_norm", x, w), ours(torch, "rms_norm", x, w))
    got, expected = ours(verigrad, "layer_norm", x, w, b), ours(torch, "layer_norm", x, w, b)
    # layer_norm's f32 results may be 1 ulp apart from PyTorch's (its fused rstd), so an f16 rounding of
    # them can be: at most a few elements, none more than 1 f16 ulp
    ulps = np.abs(got.view(np.int16).astype(np.int32) - expected.view(np.int16).astype(np.int32))
    assert ulps.max() <= 1 and np.count_nonzero(ulps) <= 4


@pytest.mark.parametrize("sizes", [(1, 1), (3, 1), (2, 1, 1), (1, 2), (2, 3)])
def test_repeat_always_copies(sizes: tuple[int, ...]) -> None:
    """repeat's result is a new tensor even where every count or axis is 1 (it was a read-only view of
    x, so an in-place write refused, or a write into x)."""
    results = []
    for lib in (verigrad, torch):
        x = lib.arange(4.0).reshape(1, 4)
        y = x.repeat(*sizes)
        y.mul_(2)
        y[(0,) * y.ndim] = -1
        results.append((y.numpy().copy(), x.numpy().copy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_a_range_indexes_as_a_list() -> None:
    results = []
    for lib in (verigrad, torch):
        a = lib.arange(12).reshape(3, 4)
        picked = a[range(3), lib.tensor([0, 2, 3])]
        a[range(0, 3, 2), 1] = -5
        results.append((picked.numpy(), a[range(1, 3)].numpy(), a[:, range(3, 0, -1)].numpy()))
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("args", [(True,), (False,), (1.5,), (True, False, True)])
def test_to_reads_a_first_bool_or_float_as_its_type(args: tuple) -> None:
    """x.to(True) is x.to(bool), x.to(1.5) x.to(float64), as PyTorch reads them (they gave x unchanged)."""
    ours, theirs = verigrad.ones(2).to(*args), torch.ones(2).to(*args)
    assert ours.numpy().dtype == theirs.numpy().dtype
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.zeros(2, dtype=float),
        lambda lib: lib.ones(2).to(float),
        lambda lib: lib.ones(2).to(dtype=float),
        lambda lib: lib.tensor([1, 2], dtype=float),
        lambda lib: lib.arange(3, dtype=float),
    ],
)
def test_python_float_as_a_dtype_is_float64(call: Callable[[Any], Any]) -> None:
    """PyTorch reads Python's float as float64 whatever the default dtype (verigrad read it as f32)."""
    _same_bits(call)


NUMBERS_REFUSED = {
    "to(device, non_blocking)": lambda lib: lib.ones(2).to("cpu", True),
    "broadcast_tensors with a number": lambda lib: lib.broadcast_tensors(lib.ones(2), 2),
    "pairwise_distance with a number": lambda lib: lib.nn.functional.pairwise_distance(lib.ones(2, 3), 2.0),
    "pairwise_distance's x1 a number": lambda lib: lib.nn.functional.pairwise_distance(2.0, lib.ones(2, 3)),
    "cosine_similarity with a number": lambda lib: lib.nn.functional.cosine_similarity(lib.ones(2, 3), 2.0),
    "trapezoid's x a number": lambda lib: lib.trapezoid(lib.ones(3), 2),
    "trapz's x a float": lambda lib: lib.trapz(lib.ones(3), x=2.0),
    "cumulative_trapezoid's x a number": lambda lib: lib.cumulative_trapezoid(lib.ones(3), 2),
    "tensor_split by True": lambda lib: lib.tensor_split(lib.ones(4), True),
    "tensor_split at [True]": lambda lib: lib.ones(4).tensor_split([True]),
}


@pytest.mark.parametrize("name", NUMBERS_REFUSED)
def test_python_numbers_where_a_tensor_is_due_raise_a_type_error(name: str) -> None:
    for lib in (torch, verigrad):
        with pytest.raises(TypeError):
            NUMBERS_REFUSED[name](lib)


def test_a_spacing_still_goes_in_dx() -> None:
    for fn in ("trapezoid", "trapz", "cumulative_trapezoid"):
        ours = getattr(verigrad, fn)(verigrad.arange(4.0), dx=2)
        np.testing.assert_array_equal(ours.numpy(), getattr(torch, fn)(torch.arange(4.0), dx=2).numpy())


def _distributions(lib: Any) -> dict[str, Any]:
    d, t = lib.distributions, lib.tensor
    return {
        "Normal": d.Normal(0.0, 1.0),
        "Uniform": d.Uniform(0.0, 2.0),
        "Exponential": d.Exponential(1.0),
        "Laplace": d.Laplace(0.0, 1.0),
        "Gumbel": d.Gumbel(0.0, 1.0),
        "Bernoulli": d.Bernoulli(0.3),
        "Categorical": d.Categorical(t([0.2, 0.8])),
        "OneHotCategorical": d.OneHotCategorical(t([0.2, 0.8])),
        "MultivariateNormal": d.MultivariateNormal(lib.zeros(2), lib.eye(2)),
        "Independent": d.Independent(d.Normal(lib.zeros(2), lib.ones(2)), 1),
        "RelaxedOneHotCategorical": d.RelaxedOneHotCategorical(t(0.5), t([0.2, 0.8])),
        "LogNormal": d.LogNormal(0.0, 1.0),
        "Beta": d.Beta(t(2.0), t(2.0)),
        "Dirichlet": d.Dirichlet(t([1.0, 2.0])),
    }


CHECKED_VALUES = [(name, "log_prob", v) for name in _distributions(torch) for v in (1, [0.5])] + [
    (name, "cdf", 1) for name in ("Normal", "Uniform", "Exponential", "Laplace")
]


@pytest.mark.parametrize(("name", "method", "value"), CHECKED_VALUES)
def test_a_value_that_is_no_tensor_raises_value_error(name: str, method: str, value: Any) -> None:
    """PyTorch's validation (on by default) refuses a number or a list given to log_prob / cdf; they were
    read as tensors (Normal(0., 1.).log_prob(1) answered)."""
    for lib in (torch, verigrad):
        with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
            getattr(_distributions(lib)[name], method)(value)


def test_without_validation_a_number_is_still_read() -> None:
    for lib in (torch, verigrad):
        normal = lib.distributions.Normal(lib.tensor(0.0), lib.tensor(1.0), validate_args=False)
        assert abs(float(normal.log_prob(lib.tensor(1.0))) + 1.4189385) < 1e-6
    assert (
        abs(float(verigrad.distributions.Normal(0.0, 1.0, validate_args=False).log_prob(1)) + 1.4189385)
        < 1e-6
    )


def _attention(lib: Any, q: np.ndarray, mask: np.ndarray, **kwargs: Any) -> np.ndarray:
    t = lib.from_numpy(q)
    out = lib.nn.functional.scaled_dot_product_attention(
        t, t * 0.5, t - 1, attn_mask=lib.from_numpy(mask), **kwargs
    )
    return np.asarray(out.numpy())


def test_an_f16_query_with_an_f32_mask_gives_f16() -> None:
    """PyTorch's f16 attention with an f32 mask (it raised a dtype error); computed in f32 as PyTorch's
    kernel accumulates: within 2**-9 of PyTorch's (an f16 ulp for outputs in [1, 2); its summation order
    differs)."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 3, 16, 8)).astype(np.float16)
    mask = rng.standard_normal((16, 16)).astype(np.float32)
    ours, theirs = _attention(verigrad, q, mask), _attention(torch, q, mask)
    assert ours.dtype == theirs.dtype == np.float16
    np.testing.assert_allclose(ours.astype(np.float32), theirs.astype(np.float32), rtol=0, atol=2**-9)


@pytest.mark.parametrize("mask", [np.zeros(4, np.float32), np.ones(4, bool), np.zeros((), np.float32)])
def test_a_mask_of_under_two_dimensions(mask: np.ndarray) -> None:
    """PyTorch's 4-D query refuses it (IndexError; not with dropout); a 3-D query broadcasts it."""
    q = np.linspace(-1, 1, 2 * 4 * 8, dtype=np.float32)
    for lib in (torch, verigrad):
        with pytest.raises(IndexError):
            _attention(lib, q.reshape(1, 2, 4, 8), mask)
    np.testing.assert_allclose(
        _attention(verigrad, q.reshape(2, 4, 8), mask), _attention(torch, q.reshape(2, 4, 8), mask), rtol=1e-6
    )
