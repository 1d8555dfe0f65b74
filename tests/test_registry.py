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
from verigrad import f32, f64
from verigrad.ops import Sample

OPS = dict(sorted(verigrad.REGISTRY.items()))
DTYPES = {"f32": f32, "f64": f64}

# Tolerances for ops that are not exactly rounded (`op.exact` False): a few ulps of the dtype, relative
# to the result, plus an absolute floor for results near zero.
RTOL = {"f32": 1e-6, "f64": 1e-13}
ATOL = {"f32": 1e-7, "f64": 1e-15}


def _samples(op: Any) -> list[Sample]:
    return list(op.samples(np.random.default_rng(0))) if op.samples is not None else []


def _cases(predicate=lambda op: True) -> list[Any]:
    return [
        pytest.param(name, i, id=f"{name}-{i}")
        for name, op in OPS.items()
        if predicate(op)
        for i in range(len(_samples(op)))
    ]


def _arrays(sample: Sample, dtype: str) -> list[np.ndarray]:
    """The sample's arrays with float ones cast to `dtype`; int and bool arrays are kept."""
    out = []
    for a in sample.args:
        a = np.asarray(a)
        out.append(a.astype(DTYPES[dtype].np) if a.dtype.kind == "f" else a)
    return out


def _canonical(op: Any, tensors: list[verigrad.Tensor], params: dict) -> dict:
    if op.canonical_params is None:
        return dict(params)
    return op.canonical_params(*(t.spec for t in tensors), **params)


def _eager(op: Any, arrays: list[np.ndarray], params: dict) -> tuple[verigrad.Tensor, list]:
    tensors = [verigrad.from_numpy(a.copy()) for a in arrays]
    return op(*tensors, **params), tensors


def _assert_close(actual: np.ndarray, expected: np.ndarray, exact: bool, dtype: str, what: str) -> None:
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if exact or actual.dtype.kind in "biu":
        assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
        np.testing.assert_array_equal(actual, expected, err_msg=what, strict=True)
    else:
        np.testing.assert_allclose(actual, expected, rtol=RTOL[dtype], atol=ATOL[dtype], err_msg=what)


# (a) eager results against the op's own definition ---------------------------------------------
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize(("name", "index"), _cases())
def test_eager_matches_definition(name: str, index: int, dtype: str) -> None:
    op = OPS[name]
    sample = _samples(op)[index]
    arrays = _arrays(sample, dtype)
    inputs = [a.copy() for a in arrays]
    out, tensors = _eager(op, arrays, sample.params)
    params = _canonical(op, tensors, sample.params)

    want = op.spec(*tensors, **params)
    assert isinstance(out, verigrad.Tensor)
    assert out.spec == want, f"{name}: eager spec {out.spec} != rule {want}"
    result = out.numpy()
    assert result.shape == want.shape and result.dtype == want.dtype.np

    if op.reference is not None:
        expected = np.asarray(op.reference(*arrays, **params))
        assert expected.dtype == want.dtype.np, f"{name}: reference gives {expected.dtype}, rule {want}"
    else:
        with verigrad.backend("reference"):
            expected = op.decompose(*(verigrad.from_numpy(a.copy()) for a in arrays), **params).numpy()
    _assert_close(result, expected, op.exact, dtype, name)
    for before, after in zip(inputs, arrays):  # neither the op nor its reference wrote into an input
        np.testing.assert_array_equal(before, after, strict=True)


@pytest.mark.parametrize(("name", "index"), _cases())
def test_abstract_spec_matches_eager(name: str, index: int) -> None:
    """The abstract mode gives the same spec as running the op, without running it."""
    op = OPS[name]
    sample = _samples(op)[index]
    arrays = _arrays(sample, "f32")
    out, _ = _eager(op, arrays, sample.params)
    specs = [verigrad.Spec(a.shape, verigrad.from_numpy(a).dtype) for a in arrays]
    assert verigrad.check(lambda *xs: op(*xs, **sample.params), *specs) == out.spec


# (b) gradients against central finite differences ----------------------------------------------
EPS = {"f64": 1e-6, "f32": 1e-3}
GRAD_TOL = {"f64": (1e-6, 1e-7), "f32": (1e-4, 1e-5)}  # (rtol, atol) of the numeric derivative


def _scalar(op: Any, arrays: list[np.ndarray], params: dict, cot: np.ndarray) -> float:
    with verigrad.no_grad():
        out, _ = _eager(op, arrays, params)
    return float(np.sum(out.numpy().astype(np.float64) * cot))


@pytest.mark.parametrize(("name", "index"), _cases(lambda op: op.differentiable))
def test_gradient_matches_finite_differences(name: str, index: int) -> None:
    op = OPS[name]
    sample = _samples(op)[index]
    arrays = _arrays(sample, "f64")
    leaves = [verigrad.from_numpy(a.copy()).requires_grad_() if a.dtype.kind == "f" else None for a in arrays]
    tensors = [t if t is not None else verigrad.from_numpy(a.copy()) for t, a in zip(leaves, arrays)]
    out = op(*tensors, **sample.params)
    assert out.dtype.is_float, f"{name} is differentiable but gave {out.dtype.name}"
    assert any(t is not None for t in leaves), f"{name}: a differentiable op's sample has no float input"
    assert out.requires_grad, f"{name} recorded no gradient history"
    rng = np.random.default_rng(1)
    cot = rng.standard_normal(out.numpy().shape).astype(out.dtype.np)
    out.backward(verigrad.tensor(cot))

    # The numeric derivative is only as precise as the output dtype allows (a cast to f32 rounds it).
    prec = "f64" if out.dtype is f64 else "f32"
    eps = EPS[prec]
    rtol, atol = GRAD_TOL[prec]
    cot64 = cot.astype(np.float64)
    for i, (leaf, a) in enumerate(zip(leaves, arrays)):
        if leaf is None:
            continue
        assert leaf.grad is not None, f"{name}: no gradient for input {i}"
        assert leaf.grad.shape == a.shape and leaf.grad.dtype is f64
        numeric = np.zeros(a.shape)
        for pos in np.ndindex(a.shape):
            plus = [b.copy() for b in arrays]
            minus = [b.copy() for b in arrays]
            plus[i][pos] += eps
            minus[i][pos] -= eps
            f_plus = _scalar(op, plus, sample.params, cot64)
            f_minus = _scalar(op, minus, sample.params, cot64)
            numeric[pos] = (f_plus - f_minus) / (2 * eps)
        np.testing.assert_allclose(
            leaf.grad.numpy(), numeric, rtol=rtol, atol=atol, err_msg=f"{name}: gradient of input {i}"
        )


# (c) every op carries what the suites and readers need --------------------------------------------
@pytest.mark.parametrize("name", list(OPS))
def test_op_has_samples_and_doc(name: str) -> None:
    op = OPS[name]
    assert op.name == name
    assert _samples(op), f"op {name} has no samples, so no suite tests it"
    assert (op.__doc__ or "").strip(), f"op {name} has no doc"
    assert (op.reference is None) != (op.decompose is None)


def test_registry_holds_the_primitive_families() -> None:
    for name in ["add", "exp", "sum", "reshape", "permute", "slice", "take", "matmul", "where", "cast"]:
        assert name in OPS
    assert verigrad.REGISTRY["matmul"] is verigrad.matmul
