"""A sweep over the calls PyTorch programs make, each written once and run on PyTorch and on verigrad with the
same inputs: values, dtypes, shapes, the answer's structure and the gradients of every float input (and
of a layer's parameters) must be PyTorch's. A call verigrad refuses with an error is recorded as
unsupported (an `UnsupportedCall` warning, listed in pytest's summary), not a failure; a call that gives
another answer without an error, or that verigrad accepts where PyTorch refuses, fails.

`python tests/parity/test_api_sweep_torch.py` prints every silent difference and unsupported call."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

# ---------------------------------------------------------------------------------------------------------
# The harness

TOLERANCE = {"f64": 1e-12, "f32": 1e-6, "f16": 1e-3, "bf16": 1e-2}  # relative and absolute, by dtype
DTYPE_NAMES = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "bool",
}


class UnsupportedCall(UserWarning):
    """A call PyTorch answers and verigrad refuses with an error."""


@dataclass(frozen=True)
class Call:
    """`fn(lib, *inputs)` with `lib` torch or verigrad and the inputs made from NumPy arrays in that library
    (float arrays as leaves requiring grad when `grad`); with `module`, `fn(lib, layer, *inputs)` where the
    layer is `module(lib)` in f64 holding PyTorch's initial weights."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple[Any, ...] = ()
    grad: bool = True
    module: Callable[[Any], Any] | None = None
    grad_rtol: float | None = None  # where PyTorch's own gradient is rounded: the reason is given with it


@dataclass
class Outcome:
    kind: str  # "same", "both refuse", "unsupported", "silent"
    detail: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Const:
    """An input that never requires grad (a class weight, a target)."""

    array: np.ndarray


class Difference(Exception):
    """A silent difference: what differs, where in the answer."""


def _is_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor | verigrad.Tensor)


def _leaves(lib: Any, inputs: tuple[Any, ...], grad: bool) -> list[Any]:
    out = []
    for a in inputs:
        if isinstance(a, Const):
            out.append(lib.from_numpy(a.array.copy()))
        elif isinstance(a, np.ndarray):
            t = lib.from_numpy(a.copy())
            if grad and a.dtype.kind == "f":
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return out


def _dtype_name(lib_dtype: Any) -> str:
    return DTYPE_NAMES[lib_dtype] if isinstance(lib_dtype, torch.dtype) else lib_dtype.name


def _same(ours: Any, theirs: Any, where: str, flags: bool = True, tol: float | None = None) -> None:
    """Raise Difference where `ours` (verigrad's answer) is not `theirs` (PyTorch's); `flags`: requires_grad
    too."""
    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, verigrad.Tensor):
            raise Difference(f"{where}: a tensor expected, got {type(ours).__name__} {ours!r:.80}")
        want_dtype, got_dtype = _dtype_name(theirs.dtype), ours.dtype.name
        if got_dtype != want_dtype:
            raise Difference(f"{where}: dtype {got_dtype}, PyTorch's {want_dtype}")
        if tuple(ours.shape) != tuple(theirs.shape):
            raise Difference(f"{where}: shape {tuple(ours.shape)}, PyTorch's {tuple(theirs.shape)}")
        # force: PyTorch's gradient of sgn (and the like) is a ZeroTensor, which has no plain NumPy view
        want = theirs.detach().float().numpy() if want_dtype == "bf16" else theirs.detach().numpy(force=True)
        got = np.asarray(ours.detach().numpy(), dtype=want.dtype)
        tol = TOLERANCE.get(want_dtype, 0.0) if tol is None else tol
        atol = tol
        if want_dtype in ("f32", "f16", "bf16") and want.size:
            # an entry of a low-precision sum carries the rounding of the largest terms, not only its own
            finite = np.abs(want[np.isfinite(want)])
            atol = tol * max(1.0, float(finite.max()) if finite.size else 1.0)
        try:
            np.testing.assert_allclose(got, want, rtol=tol, atol=atol, equal_nan=True)
        except AssertionError as e:
            raise Difference(f"{where}: values differ{str(e)[str(e).find(chr(10)) :]:.600}") from None
        if flags and ours.requires_grad != theirs.requires_grad:
            raise Difference(f"{where}: requires_grad {ours.requires_grad}, PyTorch's {theirs.requires_grad}")
        return
    if isinstance(theirs, torch.dtype):
        name = getattr(ours, "name", None)
        if name != _dtype_name(theirs):
            raise Difference(f"{where}: dtype {ours!r}, PyTorch's {theirs}")
        return
    if isinstance(theirs, tuple | list):
        if not isinstance(ours, tuple | list):
            raise Difference(f"{where}: a {type(theirs).__name__} expected, got {type(ours).__name__}")
        if isinstance(theirs, list) != isinstance(ours, list):
            raise Difference(f"{where}: a {type(theirs).__name__} expected, got {type(ours).__name__}")
        fields = getattr(theirs, "_fields", None)
        if fields is not None and getattr(ours, "_fields", None) != fields:
            raise Difference(f"{where}: fields {getattr(ours, '_fields', None)}, PyTorch's {fields}")
        if len(ours) != len(theirs):
            raise Difference(f"{where}: {len(ours)} items, PyTorch's {len(theirs)}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _same(a, b, f"{where}[{i}]", flags)
        return
    if isinstance(theirs, dict):
        if not isinstance(ours, dict) or list(ours) != list(theirs):
            raise Difference(
                f"{where}: keys {list(ours) if isinstance(ours, dict) else ours!r:.200}, "
                f"PyTorch's {list(theirs)!r:.200}"
            )
        for k in theirs:
            _same(ours[k], theirs[k], f"{where}[{k!r}]", flags)
        return
    if isinstance(theirs, bool | int | float):
        if type(ours) is not type(theirs):
            raise Difference(
                f"{where}: {type(ours).__name__} {ours!r:.80}, PyTorch's {type(theirs).__name__}"
            )
        if isinstance(theirs, float):
            same = (math.isnan(ours) and math.isnan(theirs)) or math.isclose(ours, theirs, rel_tol=1e-12)
        else:
            same = ours == theirs
        if not same:
            raise Difference(f"{where}: {ours!r}, PyTorch's {theirs!r}")
        return
    if theirs is None or isinstance(theirs, str):
        if ours != theirs:
            raise Difference(f"{where}: {ours!r:.80}, PyTorch's {theirs!r:.80}")
        return
    raise TypeError(f"{where}: the sweep cannot compare a {type(theirs).__name__}")


def _float_outputs(x: Any) -> list[Any]:
    """The tensors in an answer that carry gradients, in order."""
    if _is_tensor(x):
        return [x] if x.requires_grad else []
    if isinstance(x, tuple | list):
        return [t for item in x for t in _float_outputs(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in _float_outputs(item)]
    return []


def _module(call: Call, lib: Any, state: dict[str, np.ndarray] | None) -> Any:
    """The layer in f64 with `state` copied in (the entries it has: missing ones are other calls' concern)."""
    layer = call.module(lib).to(lib.float64)
    if state is not None:
        keys = layer.state_dict().keys()
        layer.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in state.items() if k in keys})
    return layer


def _backward(lib: Any, outputs: list[Any], seed: int) -> None:
    rng = np.random.default_rng(seed)
    total = 0
    for o in outputs:
        c = rng.standard_normal(tuple(o.shape)).astype(o.detach().numpy().dtype)
        total = total + (o * lib.from_numpy(c)).sum()
    total.backward()


def run(call: Call) -> Outcome:
    """Run `call` on both libraries and say how verigrad's answer compares with PyTorch's."""
    their_leaves = _leaves(torch, call.inputs, call.grad)
    their_args = their_leaves
    state = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if call.module is not None:
                their_layer = _module(call, torch, None)
                state = {k: v.detach().numpy().copy() for k, v in their_layer.state_dict().items()}
                their_args = [their_layer, *their_leaves]
            theirs = call.fn(torch, *their_args)
    except Exception as e:
        their_error: Exception | None = e
    else:
        their_error = None

    our_leaves = _leaves(verigrad, call.inputs, call.grad)
    our_args = our_leaves
    try:
        if call.module is not None:
            our_layer = _module(call, verigrad, state)
            our_args = [our_layer, *our_leaves]
        ours = call.fn(verigrad, *our_args)
    except Exception as e:
        if their_error is not None:
            return Outcome("both refuse", f"{type(e).__name__}: {e}")
        return Outcome("unsupported", f"{type(e).__name__}: {str(e).strip()[:300]}")
    if their_error is not None:
        return Outcome(
            "silent",
            f"PyTorch refuses ({type(their_error).__name__}: {str(their_error)[:200]}), "
            f"verigrad answers {ours!r:.200}",
        )
    try:
        _same(ours, theirs, "result")
        if call.module is not None:  # running statistics, and nothing else changed
            our_state = our_layer.state_dict()
            for k, v in their_layer.state_dict().items():
                if k in our_state:
                    _same(our_state[k], v, f"state[{k!r}] after the call", flags=False)
    except Difference as d:
        return Outcome("silent", str(d))

    their_outs = _float_outputs(theirs)
    if not their_outs:
        return Outcome("same")
    their_grads = [t for t in their_leaves if _is_tensor(t) and t.requires_grad]
    our_grads = [t for t in our_leaves if _is_tensor(t) and t.requires_grad]
    names = [f"input {i}" for i, t in enumerate(their_leaves) if _is_tensor(t) and t.requires_grad]
    if call.module is not None:
        names += [f"layer.{n}" for n, _ in their_layer.named_parameters()]
        their_grads += [p for _, p in their_layer.named_parameters()]
        our_grads += [p for _, p in our_layer.named_parameters()]
    try:
        _backward(torch, their_outs, seed=7)
    except RuntimeError:
        return Outcome("same", notes=["PyTorch has no gradient here"])
    try:
        _backward(verigrad, _float_outputs(ours), seed=7)
    except Exception as e:
        return Outcome("unsupported", f"backward: {type(e).__name__}: {str(e).strip()[:300]}")
    try:
        if len(our_grads) != len(their_grads):
            raise Difference(f"{len(our_grads)} parameters, PyTorch's {len(their_grads)}")
        for name, mine, want in zip(names, our_grads, their_grads):
            if want.grad is None:
                if mine.grad is not None:
                    raise Difference(f"grad of {name}: a tensor, PyTorch's None")
                continue
            if mine.grad is None:
                raise Difference(f"grad of {name}: None, PyTorch's a tensor")
            _same(mine.grad, want.grad, f"grad of {name}", tol=call.grad_rtol)
    except Difference as d:
        return Outcome("silent", str(d))
    return Outcome("same")


# ---------------------------------------------------------------------------------------------------------
# The inputs (f64 unless named otherwise)

_rng = np.random.default_rng(0)
A = _rng.standard_normal((3, 4))
B = _rng.standard_normal(4)
C = _rng.standard_normal((3, 1))
D = _rng.standard_normal((4, 5))
A3 = _rng.standard_normal((2, 3, 4))
A4 = _rng.standard_normal((2, 3, 6, 6))
SEQ = _rng.standard_normal((2, 3, 8))  # (N, C, L)
POS = _rng.uniform(0.5, 2.0, (3, 4))
UNIT = _rng.uniform(-0.9, 0.9, (3, 4))
PROB = _rng.uniform(0.05, 0.95, (3, 4))
A32 = A.astype(np.float32)
A16 = A.astype(np.float16)
INT = _rng.integers(-5, 6, (3, 4))  # i64
I32 = INT.astype(np.int32)
IPOS = _rng.integers(1, 6, (3, 4))
MASK = A > 0
ROWS = np.array([0, 2])
TIES = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 2.0, 0.0], [4.0, -1.0, 4.0, 4.0]])
SPECIAL = np.array([[np.nan, np.inf, -np.inf, 0.0], [-0.0, 1.0, -1.0, 2.5], [-2.5, 0.5, -0.5, 1.5]])
LOGITS = _rng.standard_normal((4, 5))
TARGET = np.array([1, 0, 4, 2])
TARGET_IGNORE = np.array([1, -100, 4, 2])
SOFT = _rng.dirichlet(np.ones(5), 4)
WEIGHT5 = np.array([0.5, 1.0, 2.0, 1.5, 0.25])
BINARY = (_rng.random((3, 4)) > 0.5).astype(np.float64)


def _c(name: str, fn: Callable[..., Any], *inputs: Any, grad: bool = True) -> Call:
    return Call(name, fn, inputs, grad)


CALLS: list[Call] = []

# ---------------------------------------------------------------------------------------------------------
# Creation

CALLS += [
    _c("zeros(2, 3)", lambda t: t.zeros(2, 3)),
    _c("zeros((2, 3))", lambda t: t.zeros((2, 3))),
    _c("zeros([2, 3])", lambda t: t.zeros([2, 3])),
    _c("zeros(0)", lambda t: t.zeros(0)),
    _c("zeros(2, dtype=int32)", lambda t: t.zeros(2, dtype=t.int32)),
    _c("zeros(2, dtype=bool)", lambda t: t.zeros(2, dtype=t.bool)),
    _c("ones(2, 3)", lambda t: t.ones(2, 3)),
    _c("ones(3, dtype=float64)", lambda t: t.ones(3, dtype=t.float64)),
    _c("ones(3, dtype=long)", lambda t: t.ones(3, dtype=t.long)),
    _c("full((2, 3), 1.5)", lambda t: t.full((2, 3), 1.5)),
    _c("full((2,), 7) is i64", lambda t: t.full((2,), 7)),
    _c("full((2,), True) is bool", lambda t: t.full((2,), True)),
    _c("full((2,), 7, dtype=float64)", lambda t: t.full((2,), 7, dtype=t.float64)),
    _c("arange(5)", lambda t: t.arange(5)),
    _c("arange(2, 7)", lambda t: t.arange(2, 7)),
    _c("arange(1, 10, 3)", lambda t: t.arange(1, 10, 3)),
    _c("arange(0, 1, 0.25)", lambda t: t.arange(0, 1, 0.25)),
    _c("arange(5.0)", lambda t: t.arange(5.0)),
    _c("arange(5, 0, -1)", lambda t: t.arange(5, 0, -1)),
    _c("arange(5, dtype=float64)", lambda t: t.arange(5, dtype=t.float64)),
    _c("arange(0, 1, 0) refused", lambda t: t.arange(0, 1, 0)),
    _c("linspace(0, 1, 5)", lambda t: t.linspace(0, 1, 5)),
    _c("linspace(-1, 1, steps=4, dtype=float64)", lambda t: t.linspace(-1, 1, steps=4, dtype=t.float64)),
    _c("linspace(0, 1, 1)", lambda t: t.linspace(0, 1, 1)),
    _c("logspace(0, 2, 3)", lambda t: t.logspace(0, 2, 3)),
    _c("eye(3)", lambda t: t.eye(3)),
    _c("eye(2, 3)", lambda t: t.eye(2, 3)),
    _c("tensor([1, 2, 3])", lambda t: t.tensor([1, 2, 3])),
    _c("tensor([1.0, 2])", lambda t: t.tensor([1.0, 2])),
    _c("tensor([True, False])", lambda t: t.tensor([True, False])),
    _c("tensor(3)", lambda t: t.tensor(3)),
    _c("tensor(2.5)", lambda t: t.tensor(2.5)),
    _c("tensor([[1, 2], [3, 4]], dtype=float64)", lambda t: t.tensor([[1, 2], [3, 4]], dtype=t.float64)),
    _c("tensor([]) is f32", lambda t: t.tensor([])),
    _c("tensor(ndarray f64)", lambda t: t.tensor(A)),
    _c("tensor(ndarray i32)", lambda t: t.tensor(I32)),
    _c("tensor(list of 0-d tensors)", lambda t: t.tensor([t.tensor(1.0).item(), 2.0])),
    _c("tensor(x, requires_grad=True)", lambda t: t.tensor([1.0, 2.0], requires_grad=True)),
    _c("as_tensor(list)", lambda t: t.as_tensor([1, 2])),
    _c("from_numpy(i64)", lambda t: t.from_numpy(INT.copy())),
    _c("from_numpy(f32)", lambda t: t.from_numpy(A32.copy())),
    _c("zeros_like(x)", lambda t, x: t.zeros_like(x), A),
    _c("ones_like(int)", lambda t, x: t.ones_like(x), INT),
    _c("full_like(x, 2)", lambda t, x: t.full_like(x, 2), A),
    _c("full_like(int, 2.7)", lambda t, x: t.full_like(x, 2.7), INT),
    _c("zeros_like(x, dtype=int64)", lambda t, x: t.zeros_like(x, dtype=t.int64), A),
    _c("empty(2, 3).shape", lambda t: (t.empty(2, 3).shape, t.empty(2, 3).dtype)),
    _c("x.new_zeros(2)", lambda t, x: x.new_zeros(2), A32),
    _c("x.new_ones((2, 2))", lambda t, x: x.new_ones((2, 2)), INT),
    _c("x.new_full((2,), 3.0)", lambda t, x: x.new_full((2,), 3.0), A),
    _c("x.new_tensor([1, 2])", lambda t, x: x.new_tensor([1, 2]), A),
    _c("tril_indices(3, 3)", lambda t: t.tril_indices(3, 3)),
    _c("triu_indices(3, 4, 1)", lambda t: t.triu_indices(3, 4, 1)),
    _c("zeros(-1) refused", lambda t: t.zeros(-1)),
    _c("get_default_dtype()", lambda t: t.get_default_dtype()),
    _c("is_tensor", lambda t, x: (t.is_tensor(x), t.is_tensor(1.0)), A),
    _c("is_floating_point", lambda t, x, i: (x.is_floating_point(), i.is_floating_point()), A, INT),
    _c("numel(x)", lambda t, x: t.numel(x), A),
]

# ---------------------------------------------------------------------------------------------------------
# Arithmetic: operators with scalars, broadcasting and the dtypes of mixed operands

_BINARY_OPERATORS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": lambda a, b: a**b,
    "%": lambda a, b: a % b,
    "//": lambda a, b: a // b,
}
_OPERAND_PAIRS = {  # (left, right): a NumPy array is a tensor, anything else a Python number
    "f64 @ 2": (A, 2),
    "f64 @ 2.5": (A, 2.5),
    "2 @ f64": (2, A),
    "f64 @ f64[4]": (A, B),
    "f64 @ f64[3,1]": (A, C),
    "f32 @ 2.5": (A32, 2.5),
    "f32 @ f64": (A32, A),
    "f32 @ i64": (A32, INT),
    "i64 @ 2": (INT, 2),
    "i64 @ 2.5": (INT, 2.5),
    "i64 @ i64": (INT, IPOS),
    "i32 @ i64": (I32, IPOS),
    "i32 @ 2": (I32, 2),
    "bool @ 1": (MASK, 1),
    "bool @ 1.5": (MASK, 1.5),
}
for _op, _f in _BINARY_OPERATORS.items():
    for _pair, (_l, _r) in _OPERAND_PAIRS.items():
        _ins = tuple(v for v in (_l, _r) if isinstance(v, np.ndarray))
        if _op == "**" and _pair.startswith("f") and isinstance(_r, float):
            _ins = tuple(np.abs(v) + 0.5 if v.dtype.kind == "f" else v for v in _ins)  # real powers
        if _op in ("**", "%", "//") and _pair in ("bool @ 1", "bool @ 1.5"):
            continue
        if isinstance(_l, np.ndarray) and isinstance(_r, np.ndarray):
            _fn = lambda t, a, b, f=_f: f(a, b)
        elif isinstance(_l, np.ndarray):
            _fn = lambda t, a, f=_f, r=_r: f(a, r)
        else:
            _fn = lambda t, b, f=_f, left=_l: f(left, b)
        CALLS.append(Call(f"{_pair.replace('@', _op)}", _fn, _ins))

