"""The registry suites on one op and one sample: what `tests/test_registry.py` runs on every op of the
registry and `verigrad.testing.check_op` on any op (a built-in or a user's `CustomOp`).

- `check_reference`: the eager call against the op's reference (or decomposition) in f32 or f64, its
  spec against the rules, the inputs unchanged;
- `check_gradient`: the VJP in f64 against central finite differences;
- `check_symbolic`: the spec rules over symbolic sizes (each size above 1 a symbol) against the
  reference's concrete shape;
- `check_kernels`: each kernel of the cpu backend for the op against its reference at its stated
  exactness, and the same bits on 1-3 threads (the verification suite's `verify_kernel`).

Each raises `OpSuiteFailure` (an AssertionError) naming the op, the sample and what differed. Only
Tensor methods are called (the eager mode and autograd bind them), so this module stays a backend's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...dtypes import f32, f64, from_numpy_dtype
from ...ops import Sample
from ...ops.creation import from_numpy, tensor
from ...shapes import Spec, dims, evaluate
from ...tensor import Tensor

DTYPES = {"f32": f32, "f64": f64}
# Tolerances for ops that are not exactly rounded (`op.exact` False): a few ulps of the dtype, relative
# to the result, plus an absolute floor for results near zero.
RTOL = {"f32": 1e-6, "f64": 1e-13}
ATOL = {"f32": 1e-7, "f64": 1e-15}
EPS = {"f64": 1e-6, "f32": 1e-3}
GRAD_TOL = {"f64": (1e-6, 1e-7), "f32": (1e-4, 1e-5)}  # (rtol, atol) of the numeric derivative


class OpSuiteFailure(AssertionError):
    """An op that fails one of the registry suites: the message names the op, the sample and what
    differed."""


@contextmanager
def failing_as(op: Any, where: str) -> Iterator[None]:
    """Any AssertionError inside re-raised as an OpSuiteFailure naming the op and `where`."""
    try:
        yield
    except OpSuiteFailure:
        raise
    except AssertionError as e:
        raise OpSuiteFailure(f"{op.name}, {where}: {str(e).strip()}") from None


def samples(op: Any, given: Sequence[Sample] | None = None) -> list[Sample]:
    """`given`, else the op's own samples (seeded, so every run gets the same)."""
    if given is not None:
        return list(given)
    return list(op.samples(np.random.default_rng(0))) if op.samples is not None else []


def has_derivative(op: Any) -> bool:
    """Differentiable, and not one PyTorch records but refuses to differentiate (floor_divide)."""
    return op.differentiable and getattr(op, "no_derivative", None) is None


def arrays_of(sample: Sample, dtype: str) -> list[np.ndarray]:
    """The sample's arrays with float ones cast to `dtype`; int and bool arrays are kept."""
    out = []
    for a in sample.args:
        a = np.asarray(a)
        out.append(a.astype(DTYPES[dtype].np) if a.dtype.kind == "f" else a)
    return out


def canonical(op: Any, specs: Sequence[Spec], params: dict) -> dict:
    if op.canonical_params is None:
        return dict(params)
    return op.canonical_params(*specs, **params)


def eager(op: Any, arrays: Sequence[np.ndarray], params: dict) -> tuple[Tensor, list[Tensor]]:
    """The op called eagerly on copies of `arrays`, and the tensors it was called on."""
    tensors = [from_numpy(a.copy()) for a in arrays]
    return op(*tensors, **params), tensors


def assert_close(actual: np.ndarray, expected: np.ndarray, exact: bool, dtype: str, what: str) -> None:
    """The same bits (an exact op, or integer results), else within RTOL/ATOL of the dtype."""
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if exact or actual.dtype.kind in "biu":
        assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
        np.testing.assert_array_equal(actual, expected, err_msg=what, strict=True)
    else:
        np.testing.assert_allclose(actual, expected, rtol=RTOL[dtype], atol=ATOL[dtype], err_msg=what)


def expected_of(op: Any, arrays: Sequence[np.ndarray], params: dict) -> np.ndarray:
    """What the op means on `arrays`: its reference, or its decomposition on the reference backend."""
    if op.reference is not None:
        return np.asarray(op.reference(*(a.copy() for a in arrays), **params))
    from ..active import backend  # the backend stack: imported here, as the suite's

    with backend("reference"):
        return op.decompose(*(from_numpy(a.copy()) for a in arrays), **params).numpy()


def check_reference(op: Any, sample: Sample, dtype: str) -> None:
    """The eager result against the op's definition in `dtype`; its spec against the rules (also the
    reference's shape and dtype); the inputs unchanged."""
    name = op.name
    arrays = arrays_of(sample, dtype)
    inputs = [a.copy() for a in arrays]
    out, tensors = eager(op, arrays, sample.params)
    params = canonical(op, [t.spec for t in tensors], sample.params)
    want = op.spec(*tensors, **params)
    assert isinstance(out, Tensor), f"{name} returned {type(out).__name__}, not a Tensor"
    assert out.spec == want, f"{name}: eager spec {out.spec} != rule {want}"
    result = out.numpy()
    assert result.shape == want.shape and result.dtype == want.dtype.np
    expected = expected_of(op, arrays, params)
    assert expected.shape == tuple(want.shape), (
        f"{name}: the reference gives shape {expected.shape}, the shape rule {tuple(want.shape)}"
    )
    assert expected.dtype == want.dtype.np, f"{name}: reference gives {expected.dtype}, rule {want}"
    assert_close(result, expected, op.exact, dtype, name)
    for before, after in zip(inputs, arrays):  # neither the op nor its reference wrote into an input
        np.testing.assert_array_equal(before, after, strict=True)


