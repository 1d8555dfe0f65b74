"""Registry-driven checks: every op in `verigrad.REGISTRY` against its own definition.

A new op is tested here with no new test code: its `samples` give the inputs, its NumPy `reference` (or,
for a composite, its `decompose`) gives the expected values, and its VJP is held against central finite
differences in f64.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import verigrad
from verigrad import bf16
from verigrad.backends.verification import op_suite as suite

REGISTRY = dict(sorted(verigrad.REGISTRY.items()))
_samples = suite.samples
_has_derivative = suite.has_derivative
_arrays = suite.arrays_of
_eager = suite.eager
_assert_close = suite.assert_close


def _cases(predicate=lambda op: True) -> list[Any]:
    return [
        pytest.param(name, i, id=f"{name}-{i}")
        for name, op in REGISTRY.items()
        if predicate(op)
        for i in range(len(_samples(op)))
    ]


def _canonical(op: Any, tensors: list[verigrad.Tensor], params: dict) -> dict:
    return suite.canonical(op, [t.spec for t in tensors], params)


# (a) eager results against the op's own definition ---------------------------------------------
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize(("name", "index"), _cases())
def test_eager_matches_definition(name: str, index: int, dtype: str) -> None:
    op = REGISTRY[name]
    suite.check_reference(op, _samples(op)[index], dtype)


def _strided(a: np.ndarray) -> np.ndarray:
    """The same values in a non-contiguous view (every other element of a larger buffer)."""
    if a.ndim == 0 or a.size == 0:
        return a.copy()
    big = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), dtype=a.dtype)
    big[..., ::2] = a
    view = big[..., ::2]
    assert not view.flags.c_contiguous or a.shape[-1] == 1
    return view


@pytest.mark.parametrize(("name", "index"), _cases())
def test_strided_inputs_give_the_same_result(name: str, index: int) -> None:
    """Kernels read their inputs through strides: a view gives what a contiguous copy gives."""
    op = REGISTRY[name]
    sample = _samples(op)[index]
    arrays = _arrays(sample, "f64")
    contiguous, _ = _eager(op, arrays, sample.params)
    tensors = [verigrad.from_numpy(_strided(a)) for a in arrays]
    strided = op(*tensors, **sample.params)
    assert strided.spec == contiguous.spec
    _assert_close(strided.numpy(), contiguous.numpy(), op.exact, "f64", name)


@pytest.mark.parametrize(("name", "index"), _cases())
def test_bf16_is_moved_exactly_or_refused(name: str, index: int) -> None:
    """bf16 is for loading, moving and casting: an op refuses it in its rule (before any work), or
    gives what it gives on the same values in f32, rounded to bf16."""
    op = REGISTRY[name]
    sample = _samples(op)[index]
    f32_values = [  # float inputs rounded to bf16 once, held in f32
        verigrad.from_numpy(a).cast(bf16).float().numpy() if a.dtype.kind == "f" else a
        for a in _arrays(sample, "f32")
    ]
    tensors = [
        verigrad.from_numpy(a.copy()).cast(bf16) if a.dtype.kind == "f" else verigrad.from_numpy(a.copy())
        for a in f32_values
    ]
    try:
        want = op.spec(*tensors, **_canonical(op, tensors, sample.params))
    except verigrad.DTypeError:
        return  # refused by the rule, before anything ran
    out = op(*tensors, **sample.params)
    assert out.spec == want
    expected = op(*(verigrad.from_numpy(a.copy()) for a in f32_values), **sample.params).cast(want.dtype)
    if want.dtype is bf16:
        out, expected = out.float(), expected.float()
    np.testing.assert_array_equal(out.numpy(), expected.numpy(), err_msg=name, strict=True)


@pytest.mark.parametrize(("name", "index"), _cases())
def test_abstract_spec_matches_eager(name: str, index: int) -> None:
    """The abstract mode gives the same spec as running the op, without running it."""
    op = REGISTRY[name]
    sample = _samples(op)[index]
    arrays = _arrays(sample, "f32")
    out, _ = _eager(op, arrays, sample.params)
    specs = [verigrad.Spec(a.shape, verigrad.from_numpy(a).dtype) for a in arrays]
    assert verigrad.check(lambda *xs: op(*xs, **sample.params), *specs) == out.spec


# (b) gradients against central finite differences ----------------------------------------------
@pytest.mark.parametrize(("name", "index"), _cases(_has_derivative))
def test_gradient_matches_finite_differences(name: str, index: int) -> None:
    op = REGISTRY[name]
    suite.check_gradient(op, _samples(op)[index])


def _vjp_dot(op: Any, arrays: list[np.ndarray], params: dict, create_graph: bool):
    """(leaves, sum_k <v_k, VJP_k(x)>) with a fixed cotangent and fixed directions v_k."""
    tensors = [verigrad.from_numpy(a.copy()) for a in arrays]
    for t in tensors:
        if t.dtype.is_float:  # int and bool operands are constants
            t.requires_grad_()
    out = op(*tensors, **params)
    cot = np.random.default_rng(2).standard_normal(out.numpy().shape)
    out.backward(verigrad.tensor(cot), create_graph=create_graph)
    total = verigrad.tensor(0.0, dtype="f64")
    for k, (t, a) in enumerate(zip(tensors, arrays)):
        if a.dtype.kind == "f":
            v = np.random.default_rng(3 + k).standard_normal(a.shape)
            total = total + (t.grad * verigrad.tensor(v)).sum()
    return tensors, total


def _has_second_derivative(op: Any) -> bool:
    """Differentiable twice: not an op whose gradient op PyTorch cannot differentiate (ctc_nll)."""
    return _has_derivative(op) and getattr(op, "first_order_only", None) is None


@pytest.mark.parametrize(("name", "index"), _cases(_has_second_derivative))
def test_second_derivative_matches_finite_differences(name: str, index: int) -> None:
    """create_graph=True: the gradient of <v, VJP(x)> against its directional finite difference."""
    op = REGISTRY[name]
    sample = _samples(op)[index]
    arrays = _arrays(sample, "f64")
    tensors, total = _vjp_dot(op, arrays, sample.params, create_graph=True)
    floats = [k for k, a in enumerate(arrays) if a.dtype.kind == "f"]
    for k in floats:
        tensors[k].grad = None
    if total.requires_grad:
        total.backward()
    rng = np.random.default_rng(4)
    directions = {k: rng.standard_normal(arrays[k].shape) for k in floats}
    analytic = sum(
        float(np.sum(tensors[k].grad.numpy() * directions[k])) if tensors[k].grad is not None else 0.0
        for k in floats
    )
    eps = 1e-6
    plus = [a + eps * directions[k] if k in directions else a for k, a in enumerate(arrays)]
    minus = [a - eps * directions[k] if k in directions else a for k, a in enumerate(arrays)]
    f_plus = _vjp_dot(op, plus, sample.params, create_graph=False)[1].item()
    f_minus = _vjp_dot(op, minus, sample.params, create_graph=False)[1].item()
    numeric = (f_plus - f_minus) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6, err_msg=f"{name}: second derivative")


# (c) every op carries what the suites and readers need --------------------------------------------
@pytest.mark.parametrize("name", list(REGISTRY))
def test_op_has_samples_and_doc(name: str) -> None:
    op = REGISTRY[name]
    assert op.name == name
    assert _samples(op), f"op {name} has no samples, so no suite tests it"
    assert (op.__doc__ or "").strip(), f"op {name} has no doc"
    assert (op.reference is None) != (op.decompose is None)


def test_registry_holds_the_primitive_families() -> None:
    for name in ["add", "exp", "sum", "reshape", "permute", "slice", "take", "matmul", "where", "cast"]:
        assert name in REGISTRY
    assert verigrad.REGISTRY["matmul"] is verigrad.matmul


def test_every_op_pickles_and_deep_copies_to_itself():
    """As PyTorch's built-in functions: an op is pickled by name (`pickle.dumps(verigrad.exp)` failed on
    the lambdas an op holds), so a module or a DataLoader's worker state that holds one can be pickled."""
    import copy
    import pickle

    for name, op in REGISTRY.items():
        assert pickle.loads(pickle.dumps(op)) is op, name
        assert copy.deepcopy(op) is op, name