CALLS += [
    _c("-x", lambda t, x: -x, A),
    _c("-int", lambda t, x: -x, INT),
    _c("+x", lambda t, x: +x, A),
    _c("abs(x)", lambda t, x: abs(x), A),
    _c("x @ y", lambda t, x, y: x @ y, A, D),
    _c("x @ vector", lambda t, x, y: x @ y, A, B),
    _c("batched @", lambda t, x, y: x @ y, A3, D),
    _c("matmul(f32, f64) refused", lambda t, x, y: t.matmul(x, y), A32, D),
    _c("matmul shape mismatch refused", lambda t, x: x @ x, A),
    _c("mm", lambda t, x, y: t.mm(x, y), A, D),
    _c("bmm", lambda t, x, y: t.bmm(x, y), A3, A3.transpose(0, 2, 1).copy()),
    _c("addmm", lambda t, b, x, y: t.addmm(b, x, y), _rng.standard_normal(5), A, D),
    _c("outer", lambda t, x, y: t.outer(x, y), B, B),
    _c("dot", lambda t, x, y: t.dot(x, y), B, B),
    _c("einsum ij,jk->ik", lambda t, x, y: t.einsum("ij,jk->ik", x, y), A, D),
    _c("x + y shape mismatch refused", lambda t, x, y: x + y, A, D),
    _c("add(alpha=2)", lambda t, x, y: t.add(x, y, alpha=2), A, B),
    _c("x.sub(y, alpha=0.5)", lambda t, x, y: x.sub(y, alpha=0.5), A, B),
    _c("mul", lambda t, x, y: t.mul(x, y), A, C),
    _c("div(rounding_mode='floor')", lambda t, x: t.div(x, 0.7, rounding_mode="floor"), A),
    _c("div(rounding_mode='trunc')", lambda t, x: t.div(x, 0.7, rounding_mode="trunc"), A),
    _c("int div(rounding_mode='floor')", lambda t, x: t.div(x, 2, rounding_mode="floor"), INT),
    _c("true_divide", lambda t, x, y: t.true_divide(x, y), A, POS),
    _c("floor_divide", lambda t, x: t.floor_divide(x, 2), INT),
    _c("remainder(x, -1.5)", lambda t, x: t.remainder(x, -1.5), A),
    _c("fmod(x, 1.5)", lambda t, x: t.fmod(x, 1.5), A),
    _c("fmod(int, 3)", lambda t, x: t.fmod(x, 3), INT),
    _c("int ** -1 refused", lambda t, x: x**-1, IPOS),
    _c("2 ** int", lambda t, x: 2**x, IPOS),
    _c("pow(x, 3)", lambda t, x: t.pow(x, 3), A),
    _c("pow(x, y)", lambda t, x, y: t.pow(x, y), POS, A),
    _c("x ** 0", lambda t, x: x**0, A),
    _c("x / 0", lambda t, x: x / 0, A),
    _c("int / 0", lambda t, x: x / 0, INT),
    _c("maximum", lambda t, x, y: t.maximum(x, y), A, B),
    _c("minimum", lambda t, x, y: t.minimum(x, y), A, C),
    _c("maximum with NaN", lambda t, x, y: t.maximum(x, y), SPECIAL, A),
    _c("fmax", lambda t, x, y: t.fmax(x, y), SPECIAL, A),
    _c("max(x, y)", lambda t, x, y: t.max(x, y), A, B),
    _c("x += 1 (in place)", lambda t, x: x.__iadd__(1), A, grad=False),
    _c("x.add_(y)", lambda t, x, y: x.add_(y), A, B, grad=False),
    _c("x.mul_(2)", lambda t, x: x.mul_(2), A, grad=False),
    _c("x.clone().add_(y)", lambda t, x, y: x.clone().add_(y), A, B),
    _c("x.clone().mul_(y)", lambda t, x, y: x.clone().mul_(y), A, B),
    _c("int.add_(float) refused", lambda t, x: x.add_(1.5), INT, grad=False),
    _c("x.zero_()", lambda t, x: x.zero_(), A, grad=False),
    _c("x.fill_(3)", lambda t, x: x.fill_(3), A, grad=False),
    _c("x.clamp_(0, 1)", lambda t, x: x.clamp_(0, 1), A, grad=False),
    _c("x.copy_(y)", lambda t, x, y: x.copy_(y), A, B, grad=False),
    _c("f32.copy_(f64)", lambda t, x, y: x.copy_(y), A32, A, grad=False),
    _c("leaf.add_ refused", lambda t, x: x.add_(1), A),
    _c("lerp", lambda t, x, y: t.lerp(x, y, 0.3), A, B),
    _c("lerp(tensor weight)", lambda t, x, y, w: t.lerp(x, y, w), A, B, PROB),
    _c("addcmul", lambda t, x, y, z: t.addcmul(x, y, z, value=0.5), A, B, C),
    _c("addcdiv", lambda t, x, y, z: t.addcdiv(x, y, z, value=2), A, B, POS),
    _c("hypot", lambda t, x, y: t.hypot(x, y), A, B),
    _c("atan2", lambda t, x, y: t.atan2(x, y), A, C),
    _c("logaddexp", lambda t, x, y: t.logaddexp(x, y), A, B),
    _c("xlogy", lambda t, x, y: t.xlogy(x, y), A, POS),
    _c("copysign", lambda t, x, y: t.copysign(x, y), A, C),
    _c("cross", lambda t, x, y: t.cross(x, y, dim=1), A[:, :3].copy(), A[:, 1:].copy()),
    _c("kron", lambda t, x, y: t.kron(x, y), A[:2, :2].copy(), C[:2].copy()),
]

# ---------------------------------------------------------------------------------------------------------
# Comparisons, logic, where, clamp

for _name, _f in {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}.items():
    CALLS += [
        Call(f"f64 {_name} 0", lambda t, x, f=_f: f(x, 0), (A,)),
        Call(f"f64 {_name} f64[4]", lambda t, x, y, f=_f: f(x, y), (A, B)),
        Call(f"i64 {_name} 0.5", lambda t, x, f=_f: f(x, 0.5), (INT,)),
        Call(f"f64 {_name} i64", lambda t, x, y, f=_f: f(x, y), (A, INT)),
        Call(f"NaN {_name} NaN", lambda t, x, f=_f: f(x, x), (SPECIAL,)),
    ]
CALLS += [
    _c("eq", lambda t, x, y: t.eq(x, y), TIES, TIES[::-1].copy()),
    _c("x.ne(1.0)", lambda t, x: x.ne(1.0), TIES),
    _c("gt / lt / ge / le", lambda t, x: (t.gt(x, 0), t.lt(x, 0), t.ge(x, 1.0), t.le(x, 1.0)), TIES),
    _c("equal", lambda t, x, y: t.equal(x, y), A, A),
    _c("allclose", lambda t, x, y: t.allclose(x, y), A, A + 1e-9),
    _c("isclose", lambda t, x, y: t.isclose(x, y), A, A + 1e-7),
    _c("~bool", lambda t, m: ~m, MASK),
    _c("bool & bool", lambda t, m: m & ~m, MASK),
    _c("bool | bool", lambda t, m: m | ~m, MASK),
    _c("bool ^ bool", lambda t, m, n: m ^ n, MASK, MASK[::-1].copy()),
    _c("int & 3", lambda t, x: x & 3, INT),
    _c("int | 1", lambda t, x: x | 1, INT),
    _c("int << 1", lambda t, x: x << 1, IPOS),
    _c("logical_and", lambda t, x, y: t.logical_and(x, y), A, INT),
    _c("logical_or", lambda t, x, y: t.logical_or(x, y), MASK, INT),
    _c("logical_not(float)", lambda t, x: t.logical_not(x), INT),
    _c("logical_xor", lambda t, x, y: t.logical_xor(x, y), MASK, INT),
    _c("where(c, x, y)", lambda t, m, x, y: t.where(m, x, y), MASK, A, B),
    _c("where(c, x, 0.0)", lambda t, m, x: t.where(m, x, 0.0), MASK, A),
    _c("where(c, 1, 0) is i64", lambda t, m: t.where(m, 1, 0), MASK),
    _c("where(c, 1.0, 0.0) is f32", lambda t, m: t.where(m, 1.0, 0.0), MASK),
    _c("where(c, f32, f64)", lambda t, m, x, y: t.where(m, x, y), MASK, A32, A),
    _c("where(c, int, 0.5)", lambda t, m, x: t.where(m, x, 0.5), MASK, INT),
    _c("where(c)", lambda t, m: t.where(m), MASK),
    _c("x.where(c, y)", lambda t, x, m, y: x.where(m, y), A, MASK, B),
    _c("where(float cond) refused", lambda t, x: t.where(x, x, x), A),
    _c("clamp(x, -0.5, 0.5)", lambda t, x: t.clamp(x, -0.5, 0.5), A),
    _c("x.clamp(min=0)", lambda t, x: x.clamp(min=0), A),
    _c("x.clamp(max=0.2)", lambda t, x: x.clamp(max=0.2), A),
    _c("clamp(tensor bounds)", lambda t, x, lo, hi: t.clamp(x, lo, hi), A, C - 0.5, C + 0.5),
    _c("clamp(int, 0.5) is f32", lambda t, x: t.clamp(x, min=0.5), INT),
    _c("clamp(int, -1, 1)", lambda t, x: t.clamp(x, -1, 1), INT),
    _c("clamp with min > max", lambda t, x: t.clamp(x, 1.0, -1.0), A),
    _c("clamp(NaN)", lambda t, x: t.clamp(x, -1, 1), SPECIAL),
    _c("clamp() refused", lambda t, x: t.clamp(x), A),
    _c("clip", lambda t, x: t.clip(x, -1, 1), A),
    _c("clamp at the bound: gradient", lambda t, x: t.clamp(x, 0.5, 3.0), TIES),
    _c("x.clamp_min(0)", lambda t, x: x.clamp_min(0), A),
    _c("masked_fill(m, -inf)", lambda t, x, m: x.masked_fill(m, float("-inf")), A, MASK),
    _c("masked_fill(m, 0) on int", lambda t, x, m: x.masked_fill(m, 0), INT, MASK),
    _c(
        "masked_fill(row mask)",
        lambda t, x, m: t.masked_fill(x, m, 2.0),
        A,
        np.array([True, False, True, False]),
    ),
    _c("masked_fill(float mask) refused", lambda t, x: x.masked_fill(x, 0.0), A),
]

# ---------------------------------------------------------------------------------------------------------
# Element-wise math: as a function and as a method, on floats and (where PyTorch takes them) integers

_UNARY = {  # name: input
    "exp": A,
    "log": POS,
    "log2": POS,
    "log10": POS,
    "log1p": POS,
    "expm1": A,
    "sqrt": POS,
    "rsqrt": POS,
    "sin": A,
    "cos": A,
    "tan": UNIT,
    "asin": UNIT,
    "acos": UNIT,
    "atan": A,
    "sinh": A,
    "cosh": A,
    "tanh": A,
    "asinh": A,
    "acosh": POS + 1.0,
    "atanh": UNIT,
    "sigmoid": A,
    "erf": A,
    "erfc": A,
    "erfinv": UNIT,
    "floor": A * 3,
    "ceil": A * 3,
    "round": A * 3,
    "trunc": A * 3,
    "frac": A * 3,
    "sign": A,
    "sgn": A,
    "reciprocal": POS,
    "square": A,
    "neg": A,
    "abs": A,
    "exp2": A,
    "logit": PROB,
    "relu": A,
    "lgamma": POS,
    "digamma": POS,
    "sinc": A,
    "deg2rad": A,
    "rad2deg": A,
    "nan_to_num": SPECIAL,
    "isnan": SPECIAL,
    "isinf": SPECIAL,
    "isfinite": SPECIAL,
    "signbit": SPECIAL,
    "positive": A,
    "fix": A * 3,
    "arctan": A,
    "absolute": A,
    "negative": A,
    "i0": A,
}
_INT_UNARY = [
    "exp",
    "sqrt",
    "sin",
    "sigmoid",
    "abs",
    "neg",
    "sign",
    "square",
    "reciprocal",
    "floor",
    "round",
    "log1p",
    "tanh",
    "isnan",
    "isfinite",
    "relu",
    "frac",
]
# digamma's gradient is PyTorch's trigamma, a series up to ~5e-10 off the exact value verigrad gives
_UNARY_GRAD_RTOL = {"digamma": 1e-9}
for _name, _x in _UNARY.items():
    _rtol = _UNARY_GRAD_RTOL.get(_name)
    CALLS.append(Call(f"{_name}(x)", lambda t, x, n=_name: getattr(t, n)(x), (_x,), grad_rtol=_rtol))
    CALLS.append(Call(f"x.{_name}()", lambda t, x, n=_name: getattr(x, n)(), (_x,), grad_rtol=_rtol))
    CALLS.append(Call(f"{_name}(f32)", lambda t, x, n=_name: getattr(t, n)(x), (_x.astype(np.float32),)))
for _name in _INT_UNARY:
    _x = IPOS if _name in ("sqrt", "reciprocal", "log1p") else INT
    CALLS.append(Call(f"{_name}(i64)", lambda t, x, n=_name: getattr(t, n)(x), (_x,)))
CALLS += [
    _c("round(x, decimals=1)", lambda t, x: t.round(x, decimals=1), A),
    _c("round half to even", lambda t, x: t.round(x), np.array([0.5, 1.5, 2.5, -0.5, -1.5])),
    _c("nan_to_num(nan=0, posinf=9)", lambda t, x: t.nan_to_num(x, nan=0.0, posinf=9.0), SPECIAL),
    _c("sqrt of negatives", lambda t, x: t.sqrt(x), A),
    _c("log of 0 and negatives", lambda t, x: t.log(x), np.array([0.0, -1.0, 1.0])),
    _c("exp of SPECIAL", lambda t, x: t.exp(x), SPECIAL),
    _c("sigmoid of SPECIAL", lambda t, x: t.sigmoid(x), SPECIAL),
    _c("sign of SPECIAL", lambda t, x: t.sign(x), SPECIAL),
    _c("abs gradient at 0", lambda t, x: t.abs(x), np.array([0.0, -1.0, 2.0])),
    _c("sqrt gradient at 0", lambda t, x: t.sqrt(x), np.array([0.0, 1.0, 4.0])),
    _c("relu gradient at 0", lambda t, x: t.relu(x), np.array([0.0, -1.0, 2.0])),
    _c("pow gradient at 0", lambda t, x: x**2.5, np.array([0.0, 1.0, 4.0])),
    _c("x ** 0.5 at 0: gradient", lambda t, x: x**0.5, np.array([0.0, 1.0])),
    # polygamma(1, x) is held to exact values in test_special_and_joining_torch.py: PyTorch's trigamma
    # series is up to ~5e-10 off (a documented difference in the README's table)
    _c("polygamma(2, x)", lambda t, x: t.polygamma(2, x), POS),
    _c("mvlgamma", lambda t, x: t.mvlgamma(x + 2, 2), POS),
]

# ---------------------------------------------------------------------------------------------------------
# Reductions

_REDUCTION_ARGS = {
    "()": ((), {}),
    "(0)": ((0,), {}),
    "(1)": ((1,), {}),
    "(-1, keepdim=True)": ((-1,), {"keepdim": True}),
    "(dim=0, keepdim=True)": ((), {"dim": 0, "keepdim": True}),
    "((0, 1))": (((0, 1),), {}),
}
for _name in ["sum", "mean", "prod", "amax", "amin", "logsumexp", "nansum", "nanmean", "std", "var"]:
    for _args_name, (_args, _kw) in _REDUCTION_ARGS.items():
        if _name == "logsumexp" and _args_name == "()":
            continue  # PyTorch's needs a dim
        if _name == "prod" and _args_name == "((0, 1))":
            continue  # PyTorch's takes one dim
        CALLS.append(
            Call(
                f"x.{_name}{_args_name}", lambda t, x, n=_name, a=_args, k=_kw: getattr(x, n)(*a, **k), (A3,)
            )
        )
    CALLS.append(Call(f"{_name}(x, 1)", lambda t, x, n=_name: getattr(t, n)(x, 1), (A,)))
for _name in ["max", "min", "argmax", "argmin", "median", "all", "any", "count_nonzero"]:
    CALLS.append(Call(f"x.{_name}()", lambda t, x, n=_name: getattr(x, n)(), (TIES,)))
    CALLS.append(Call(f"x.{_name}(1)", lambda t, x, n=_name: getattr(x, n)(1), (TIES,)))
    CALLS.append(Call(f"{_name}(x, dim=0)", lambda t, x, n=_name: getattr(t, n)(x, dim=0), (TIES,)))
    if _name != "count_nonzero":
        CALLS.append(
            Call(f"x.{_name}(1, keepdim=True)", lambda t, x, n=_name: getattr(x, n)(1, keepdim=True), (TIES,))
        )
CALLS += [
    _c("sum of int is i64", lambda t, x: x.sum(), I32),
    _c("sum of bool is i64", lambda t, m: m.sum(), MASK),
    _c("sum(1) of bool", lambda t, m: m.sum(1), MASK),
    _c("sum(dtype=float64) of f32", lambda t, x: x.sum(dtype=t.float64), A32),
    _c("sum(dim=[0, 1])", lambda t, x: x.sum(dim=[0, 1]), A3),
    _c("sum of f32 is f32", lambda t, x: t.sum(x, 0), A32),
    _c("mean of int refused", lambda t, x: x.mean(), INT),
    _c("x.float().mean()", lambda t, x: x.float().mean(), INT),
    _c("prod of int", lambda t, x: x.prod(1), INT),
    _c("prod gradient with zeros", lambda t, x: x.prod(1), np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 1.0]])),
    _c("cumsum(1)", lambda t, x: x.cumsum(1), A),
    _c("cumsum(dim=0) of int", lambda t, x: t.cumsum(x, dim=0), INT),
    _c("cumsum of bool", lambda t, m: m.cumsum(0), MASK),
    _c("cumprod(0)", lambda t, x: x.cumprod(0), A),
    _c("cummax(1)", lambda t, x: t.cummax(x, 1), TIES),
    _c("cummin(0)", lambda t, x: t.cummin(x, 0), TIES),
    _c("std(unbiased=False)", lambda t, x: x.std(unbiased=False), A),
    _c("std(1, correction=0)", lambda t, x: x.std(1, correction=0), A),
    _c("var(0, unbiased=True)", lambda t, x: x.var(0, unbiased=True), A),
    _c("var of one element", lambda t, x: x[:1].var(0), A),
    _c("std_mean(1)", lambda t, x: t.std_mean(x, 1), A),
    _c("var_mean(0, correction=0)", lambda t, x: t.var_mean(x, 0, correction=0), A),
    _c("norm()", lambda t, x: x.norm(), A),
    _c("norm(p=1)", lambda t, x: x.norm(p=1), A),
    _c("norm(dim=1)", lambda t, x: x.norm(dim=1), A),
    _c("norm(2, dim=1, keepdim=True)", lambda t, x: x.norm(2, dim=1, keepdim=True), A),
    _c("norm(p='fro')", lambda t, x: t.norm(x, p="fro"), A),
    _c("norm(float('inf'))", lambda t, x: x.norm(float("inf")), A),
    _c("linalg.norm", lambda t, x: t.linalg.norm(x), A),
    _c("linalg.vector_norm(ord=3)", lambda t, x: t.linalg.vector_norm(x, ord=3), A),
    _c("norm gradient at 0", lambda t, x: x.norm(), np.zeros(3)),
    _c("max of NaN", lambda t, x: x.max(), SPECIAL),
    _c("max(1) of NaN", lambda t, x: x.max(1), SPECIAL),
    _c("argmax of NaN", lambda t, x: x.argmax(1), SPECIAL),
    _c("sum of SPECIAL", lambda t, x: x.sum(0), SPECIAL),
    _c("all() of float", lambda t, x: x.all(), A),
    _c("any(dim=1) of int", lambda t, x: x.any(dim=1), INT),
    _c("aminmax", lambda t, x: t.aminmax(x), A),
    _c("aminmax(dim=1)", lambda t, x: t.aminmax(x, dim=1), A),
    _c("mode(1)", lambda t, x: t.mode(x, 1), TIES),
    _c("kthvalue(2, 1)", lambda t, x: t.kthvalue(x, 2, 1), TIES),
    _c("median() even count (lower)", lambda t, x: x.median(), B),
    _c("quantile(0.3)", lambda t, x: t.quantile(x, 0.3), A),
    _c("quantile(q, dim=1)", lambda t, x: t.quantile(x, 0.75, dim=1), A),
    _c("sum(5) refused", lambda t, x: x.sum(5), A),
    _c("max(dim=2) refused", lambda t, x: x.max(dim=2), A),
    _c("max() of empty refused", lambda t: t.zeros(0).max()),
    _c("sum of empty", lambda t: t.zeros(0).sum()),
    _c("mean of empty is NaN", lambda t: t.zeros(0).mean()),
]

