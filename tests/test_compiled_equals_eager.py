"""Compiled = eager on every input: random small programs (element-wise ops, reductions, matmul,
softmax, cross_entropy, gather, where, clamp; with and without backward) run eagerly and compiled on
both backends, on data with NaN, infinities, signed zeros and positions out of range. A compiled plan is
first run on benign data until it replays its recorded calls (ir/replay.py), then on the drawn data
(and another plan first on the drawn data): each result must have eager's bits (NaN payloads and -0.0
included), or the run must raise eager's exception with eager's message."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import verigrad
import verigrad.nn.functional as F
from verigrad.backends import cpu as cpu_backend

N, C = 4, 5
TILE = 1024  # rows repeated: [4096, 5] operands, more elements than the cpu backend runs as ufuncs
WARM = 10  # benign runs first: more than Plan.replay_after, so the drawn data meets a replay

SPECIAL = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3e38, -3e38, 1e-45, 0.5, -2.5, 88.0, 100.0]
FLOATS = st.one_of(st.sampled_from(SPECIAL), st.floats(width=32, allow_nan=True, allow_infinity=True))

UNARY = {
    "exp": lambda h: h.exp(),
    "log": lambda h: h.log(),
    "sqrt": lambda h: h.sqrt(),
    "tanh": lambda h: h.tanh(),
    "sigmoid": lambda h: h.sigmoid(),
    "relu": lambda h: h.relu(),
    "abs": lambda h: h.abs(),
    "neg": lambda h: -h,
    "sin": lambda h: h.sin(),
    "clamp": lambda h: h.clamp(-1.0, 1.0),
    "softmax": lambda h: F.softmax(h, dim=1),
    "log_softmax": lambda h: F.log_softmax(h, dim=1),
    "max": lambda h: h - h.max(dim=1, keepdim=True).values,
    "sum": lambda h: h * h.sum(dim=1, keepdim=True),
    "mean": lambda h: h - h.mean(dim=0, keepdim=True),
}
BINARY = {
    "add": lambda h, y: h + y,
    "sub": lambda h, y: h - y,
    "mul": lambda h, y: h * y,
    "div": lambda h, y: h / y,
    "maximum": lambda h, y: verigrad.maximum(h, y),
    "minimum": lambda h, y: verigrad.minimum(h, y),
    "where": lambda h, y: verigrad.where(h > y, h, y),
    "matmul": lambda h, y: h @ y.T @ y,
}
OPS = [*UNARY, *BINARY, "gather"]
ENDS = ("sum", "cross_entropy", "cross_entropy_ignore", "gather_sum")


def _program(ops: list[str], end: str, backward: bool) -> Any:
    def fn(x: Any, y: Any, idx: Any, t: Any) -> Any:
        w = x.detach().requires_grad_() if backward else x
        h = w
        for name in ops:
            if name in UNARY:
                h = UNARY[name](h)
            elif name in BINARY:
                h = BINARY[name](h, y)
            else:  # gather, kept [N, C]
                h = h + verigrad.gather(h, 1, idx).sum(dim=1, keepdim=True)
        if end == "sum":
            loss = h.sum()
        elif end == "cross_entropy":
            loss = F.cross_entropy(h, t)
        elif end == "cross_entropy_ignore":
            loss = F.cross_entropy(h, t, ignore_index=0)
        else:
            loss = verigrad.gather(h, 1, idx).sum()
        if not backward:
            return h, loss
        loss.backward()
        return h, loss, w.grad

    return fn


def _run(fn: Any, arrays: list[np.ndarray]) -> Any:
    """The outputs' arrays, or the exception's type and message."""
    try:
        result = fn(*[verigrad.tensor(a) for a in arrays])
    except Exception as e:  # the exception itself is what is compared
        return type(e), str(e)
    return [np.asarray(r.numpy()) for r in result]


def _same(actual: Any, expected: Any) -> bool:
    """The same exception and message, or the same bits (NaN payloads and signs, -0.0 and 0.0 apart)."""
    if isinstance(expected, tuple) or isinstance(actual, tuple):
        return actual == expected
    return all(
        a.dtype == e.dtype and a.shape == e.shape and a.tobytes() == e.tobytes()
        for a, e in zip(actual, expected, strict=True)
    )


def _benign(rows: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    x, y = rng.uniform(0.5, 1.5, (2, rows, C)).astype(np.float32)
    return [x, y, rng.integers(0, C, (rows, 2)), rng.integers(1, C, rows)]


@st.composite
def _cases(draw: Any) -> tuple:
    ops = draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=4))
    end = draw(st.sampled_from(ENDS))
    backward = draw(st.booleans())
    x = draw(hnp.arrays(np.float32, (N, C), elements=FLOATS))
    y = draw(hnp.arrays(np.float32, (N, C), elements=FLOATS))
    idx = draw(hnp.arrays(np.int64, (N, 2), elements=st.integers(-1, C)))
    t = draw(hnp.arrays(np.int64, (N,), elements=st.integers(-1, C)))
    if draw(st.booleans()):  # mostly in range: the values, not the error, compared
        idx, t = np.clip(idx, 0, C - 1), np.clip(t, 0, C - 1)
    if draw(st.booleans()):  # past the cpu backend's `ufunc_below`: its C kernels, fused ones too
        x, y, idx, t = (np.tile(a, (TILE,) + (1,) * (a.ndim - 1)) for a in (x, y, idx, t))
    return ops, end, backward, [x, y, idx, t]


BACKENDS = ("reference", "cpu") if cpu_backend.available() else ("reference",)


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(_cases())
def test_compiled_replayed_plans_give_eager_bits_or_eager_errors(case):
    ops, end, backward, arrays = case
    fn = _program(ops, end, backward)
    for backend in BACKENDS:
        with verigrad.backend(backend):
            expected = _run(fn, arrays)
            compiled = verigrad.compile(fn)
            benign = _benign(len(arrays[0]))
            want = _run(fn, benign)
            for _ in range(WARM):
                assert _same(_run(compiled, benign), want), (backend, "benign data")
            for _ in range(2):  # the replay (or its check) on the drawn data, then again
                assert _same(_run(compiled, arrays), expected), (backend, ops, end, backward)
            assert _same(_run(compiled, benign), want), (backend, "benign data after")
            fresh = verigrad.compile(fn)  # a plan whose first, checked run meets the drawn data
            assert _same(_run(fresh, arrays), expected), (backend, "first run")
            assert _same(_run(fresh, benign), want), (backend, "first run, then benign data")


def test_nan_plus_nan_keeps_eager_sign():
    """The first discrepancy the test above found: a plan added operands of few elements with NumPy's
    ufunc, eager mode with the cpu backend's kernel, and NumPy gives NaN + -NaN either sign (its vector
    and scalar loops differ): the gradient of exp(x - x.mean(0)) on NaNs had NaNs of both signs."""
    fn = _program(["mean", "exp"], "sum", True)
    nan = np.full((N, C), np.nan, np.float32)
    arrays = [nan, nan.copy(), np.zeros((N, 2), np.int64), np.zeros(N, np.int64)]
    for backend in BACKENDS:
        with verigrad.backend(backend):
            assert _same(_run(verigrad.compile(fn), arrays), _run(fn, arrays))


def test_a_replay_recorded_where_a_kernel_fell_back_to_numpy_is_not_stale():
    """The second discrepancy: log(log(x)) of the benign data has NaNs (log of a negative), on which the
    cpu sum's C call says "not done" and NumPy sums; the replay recorded so made the C call alone and
    gave the recording's NaN (-NaN) for the sum of other NaNs (+NaN). Such a step runs in Python."""
    fn = _program(["log", "log"], "sum", False)
    nan = np.full((N, C), np.nan, np.float32)
    arrays = [nan, nan.copy(), np.zeros((N, 2), np.int64), np.zeros(N, np.int64)]
    with verigrad.backend("cpu" if cpu_backend.available() else "reference"):
        compiled = verigrad.compile(fn)
        for _ in range(WARM):
            _run(compiled, _benign(N))
        assert _same(_run(compiled, arrays), _run(fn, arrays))