def _scalar(op: Any, arrays: list[np.ndarray], params: dict, cot: np.ndarray) -> float:
    out, _ = eager(op, arrays, params)  # no input requires grad: nothing recorded
    return float(np.sum(out.numpy().astype(np.float64) * cot))


def check_gradient(op: Any, sample: Sample) -> None:
    """The op's VJP in f64 (on a fixed random cotangent) against central finite differences."""
    name = op.name
    arrays = arrays_of(sample, "f64")
    leaves = [from_numpy(a.copy()).requires_grad_() if a.dtype.kind == "f" else None for a in arrays]
    tensors = [t if t is not None else from_numpy(a.copy()) for t, a in zip(leaves, arrays)]
    out = op(*tensors, **sample.params)
    assert out.dtype.is_float, f"{name} is differentiable but gave {out.dtype.name}"
    assert any(t is not None for t in leaves), f"{name}: a differentiable op's sample has no float input"
    assert out.requires_grad, f"{name} recorded no gradient history"
    cot = np.random.default_rng(1).standard_normal(out.numpy().shape).astype(out.dtype.np)
    out.backward(tensor(cot))
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


def symbolic_shapes(shapes: Sequence[tuple[int, ...]]) -> tuple[list[tuple], dict[str, int]]:
    """Each size above 1 replaced by a symbol (equal sizes by the same one), and the symbols' values."""
    values: dict[str, int] = {}
    out = []
    for shape in shapes:
        shown: list[Any] = []
        for n in shape:
            if n > 1:
                values[f"size{n}"] = n
                shown.append(dims(f"size{n}"))
            else:
                shown.append(n)
        out.append(tuple(shown))
    return out, values


def check_symbolic(op: Any, sample: Sample) -> bool:
    """The spec rules over symbolic sizes, evaluated at the sample's sizes, against the reference's
    shape and dtype. False where the rules refuse the symbols (a param that must match a concrete
    size): nothing to compare."""
    arrays = arrays_of(sample, "f32")
    concrete = [Spec(a.shape, from_numpy_dtype(a.dtype)) for a in arrays]
    params = canonical(op, concrete, sample.params)
    expected = expected_of(op, arrays, params)
    shapes, values = symbolic_shapes([a.shape for a in arrays])
    specs = [Spec(s, c.dtype) for s, c in zip(shapes, concrete)]
    try:
        got = op.spec(*(Tensor(s, None) for s in specs), **canonical(op, specs, sample.params))
    except Exception:
        return False
    shape = tuple(evaluate(d, values) for d in got.shape)
    assert shape == expected.shape, (
        f"the rule over symbols gives {tuple(got.shape)} = {shape} at {values}, the reference "
        f"{expected.shape}"
    )
    assert got.dtype.np == expected.dtype, (
        f"the rule over symbols gives {got.dtype.name}, the reference {expected.dtype}"
    )
    return True


def check_kernels(op: Any, given: Sequence[Sample] = (), backend: Any = None) -> int:
    """Each kernel the backend (default: cpu) registered for the op against its reference at its stated
    exactness, and the same bits on 1-3 threads; the number of kernels verified."""
    from ..active import lookup
    from .suite import verify_kernel

    backend = backend or lookup("cpu")
    extra = list(given) if op.samples is None else []  # the op's own samples are the suite's anyway
    checked = 0
    for (name, dtype), _ in backend.registered().items():
        if name != op.name:
            continue
        result = verify_kernel(backend, name, dtype, extra=extra)
        if result.status != "pass":
            raise OpSuiteFailure(
                f"{op.name}, kernel for {dtype or 'every dtype'} ({result.exactness}): {result.status}: "
                f"{result.message}"
            )
        checked += 1
    return checked


def run_all(op: Any, given: Sequence[Sample] | None = None, kernels: bool = True) -> dict[str, int]:
    """Every suite on every sample (`given`, else the op's own); how many checks each ran."""
    found = samples(op, given)
    if not found:
        raise OpSuiteFailure(f"{op.name} has no samples, so no suite tests it: pass samples=[Sample(...)]")
    counts = {"reference": 0, "gradient": 0, "symbolic": 0, "kernels": 0}
    suites: list[tuple[str, Callable[[Sample], Any]]] = [
        ("reference", lambda s: (check_reference(op, s, "f32"), check_reference(op, s, "f64"))),
        ("symbolic", lambda s: check_symbolic(op, s)),
    ]
    if has_derivative(op):
        suites.append(("gradient", lambda s: check_gradient(op, s)))
    for i, sample in enumerate(found):
        for what, check in suites:
            with failing_as(op, f"sample {i} ({_describe(sample)}), {what}"):
                ran = check(sample)
            counts[what] += ran is not False
    if kernels:
        counts["kernels"] = check_kernels(op, found if given is not None else ())
    return counts


def _describe(sample: Sample) -> str:
    shapes = ", ".join(f"{np.asarray(a).dtype}{list(np.shape(a))}" for a in sample.args)
    return shapes + (f", {sample.params}" if sample.params else "")