# ---------------------------------------------------------------------------------------------------------
# Indexing

_INDEXES = {
    "x[0]": lambda t, x: x[0],
    "x[-1]": lambda t, x: x[-1],
    "x[:, 1]": lambda t, x: x[:, 1],
    "x[1:3]": lambda t, x: x[1:3],
    "x[::2]": lambda t, x: x[::2],
    "x[..., -1]": lambda t, x: x[..., -1],
    "x[None]": lambda t, x: x[None],
    "x[:, None, :]": lambda t, x: x[:, None, :],
    "x[0, 1] (0-d)": lambda t, x: x[0, 1],
    "x[[0, 2]]": lambda t, x: x[[0, 2]],
    "x[tensor([0, 2])]": lambda t, x: x[t.tensor([0, 2])],
    "x[tensor([[0, 1], [2, 2]])]": lambda t, x: x[t.tensor([[0, 1], [2, 2]])],
    "x[[0, 0, 1]] (repeated rows)": lambda t, x: x[[0, 0, 1]],
    "x[:, [1, 3]]": lambda t, x: x[:, [1, 3]],
    "x[[0, 1], [2, 3]]": lambda t, x: x[[0, 1], [2, 3]],
    "x[x > 0]": lambda t, x: x[x > 0],
    "x[row mask]": lambda t, x: x[t.tensor([True, False, True])],
    "x[1:, -2:]": lambda t, x: x[1:, -2:],
    "x[5:] (empty)": lambda t, x: x[5:],
    "x[-10:10]": lambda t, x: x[-10:10],
    "x[tensor(1)]": lambda t, x: x[t.tensor(1)],
    "x[True]": lambda t, x: x[True],
    "x[..., None]": lambda t, x: x[..., None],
    "x[::-1] refused": lambda t, x: x[::-1],
    "x[3] refused": lambda t, x: x[3],
    "x[0, 0, 0] refused": lambda t, x: x[0, 0, 0],
    "x[tensor([5])] refused": lambda t, x: x[t.tensor([5])],
    "x[1.0] refused": lambda t, x: x[1.0],
}
for _name, _f in _INDEXES.items():
    CALLS.append(Call(_name, _f, (A,)))
CALLS += [
    _c("x3[:, 0, :]", lambda t, x: x[:, 0, :], A3),
    _c("x3[..., 1:3]", lambda t, x: x[..., 1:3], A3),
    _c("x3[1, :, [0, 3]]", lambda t, x: x[1, :, [0, 3]], A3),
    _c("x3[:, [0, 2], [1, 3]]", lambda t, x: x[:, [0, 2], [1, 3]], A3),
    _c("x3[[0, 1], :, [1, 2]] (split advanced)", lambda t, x: x[[0, 1], :, [1, 2]], A3),
    _c("int[:, 1:]", lambda t, x: x[:, 1:], INT),
    _c("x[i64 tensor index]", lambda t, x, i: x[i], A, ROWS),
    _c("x[i32 tensor index]", lambda t, x, i: x[i], A, ROWS.astype(np.int32)),
    _c("x[mask tensor]", lambda t, x, m: x[m], A, MASK),
    _c("setitem x[0] = 1", lambda t, x: _set(x.clone(), 0, 1.0), A),
    _c("setitem x[:, 1] = row", lambda t, x, y: _set(x.clone(), (slice(None), 1), y[:3]), A, B),
    _c("setitem x[x > 0] = 0", lambda t, x: _set(x.clone(), x > 0, 0.0), A),
    _c("setitem x[[0, 2]] = y", lambda t, x, y: _set(x.clone(), [0, 2], y), A, B),
    _c(
        "setitem x[[0, 0]] = tensor (repeated)",
        lambda t, x, y: _set(x.clone(), [0, 0], y[:2, None] * 1.0),
        A,
        A[:, 0].copy(),
    ),
    _c("setitem int[0] = 2.7 (truncated)", lambda t, x: _set(x.clone(), 0, 2.7), INT),
    _c("setitem x[1:] = 0 (leaf not involved)", lambda t, x: _set(x.clone(), slice(1, None), 0), A),
    _c("index_select", lambda t, x, i: t.index_select(x, 1, i), A, ROWS),
    _c("x.index_select(0, i)", lambda t, x, i: x.index_select(0, i), A, ROWS),
    _c("gather", lambda t, x, i: t.gather(x, 1, i), A, np.array([[0, 3], [1, 1], [2, 0]])),
    _c("x.gather(0, i)", lambda t, x, i: x.gather(0, i), A, np.array([[0, 1, 2, 0]])),
    _c("gather out of range refused", lambda t, x, i: x.gather(1, i), A, np.array([[4], [0], [0]])),
    _c("take", lambda t, x, i: t.take(x, i), A, np.array([0, 5, 11])),
    _c("take(x, [0, 2]) indexes the flattened x", lambda t, x, i: t.take(x, i), A, np.array([0, 2])),
    _c("x.take(i)", lambda t, x, i: x.take(i), A, np.array([[1, 2], [0, 0]])),
    _c("masked_select", lambda t, x, m: t.masked_select(x, m), A, MASK),
    _c("narrow", lambda t, x: t.narrow(x, 1, 1, 2), A),
    _c("x.narrow(0, 1, 2)", lambda t, x: x.narrow(0, 1, 2), A),
    _c("scatter", lambda t, x, i, s: x.scatter(1, i, s), A, np.array([[0], [2], [3]]), C),
    _c("scatter(value)", lambda t, x, i: x.scatter(1, i, 0.5), A, np.array([[0], [2], [3]])),
    _c("scatter_add", lambda t, x, i, s: x.scatter_add(0, i, s), A, np.array([[0, 1, 2, 0]]), B[None]),
    _c(
        "scatter_reduce amax",
        lambda t, x, i, s: x.scatter_reduce(0, i, s, reduce="amax"),
        A,
        np.array([[0, 1, 2, 0]]),
        B[None],
    ),
    _c("index_add", lambda t, x, i, s: x.index_add(0, i, s), A, ROWS, A[:2].copy()),
    _c("index_fill", lambda t, x, i: x.index_fill(1, i, -1.0), A, ROWS),
    _c("index_put", lambda t, x, v: x.index_put((t.tensor([0, 2]),), v), A, B),
    _c("nonzero", lambda t, x: t.nonzero(x), INT),
    _c("nonzero(as_tuple=True)", lambda t, x: t.nonzero(x, as_tuple=True), INT),
    _c("x.nonzero()", lambda t, m: m.nonzero(), MASK),
    _c("argwhere", lambda t, x: t.argwhere(x), INT),
    _c("one_hot", lambda t, i: t.nn.functional.one_hot(i), TARGET),
    _c("one_hot(num_classes=6)", lambda t, i: t.nn.functional.one_hot(i, num_classes=6), TARGET),
    _c("embedding", lambda t, i, w: t.nn.functional.embedding(i, w), np.array([[0, 2], [1, 1]]), A),
    _c("embedding out of range refused", lambda t, i, w: t.nn.functional.embedding(i, w), np.array([3]), A),
    _c("bincount", lambda t, i: t.bincount(i), np.array([0, 1, 1, 4])),
    _c("diag", lambda t, x: t.diag(x), B),
    _c("diag of matrix", lambda t, x: t.diag(x), A),
    _c("diagonal", lambda t, x: t.diagonal(x, 1), A),
    _c("x.diagonal(dim1=1, dim2=2)", lambda t, x: x.diagonal(dim1=1, dim2=2), A3),
    _c("trace", lambda t, x: t.trace(x), A),
    _c("tril", lambda t, x: t.tril(x), A),
    _c("triu(1)", lambda t, x: t.triu(x, 1), A),
    _c("x.tril(-1)", lambda t, x: x.tril(-1), A),
]


def _set(x: Any, index: Any, value: Any) -> Any:
    x[index] = value
    return x


# ---------------------------------------------------------------------------------------------------------
# Shapes

CALLS += [
    _c("view(4, 3)", lambda t, x: x.view(4, 3), A),
    _c("view(-1)", lambda t, x: x.view(-1), A),
    _c("view((2, -1))", lambda t, x: x.view((2, -1)), A),
    _c("view(5, -1) refused", lambda t, x: x.view(5, -1), A),
    _c("view after transpose refused", lambda t, x: x.t().view(-1), A),
    _c("view(dtype) reinterprets the bytes", lambda t, x: x.view(t.int64), A),
    _c("reshape(2, -1)", lambda t, x: x.reshape(2, -1), A),
    _c("reshape((-1,))", lambda t, x: x.reshape((-1,)), A),
    _c("reshape(x, (6, 2))", lambda t, x: t.reshape(x, (6, 2)), A),
    _c("reshape(-1, -1) refused", lambda t, x: x.reshape(-1, -1), A),
    _c("view_as", lambda t, x, y: x.view_as(y), A, A.reshape(4, 3).copy()),
    _c("reshape_as", lambda t, x, y: x.reshape_as(y), A, A.reshape(2, 6).copy()),
    _c("permute(1, 0)", lambda t, x: x.permute(1, 0), A),
    _c("permute((2, 0, 1))", lambda t, x: x.permute((2, 0, 1)), A3),
    _c("permute(x, (0, 2, 1))", lambda t, x: t.permute(x, (0, 2, 1)), A3),
    _c("permute(0, 0, 1) refused", lambda t, x: x.permute(0, 0, 1), A3),
    _c("transpose(0, 1)", lambda t, x: x.transpose(0, 1), A),
    _c("transpose(-1, -2)", lambda t, x: x.transpose(-1, -2), A3),
    _c("transpose(x, 0, 2)", lambda t, x: t.transpose(x, 0, 2), A3),
    _c("swapaxes", lambda t, x: x.swapaxes(0, 1), A),
    _c("x.T", lambda t, x: x.T, A),
    _c("x.t()", lambda t, x: x.t(), A),
    _c("x.t() of a vector", lambda t, x: x.t(), B),
    _c("x.mT", lambda t, x: x.mT, A3),
    _c("x.mT of a vector refused", lambda t, x: x.mT, B),
    _c("expand(3, 4)", lambda t, x: x.expand(3, 4), C),
    _c("expand(-1, 4)", lambda t, x: x.expand(-1, 4), C),
    _c("expand(2, 3, 4)", lambda t, x: x.expand(2, 3, 4), A),
    _c("expand((2, -1, -1))", lambda t, x: x.expand((2, -1, -1)), A),
    _c("expand_as", lambda t, x, y: x.expand_as(y), B, A),
    _c("expand(4, 4) refused", lambda t, x: x.expand(4, 4), A),
    _c("broadcast_to", lambda t, x: t.broadcast_to(x, (2, 3, 4)), B),
    _c("broadcast_tensors", lambda t, x, y: t.broadcast_tensors(x, y), C, B),
    _c("repeat(2, 1)", lambda t, x: x.repeat(2, 1), A),
    _c("repeat(1, 2, 1)", lambda t, x: x.repeat(1, 2, 1), A),
    _c("repeat((2, 2))", lambda t, x: x.repeat((2, 2)), B),
    _c("repeat(2) refused (fewer dims)", lambda t, x: x.repeat(2), A),
    _c("repeat_interleave(2)", lambda t, x: x.repeat_interleave(2), B),
    _c("repeat_interleave(2, dim=0)", lambda t, x: t.repeat_interleave(x, 2, dim=0), A),
    _c("tile", lambda t, x: t.tile(x, (2,)), A),
    _c("squeeze()", lambda t, x: x.squeeze(), C),
    _c("squeeze(1)", lambda t, x: x.squeeze(1), C),
    _c("squeeze(0) of size 3 (no-op)", lambda t, x: x.squeeze(0), C),
    _c("squeeze((0, 1))", lambda t, x: x.squeeze((0, 1)), C[None]),
    _c("squeeze(5) refused", lambda t, x: x.squeeze(5), C),
    _c("squeeze(x, -1)", lambda t, x: t.squeeze(x, -1), C),
    _c("unsqueeze(0)", lambda t, x: x.unsqueeze(0), A),
    _c("unsqueeze(-1)", lambda t, x: x.unsqueeze(-1), A),
    _c("unsqueeze(x, 1)", lambda t, x: t.unsqueeze(x, 1), B),
    _c("unsqueeze(3) refused", lambda t, x: x.unsqueeze(4), A),
    _c("flatten()", lambda t, x: x.flatten(), A3),
    _c("flatten(1)", lambda t, x: t.flatten(x, 1), A3),
    _c("flatten(0, 1)", lambda t, x: x.flatten(0, 1), A3),
    _c("flatten of 0-d", lambda t, x: x.sum().flatten(), A),
    _c("unflatten", lambda t, x: x.unflatten(1, (2, 2)), A),
    _c("unflatten(-1)", lambda t, x: t.unflatten(x, -1, (2, -1)), A),
    _c("ravel", lambda t, x: x.ravel(), A),
    _c("movedim", lambda t, x: t.movedim(x, 0, -1), A3),
    _c("moveaxis", lambda t, x: t.moveaxis(x, 2, 0), A3),
    _c("flip(0)", lambda t, x: t.flip(x, [0]), A),
    _c("x.flip(0, 1)", lambda t, x: x.flip(0, 1), A),
    _c("fliplr", lambda t, x: t.fliplr(x), A),
    _c("roll(1)", lambda t, x: t.roll(x, 1), A),
    _c("roll(1, dims=1)", lambda t, x: t.roll(x, 1, dims=1), A),
    _c("roll((1, 2), (0, 1))", lambda t, x: x.roll((1, 2), (0, 1)), A),
    _c("rot90", lambda t, x: t.rot90(x, 1, (0, 1)), A),
    _c("chunk(2, dim=1)", lambda t, x: x.chunk(2, dim=1), A),
    _c("chunk(3, dim=1) (uneven: 2 chunks)", lambda t, x: x.chunk(3, dim=1), A),
    _c("chunk(2) uneven rows", lambda t, x: t.chunk(x, 2), A),
    _c("chunk(5) more than rows", lambda t, x: t.chunk(x, 5), A),
    _c("split(2, dim=1)", lambda t, x: x.split(2, dim=1), A),
    _c("split(2) uneven", lambda t, x: t.split(x, 2), A),
    _c("split([1, 3], dim=1)", lambda t, x: x.split([1, 3], dim=1), A),
    _c("split([1, 2], dim=1) refused", lambda t, x: x.split([1, 2], dim=1), A),
    _c("tensor_split(3, dim=1)", lambda t, x: t.tensor_split(x, 3, dim=1), A),
    _c("unbind(1)", lambda t, x: x.unbind(1), A),
    _c("unbind(x)", lambda t, x: t.unbind(x), A),
    _c("stack([x, x])", lambda t, x: t.stack([x, x]), A),
    _c("stack((x, y), dim=1)", lambda t, x, y: t.stack((x, y), dim=1), A, A * 2),
    _c("stack(dim=-1)", lambda t, x, y: t.stack([x, y], dim=-1), A, A),
    _c("stack(f32, f64)", lambda t, x, y: t.stack([x, y]), A32, A),
    _c("stack of shapes that differ refused", lambda t, x, y: t.stack([x, y]), A, D),
    _c("stack of 0-d", lambda t, x: t.stack([x.sum(), x.mean()]), A),
    _c("cat([x, x])", lambda t, x: t.cat([x, x]), A),
    _c("cat((x, y), dim=1)", lambda t, x, y: t.cat((x, y), dim=1), A, C),
    _c("cat(dim=-1)", lambda t, x, y: t.cat([x, y], dim=-1), A, C),
    _c("cat(f32, f64)", lambda t, x, y: t.cat([x, y]), A32, A),
    _c("cat(i64, f32)", lambda t, x, y: t.cat([x, y]), INT, A32),
    _c("cat with an empty tensor", lambda t, x: t.cat([x, t.zeros(0, 4, dtype=t.float64)]), A),
    _c("cat of shapes that differ refused", lambda t, x, y: t.cat([x, y]), A, D),
    _c("concat", lambda t, x: t.concat([x, x], dim=1), A),
    _c("concatenate", lambda t, x: t.concatenate([x, x]), A),
    _c("hstack", lambda t, x, y: t.hstack([x, y]), A, C),
    _c("vstack", lambda t, x, y: t.vstack([x, y]), A, B),
    _c("dstack", lambda t, x: t.dstack([x, x]), A),
    _c("column_stack", lambda t, x, y: t.column_stack([x, y]), B, B),
    _c("meshgrid(indexing='ij')", lambda t, x, y: t.meshgrid(x, y, indexing="ij"), B, C[:, 0].copy()),
    _c("meshgrid(indexing='xy')", lambda t, x, y: t.meshgrid(x, y, indexing="xy"), B, C[:, 0].copy()),
    _c("contiguous", lambda t, x: x.t().contiguous(), A),
    _c("is_contiguous", lambda t, x: (x.is_contiguous(), x.t().is_contiguous()), A),
    _c("clone", lambda t, x: x.clone(), A),
    _c("detach", lambda t, x: x.detach(), A),
    _c("x.size()", lambda t, x: tuple(x.size()), A3),
    _c("x.size(1)", lambda t, x: x.size(1), A3),
    _c("x.size(-1)", lambda t, x: x.size(-1), A3),
    _c("x.shape", lambda t, x: tuple(x.shape), A3),
    _c("x.shape[0]", lambda t, x: x.shape[0], A3),
    _c("x.dim()", lambda t, x: x.dim(), A3),
    _c("x.ndim", lambda t, x: x.ndim, A3),
    _c("x.ndimension()", lambda t, x: x.ndimension(), A3),
    _c("x.numel()", lambda t, x: x.numel(), A3),
    _c("x.nelement()", lambda t, x: x.nelement(), A3),
    _c("len(x)", lambda t, x: len(x), A3),
    _c("x.element_size()", lambda t, x: x.element_size(), A32),
    _c("x.dtype", lambda t, x: x.dtype, A32),
    _c("x.dtype == float64", lambda t, x: x.dtype == t.float64, A),
    _c("x.is_leaf", lambda t, x: (x.is_leaf, (x * 2).is_leaf), A),
    _c("x.requires_grad", lambda t, x: (x.requires_grad, x.detach().requires_grad), A),
    _c("x.grad_fn is None", lambda t, x: (x.grad_fn is None, (x * 2).grad_fn is None), A),
    _c("x.device.type", lambda t, x: str(x.device), A),
    _c("x.item()", lambda t, x: x.sum().item(), A),
    _c("int x.item()", lambda t, x: x.sum().item(), INT),
    _c("bool x.item()", lambda t, m: m.any().item(), MASK),
    _c("x.item() of many refused", lambda t, x: x.item(), A),
    _c("x.tolist()", lambda t, x: x.tolist(), A),
    _c("int x.tolist()", lambda t, x: x.tolist(), INT),
    _c("0-d tolist()", lambda t, x: x.sum().tolist(), A),
    _c("float(x)", lambda t, x: float(x.sum()), A),
    _c("int(x)", lambda t, x: int(x[0, 0]), INT),
    _c("bool(x) of one", lambda t, x: bool(x[0, 0] > 0), A),
    _c("bool(x) of many refused", lambda t, x: bool(x > 0), A),
    # x.numpy() of a tensor requiring grad gives the values (PyTorch refuses): documented in the README
    _c("x.to(float32)", lambda t, x: x.to(t.float32), A),
    _c("x.to(dtype=int64)", lambda t, x: x.to(dtype=t.int64), A * 3),
    _c("x.to('cpu')", lambda t, x: x.to("cpu"), A),
    _c("x.to(y)", lambda t, x, y: x.to(y), A, A32),
    _c("x.to('cpu', float32)", lambda t, x: x.to("cpu", t.float32), A),
    _c("x.cpu()", lambda t, x: x.cpu(), A),
    _c("x.float()", lambda t, x: x.float(), A),
    _c("x.double()", lambda t, x: x.double(), A32),
    _c("x.half()", lambda t, x: x.half(), A),
    _c("x.long() truncates", lambda t, x: x.long(), A * 3),
    _c("x.int()", lambda t, x: x.int(), A * 3),
    _c("x.bool()", lambda t, x: x.bool(), INT),
    _c("bool.float()", lambda t, m: m.float(), MASK),
    _c("x.type(float32)", lambda t, x: x.type(t.float32), A),
    _c("x.type_as(y)", lambda t, x, y: x.type_as(y), INT, A32),
    _c("x.long() of NaN and inf", lambda t, x: x[1:].long(), SPECIAL),
    _c("x.abs().sqrt().log()", lambda t, x: x.abs().sqrt().log(), A),
]