def test_nan_signs_in_fused_kernels():
    """Found by this file's fuzz test (with more examples than CI runs): the gradient of
    cross_entropy(x - x.mean(0)) on NaNs, [4096, 5], whose last step is a fused add of two NaNs. Past the
    cpu backend's ufunc_below a plan fuses element-wise ops into one generated C kernel, and for NaN + NaN
    the C compiler may take either operand's NaN (an add is commutative to it): IEEE 754 leaves the sign
    of a NaN result unspecified, and the kernels' EXACT claim (`verigrad verify`) is the reference's bits
    with NaN meeting NaN whatever its sign and payload. That is what holds here: every other bit, and
    every NaN's position."""
    fn = _program(["mean"], "cross_entropy", True)
    nan = np.full((N * TILE, C), np.nan, np.float32)
    arrays = [nan, nan.copy(), np.zeros((N * TILE, 2), np.int64), np.zeros(N * TILE, np.int64)]
    with verigrad.backend("cpu" if cpu_backend.available() else "reference"):
        compiled, eager = _run(verigrad.compile(fn), arrays), _run(fn, arrays)
    assert _same(_canonical_nans(compiled), _canonical_nans(eager))
    assert any(np.isnan(a).any() for a in eager)


def _canonical_nans(results: Any) -> Any:
    """The arrays with every NaN replaced by the one quiet NaN (its sign and payload dropped)."""
    if isinstance(results, tuple):
        return results
    return [
        np.where(np.isnan(a), np.array(np.nan, a.dtype), a) if a.dtype.kind == "f" else a for a in results
    ]