# ---------------------------------------------------------------------------------------------------------
# Sorting and searching

CALLS += [
    _c("sort()", lambda t, x: t.sort(x), A),
    _c("x.sort(descending=True)", lambda t, x: x.sort(descending=True), A),
    _c("x.sort(0)", lambda t, x: x.sort(0), A),
    _c("sort(dim=1, stable=True) ties", lambda t, x: t.sort(x, dim=1, stable=True), TIES),
    _c("sort with NaN (last)", lambda t, x: t.sort(x, 1), SPECIAL),
    _c("sort of int", lambda t, x: t.sort(x), INT),
    _c("argsort", lambda t, x: t.argsort(x), A),
    _c("argsort(descending=True)", lambda t, x: x.argsort(1, descending=True), A),
    _c("argsort(stable=True) ties", lambda t, x: t.argsort(x, stable=True), TIES),
    _c("msort", lambda t, x: t.msort(x), A),
    _c("topk(2)", lambda t, x: t.topk(x, 2), A),
    _c("x.topk(2, largest=False)", lambda t, x: x.topk(2, largest=False), A),
    _c("topk(2, dim=0)", lambda t, x: x.topk(2, dim=0), A),
    _c("topk(k=3)", lambda t, x: x.topk(k=3), B),
    _c("topk(5) refused", lambda t, x: x.topk(5), A),
    _c("argmax()", lambda t, x: t.argmax(x), A),
    _c("argmax(dim=1, keepdim=True)", lambda t, x: t.argmax(x, dim=1, keepdim=True), A),
    _c("argmax of int", lambda t, x: x.argmax(0), INT),
    _c("argmax of bool", lambda t, m: m.argmax(1), MASK),
    _c("argmin(0)", lambda t, x: x.argmin(0), TIES),
    _c("unique", lambda t, x: t.unique(x), INT),
    _c("unique(return_counts=True)", lambda t, x: t.unique(x, return_counts=True), INT),
    _c("unique(return_inverse=True)", lambda t, x: t.unique(x, return_inverse=True), INT),
    _c("x.unique(sorted=True)", lambda t, x: x.unique(sorted=True), TIES, grad=False),
    _c("unique(dim=0)", lambda t, x: t.unique(x, dim=0), np.array([[1, 2], [0, 1], [1, 2]])),
    _c("unique_consecutive", lambda t, x: t.unique_consecutive(x), np.array([1, 1, 2, 2, 3, 1])),
    _c("searchsorted", lambda t, s, v: t.searchsorted(s, v), np.sort(B), A),
    _c(
        "searchsorted(right=True)",
        lambda t, s, v: t.searchsorted(s, v, right=True),
        np.array([1.0, 2, 2, 3]),
        np.array([2.0, 0.0, 4.0]),
    ),
    _c("bucketize", lambda t, v, s: t.bucketize(v, s), A, np.array([-1.0, 0.0, 1.0])),
    _c("histc", lambda t, x: t.histc(x, bins=4, min=-2, max=2), A),
    _c("x.max(1).indices", lambda t, x: x.max(1).indices, TIES),
    _c("x.max(1)[0]", lambda t, x: x.max(1)[0], TIES),
    _c("values, indices = x.min(0)", lambda t, x: list(x.min(0)), TIES),
]

# ---------------------------------------------------------------------------------------------------------
# nn.functional: activations

_ACTIVATIONS = {
    "relu": lambda F, x: F.relu(x),
    "relu6": lambda F, x: F.relu6(x * 4),
    "leaky_relu": lambda F, x: F.leaky_relu(x),
    "leaky_relu(0.2)": lambda F, x: F.leaky_relu(x, 0.2),
    "leaky_relu(negative_slope=0.3)": lambda F, x: F.leaky_relu(x, negative_slope=0.3),
    "elu": lambda F, x: F.elu(x),
    "elu(alpha=0.5)": lambda F, x: F.elu(x, alpha=0.5),
    "selu": lambda F, x: F.selu(x),
    "celu": lambda F, x: F.celu(x, alpha=2.0),
    "gelu": lambda F, x: F.gelu(x),
    "gelu(approximate='tanh')": lambda F, x: F.gelu(x, approximate="tanh"),
    "gelu(approximate='bad') refused": lambda F, x: F.gelu(x, approximate="bad"),
    "silu": lambda F, x: F.silu(x),
    "mish": lambda F, x: F.mish(x),
    "softplus": lambda F, x: F.softplus(x),
    "softplus(beta=2, threshold=1)": lambda F, x: F.softplus(x, beta=2, threshold=1),
    "softsign": lambda F, x: F.softsign(x),
    "hardtanh": lambda F, x: F.hardtanh(x * 2),
    "hardtanh(-0.5, 0.5)": lambda F, x: F.hardtanh(x, -0.5, 0.5),
    "hardsigmoid": lambda F, x: F.hardsigmoid(x * 4),
    "hardswish": lambda F, x: F.hardswish(x * 4),
    "logsigmoid": lambda F, x: F.logsigmoid(x),
    "tanhshrink": lambda F, x: F.tanhshrink(x),
    "softshrink": lambda F, x: F.softshrink(x, 0.5),
    "hardshrink": lambda F, x: F.hardshrink(x, 0.5),
    "threshold": lambda F, x: F.threshold(x, 0.1, 20.0),
    "sigmoid": lambda F, x: F.sigmoid(x),
    "tanh": lambda F, x: F.tanh(x),
    "softmax(dim=1)": lambda F, x: F.softmax(x, dim=1),
    "softmax(dim=0)": lambda F, x: F.softmax(x, dim=0),
    "softmax(x, -1)": lambda F, x: F.softmax(x, -1),
    "softmax(dim=1, dtype=float32)": lambda F, x: F.softmax(x, dim=1, dtype=x.dtype),
    "log_softmax(dim=1)": lambda F, x: F.log_softmax(x, dim=1),
    "log_softmax(dim=0)": lambda F, x: F.log_softmax(x, dim=0),
    "softmin(dim=1)": lambda F, x: F.softmin(x, dim=1),
    "glu": lambda F, x: F.glu(x),
    "glu(dim=0) refused (odd)": lambda F, x: F.glu(x, dim=0),
    "normalize": lambda F, x: F.normalize(x),
    "normalize(p=1, dim=0)": lambda F, x: F.normalize(x, p=1, dim=0),
    "dropout(training=False)": lambda F, x: F.dropout(x, 0.5, training=False),
    "dropout(p=0)": lambda F, x: F.dropout(x, 0.0),
    "dropout(p=1) is zeros": lambda F, x: F.dropout(x, 1.0),
    "dropout(p=2) refused": lambda F, x: F.dropout(x, 2.0),
    "alpha_dropout(training=False)": lambda F, x: F.alpha_dropout(x, 0.5, training=False),
    "rrelu(training=False)": lambda F, x: F.rrelu(x, training=False),
    "prelu": lambda F, x: F.prelu(x, x.new_full((1,), 0.25)),
    "rms_norm": lambda F, x: F.rms_norm(x, (4,)),
    "layer_norm(x, (4,))": lambda F, x: F.layer_norm(x, (4,)),
    "layer_norm(x, [3, 4])": lambda F, x: F.layer_norm(x, [3, 4]),
    "local_response_norm": lambda F, x: F.local_response_norm(x[None], 2),
    "pad(x, (1, 2))": lambda F, x: F.pad(x, (1, 2)),
    "pad(x, (1, 1, 2, 0), value=3)": lambda F, x: F.pad(x, (1, 1, 2, 0), value=3.0),
    "pad(x, (-1, 1)) crops": lambda F, x: F.pad(x, (-1, 1)),
    "pad(reflect)": lambda F, x: F.pad(x[None], (2, 1), mode="reflect"),
    "pad(replicate)": lambda F, x: F.pad(x[None], (2, 1), mode="replicate"),
    "pad(circular)": lambda F, x: F.pad(x[None], (2, 1), mode="circular"),
    "cosine_similarity": lambda F, x: F.cosine_similarity(x, x.flip(0)),
    "cosine_similarity(dim=0)": lambda F, x: F.cosine_similarity(x, x * 2 + 1, dim=0),
    "pairwise_distance": lambda F, x: F.pairwise_distance(x, x.flip(0)),
}
# PyTorch's hardsigmoid backward multiplies by 1/6 rounded to f32, in f64 too (0.1666666716...)
_GRAD_RTOL = {"hardsigmoid": 1e-7}
for _name, _f in _ACTIVATIONS.items():
    _x = A3 if "[3, 4]" in _name else A
    CALLS.append(
        Call(f"F.{_name}", lambda t, x, f=_f: f(t.nn.functional, x), (_x,), grad_rtol=_GRAD_RTOL.get(_name))
    )
    if "refused" not in _name:
        CALLS.append(Call(f"F.{_name} f32", lambda t, x, f=_f: f(t.nn.functional, x), (A32,)))
CALLS += [
    _c("F.relu at 0: gradient", lambda t, x: t.nn.functional.relu(x), np.array([0.0, 1.0, -1.0])),
    _c("F.leaky_relu at 0: gradient", lambda t, x: t.nn.functional.leaky_relu(x, 0.1), np.array([0.0, 1.0])),
    _c(
        "F.hardtanh at the bounds: gradient",
        lambda t, x: t.nn.functional.hardtanh(x),
        np.array([-1.0, 1.0, 0.5]),
    ),
    _c("F.relu6 at 6: gradient", lambda t, x: t.nn.functional.relu6(x), np.array([0.0, 6.0, 3.0])),
    _c(
        "F.softmax of -inf row",
        lambda t, x: t.nn.functional.softmax(x, dim=1),
        np.array([[-np.inf, 0.0, 1.0], [2.0, -np.inf, -np.inf]]),
    ),
    _c("F.softmax of int refused", lambda t, x: t.nn.functional.softmax(x, dim=1), INT),
    _c("F.softmax of f32 to f64", lambda t, x: t.nn.functional.softmax(x, dim=1, dtype=t.float64), A32),
    _c("F.relu of int", lambda t, x: t.nn.functional.relu(x), INT),
    _c("F.relu(inplace=True)", lambda t, x: t.nn.functional.relu(x.clone(), inplace=True), A),
    _c("F.gelu of large values", lambda t, x: t.nn.functional.gelu(x * 30), A),
    _c("F.softplus of large values", lambda t, x: t.nn.functional.softplus(x * 100), A),
    _c("F.logsigmoid of large values", lambda t, x: t.nn.functional.logsigmoid(x * 1000), A),
    _c("F.log_softmax of large values", lambda t, x: t.nn.functional.log_softmax(x * 1e4, dim=1), A),
    _c("sigmoid of large values: gradient", lambda t, x: t.sigmoid(x * 1000), A),
]

# ---------------------------------------------------------------------------------------------------------
# nn.functional: linear, convolution, pooling, normalization, attention

_F = lambda t: t.nn.functional
_W = _rng.standard_normal((5, 4))
_BIAS5 = _rng.standard_normal(5)
_K2 = _rng.standard_normal((4, 3, 3, 3))
_K1 = _rng.standard_normal((4, 3, 3))
_Q = _rng.standard_normal((2, 2, 5, 4))
_KV = _rng.standard_normal((2, 2, 6, 4))
CALLS += [
    _c("F.linear", lambda t, x, w, b: _F(t).linear(x, w, b), A, _W, _BIAS5),
    _c("F.linear no bias", lambda t, x, w: _F(t).linear(x, w), A3, _W),
    _c("F.linear of a vector", lambda t, x, w: _F(t).linear(x, w), B, _W),
    _c("F.linear shape mismatch refused", lambda t, x, w: _F(t).linear(x, w), A, D),
    _c("F.bilinear", lambda t, x, y, w: _F(t).bilinear(x, y, w), A, A, _rng.standard_normal((2, 4, 4))),
    _c("F.conv1d", lambda t, x, w: _F(t).conv1d(x, w), SEQ, _K1),
    _c("F.conv1d(padding=1, stride=2)", lambda t, x, w: _F(t).conv1d(x, w, padding=1, stride=2), SEQ, _K1),
    _c(
        "F.conv1d(padding='same', dilation=2)",
        lambda t, x, w: _F(t).conv1d(x, w, padding="same", dilation=2),
        SEQ,
        _K1,
    ),
    _c("F.conv2d", lambda t, x, w, b: _F(t).conv2d(x, w, b), A4, _K2, B),
    _c("F.conv2d(stride=2, padding=1)", lambda t, x, w: _F(t).conv2d(x, w, stride=2, padding=1), A4, _K2),
    _c("F.conv2d(padding=(1, 0))", lambda t, x, w: _F(t).conv2d(x, w, padding=(1, 0)), A4, _K2),
    _c("F.conv2d(dilation=2)", lambda t, x, w: _F(t).conv2d(x, w, dilation=2), A4, _K2),
    _c("F.conv2d(padding='same')", lambda t, x, w: _F(t).conv2d(x, w, padding="same"), A4, _K2),
    _c("F.conv2d(padding='valid')", lambda t, x, w: _F(t).conv2d(x, w, padding="valid"), A4, _K2),
    _c(
        "F.conv2d(groups=3)",
        lambda t, x, w: _F(t).conv2d(x, w, groups=3),
        A4,
        _rng.standard_normal((6, 1, 3, 3)),
    ),
    _c("F.conv2d unbatched", lambda t, x, w: _F(t).conv2d(x, w), A4[0].copy(), _K2),
    _c("F.conv2d channel mismatch refused", lambda t, x, w: _F(t).conv2d(x, w), A4, _K2[:, :2].copy()),
    _c(
        "F.conv_transpose2d",
        lambda t, x, w: _F(t).conv_transpose2d(x, w),
        A4,
        _K2.transpose(1, 0, 2, 3).copy(),
    ),
    _c(
        "F.conv_transpose2d(stride=2, output_padding=1)",
        lambda t, x, w: _F(t).conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
        A4,
        _K2.transpose(1, 0, 2, 3).copy(),
    ),
    _c(
        "F.conv_transpose1d",
        lambda t, x, w: _F(t).conv_transpose1d(x, w, stride=2),
        SEQ,
        _K1.transpose(1, 0, 2).copy(),
    ),
    _c("F.max_pool2d(2)", lambda t, x: _F(t).max_pool2d(x, 2), A4),
    _c("F.max_pool2d(3, stride=2, padding=1)", lambda t, x: _F(t).max_pool2d(x, 3, stride=2, padding=1), A4),
    _c(
        "F.max_pool2d(2, ceil_mode=True)",
        lambda t, x: _F(t).max_pool2d(x[..., :5, :5], 2, ceil_mode=True),
        A4,
    ),
    _c("F.max_pool2d(return_indices=True)", lambda t, x: _F(t).max_pool2d(x, 2, return_indices=True), A4),
    _c("F.max_pool2d(dilation=2)", lambda t, x: _F(t).max_pool2d(x, 2, dilation=2), A4),
    _c(
        "F.max_pool2d with ties: gradient",
        lambda t, x: _F(t).max_pool2d(x, 2, stride=1),
        np.ones((1, 1, 3, 3)),
    ),
    _c("F.max_pool1d", lambda t, x: _F(t).max_pool1d(x, 2), SEQ),
    _c("F.avg_pool2d(2)", lambda t, x: _F(t).avg_pool2d(x, 2), A4),
    _c("F.avg_pool2d(3, 2, padding=1)", lambda t, x: _F(t).avg_pool2d(x, 3, 2, padding=1), A4),
    _c(
        "F.avg_pool2d(count_include_pad=False)",
        lambda t, x: _F(t).avg_pool2d(x, 3, 2, padding=1, count_include_pad=False),
        A4,
    ),
    _c("F.avg_pool1d", lambda t, x: _F(t).avg_pool1d(x, 3, 2), SEQ),
    _c("F.adaptive_avg_pool2d(1)", lambda t, x: _F(t).adaptive_avg_pool2d(x, 1), A4),
    _c("F.adaptive_avg_pool2d((4, 3))", lambda t, x: _F(t).adaptive_avg_pool2d(x, (4, 3)), A4),
    _c("F.adaptive_max_pool2d(2)", lambda t, x: _F(t).adaptive_max_pool2d(x, 2), A4),
    _c("F.adaptive_avg_pool1d(3)", lambda t, x: _F(t).adaptive_avg_pool1d(x, 3), SEQ),
    _c("F.lp_pool2d", lambda t, x: _F(t).lp_pool2d(x, 2, 2), A4),
    _c("F.interpolate(scale_factor=2)", lambda t, x: _F(t).interpolate(x, scale_factor=2), A4),
    _c("F.interpolate(size=(9, 9), nearest)", lambda t, x: _F(t).interpolate(x, size=(9, 9)), A4),
    _c("F.interpolate(bilinear)", lambda t, x: _F(t).interpolate(x, scale_factor=2, mode="bilinear"), A4),
    _c(
        "F.interpolate(bilinear, align_corners=True)",
        lambda t, x: _F(t).interpolate(x, size=(8, 7), mode="bilinear", align_corners=True),
        A4,
    ),
    _c("F.interpolate(bicubic)", lambda t, x: _F(t).interpolate(x, scale_factor=2, mode="bicubic"), A4),
    _c("F.interpolate(linear)", lambda t, x: _F(t).interpolate(x, scale_factor=1.5, mode="linear"), SEQ),
    _c(
        "F.interpolate(nearest-exact)",
        lambda t, x: _F(t).interpolate(x, size=(4, 4), mode="nearest-exact"),
        A4,
    ),
    _c("F.pixel_shuffle", lambda t, x: _F(t).pixel_shuffle(x, 2), _rng.standard_normal((1, 8, 2, 3))),
    _c("F.pixel_unshuffle", lambda t, x: _F(t).pixel_unshuffle(x, 2), A4),
    _c("F.unfold", lambda t, x: _F(t).unfold(x, 3), A4),
    _c("F.fold", lambda t, x: _F(t).fold(x, (4, 4), 3), _rng.standard_normal((1, 18, 4))),
    _c(
        "F.embedding(padding_idx=0)",
        lambda t, i, w: _F(t).embedding(i, w, padding_idx=0),
        np.array([0, 2, 0]),
        A,
    ),
    _c(
        "F.embedding(max_norm=1)",
        lambda t, i, w: _F(t).embedding(i, w.detach().clone(), max_norm=1.0),
        np.array([0, 2]),
        A,
    ),
    _c(
        "F.layer_norm(weight, bias)",
        lambda t, x, w, b: _F(t).layer_norm(x, (4,), w, b, eps=1e-3),
        A,
        B,
        B[::-1].copy(),
    ),
    _c("F.group_norm", lambda t, x: _F(t).group_norm(x, 1), A4),
    _c(
        "F.group_norm(3, weight, bias)",
        lambda t, x, w, b: _F(t).group_norm(x, 3, w, b),
        A4,
        B[:3].copy(),
        C[:, 0].copy(),
    ),
    _c("F.batch_norm(training=True)", lambda t, x: _F(t).batch_norm(x, None, None, training=True), A4),
    _c(
        "F.batch_norm(running stats, eval)",
        lambda t, x, m, v: _F(t).batch_norm(x, m, v, training=False),
        A4,
        B[:3].copy(),
        POS[0, :3].copy(),
        grad=False,
    ),
    _c(
        "F.batch_norm updates running stats",
        lambda t, x, m, v: (_F(t).batch_norm(x, m, v, training=True, momentum=0.2), m, v),
        A4,
        B[:3].copy(),
        POS[0, :3].copy(),
        grad=False,
    ),
    _c("F.instance_norm", lambda t, x: _F(t).instance_norm(x), A4),
    _c("F.sdpa", lambda t, q, k, v: _F(t).scaled_dot_product_attention(q, k, v), _Q, _KV, _KV),
    _c(
        "F.sdpa(is_causal=True)",
        lambda t, q, k, v: _F(t).scaled_dot_product_attention(q, k, v, is_causal=True),
        _Q,
        _Q,
        _Q,
    ),
    _c(
        "F.sdpa(is_causal=True) with Lq < Lk (top-left)",
        lambda t, q, k, v: _F(t).scaled_dot_product_attention(q, k, v, is_causal=True),
        _Q,
        _KV,
        _KV,
    ),
    _c(
        "F.sdpa(bool mask)",
        lambda t, q, k, v, m: _F(t).scaled_dot_product_attention(q, k, v, attn_mask=m),
        _Q,
        _KV,
        _KV,
        _rng.random((5, 6)) > 0.3,
    ),
    _c(
        "F.sdpa(float mask)",
        lambda t, q, k, v, m: _F(t).scaled_dot_product_attention(q, k, v, attn_mask=m),
        _Q,
        _KV,
        _KV,
        _rng.standard_normal((2, 1, 5, 6)),
    ),
    _c(
        "F.sdpa(scale=0.3)",
        lambda t, q, k, v: _F(t).scaled_dot_product_attention(q, k, v, scale=0.3),
        _Q,
        _KV,
        _KV,
    ),
    _c(
        "F.sdpa(enable_gqa=True)",
        lambda t, q, k, v: _F(t).scaled_dot_product_attention(q, k, v, enable_gqa=True),
        _Q,
        _KV[:, :1].copy(),
        _KV[:, :1].copy(),
    ),
    _c("F.sdpa 3-d", lambda t, q, k, v: _F(t).scaled_dot_product_attention(q, k, v), _Q[0], _KV[0], _KV[0]),
    _c(
        "F.sdpa(attn_mask and is_causal)",
        lambda t, q, m: _F(t).scaled_dot_product_attention(q, q, q, attn_mask=m, is_causal=True),
        _Q,
        np.ones((5, 5), bool),
    ),
    _c(
        "F.sdpa fully masked row",
        lambda t, q, k, v, m: _F(t).scaled_dot_product_attention(q, k, v, attn_mask=m),
        _Q,
        _KV,
        _KV,
        np.arange(5)[:, None] > np.arange(6)[None] + 10,
    ),
]

# ---------------------------------------------------------------------------------------------------------
# nn.functional: losses

_LOSSES: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
    ("mse_loss", lambda F, x, y, **k: F.mse_loss(x, y, **k), (A, POS)),
    ("l1_loss", lambda F, x, y, **k: F.l1_loss(x, y, **k), (A, POS)),
    ("smooth_l1_loss", lambda F, x, y, **k: F.smooth_l1_loss(x, y, **k), (A, POS)),
    ("smooth_l1_loss(beta=0.5)", lambda F, x, y, **k: F.smooth_l1_loss(x, y, beta=0.5, **k), (A, POS)),
    ("huber_loss(delta=0.5)", lambda F, x, y, **k: F.huber_loss(x, y, delta=0.5, **k), (A, POS)),
    ("cross_entropy", lambda F, x, y, **k: F.cross_entropy(x, y, **k), (LOGITS, TARGET)),
    (
        "cross_entropy(weight)",
        lambda F, x, y, w, **k: F.cross_entropy(x, y, weight=w, **k),
        (LOGITS, TARGET, Const(WEIGHT5)),
    ),
    (
        "cross_entropy(ignore_index=-100)",
        lambda F, x, y, **k: F.cross_entropy(x, y, **k),
        (LOGITS, TARGET_IGNORE),
    ),
    (
        "cross_entropy(ignore_index=2)",
        lambda F, x, y, **k: F.cross_entropy(x, y, ignore_index=2, **k),
        (LOGITS, TARGET),
    ),
    (
        "cross_entropy(label_smoothing=0.1)",
        lambda F, x, y, **k: F.cross_entropy(x, y, label_smoothing=0.1, **k),
        (LOGITS, TARGET),
    ),
    (
        "cross_entropy(weight, label_smoothing)",
        lambda F, x, y, w, **k: F.cross_entropy(x, y, weight=w, label_smoothing=0.2, **k),
        (LOGITS, TARGET, Const(WEIGHT5)),
    ),
    ("cross_entropy(probabilities)", lambda F, x, y, **k: F.cross_entropy(x, y, **k), (LOGITS, SOFT)),
    (
        "cross_entropy(probabilities, label_smoothing)",
        lambda F, x, y, **k: F.cross_entropy(x, y, label_smoothing=0.1, **k),
        (LOGITS, SOFT),
    ),
    (
        "cross_entropy (N, C, d)",
        lambda F, x, y, **k: F.cross_entropy(x, y, **k),
        (_rng.standard_normal((2, 5, 3)), np.array([[0, 4, 1], [2, 2, 3]])),
    ),
    (
        "cross_entropy (N, C, d) targets < d",
        lambda F, x, y, **k: F.cross_entropy(x, y, **k),
        (_rng.standard_normal((2, 5, 3)), np.array([[0, 2, 1], [2, 2, 0]])),
    ),
    ("cross_entropy unbatched", lambda F, x, y, **k: F.cross_entropy(x, y, **k), (LOGITS[0], np.array(3))),
    ("nll_loss", lambda F, x, y, **k: F.nll_loss(F.log_softmax(x, 1), y, **k), (LOGITS, TARGET)),
    (
        "nll_loss(weight)",
        lambda F, x, y, w, **k: F.nll_loss(F.log_softmax(x, 1), y, weight=w, **k),
        (LOGITS, TARGET, Const(WEIGHT5)),
    ),
    ("nll_loss(ignore_index)", lambda F, x, y, **k: F.nll_loss(x, y, **k), (LOGITS, TARGET_IGNORE)),
    ("binary_cross_entropy", lambda F, p, y, **k: F.binary_cross_entropy(p, y, **k), (PROB, BINARY)),
    (
        "binary_cross_entropy(weight)",
        lambda F, p, y, w, **k: F.binary_cross_entropy(p, y, weight=w, **k),
        (PROB, BINARY, Const(B)),
    ),
    (
        "binary_cross_entropy soft targets",
        lambda F, p, y, **k: F.binary_cross_entropy(p, y, **k),
        (PROB, PROB[::-1].copy()),
    ),
    (
        "binary_cross_entropy_with_logits",
        lambda F, x, y, **k: F.binary_cross_entropy_with_logits(x, y, **k),
        (A, BINARY),
    ),
    (
        "binary_cross_entropy_with_logits(pos_weight)",
        lambda F, x, y, w, **k: F.binary_cross_entropy_with_logits(x, y, pos_weight=w, **k),
        (A, BINARY, Const(POS[0].copy())),
    ),
    ("kl_div", lambda F, x, y, **k: F.kl_div(F.log_softmax(x, 1), y, **k), (LOGITS, SOFT)),
    (
        "kl_div(log_target=True)",
        lambda F, x, y, **k: F.kl_div(x, y, log_target=True, **k),
        (LOGITS, LOGITS[::-1].copy()),
    ),
    (
        "margin_ranking_loss",
        lambda F, x, y, s, **k: F.margin_ranking_loss(x, y, s, margin=0.1, **k),
        (B, B[::-1].copy(), np.array([1.0, -1.0, 1.0, -1.0])),
    ),
    ("hinge_embedding_loss", lambda F, x, y, **k: F.hinge_embedding_loss(x, y, **k), (A, BINARY * 2 - 1)),
    ("soft_margin_loss", lambda F, x, y, **k: F.soft_margin_loss(x, y, **k), (A, Const(BINARY * 2 - 1))),
    (
        "multilabel_soft_margin_loss",
        lambda F, x, y, **k: F.multilabel_soft_margin_loss(x, y, **k),
        (A, BINARY),
    ),
    ("multi_margin_loss", lambda F, x, y, **k: F.multi_margin_loss(x, y, **k), (LOGITS, TARGET)),
    (
        "cosine_embedding_loss",
        lambda F, x, y, s, **k: F.cosine_embedding_loss(x, y, s, **k),
        (A, POS, np.array([1.0, -1.0, 1.0])),
    ),
    ("triplet_margin_loss", lambda F, a, p, n, **k: F.triplet_margin_loss(a, p, n, **k), (A, POS, UNIT)),
    ("poisson_nll_loss", lambda F, x, y, **k: F.poisson_nll_loss(x, y, **k), (A, POS)),
    ("gaussian_nll_loss", lambda F, x, y, v, **k: F.gaussian_nll_loss(x, y, v, **k), (A, POS, PROB)),
]
for _name, _f, _ins in _LOSSES:
    for _reduction in ("mean", "sum", "none"):
        if "kl_div" in _name and _reduction == "mean":
            _reduction = "batchmean"
        CALLS.append(
            Call(
                f"F.{_name} reduction={_reduction}",
                lambda t, *xs, f=_f, r=_reduction: f(t.nn.functional, *xs, reduction=r),
                _ins,
            )
        )
CALLS += [
    _c("F.kl_div reduction=mean", lambda t, x, y: _F(t).kl_div(x, y, reduction="mean"), LOGITS, SOFT),
    _c("F.cross_entropy f32", lambda t, x, y: _F(t).cross_entropy(x, y), LOGITS.astype(np.float32), TARGET),
    _c(
        "F.cross_entropy i32 target",
        lambda t, x, y: _F(t).cross_entropy(x, y),
        LOGITS,
        TARGET.astype(np.int32),
    ),
    _c(
        "F.cross_entropy all ignored is NaN",
        lambda t, x, y: _F(t).cross_entropy(x, y),
        LOGITS,
        np.full(4, -100),
    ),
    _c(
        "F.cross_entropy target out of range refused",
        lambda t, x, y: _F(t).cross_entropy(x, y),
        LOGITS,
        np.array([1, 0, 5, 2]),
    ),
    _c(
        "F.cross_entropy float class target refused",
        lambda t, x, y: _F(t).cross_entropy(x, y),
        LOGITS,
        TARGET.astype(np.float64),
    ),
    _c(
        "F.nll_loss float target refused",
        lambda t, x, y: _F(t).nll_loss(x, y),
        LOGITS,
        TARGET.astype(np.float64),
    ),
    _c("F.mse_loss broadcast (warns)", lambda t, x, y: _F(t).mse_loss(x, y), A, B),
    _c("F.mse_loss(reduction='bad') refused", lambda t, x, y: _F(t).mse_loss(x, y, reduction="bad"), A, POS),
    _c(
        "F.binary_cross_entropy outside [0, 1] refused",
        lambda t, x, y: _F(t).binary_cross_entropy(x, y),
        A,
        BINARY,
    ),
    _c(
        "F.binary_cross_entropy at 0 and 1 (log clamped)",
        lambda t, p, y: _F(t).binary_cross_entropy(p, y),
        np.array([0.0, 1.0, 0.5]),
        np.array([1.0, 0.0, 1.0]),
        grad=False,
    ),
    _c("F.l1_loss f32 with f64 refused or promoted", lambda t, x, y: _F(t).l1_loss(x, y), A32, A),
]

# ---------------------------------------------------------------------------------------------------------
# Linear algebra

_SQ = _rng.standard_normal((3, 3)) + 3 * np.eye(3)
_SPD = _SQ @ _SQ.T
CALLS += [
    _c("inverse", lambda t, x: t.inverse(x), _SQ),
    _c("linalg.inv", lambda t, x: t.linalg.inv(x), _SQ),
    _c("det", lambda t, x: t.det(x), _SQ),
    _c("linalg.det", lambda t, x: t.linalg.det(x), _SQ),
    _c("logdet", lambda t, x: t.logdet(x), _SPD),
    _c("linalg.slogdet", lambda t, x: t.linalg.slogdet(x), _SQ),
    _c("linalg.solve", lambda t, a, b: t.linalg.solve(a, b), _SQ, A),
    _c("linalg.cholesky", lambda t, x: t.linalg.cholesky(x), _SPD),
    _c("linalg.qr", lambda t, x: t.linalg.qr(x), A.T.copy()),
    _c("linalg.eigh", lambda t, x: t.linalg.eigh(x), _SPD),
    _c("linalg.svdvals", lambda t, x: t.linalg.svdvals(x), A),
    _c("linalg.matrix_norm", lambda t, x: t.linalg.matrix_norm(x), A),
    _c("linalg.pinv", lambda t, x: t.linalg.pinv(x), A),
    _c("cdist", lambda t, x, y: t.cdist(x, y), A, POS),
    _c("tensordot", lambda t, x, y: t.tensordot(x, y, dims=1), A, D),
    _c("matrix_power", lambda t, x: t.matrix_power(x, 3), _SQ),
]

# ---------------------------------------------------------------------------------------------------------
# Layers in nn, holding the same weights (PyTorch's initial ones); their parameters' gradients are compared


def _layer(
    name: str, make: Callable[[Any], Any], forward: Callable[..., Any], *inputs: Any, grad: bool = True
) -> Call:
    return Call(f"nn.{name}", forward, inputs, grad, module=make)


_call = lambda t, m, *xs: m(*xs)
_eval = lambda t, m, *xs: m.eval()(*xs)
_IMG = _rng.standard_normal((2, 3, 8, 8))
_TOKENS = np.array([[1, 4, 0, 2], [3, 3, 9, 0]])
_SEQ_BLD = _rng.standard_normal((2, 5, 4))  # (batch, length, features)
CALLS += [
    _layer("Linear(4, 5)", lambda t: t.nn.Linear(4, 5), _call, A),
    _layer("Linear(4, 5, bias=False)", lambda t: t.nn.Linear(4, 5, bias=False), _call, A3),
    _layer("Linear on a vector", lambda t: t.nn.Linear(4, 2), _call, B),
    _layer("Bilinear", lambda t: t.nn.Bilinear(4, 4, 2), _call, A, POS),
    _layer("Identity", lambda t: t.nn.Identity(), _call, A),
    _layer("Conv1d", lambda t: t.nn.Conv1d(3, 4, 3, padding=1), _call, SEQ),
    _layer("Conv2d", lambda t: t.nn.Conv2d(3, 4, 3), _call, _IMG),
    _layer("Conv2d(stride=2, padding=1)", lambda t: t.nn.Conv2d(3, 4, 3, stride=2, padding=1), _call, _IMG),
    _layer(
        "Conv2d(padding='same', bias=False)",
        lambda t: t.nn.Conv2d(3, 2, 5, padding="same", bias=False),
        _call,
        _IMG,
    ),
    _layer("Conv2d(groups=3)", lambda t: t.nn.Conv2d(3, 6, 3, groups=3), _call, _IMG),
    _layer(
        "Conv2d(padding_mode='reflect')",
        lambda t: t.nn.Conv2d(3, 2, 3, padding=1, padding_mode="reflect"),
        _call,
        _IMG,
    ),
    _layer("ConvTranspose2d", lambda t: t.nn.ConvTranspose2d(3, 2, 3, stride=2), _call, _IMG),
    _layer("MaxPool2d(2)", lambda t: t.nn.MaxPool2d(2), _call, _IMG),
    _layer("MaxPool2d(3, 2, 1)", lambda t: t.nn.MaxPool2d(3, 2, 1), _call, _IMG),
    _layer("AvgPool2d(2)", lambda t: t.nn.AvgPool2d(2), _call, _IMG),
    _layer("AdaptiveAvgPool2d((1, 1))", lambda t: t.nn.AdaptiveAvgPool2d((1, 1)), _call, _IMG),
    _layer("AdaptiveMaxPool2d(3)", lambda t: t.nn.AdaptiveMaxPool2d(3), _call, _IMG),
    _layer("Flatten", lambda t: t.nn.Flatten(), _call, _IMG),
    _layer("Flatten(0, 2)", lambda t: t.nn.Flatten(0, 2), _call, _IMG),
    _layer("Unflatten", lambda t: t.nn.Unflatten(1, (2, 2)), _call, A),
    _layer("BatchNorm1d train", lambda t: t.nn.BatchNorm1d(4), _call, A),
    _layer("BatchNorm1d (N, C, L)", lambda t: t.nn.BatchNorm1d(3), _call, SEQ),
    _layer("BatchNorm1d eval", lambda t: t.nn.BatchNorm1d(4), _eval, A),
    _layer("BatchNorm2d train", lambda t: t.nn.BatchNorm2d(3), _call, _IMG),
    _layer("BatchNorm2d(momentum=None) train", lambda t: t.nn.BatchNorm2d(3, momentum=None), _call, _IMG),
    _layer("BatchNorm2d(affine=False)", lambda t: t.nn.BatchNorm2d(3, affine=False), _call, _IMG),
    _layer(
        "BatchNorm2d(track_running_stats=False) eval",
        lambda t: t.nn.BatchNorm2d(3, track_running_stats=False),
        _eval,
        _IMG,
    ),
    _layer("BatchNorm1d batch of one refused", lambda t: t.nn.BatchNorm1d(4), _call, A[:1].copy()),
    _layer("LayerNorm(4)", lambda t: t.nn.LayerNorm(4), _call, A3),
    _layer("LayerNorm([3, 4])", lambda t: t.nn.LayerNorm([3, 4]), _call, A3),
    _layer(
        "LayerNorm(elementwise_affine=False)",
        lambda t: t.nn.LayerNorm(4, elementwise_affine=False),
        _call,
        A3,
    ),
    _layer("LayerNorm(bias=False)", lambda t: t.nn.LayerNorm(4, bias=False), _call, A3),
    _layer("GroupNorm(1, 3)", lambda t: t.nn.GroupNorm(1, 3), _call, _IMG),
    _layer("GroupNorm(3, 3)", lambda t: t.nn.GroupNorm(3, 3), _call, _IMG),
    _layer("InstanceNorm2d", lambda t: t.nn.InstanceNorm2d(3), _call, _IMG),
    _layer("InstanceNorm2d(affine=True)", lambda t: t.nn.InstanceNorm2d(3, affine=True), _call, _IMG),
    _layer("RMSNorm(4)", lambda t: t.nn.RMSNorm(4), _call, A3),
    _layer("RMSNorm(4, eps=None)", lambda t: t.nn.RMSNorm(4, eps=None), _call, A3 * 1e-5),
    _layer("Embedding", lambda t: t.nn.Embedding(10, 3), _call, _TOKENS),
    _layer("Embedding(padding_idx=0)", lambda t: t.nn.Embedding(10, 3, padding_idx=0), _call, _TOKENS),
    _layer(
        "Embedding.from_pretrained",
        lambda t: t.nn.Embedding.from_pretrained(t.ones(10, 3) * 0.5),
        _call,
        _TOKENS,
    ),
    _layer("EmbeddingBag(mode='mean')", lambda t: t.nn.EmbeddingBag(10, 3, mode="mean"), _call, _TOKENS),
    _layer("Dropout eval", lambda t: t.nn.Dropout(0.5), _eval, A),
    _layer("Dropout(p=0) train", lambda t: t.nn.Dropout(0.0), _call, A),
    _layer("Dropout2d eval", lambda t: t.nn.Dropout2d(0.3), _eval, _IMG),
    _layer("ReLU", lambda t: t.nn.ReLU(), _call, A),
    _layer("ReLU(inplace=True)", lambda t: t.nn.ReLU(inplace=True), lambda t, m, x: m(x * 1.0), A),
    _layer("LeakyReLU(0.1)", lambda t: t.nn.LeakyReLU(0.1), _call, A),
    _layer("GELU", lambda t: t.nn.GELU(), _call, A),
    _layer("GELU('tanh')", lambda t: t.nn.GELU("tanh"), _call, A),
    _layer("SiLU", lambda t: t.nn.SiLU(), _call, A),
    _layer("Tanh", lambda t: t.nn.Tanh(), _call, A),
    _layer("Sigmoid", lambda t: t.nn.Sigmoid(), _call, A),
    _layer("ELU", lambda t: t.nn.ELU(), _call, A),
    _layer("Softplus", lambda t: t.nn.Softplus(), _call, A),
    _layer("Hardswish", lambda t: t.nn.Hardswish(), _call, A * 4),
    _layer("Mish", lambda t: t.nn.Mish(), _call, A),
    _layer("PReLU", lambda t: t.nn.PReLU(), _call, A),
    _layer("PReLU(4)", lambda t: t.nn.PReLU(3), _call, _IMG),
    _layer("Softmax(dim=1)", lambda t: t.nn.Softmax(dim=1), _call, A),
    _layer("LogSoftmax(dim=-1)", lambda t: t.nn.LogSoftmax(dim=-1), _call, A),
    _layer("Softmax2d", lambda t: t.nn.Softmax2d(), _call, _IMG),
    _layer("Upsample(scale_factor=2)", lambda t: t.nn.Upsample(scale_factor=2), _call, _IMG),
    _layer("Upsample(bilinear)", lambda t: t.nn.Upsample(scale_factor=2, mode="bilinear"), _call, _IMG),
    _layer("PixelShuffle", lambda t: t.nn.PixelShuffle(2), _call, _rng.standard_normal((1, 8, 2, 3))),
    _layer("ZeroPad2d", lambda t: t.nn.ZeroPad2d((1, 0, 2, 1)), _call, _IMG),
    _layer("ConstantPad1d", lambda t: t.nn.ConstantPad1d(2, 0.5), _call, SEQ),
    _layer("ReflectionPad2d", lambda t: t.nn.ReflectionPad2d(1), _call, _IMG),
    _layer(
        "Sequential", lambda t: t.nn.Sequential(t.nn.Linear(4, 8), t.nn.ReLU(), t.nn.Linear(8, 2)), _call, A
    ),
    _layer(
        "Sequential[0]", lambda t: t.nn.Sequential(t.nn.Linear(4, 8), t.nn.ReLU()), lambda t, m, x: m[0](x), A
    ),
    _layer(
        "Sequential[:1]",
        lambda t: t.nn.Sequential(t.nn.Linear(4, 8), t.nn.ReLU()),
        lambda t, m, x: m[:1](x),
        A,
    ),
    _layer(
        "ModuleList",
        lambda t: t.nn.ModuleList([t.nn.Linear(4, 4), t.nn.Linear(4, 2)]),
        lambda t, m, x: m[1](m[0](x)),
        A,
    ),
    _layer("ModuleDict", lambda t: t.nn.ModuleDict({"a": t.nn.Linear(4, 3)}), lambda t, m, x: m["a"](x), A),
    _layer("RNN", lambda t: t.nn.RNN(4, 3), _call, _SEQ_BLD),
    _layer(
        "RNN(batch_first, 2 layers)",
        lambda t: t.nn.RNN(4, 3, num_layers=2, batch_first=True),
        _call,
        _SEQ_BLD,
    ),
    _layer("RNN(nonlinearity='relu')", lambda t: t.nn.RNN(4, 3, nonlinearity="relu"), _call, _SEQ_BLD),
    _layer("LSTM", lambda t: t.nn.LSTM(4, 3), _call, _SEQ_BLD),
    _layer("LSTM(batch_first)", lambda t: t.nn.LSTM(4, 3, batch_first=True), _call, _SEQ_BLD),
    _layer(
        "LSTM(bidirectional)",
        lambda t: t.nn.LSTM(4, 3, bidirectional=True, batch_first=True),
        _call,
        _SEQ_BLD,
    ),
    _layer("LSTM(num_layers=2)", lambda t: t.nn.LSTM(4, 3, num_layers=2), _call, _SEQ_BLD),
    _layer("LSTM(proj_size=2)", lambda t: t.nn.LSTM(4, 3, proj_size=2), _call, _SEQ_BLD),
    _layer(
        "LSTM with (h0, c0)",
        lambda t: t.nn.LSTM(4, 3, batch_first=True),
        lambda t, m, x, h, c: m(x, (h, c)),
        _SEQ_BLD,
        _rng.standard_normal((1, 2, 3)),
        _rng.standard_normal((1, 2, 3)),
    ),
    _layer("LSTM unbatched", lambda t: t.nn.LSTM(4, 3), _call, _SEQ_BLD[0].copy()),
    _layer("GRU", lambda t: t.nn.GRU(4, 3, batch_first=True), _call, _SEQ_BLD),
    _layer(
        "GRU(bidirectional, 2 layers)",
        lambda t: t.nn.GRU(4, 3, num_layers=2, bidirectional=True),
        _call,
        _SEQ_BLD,
    ),
    _layer("LSTMCell", lambda t: t.nn.LSTMCell(4, 3), _call, A),
    _layer("GRUCell", lambda t: t.nn.GRUCell(4, 3), _call, A),
    _layer("RNNCell", lambda t: t.nn.RNNCell(4, 3), _call, A),
    _layer(
        "MultiheadAttention(batch_first)",
        lambda t: t.nn.MultiheadAttention(4, 2, batch_first=True),
        lambda t, m, x: m(x, x, x),
        _SEQ_BLD,
    ),
    _layer(
        "MultiheadAttention (L, N, E)",
        lambda t: t.nn.MultiheadAttention(4, 2),
        lambda t, m, x: m(x, x, x),
        _SEQ_BLD,
    ),
    _layer(
        "MultiheadAttention(need_weights=False)",
        lambda t: t.nn.MultiheadAttention(4, 2, batch_first=True),
        lambda t, m, x: m(x, x, x, need_weights=False),
        _SEQ_BLD,
    ),
    _layer(
        "MultiheadAttention(average_attn_weights=False)",
        lambda t: t.nn.MultiheadAttention(4, 2, batch_first=True),
        lambda t, m, x: m(x, x, x, average_attn_weights=False),
        _SEQ_BLD,
    ),
    _layer(
        "MultiheadAttention(attn_mask causal)",
        lambda t: t.nn.MultiheadAttention(4, 2, batch_first=True),
        lambda t, m, x, mask: m(x, x, x, attn_mask=mask),
        _SEQ_BLD,
        np.triu(np.ones((5, 5), bool), 1),
    ),
    _layer(
        "MultiheadAttention(key_padding_mask)",
        lambda t: t.nn.MultiheadAttention(4, 2, batch_first=True),
        lambda t, m, x, mask: m(x, x, x, key_padding_mask=mask),
        _SEQ_BLD,
        np.array([[False] * 5, [False, False, False, True, True]]),
    ),
    _layer(
        "MultiheadAttention(kdim, vdim)",
        lambda t: t.nn.MultiheadAttention(4, 2, kdim=3, vdim=3, batch_first=True),
        lambda t, m, x, y: m(x, y, y),
        _SEQ_BLD,
        _rng.standard_normal((2, 6, 3)),
    ),
    _layer(
        "TransformerEncoderLayer",
        lambda t: t.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True),
        _call,
        _SEQ_BLD,
    ),
    _layer(
        "TransformerEncoderLayer(norm_first, gelu)",
        lambda t: t.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation="gelu", norm_first=True),
        _call,
        _SEQ_BLD,
    ),
    _layer(
        "TransformerEncoderLayer(src_mask causal)",
        lambda t: t.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True),
        lambda t, m, x: m(
            x, src_mask=t.nn.Transformer.generate_square_subsequent_mask(5, dtype=t.float64), is_causal=True
        ),
        _SEQ_BLD,
    ),
    _layer(
        "TransformerEncoder(2 layers)",
        lambda t: t.nn.TransformerEncoder(
            t.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0), 2, enable_nested_tensor=False
        ),
        _call,
        _SEQ_BLD,
    ),
    _layer(
        "TransformerDecoderLayer",
        lambda t: t.nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0, batch_first=True),
        lambda t, m, x, y: m(x, y),
        _SEQ_BLD,
        _rng.standard_normal((2, 6, 4)),
    ),
    _layer("CrossEntropyLoss", lambda t: t.nn.CrossEntropyLoss(), _call, LOGITS, TARGET),
    _layer(
        "CrossEntropyLoss(label_smoothing)",
        lambda t: t.nn.CrossEntropyLoss(label_smoothing=0.1),
        _call,
        LOGITS,
        TARGET,
    ),
    _layer("NLLLoss(reduction='sum')", lambda t: t.nn.NLLLoss(reduction="sum"), _call, LOGITS, TARGET),
    _layer("MSELoss", lambda t: t.nn.MSELoss(), _call, A, POS),
    _layer("L1Loss", lambda t: t.nn.L1Loss(reduction="none"), _call, A, POS),
    _layer("BCELoss", lambda t: t.nn.BCELoss(), _call, PROB, BINARY),
    _layer("BCEWithLogitsLoss", lambda t: t.nn.BCEWithLogitsLoss(), _call, A, BINARY),
    _layer("SmoothL1Loss", lambda t: t.nn.SmoothL1Loss(), _call, A, POS),
    _layer("HuberLoss", lambda t: t.nn.HuberLoss(delta=0.5), _call, A, POS),
    _layer("KLDivLoss(batchmean)", lambda t: t.nn.KLDivLoss(reduction="batchmean"), _call, LOGITS, SOFT),
    _layer("CosineSimilarity", lambda t: t.nn.CosineSimilarity(), _call, A, POS),
    _layer("PairwiseDistance", lambda t: t.nn.PairwiseDistance(), _call, A, POS),
]

# what a module says about itself
_MLP = lambda t: t.nn.Sequential(t.nn.Linear(4, 8), t.nn.BatchNorm1d(8), t.nn.ReLU(), t.nn.Linear(8, 2))
CALLS += [
    _layer("state_dict() keys", _MLP, lambda t, m: list(m.state_dict().keys())),
    _layer("named_parameters() names", _MLP, lambda t, m: [n for n, _ in m.named_parameters()]),
    _layer("named_buffers() names", _MLP, lambda t, m: [n for n, _ in m.named_buffers()]),
    _layer("parameter count", _MLP, lambda t, m: sum(p.numel() for p in m.parameters())),
    _layer("named_modules() names", _MLP, lambda t, m: [n for n, _ in m.named_modules()]),
    _layer("children() count", _MLP, lambda t, m: len(list(m.children()))),
    _layer("training flags after eval()", _MLP, lambda t, m: [x.training for x in m.eval().modules()]),
    _layer(
        "requires_grad_(False)",
        _MLP,
        lambda t, m: [p.requires_grad for p in m.requires_grad_(False).parameters()],
    ),
    _layer(
        "load_state_dict returns missing/unexpected", _MLP, lambda t, m: m.load_state_dict(m.state_dict())
    ),
    _layer(
        "load_state_dict(strict=False) of a part",
        _MLP,
        lambda t, m: m.load_state_dict({"0.bias": t.zeros(8, dtype=t.float64)}, strict=False),
    ),
    _layer(
        "state_dict() values are detached",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m: [v.requires_grad for v in m.state_dict().values()],
    ),
    _layer(
        "load_state_dict casts f32 values",
        _MLP,
        lambda t, m: (m.load_state_dict({k: v.float() for k, v in m.state_dict().items()}), m[0].weight)[1],
    ),
    _layer(
        "zero_grad() sets grads to None",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m, x: (m(x).sum().backward(), m.zero_grad(), m.weight.grad)[2],
        A,
    ),
    _layer("weight.shape", lambda t: t.nn.Linear(4, 2), lambda t, m: tuple(m.weight.shape)),
    _layer("Conv2d weight.shape", lambda t: t.nn.Conv2d(3, 4, (2, 3)), lambda t, m: tuple(m.weight.shape)),
    _layer(
        "ConvTranspose2d weight.shape",
        lambda t: t.nn.ConvTranspose2d(3, 4, 2),
        lambda t, m: tuple(m.weight.shape),
    ),
    _layer(
        "LSTM parameter names",
        lambda t: t.nn.LSTM(4, 3, num_layers=2, bidirectional=True),
        lambda t, m: [n for n, _ in m.named_parameters()],
    ),
    _layer(
        "MultiheadAttention parameter names",
        lambda t: t.nn.MultiheadAttention(4, 2),
        lambda t, m: [n for n, _ in m.named_parameters()],
    ),
    _layer(
        "TransformerEncoderLayer parameter names",
        lambda t: t.nn.TransformerEncoderLayer(4, 2, 8),
        lambda t, m: [n for n, _ in m.named_parameters()],
    ),
    _layer(
        "BatchNorm2d buffers", lambda t: t.nn.BatchNorm2d(3), lambda t, m: [n for n, _ in m.named_buffers()]
    ),
    _layer("Embedding weight dtype", lambda t: t.nn.Embedding(3, 2), lambda t, m: m.weight.dtype),
    _layer(
        "clip_grad_norm_",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m, x: (
            m(x).pow(2).sum().backward(),
            t.nn.utils.clip_grad_norm_(m.parameters(), 0.5),
            m.weight.grad,
        )[1:],
        A,
        grad=False,
    ),
    _layer(
        "clip_grad_norm_(norm_type=inf)",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m, x: (
            m(x).pow(2).sum().backward(),
            t.nn.utils.clip_grad_norm_(m.parameters(), 0.5, norm_type=float("inf")),
            m.weight.grad,
        )[1:],
        A,
        grad=False,
    ),
    _layer(
        "clip_grad_value_",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m, x: (
            m(x).pow(2).sum().backward(),
            t.nn.utils.clip_grad_value_(m.parameters(), 0.1),
            m.weight.grad,
        )[1:],
        A,
        grad=False,
    ),
    _layer(
        "parameters_to_vector",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m: t.nn.utils.parameters_to_vector(m.parameters()),
    ),
]

# ---------------------------------------------------------------------------------------------------------
# Optimizers and schedules: three steps on a small regression, the parameters after them


def _train(make_optimizer: Callable[[Any, Any], Any], steps: int = 3) -> Callable[..., Any]:
    def fn(t: Any, m: Any, x: Any, y: Any) -> Any:
        opt = make_optimizer(t, m)
        for _ in range(steps):
            opt.zero_grad()
            t.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
        return [p.detach() for p in m.parameters()]

    return fn


def _schedule(make: Callable[[Any, Any], Any], steps: int = 12) -> Callable[..., Any]:
    def fn(t: Any, m: Any) -> Any:
        opt = t.optim.SGD(m.parameters(), lr=0.1)
        sched = make(t, opt)
        lrs = []
        for _ in range(steps):
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        return lrs, sched.get_last_lr()

    return fn


def _lr_changed_by_hand(t: Any, m: Any, x: Any, y: Any) -> Any:
    opt = t.optim.Adam(m.parameters(), lr=0.1)
    for step in range(4):
        if step == 2:
            for g in opt.param_groups:
                g["lr"] = 0.01
        opt.zero_grad()
        t.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    return [p.detach() for p in m.parameters()]


def _optimizer_state(t: Any, m: Any, x: Any, y: Any) -> Any:
    opt = t.optim.Adam(m.parameters(), lr=0.1)
    t.nn.functional.mse_loss(m(x), y).backward()
    opt.step()
    state = opt.state_dict()
    return (
        sorted(state),
        state["param_groups"][0]["params"],
        sorted(state["state"][0]),
        state["state"][0]["exp_avg"],
        float(state["state"][0]["step"]),
    )


def _optimizer_round_trip(t: Any, m: Any, x: Any, y: Any) -> Any:
    opt = t.optim.Adam(m.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        t.nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    saved = opt.state_dict()
    fresh = t.optim.Adam(m.parameters(), lr=0.5)
    fresh.load_state_dict(saved)
    fresh.zero_grad()
    t.nn.functional.mse_loss(m(x), y).backward()
    fresh.step()
    return [p.detach() for p in m.parameters()], fresh.param_groups[0]["lr"]


def _add_param_group(t: Any, m: Any, x: Any, y: Any) -> Any:
    opt = t.optim.SGD([m.weight], lr=0.1)
    opt.add_param_group({"params": [m.bias], "lr": 0.5})
    t.nn.functional.mse_loss(m(x), y).backward()
    opt.step()
    return [p.detach() for p in m.parameters()], len(opt.param_groups)


def _bn_train_then_eval(t: Any, m: Any, x: Any) -> Any:
    for _ in range(3):
        m(x)
    return m.eval()(x)


_OPTIMIZERS = {
    "SGD(lr=0.1)": lambda t, m: t.optim.SGD(m.parameters(), lr=0.1),
    "SGD(momentum=0.9)": lambda t, m: t.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
    "SGD(momentum, nesterov, weight_decay)": lambda t, m: t.optim.SGD(
        m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01
    ),
    "SGD(momentum, dampening=0.5)": lambda t, m: t.optim.SGD(
        m.parameters(), lr=0.1, momentum=0.9, dampening=0.5
    ),
    "SGD(maximize=True)": lambda t, m: t.optim.SGD(m.parameters(), lr=0.1, maximize=True),
    "Adam()": lambda t, m: t.optim.Adam(m.parameters()),
    "Adam(lr=0.01, betas, eps, weight_decay)": lambda t, m: t.optim.Adam(
        m.parameters(), lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1
    ),
    "Adam(amsgrad=True)": lambda t, m: t.optim.Adam(m.parameters(), lr=0.01, amsgrad=True),
    "AdamW() (weight_decay 0.01)": lambda t, m: t.optim.AdamW(m.parameters(), lr=0.01),
    "AdamW(weight_decay=0.1)": lambda t, m: t.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.1),
    "Adamax": lambda t, m: t.optim.Adamax(m.parameters(), lr=0.01),
    "NAdam": lambda t, m: t.optim.NAdam(m.parameters(), lr=0.01),
    "RAdam": lambda t, m: t.optim.RAdam(m.parameters(), lr=0.01),
    "RMSprop": lambda t, m: t.optim.RMSprop(m.parameters(), lr=0.01),
    "RMSprop(momentum, centered)": lambda t, m: t.optim.RMSprop(
        m.parameters(), lr=0.01, momentum=0.9, centered=True
    ),
    "Adagrad": lambda t, m: t.optim.Adagrad(m.parameters(), lr=0.1),
    "Adadelta": lambda t, m: t.optim.Adadelta(m.parameters()),
    "Adam over two parameter groups": lambda t, m: t.optim.Adam(
        [{"params": [m.weight], "weight_decay": 0.1}, {"params": [m.bias], "lr": 0.1}], lr=0.01
    ),
    "SGD(lr=-1) refused": lambda t, m: t.optim.SGD(m.parameters(), lr=-1.0),
}
_SCHEDULES = {
    "StepLR(step_size=3, gamma=0.5)": lambda t, o: t.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR([2, 5])": lambda t, o: t.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 5], gamma=0.1),
    "ExponentialLR(0.9)": lambda t, o: t.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR(T_max=5)": lambda t, o: t.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5),
    "CosineAnnealingLR(T_max=5, eta_min=0.01)": lambda t, o: t.optim.lr_scheduler.CosineAnnealingLR(
        o, T_max=5, eta_min=0.01
    ),
    "CosineAnnealingWarmRestarts(3, T_mult=2)": lambda t, o: t.optim.lr_scheduler.CosineAnnealingWarmRestarts(
        o, 3, T_mult=2
    ),
    "LinearLR": lambda t, o: t.optim.lr_scheduler.LinearLR(o, start_factor=0.2, total_iters=4),
    "LambdaLR": lambda t, o: t.optim.lr_scheduler.LambdaLR(o, lambda step: 1.0 / (step + 1)),
    "OneCycleLR": lambda t, o: t.optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=12),
    "SequentialLR(LinearLR, ExponentialLR)": lambda t, o: t.optim.lr_scheduler.SequentialLR(
        o,
        [t.optim.lr_scheduler.LinearLR(o, 0.5, total_iters=3), t.optim.lr_scheduler.ExponentialLR(o, 0.9)],
        milestones=[3],
    ),
    "PolynomialLR": lambda t, o: t.optim.lr_scheduler.PolynomialLR(o, total_iters=6, power=2.0),
    "ConstantLR": lambda t, o: t.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=3),
}
_X8, _Y8 = _rng.standard_normal((8, 4)), _rng.standard_normal((8, 2))
for _name, _make in _OPTIMIZERS.items():
    CALLS.append(
        Call(f"optim.{_name}", _train(_make), (_X8, _Y8), grad=False, module=lambda t: t.nn.Linear(4, 2))
    )
for _name, _make in _SCHEDULES.items():
    CALLS.append(Call(f"lr_scheduler.{_name}", _schedule(_make), (), module=lambda t: t.nn.Linear(4, 2)))
CALLS += [
    _layer(
        "optimizer.param_groups[0] keys",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m: {
            k: t.optim.Adam(m.parameters()).param_groups[0][k] for k in ("lr", "betas", "eps", "amsgrad")
        },
    ),
    _layer(
        "optimizer.zero_grad() sets None",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m, x: (
            m(x).sum().backward(),
            t.optim.SGD(m.parameters(), lr=0.1).zero_grad(),
            m.weight.grad,
        )[2],
        A,
    ),
    _layer(
        "optimizer.zero_grad(set_to_none=False) zeros",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m, x: (
            m(x).sum().backward(),
            t.optim.SGD(m.parameters(), lr=0.1).zero_grad(set_to_none=False),
            m.weight.grad,
        )[2],
        A,
        grad=False,
    ),
    Call(
        "optim: lr changed by hand mid-training",
        _lr_changed_by_hand,
        (_X8, _Y8),
        False,
        lambda t: t.nn.Linear(4, 2),
    ),
    Call(
        "optim: state_dict() keys",
        lambda t, m, x, y: sorted(t.optim.Adam(m.parameters()).state_dict()),
        (_X8, _Y8),
        False,
        lambda t: t.nn.Linear(4, 2),
    ),
    Call("optim: Adam state_dict", _optimizer_state, (_X8, _Y8), False, lambda t: t.nn.Linear(4, 2)),
    Call(
        "optim: load_state_dict round trip",
        _optimizer_round_trip,
        (_X8, _Y8),
        False,
        lambda t: t.nn.Linear(4, 2),
    ),
    Call("optim: add_param_group", _add_param_group, (_X8, _Y8), False, lambda t: t.nn.Linear(4, 2)),
    Call(
        "BatchNorm1d: three training steps, then eval",
        _bn_train_then_eval,
        (_X8,),
        True,
        lambda t: t.nn.BatchNorm1d(4, momentum=0.3),
    ),
    _layer(
        "ReduceLROnPlateau",
        lambda t: t.nn.Linear(4, 2),
        lambda t, m: _plateau(t, t.optim.SGD(m.parameters(), lr=0.1)),
    ),
]


def _plateau(t: Any, opt: Any) -> list[float]:
    sched = t.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    lrs = []
    for loss in [1.0, 0.9, 0.95, 0.96, 0.97, 0.5, 0.6, 0.7]:
        sched.step(loss)
        lrs.append(opt.param_groups[0]["lr"])
    return lrs


# ---------------------------------------------------------------------------------------------------------
# Storage shared by views, promotion with 0-d tensors, random tensors' dtypes, initialization, iteration


def _write_through_view(t: Any, x: Any) -> Any:
    y = x.clone()
    v = y.view(-1)
    v[0] = 100.0
    return y


def _write_through_slice(t: Any, x: Any) -> Any:
    y = x.clone()
    y[0].mul_(2)
    y[:, 1] += 1
    return y


def _write_through_transpose(t: Any, x: Any) -> Any:
    y = x.clone()
    y.t()[0] = -1.0
    return y


def _write_through_detach(t: Any, x: Any) -> Any:
    y = x.clone()
    y.detach().zero_()
    return y


def _write_through_unsqueeze(t: Any, x: Any) -> Any:
    y = x.clone()
    y.unsqueeze(0)[0, 1, 2] = 7.0
    return y


def _reshape_is_a_view(t: Any, x: Any) -> Any:
    y = x.clone()
    y.reshape(-1).fill_(1.0)
    return y


def _bound(t: Any, w: Any, fan_in: int) -> tuple[bool, bool]:
    """Inside the uniform bound 1/sqrt(fan_in), and close to it (not a narrower distribution)."""
    b = 1.0 / math.sqrt(fan_in)
    m = w.detach().abs().max().item()
    return m <= b, m > 0.9 * b


def _std_near(w: Any, std: float) -> bool:
    return abs(w.detach().std().item() - std) < 0.05 * std


CALLS += [
    _c("write through view(-1)", _write_through_view, A, grad=False),
    _c("write through x[0] and x[:, 1]", _write_through_slice, A, grad=False),
    _c("write through t()", _write_through_transpose, A, grad=False),
    _c("write through detach()", _write_through_detach, A, grad=False),
    _c("write through unsqueeze", _write_through_unsqueeze, A, grad=False),
    _c("reshape of contiguous is a view", _reshape_is_a_view, A, grad=False),
    _c("x[mask] = tensor", lambda t, x, m: _set(x.clone(), m, x[m] * 10), A, MASK, grad=False),
    _c("x[:, 0] += 1 on a clone", lambda t, x: _set(x.clone(), (slice(None), 0), x[:, 0] + 1), A, grad=False),
    _c("i64 + 0-d f64 is f32", lambda t, x: x + t.tensor(2.5, dtype=t.float64), INT),
    _c("f32 + 0-d f64 is f32", lambda t, x: x + t.tensor(2.5, dtype=t.float64), A32),
    _c("i32 + 0-d i64 is i32", lambda t, x: x + t.tensor(5), I32),
    _c("0-d f64 + 0-d f32 is f64", lambda t: t.tensor(1.5, dtype=t.float64) + t.tensor(2.0)),
    _c("i64 + True", lambda t, x: x + True, INT),
    _c("f32 * 2**40", lambda t, x: x * 2**40, A32),
    _c("tensor(3) / 2", lambda t: t.tensor(3) / 2),
    _c("tensor(-7) % 3", lambda t: t.tensor(-7) % 3),
    _c("tensor(3.0) ** tensor(2)", lambda t: t.tensor(3.0) ** t.tensor(2)),
    _c("int ** 2.0 is f32", lambda t, x: x**2.0, INT),
    _c("arange(5) * 0.5", lambda t: t.arange(5) * 0.5),
    _c("arange(0, 1, 0.1) length", lambda t: t.arange(0, 1, 0.1)),
    _c("linspace(0, 10, 5) of ints is f32", lambda t: t.linspace(0, 10, 5)),
    _c("full((2,), 1.5, dtype=int64)", lambda t: t.full((2,), 1.5, dtype=t.int64)),
    _c("tensor([1, 2.5])", lambda t: t.tensor([1, 2.5])),
    _c("tensor(2**40)", lambda t: t.tensor(2**40)),
    _c("tensor([[1], [2, 3]]) refused", lambda t: t.tensor([[1], [2, 3]])),
    _c("randn(2, 3) shape and dtype", lambda t: (tuple(t.randn(2, 3).shape), t.randn(2, 3).dtype)),
    _c("randn(2, dtype=float64).dtype", lambda t: t.randn(2, dtype=t.float64).dtype),
    _c(
        "rand(3).dtype and range",
        lambda t: (t.rand(3).dtype, bool(((t.rand(100) >= 0) & (t.rand(100) < 1)).all())),
    ),
    _c(
        "randint(0, 10, (3,)).dtype",
        lambda t: (t.randint(0, 10, (3,)).dtype, tuple(t.randint(0, 10, (3,)).shape)),
    ),
    _c(
        "randint(5, (2, 2)) range",
        lambda t: bool(((t.randint(5, (50,)) >= 0) & (t.randint(5, (50,)) < 5)).all()),
    ),
    _c("randperm(5) is a permutation", lambda t: (t.randperm(5).dtype, sorted(t.randperm(5).tolist()))),
    _c("randn_like(x).dtype", lambda t, x: (t.randn_like(x).dtype, tuple(t.randn_like(x).shape)), A32),
    _c("rand_like(int) refused", lambda t, x: t.rand_like(x), INT),
    _c("bernoulli(p).dtype", lambda t, p: t.bernoulli(p).dtype, PROB, grad=False),
    _c(
        "multinomial(p, 2).dtype",
        lambda t, p: (t.multinomial(p, 2).dtype, tuple(t.multinomial(p, 2).shape)),
        PROB,
    ),
    _c("manual_seed returns", lambda t: type(t.manual_seed(0)).__name__),
    _c(
        "F.dropout scales by 1/(1-p)",
        lambda t: sorted(set(t.nn.functional.dropout(t.ones(2000), 0.25).tolist())),
    ),
    _c(
        "F.dropout trains by default", lambda t: bool((t.nn.functional.dropout(t.ones(2000), 0.5) == 0).any())
    ),
    _c("nn.Dropout in train mode", lambda t: sorted(set(t.nn.Dropout(0.5)(t.ones(2000)).tolist()))),
    _c(
        "dropout keeps about 1-p",
        lambda t: round((t.nn.functional.dropout(t.ones(20000), 0.3) != 0).float().mean().item(), 1),
    ),
    _c("nn.Linear init bound", lambda t: _bound(t, t.nn.Linear(400, 30).weight, 400)),
    _c("nn.Linear bias init bound", lambda t: _bound(t, t.nn.Linear(40, 3000).bias, 40)),
    _c("nn.Conv2d init bound", lambda t: _bound(t, t.nn.Conv2d(16, 32, 3).weight, 16 * 9)),
    _c("nn.Conv1d bias init bound", lambda t: _bound(t, t.nn.Conv1d(4, 600, 5).bias, 20)),
    _c("nn.Embedding init N(0, 1)", lambda t: _std_near(t.nn.Embedding(1000, 64).weight, 1.0)),
    _c(
        "nn.Embedding(padding_idx=0) row 0 is zero",
        lambda t: t.nn.Embedding(5, 3, padding_idx=0).weight[0].tolist(),
    ),
    _c("nn.LayerNorm init", lambda t: (t.nn.LayerNorm(3).weight.tolist(), t.nn.LayerNorm(3).bias.tolist())),
    _c("nn.BatchNorm2d init", lambda t: [v.tolist() for v in t.nn.BatchNorm2d(2).state_dict().values()]),
    _c(
        "nn.Linear weight dtype",
        lambda t: (t.nn.Linear(2, 2).weight.dtype, t.nn.Linear(2, 2).weight.requires_grad),
    ),
    _c(
        "nn.Parameter",
        lambda t: (
            t.nn.Parameter(t.zeros(2)).requires_grad,
            isinstance(t.nn.Parameter(t.zeros(2)), t.Tensor),
        ),
    ),
    _c(
        "nn.Parameter(requires_grad=False)",
        lambda t: t.nn.Parameter(t.zeros(2), requires_grad=False).requires_grad,
    ),
    _c("nn.init.zeros_", lambda t: t.nn.init.zeros_(t.empty(2, 3)).tolist()),
    _c("nn.init.ones_", lambda t: t.nn.init.ones_(t.empty(2, 3)).tolist()),
    _c("nn.init.constant_", lambda t: t.nn.init.constant_(t.empty(2), 0.3).tolist()),
    _c(
        "nn.init.normal_(std=0.02)", lambda t: _std_near(t.nn.init.normal_(t.empty(200, 100), std=0.02), 0.02)
    ),
    _c(
        "nn.init.normal_(mean=1)",
        lambda t: round(t.nn.init.normal_(t.empty(200, 100), mean=1.0).mean().item(), 1),
    ),
    _c(
        "nn.init.xavier_uniform_ bound",
        lambda t: _bound(t, t.nn.init.xavier_uniform_(t.empty(300, 100)), 400 / 6),
    ),
    _c(
        "nn.init.kaiming_normal_ std",
        lambda t: _std_near(t.nn.init.kaiming_normal_(t.empty(300, 200)), math.sqrt(2 / 200)),
    ),
    _c(
        "nn.init.kaiming_uniform_(a=sqrt(5))",
        lambda t: _bound(t, t.nn.init.kaiming_uniform_(t.empty(30, 400), a=math.sqrt(5)), 400),
    ),
    _c(
        "nn.init.trunc_normal_",
        lambda t: bool((t.nn.init.trunc_normal_(t.empty(1000), std=1.0).abs() <= 2).all()),
    ),
    _c("nn.init.uniform_(-0.1, 0.1)", lambda t: _bound(t, t.nn.init.uniform_(t.empty(3000), -0.1, 0.1), 100)),
    _c(
        "nn.init.orthogonal_",
        lambda t: t.allclose((w := t.nn.init.orthogonal_(t.empty(4, 4))) @ w.T, t.eye(4), atol=1e-5),
    ),
    _c("list(x) gives rows", lambda t, x: list(x), A),
    _c("[r.sum() for r in x]", lambda t, x: [r.sum() for r in x], A),
    _c("x in a 0-d loop: x.unbind()", lambda t, x: [v.item() for v in x[0]], A),
    _c("isinstance(x, Tensor)", lambda t, x: isinstance(x, t.Tensor), A),
    _c("x.sum(axis=0)", lambda t, x: x.sum(axis=0), A),
    _c("x.max(axis=1)", lambda t, x: x.max(axis=1), A),
    _c("mean(x, dim=(0, 1))", lambda t, x: t.mean(x, dim=(0, 1)), A3),
    _c("x.mean(dtype=float64) of f32", lambda t, x: x.mean(dtype=t.float64), A32),
    _c("x.std(0, keepdim=True)", lambda t, x: x.std(0, keepdim=True), A),
    _c("x.std((0, 2))", lambda t, x: x.std((0, 2)), A3),
    _c("std of int refused", lambda t, x: x.std(), INT),
    _c("x.argmax(keepdim=True)", lambda t, x: x.argmax(keepdim=True), A),
    _c("x.max(dim=1, keepdim=True).values", lambda t, x: x.max(dim=1, keepdim=True).values, A),
    _c("x.softmax(-1)", lambda t, x: x.softmax(-1), A),
    _c("x.log_softmax(dim=0)", lambda t, x: x.log_softmax(dim=0), A),
    _c("x.relu()", lambda t, x: x.relu(), A),
    _c("x.sigmoid()", lambda t, x: x.sigmoid(), A),
    _c("x.masked_fill_(m, 0)", lambda t, x, m: x.masked_fill_(m, 0.0), A, MASK, grad=False),
    _c(
        "x.scatter_(1, i, 1.0)",
        lambda t, x, i: x.scatter_(1, i, 1.0),
        A,
        np.array([[0], [1], [3]]),
        grad=False,
    ),
    _c("x.index_fill_(0, i, 2)", lambda t, x, i: x.index_fill_(0, i, 2.0), A, ROWS, grad=False),
    _c("x.exp_()", lambda t, x: x.exp_(), A, grad=False),
    _c("x.sub_(1).div_(2)", lambda t, x: x.sub_(1).div_(2), A, grad=False),
    _c("x.pow_(2)", lambda t, x: x.pow_(2), A, grad=False),
    _c("x.uniform_ range", lambda t, x: bool(((x.uniform_(-1, 1) >= -1) & (x <= 1)).all()), A, grad=False),
    _c("x.normal_() dtype", lambda t, x: x.normal_().dtype, A32, grad=False),
    _c("x.T of 3-D", lambda t, x: x.T, A3),
    _c("x.split(1)", lambda t, x: x.split(1), A),
    _c("expand(3, -1) of a vector", lambda t, x: x.expand(3, -1), B),
    _c("view(2, 2, 3)", lambda t, x: x.view(2, 2, 3), A),
    _c("unsqueeze(-3)", lambda t, x: x.unsqueeze(-3), A),
    _c("transpose(-1, 0)", lambda t, x: x.transpose(-1, 0), A3),
    _c("stack(dim=2)", lambda t, x: t.stack([x, x], dim=2), A),
    _c("cat with a 1-D empty tensor (legacy)", lambda t, x: t.cat([x, t.tensor([], dtype=t.float64)]), A),
    _c("arange(10).view(2, 5)[:, ::2]", lambda t: t.arange(10).view(2, 5)[:, ::2]),
    _c("flatten() of 1-D", lambda t, x: t.flatten(x), B),
    _c("1-D @ 1-D", lambda t, x: x @ x, B),
    _c("1-D @ 2-D", lambda t, x, y: x @ y, B, D),
    _c("3-D @ 3-D batch broadcast", lambda t, x, y: x @ y, A3, _rng.standard_normal((1, 4, 2))),
    _c("bmm of 3-D and 2-D refused", lambda t, x, y: t.bmm(x, y), A3, D),
    _c("mm of 3-D refused", lambda t, x, y: t.mm(x, y), A3, D),
    _c(
        "einsum bij,bjk->bik",
        lambda t, x, y: t.einsum("bij,bjk->bik", x, y),
        A3,
        _rng.standard_normal((2, 4, 2)),
    ),
    _c("einsum ii->i", lambda t, x: t.einsum("ii->i", x), A[:, :3].copy()),
    _c("einsum ij->", lambda t, x: t.einsum("ij->", x), A),
    _c("einsum i,i->", lambda t, x: t.einsum("i,i->", x, x), B),
    _c("einsum ij->ji", lambda t, x: t.einsum("ij->ji", x), A),
    _c("einsum ...ij,...jk", lambda t, x, y: t.einsum("...ij,...jk->...ik", x, y), A3, D),
    _c("einsum with list operands", lambda t, x, y: t.einsum("ij,jk->ik", [x, y]), A, D),
    _c("einsum bhqd,bhkd->bhqk", lambda t, q, k: t.einsum("bhqd,bhkd->bhqk", q, k), _Q, _KV),
    _c("diff", lambda t, x: t.diff(x), A),
    _c("diff(dim=0)", lambda t, x: t.diff(x, dim=0), A),
    _c("allclose(rtol, atol)", lambda t, x: t.allclose(x, x * 1.001, rtol=1e-2, atol=0.0), A),
    _c("clamp(min=0-d tensor)", lambda t, x: t.clamp(x, min=t.tensor(0.0, dtype=t.float64)), A),
    _c("mask.float().mean()", lambda t, m: m.float().mean(), MASK),
    _c("torch.no_grad as a decorator", lambda t, x: t.no_grad()(lambda y: y * 2)(x).requires_grad, A),
    _c("model.train() returns the model", lambda t: isinstance(t.nn.Linear(2, 2).train(), t.nn.Linear)),
    _c("model.eval().training", lambda t: t.nn.Linear(2, 2).eval().training),
    _c("register_buffer(persistent=False)", lambda t: list(_with_buffer(t).state_dict())),
    _c(
        "named_buffers() lists a non-persistent buffer",
        lambda t: [n for n, _ in _with_buffer(t).named_buffers()],
    ),
    _c("model.double() converts buffers", lambda t: _with_buffer(t).double().mask.dtype),
    _c("add_module / get_submodule", lambda t: _submodule(t)),
    _c("model.apply(init)", lambda t: _apply_init(t)),
]


def _with_buffer(t: Any) -> Any:
    class WithBuffer(t.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = t.nn.Linear(2, 2)
            self.register_buffer("mask", t.ones(2), persistent=False)
            self.register_buffer("count", t.zeros(1))

    return WithBuffer()


def _submodule(t: Any) -> Any:
    m = t.nn.Sequential()
    m.add_module("inner", t.nn.Sequential(t.nn.Linear(2, 3)))
    return tuple(m.get_submodule("inner.0").weight.shape), [n for n, _ in m.named_parameters()]


def _apply_init(t: Any) -> Any:
    m = t.nn.Sequential(t.nn.Linear(2, 3), t.nn.ReLU(), t.nn.Linear(3, 1))

    def init(layer: Any) -> None:
        if isinstance(layer, t.nn.Linear):
            t.nn.init.constant_(layer.weight, 0.5)
            t.nn.init.zeros_(layer.bias)

    m.apply(init)
    return [p.detach() for p in m.parameters()]


# ---------------------------------------------------------------------------------------------------------
# Autograd behaviour


def _grad_of(t: Any, x: Any) -> Any:
    y = (x * x).sum()
    return t.autograd.grad(y, x)


def _twice(t: Any, x: Any) -> Any:
    (x * x).sum().backward()
    (x * 3).sum().backward()
    return x.grad


def _retain(t: Any, x: Any) -> Any:
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward()
    return y.grad


def _no_grad(t: Any, x: Any) -> Any:
    with t.no_grad():
        y = x * 2
    return y.requires_grad, y


def _detach_stops(t: Any, x: Any) -> Any:
    (x.detach() * x).sum().backward()
    return x.grad


def _backward_twice_refused(t: Any, x: Any) -> Any:
    y = x.exp().sum()
    y.backward()
    y.backward()
    return x.grad


def _backward_of_vector_refused(t: Any, x: Any) -> Any:
    (x * 2).backward()
    return x.grad


def _forward_hook(t: Any, x: Any) -> Any:
    m = t.nn.Linear(4, 2).double()
    seen = []
    handle = m.register_forward_hook(lambda mod, args, out: seen.append(tuple(out.shape)) or out * 2)
    y = m(x)
    handle.remove()
    z = m(x)
    return seen, bool(t.allclose(y, z * 2))


def _forward_pre_hook(t: Any, x: Any) -> Any:
    m = t.nn.Linear(4, 2).double()
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    return m(x).detach() - m.bias.detach()


def _in(ctx: Any, fn: Callable[[], Any]) -> Any:
    with ctx:
        return fn()


def _retain_graph(t: Any, x: Any) -> Any:
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    return x.grad


def _backward_gradient(t: Any, x: Any) -> Any:
    (x * 3).backward(gradient=t.ones_like(x) * 2)
    return x.grad


def _hook(t: Any, x: Any) -> Any:
    x.register_hook(lambda g: g * 2)
    (x * x).sum().backward()
    return x.grad


def _grad_context(t: Any, x: Any) -> Any:
    with t.set_grad_enabled(False):
        off = (x * 2).requires_grad
    with t.set_grad_enabled(True):
        on = (x * 2).requires_grad
    return off, on


def _manual_sgd(t: Any, x: Any) -> Any:
    m = t.nn.Linear(4, 2).double()
    with t.no_grad():
        m.weight.fill_(0.5)
        m.bias.zero_()
    w = m.weight
    m(x).pow(2).sum().backward()
    with t.no_grad():
        for p in m.parameters():
            p -= 0.1 * p.grad
    return w.detach().clone(), m.weight.detach().clone(), m.bias.detach().clone()


def _manual_sgd_sub(t: Any, x: Any) -> Any:
    m = t.nn.Linear(4, 2).double()
    with t.no_grad():
        m.weight.fill_(0.5)
        m.bias.zero_()
    m(x).pow(2).sum().backward()
    with t.no_grad():
        for p in m.parameters():
            p.sub_(0.1 * p.grad)
            p.grad.zero_()
    return m.weight.detach().clone(), m.weight.grad


def _step_in_place(t: Any, x: Any) -> Any:
    m = t.nn.Linear(4, 2).double()
    with t.no_grad():
        m.weight.fill_(0.5)
        m.bias.zero_()
    w = m.weight
    opt = t.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        m(x).pow(2).sum().backward()
        opt.step()
    return w is m.weight, w.detach().clone()


def _iadd_alias(t: Any, x: Any) -> Any:
    alias = x
    x += 1
    return alias


def _imul_alias(t: Any, x: Any, y: Any) -> Any:
    alias = x
    x *= y
    return alias


def _numpy_shares(t: Any, x: Any) -> Any:
    x.numpy()[0, 0] = 5.0
    return x


def _from_numpy_shares(t: Any) -> Any:
    a = np.zeros(3)
    x = t.from_numpy(a)
    a[0] = 1.0
    return x


def _as_tensor_shares(t: Any) -> Any:
    a = np.zeros(3)
    x = t.as_tensor(a)
    a[0] = 1.0
    return x


def _tensor_copies(t: Any) -> Any:
    a = np.zeros(3)
    x = t.tensor(a)
    a[0] = 1.0
    return x


CALLS += [
    _c("autograd.grad", _grad_of, A),
    _c("gradients accumulate", _twice, A, grad=True),
    _c("retain_grad", _retain, A),
    _c("no_grad", _no_grad, A),
    _c("detach stops the gradient", _detach_stops, A),
    _c("backward twice refused", _backward_twice_refused, A),
    _c("backward of a non-scalar refused", _backward_of_vector_refused, A),
    _c(
        "set_grad_enabled(False)",
        lambda t, x: (t.set_grad_enabled(False), (x * 2).requires_grad, t.set_grad_enabled(True))[1],
        A,
    ),
    _c("is_grad_enabled", lambda t: t.is_grad_enabled()),
    _c("requires_grad_ on an int refused", lambda t, x: x.requires_grad_(), INT),
    _c("x.grad of a non-leaf is None", lambda t, x: ((x * 2).sum().backward(), x.grad)[1], A),
    _c("backward(retain_graph=True) twice", _retain_graph, A),
    _c("backward(gradient=...)", _backward_gradient, A),
    _c("register_hook doubles the gradient", _hook, A),
    _c("set_grad_enabled as a context", _grad_context, A),
    _c("inference_mode", lambda t, x: _in(t.inference_mode(), lambda: (x * 2).requires_grad), A),
    _c("x.detach().requires_grad_()", lambda t, x: x.detach().requires_grad_().is_leaf, A),
    _c("manual SGD: p -= lr * p.grad under no_grad", _manual_sgd, A, grad=False),
    _c("manual SGD: p.sub_(lr * p.grad); p.grad.zero_()", _manual_sgd_sub, A, grad=False),
    _c("optimizer.step() updates the parameter object", _step_in_place, A, grad=False),
    _c("x += 1 is in place (an alias sees it)", _iadd_alias, A, grad=False),
    _c("x *= y is in place (an alias sees it)", _imul_alias, A, B, grad=False),
    _c("x.add_(1) returns x", lambda t, x: x.add_(1) is x, A, grad=False),
    _c("x.numpy() shares memory", _numpy_shares, A, grad=False),
    _c("from_numpy shares memory", _from_numpy_shares),
    _c("as_tensor of an array shares memory", _as_tensor_shares),
    _c("tensor(array) copies", _tensor_copies),
    _c("x.shape == (3, 4)", lambda t, x: x.shape == (3, 4), A),
    _c("Size", lambda t: tuple(t.Size([2, 3]))),
    _c(
        "x.dtype == float", lambda t, x: (x.dtype == t.float, t.float32 == t.float, x.dtype == t.float64), A32
    ),
    _c("x.is_cuda", lambda t, x: x.is_cuda, A),
    _c("x.device == device('cpu')", lambda t, x: x.device == t.device("cpu"), A),
    _c("len of 0-d refused", lambda t, x: len(x.sum()), A),
    _c("u8 + 250 wraps", lambda t, x: x + 250, np.arange(12, dtype=np.uint8).reshape(3, 4)),
    _c("u8 - 1 wraps", lambda t, x: x - 1, np.arange(12, dtype=np.uint8).reshape(3, 4)),
    _c("u8.sum() is i64", lambda t, x: x.sum(), np.arange(200, 212, dtype=np.uint8)),
    _c("u8.float() / 255", lambda t, x: x.float() / 255, np.arange(12, dtype=np.uint8)),
    _c("u8 * 2.0 is f32", lambda t, x: x * 2.0, np.arange(12, dtype=np.uint8)),
    _c("u8 + i64", lambda t, x, y: x + y, np.arange(12, dtype=np.uint8).reshape(3, 4), INT),
    _c("i32 * i32 stays i32", lambda t, x: x * x, I32),
    _c("f16 + 1", lambda t, x: x + 1, A16),
    _c("f16 sum", lambda t, x: x.sum(), A3.astype(np.float16)),
    _c("f16 matmul", lambda t, x, y: x @ y, A16, D.astype(np.float16)),
    _c("f16 + f32 is f32", lambda t, x, y: x + y, A16, A32),
    _c("bf16 round trip", lambda t, x: x.to(t.bfloat16).float(), A32),
    _c("bf16 * 3", lambda t, x: x.to(t.bfloat16) * 3, A32),
    _c("f32 sum of 10^6 elements", lambda t, x: x.sum(), _rng.standard_normal(10**6).astype(np.float32) + 3),
    _c(
        "f32 mean of 10^6 elements", lambda t, x: x.mean(), _rng.standard_normal(10**6).astype(np.float32) + 3
    ),
    _c(
        "f32 var with a large mean",
        lambda t, x: x.var(),
        (_rng.standard_normal(1000) + 1e4).astype(np.float32),
    ),
    _c("f64 var with a large mean", lambda t, x: x.var(), _rng.standard_normal(1000) + 1e8),
    _c(
        "logsumexp of an all -inf row",
        lambda t, x: t.logsumexp(x, 1),
        np.array([[-np.inf, -np.inf], [0.0, 1.0]]),
    ),
    _c(
        "logsumexp of +inf", lambda t, x: t.logsumexp(x, 1), np.array([[np.inf, 1.0], [0.0, 1.0]]), grad=False
    ),
    _c(
        "F.cross_entropy of large f32 logits",
        lambda t, x, y: t.nn.functional.cross_entropy(x * 1e4, y),
        LOGITS.astype(np.float32),
        TARGET,
    ),
    _c("F.log_softmax of large f32", lambda t, x: t.nn.functional.log_softmax(x * 1e4, 1), A32),
    _c("exp of f32 100 is inf", lambda t, x: t.exp(x * 1000), A32, grad=False),
    _c("int % 0 refused", lambda t, x: x % 0, INT),
    _c("bool.mean() refused", lambda t, m: m.mean(), MASK),
    _c("sum(dim=0) of an empty", lambda t: t.zeros(0, 3).sum(0)),
    _c("max(dim=1) of int", lambda t, x: x.max(1), INT),
    _c("pad_sequence", lambda t, a, b: t.nn.utils.rnn.pad_sequence([a, b]), A, A[:2].copy()),
    _c(
        "pad_sequence(batch_first, padding_value)",
        lambda t, a, b: t.nn.utils.rnn.pad_sequence([a, b], batch_first=True, padding_value=-1.0),
        A,
        A[:2].copy(),
    ),
    _c(
        "index_add with repeated indices", lambda t, x, s: x.index_add(0, t.tensor([0, 0, 2]), s), A, A.copy()
    ),
    _c(
        "scatter_add with colliding indices",
        lambda t, x, s: x.scatter_add(0, t.zeros(2, 4, dtype=t.long), s),
        A,
        A[:2].copy(),
    ),
    _c(
        "scatter with colliding indices (last wins)",
        lambda t, x, s: x.scatter(0, t.zeros(2, 4, dtype=t.long), s),
        A,
        A[:2].copy(),
        grad=False,
    ),
    _c(
        "bincount(weights, minlength)",
        lambda t, i, w: t.bincount(i, weights=w, minlength=6),
        np.array([0, 1, 1, 4]),
        Const(B),
    ),
    _c("one_hot(-1) refused", lambda t, i: t.nn.functional.one_hot(i), np.array([0, -1])),
    _c(
        "F.grid_sample",
        lambda t, x, g: t.nn.functional.grid_sample(x, g, align_corners=False),
        A4,
        _rng.uniform(-1, 1, (2, 3, 3, 2)),
    ),
    _c(
        "F.affine_grid",
        lambda t, th: t.nn.functional.affine_grid(th, [2, 3, 4, 4], align_corners=False),
        _rng.standard_normal((2, 2, 3)),
    ),
    _c("cumsum(dtype=float64) of int", lambda t, x: x.cumsum(0, dtype=t.float64), INT),
    _c("flip(-1)", lambda t, x: x.flip(-1), A3),
    _c("triu of a batch", lambda t, x: t.triu(x), A3),
    _c("repeat(0, 1)", lambda t, x: x.repeat(0, 1), A),
    _c("tensor(list of 0-d tensors)", lambda t: t.tensor([t.tensor(1.0), t.tensor(2.0)])),
    _c("stack of python-built rows", lambda t, x: t.stack([x[i] * i for i in range(3)]), A),
    _c("topk of int", lambda t, x: x.topk(2), np.array([[3, 1, 4, 1], [5, 9, 2, 6]])),
    _c("argmax() of 3-D is a flat index", lambda t, x: x.argmax(), A3),
    _c("F.conv2d(stride=(2, 1))", lambda t, x, w: t.nn.functional.conv2d(x, w, stride=(2, 1)), A4, _K2),
    _c(
        "F.conv2d f32",
        lambda t, x, w, b: t.nn.functional.conv2d(x, w, b, padding=1),
        A4.astype(np.float32),
        _K2.astype(np.float32),
        B.astype(np.float32),
    ),
    _c(
        "F.max_pool2d((2, 3), stride=(1, 2))",
        lambda t, x: t.nn.functional.max_pool2d(x, (2, 3), stride=(1, 2)),
        A4,
    ),
    _c(
        "F.avg_pool2d(divisor_override=2)",
        lambda t, x: t.nn.functional.avg_pool2d(x, 2, divisor_override=2),
        A4,
    ),
    _c(
        "F.adaptive_avg_pool2d((None, 2))", lambda t, x: t.nn.functional.adaptive_avg_pool2d(x, (None, 2)), A4
    ),
    _c(
        "F.interpolate(scale_factor=(2, 3))",
        lambda t, x: t.nn.functional.interpolate(x, scale_factor=(2, 3)),
        A4,
    ),
    _c("F.pad 4-D (1, 1, 2, 2)", lambda t, x: t.nn.functional.pad(x, (1, 1, 2, 2)), A4),
    _c("F.pad 4-D reflect", lambda t, x: t.nn.functional.pad(x, (1, 2, 2, 1), mode="reflect"), A4),
    _c("nn.Upsample(size=(7, 5))", lambda t, x: t.nn.Upsample(size=(7, 5))(x), A4),
    _c(
        "nn.Upsample(bilinear, align_corners=True)",
        lambda t, x: t.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(x),
        A4,
    ),
    _c("F.embedding of a 0-d index", lambda t, w: t.nn.functional.embedding(t.tensor(2), w), A),
    _c("F.linear f32 with f64 weight refused", lambda t, x, w: t.nn.functional.linear(x, w), A32, _W),
    _c("register_forward_hook", lambda t, x: _forward_hook(t, x), A),
    _c("register_forward_pre_hook", lambda t, x: _forward_pre_hook(t, x), A),
    _c("x * 0-d tensor: gradient of the 0-d", lambda t, x, s: x * s, A, np.array(2.0)),
    _c("0-d + 0-d", lambda t, a, b: a + b, np.array(1.5), np.array(-2.0)),
    _c("where(x > 0, x.sqrt(), 0): NaN gradient", lambda t, x: t.where(x > 0, x.sqrt(), 0.0), A),
    _c("where(x > 0, x.log(), x): NaN gradient", lambda t, x: t.where(x > 0, x.log(), x), A),
    _c("norm(dim=1) of a zero row: gradient", lambda t, x: x.norm(dim=1), np.array([[0.0, 0.0], [3.0, 4.0]])),
    _c(
        "F.normalize of a zero row: gradient",
        lambda t, x: t.nn.functional.normalize(x),
        np.array([[0.0, 0.0], [3.0, 4.0]]),
    ),
    _c("cdist(x, x): gradient at zero distance", lambda t, x: t.cdist(x, x), A),
    _c("x ** 0 at 0: gradient", lambda t, x: x**0, np.array([0.0, 1.0])),
    _c(
        "pow(0, y): gradient",
        lambda t, x, y: t.pow(x, y),
        np.array([0.0, 0.0, 2.0]),
        np.array([0.0, 2.0, 0.5]),
    ),
    _c("atan2(0, 0): gradient", lambda t, y, x: t.atan2(y, x), np.array([0.0, 1.0]), np.array([0.0, 1.0])),
    _c(
        "F.cosine_similarity of zero vectors",
        lambda t, x, y: t.nn.functional.cosine_similarity(x, y),
        np.array([[0.0, 0.0], [1.0, 2.0]]),
        np.array([[1.0, 1.0], [0.0, 0.0]]),
    ),
    _c("int where with i32 and i64", lambda t, m, a, b: t.where(m, a, b), MASK, I32, INT),
    _c("bool == 1", lambda t, m: m == 1, MASK),
    _c("mask.sum() / mask.numel()", lambda t, m: m.sum() / m.numel(), MASK),
    _c("int.max() stays int", lambda t, x: (x.max(), x.min(), x.sum(0)), INT),
    _c("arange(3, dtype=float32)", lambda t: t.arange(3, dtype=t.float32)),
    _c("sort values: gradient", lambda t, x: x.sort(1).values, A),
    _c("topk values: gradient", lambda t, x: x.topk(2, dim=0).values, A),
    _c("kthvalue values: gradient", lambda t, x: t.kthvalue(x, 2, 1).values, A),
    _c("median(1) values: gradient", lambda t, x: x.median(1).values, A),
    _c(
        "cumprod with a zero: gradient",
        lambda t, x: x.cumprod(1),
        np.array([[1.0, 0.0, 2.0, 3.0], [2.0, 2.0, 0.0, 0.0]]),
    ),
    _c("f16 softmax", lambda t, x: t.nn.functional.softmax(x, dim=-1), A16),
]


# ---------------------------------------------------------------------------------------------------------
# The test


def _ids() -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for c in CALLS:
        n = seen.get(c.name, 0)
        seen[c.name] = n + 1
        out.append(c.name if n == 0 else f"{c.name} #{n + 1}")
    return out


@pytest.mark.parametrize("call", CALLS, ids=_ids())
def test_call_gives_pytorchs_answer_or_an_error(call: Call) -> None:
    outcome = run(call)
    if outcome.kind == "unsupported":
        warnings.warn(UnsupportedCall(f"{call.name}: {outcome.detail}"), stacklevel=1)
    assert outcome.kind != "silent", f"{call.name}: {outcome.detail}"


def _on_verigrad(t: Any) -> bool:
    return t is verigrad


@pytest.mark.parametrize(
    ("fn", "inputs", "kind"),
    [
        (lambda t, x: x * (3 if _on_verigrad(t) else 2), (A,), "silent"),  # values
        (lambda t, x: x.float() if _on_verigrad(t) else x, (A,), "silent"),  # dtype
        (lambda t, x: x[None] if _on_verigrad(t) else x, (A,), "silent"),  # shape
        (lambda t, x: x.detach() if _on_verigrad(t) else x, (A,), "silent"),  # requires_grad
        (lambda t, x: x * x.detach() * 2 if _on_verigrad(t) else x * x, (A,), "silent"),  # gradient only
        (lambda t, x: (x.sum(), x) if _on_verigrad(t) else (x.sum(),), (A,), "silent"),  # structure
        (lambda t, x: x.sum().item() if _on_verigrad(t) else int(x.sum().item()), (A,), "silent"),  # type
        (lambda t, x: x if _on_verigrad(t) else x.view(5, -1), (A,), "silent"),  # PyTorch refuses
        (lambda t, x: x.view(5, -1) if _on_verigrad(t) else x, (A,), "unsupported"),
        (lambda t, x: x.view(5, -1), (A,), "both refuse"),
        (lambda t, x: (x * 2, x.argmax()), (A,), "same"),
    ],
)
def test_the_harness_tells_a_silent_difference_from_a_refusal(fn, inputs, kind) -> None:
    assert run(Call("harness", fn, inputs)).kind == kind


def test_the_sweep_is_broad() -> None:
    assert len(CALLS) >= 600
    assert len(set(_ids())) == len(CALLS)


if __name__ == "__main__":
    torch.set_num_threads(1)
    kinds: dict[str, list[str]] = {}
    for c, name in zip(CALLS, _ids()):
        o = run(c)
        kinds.setdefault(o.kind, []).append(f"{name}: {o.detail}")
    for kind in ("silent", "unsupported"):
        print(f"\n== {kind}: {len(kinds.get(kind, []))}")
        print("\n".join(kinds.get(kind, [])))
    print({k: len(v) for k, v in kinds.items()})
