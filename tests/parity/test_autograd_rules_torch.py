"""Autograd's rules against PyTorch's, each case written once and run on both with the same f64 inputs:
which results carry history, retain_graph, `autograd.grad` and `autograd.backward`, gradients at NaN and
singular points (compared bit for bit, signed zeros included), and the calls both refuse."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

NAN = math.nan


def _leaf(lib: Any, values: Any, dtype: str = "float64") -> Any:
    return lib.tensor(values, dtype=getattr(lib, dtype), requires_grad=True)


def _np(t: Any) -> np.ndarray:
    return t.detach().numpy()


def _same(ours: Any, theirs: Any) -> None:
    """The same values bit for bit (NaN where NaN, the sign of a zero), dtype and requires_grad."""
    if theirs is None or ours is None:
        assert ours is None and theirs is None
        return
    a, b = _np(ours), _np(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)
    assert (np.signbit(a) == np.signbit(b)).all()
    assert ours.requires_grad == theirs.requires_grad


# 1. only a float result has a gradient ---------------------------------------------------------------------
RESULTS: dict[str, Callable[[Any, Any], Any]] = {
    "long": lambda t, x: x.long(),
    "int": lambda t, x: x.int(),
    "to(int64)": lambda t, x: x.to(dtype=t.int64),
    "bool": lambda t, x: x.bool(),
    "gt": lambda t, x: x > 0,
    "argmax": lambda t, x: x.argmax(),
    "argmin(0)": lambda t, x: t.argmin(x, 0),
    "max(0).indices": lambda t, x: x.max(0).indices,
    "float": lambda t, x: x.float(),
    "mul": lambda t, x: x * 2,
}


@pytest.mark.parametrize("name", RESULTS)
def test_only_a_float_result_requires_grad(name: str) -> None:
    values = [1.5, -2.0, 3.0]
    fn = RESULTS[name]
    ours, theirs = fn(verigrad, _leaf(verigrad, values)), fn(torch, _leaf(torch, values))
    assert ours.requires_grad == theirs.requires_grad
    assert (ours.grad_fn is None) == (theirs.grad_fn is None)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


# 2, 3. retain_graph, autograd.grad and autograd.backward -----------------------------------------------
def _twice(t: Any, x: Any) -> Any:
    y = (x * x).sum()
    y.backward()
    y.backward()


def _shared(t: Any, x: Any) -> Any:
    h = x.exp()
    (h * 2).sum().backward()
    (h * 3).sum().backward()


def _grad_then_backward(t: Any, x: Any) -> Any:
    y = (x.sin() * x).sum()
    t.autograd.grad(y, x)
    y.backward()


REFUSED: dict[str, Callable[[Any, Any], Any]] = {
    "backward twice": _twice,
    "a shared part backward twice": _shared,
    "autograd.grad then backward": _grad_then_backward,
    "backward of a vector": lambda t, x: (x * 2).backward(),
    "grad of an unused input": lambda t, x: t.autograd.grad((x * 2).sum(), [x, _leaf(t, [1.0])]),
    "grad of a non-leaf that is not used": lambda t, x: t.autograd.grad((x * 2).sum(), [x * 3]),
    "grad by a constant": lambda t, x: t.autograd.grad((x * 2).sum(), x.detach()),
    "grad of a constant": lambda t, x: t.autograd.grad(x.detach().sum(), x),
    "materialize_grads with allow_unused=False": lambda t, x: t.autograd.grad(
        (x * 2).sum(), x, allow_unused=False, materialize_grads=True
    ),
    "argmax of bool": lambda t, x: (x > 0).argmax(),
    "argmin of bool": lambda t, x: (x > 0).argmin(0),
    "sum(dim=True)": lambda t, x: x.reshape(1, 3).sum(dim=True),  # (2-D: True would be a valid dim 1)
    "amax(dim=True)": lambda t, x: x.reshape(1, 3).amax(dim=True),
    "argmax(dim=True)": lambda t, x: x.reshape(1, 3).argmax(dim=True),
    "int % 0": lambda t, x: x.long() % 0,
    "int % a tensor holding 0": lambda t, x: x.long() % t.tensor([1, 0, 2]),
    "fmod(int, 0)": lambda t, x: t.fmod(x.int(), 0),
}


@pytest.mark.parametrize("name", REFUSED)
def test_both_refuse(name: str) -> None:
    values = [1.5, -2.0, 3.0]
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        REFUSED[name](torch, _leaf(torch, values))
    with pytest.raises((RuntimeError, TypeError, ValueError, ZeroDivisionError)):
        REFUSED[name](verigrad, _leaf(verigrad, values))


def _retained(t: Any, x: Any) -> Any:
    y = (x.sin() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    return x.grad


def _create_graph(t: Any, x: Any) -> Any:
    (x**3).sum().backward(create_graph=True)
    g = x.grad
    (g2,) = t.autograd.grad(g.sum(), x)  # through the graph create_graph kept
    return g, g2


def _grad_tuple(t: Any, x: Any) -> Any:
    out = t.autograd.grad((x * x.exp()).sum(), x)
    assert isinstance(out, tuple) and len(out) == 1 and x.grad is None
    return out[0]


def _grad_total(t: Any, x: Any) -> Any:
    h = x * 2
    return t.autograd.grad((h * h.sin()).sum() + x.sum(), [x, h])


def _grad_unused(t: Any, x: Any) -> Any:
    w = _leaf(t, [2.0])
    return t.autograd.grad((x * 2).sum(), [x, w], allow_unused=True) + t.autograd.grad(
        (x * 2).sum(), [w, x], materialize_grads=True
    )


def _grad_second(t: Any, x: Any) -> Any:
    (g,) = t.autograd.grad((x**3 * x.sin()).sum(), x, create_graph=True)
    return g, t.autograd.grad(g.sum(), x, retain_graph=True)[0]


def _grad_outputs(t: Any, x: Any) -> Any:
    seed = t.tensor([1.0, -2.0, 0.5], dtype=t.float64)
    return t.autograd.grad([x * x, x.exp().sum()], x, grad_outputs=[seed, None])


def _autograd_backward(t: Any, x: Any) -> Any:
    w = _leaf(t, [0.5])
    t.autograd.backward([(x * w).sum(), x.exp()], [None, t.tensor([1.0, 2.0, 3.0], dtype=t.float64)])
    first = (x.grad.clone(), w.grad.clone())
    t.autograd.backward((x * w).sum(), inputs=[w])
    return (*first, x.grad, w.grad)


def _positional_retain(t: Any, x: Any) -> Any:
    y = x * x
    y.backward(t.ones_like(x), True)
    y.backward(t.ones_like(x))
    return x.grad


ANSWERS: dict[str, Callable[[Any, Any], Any]] = {
    "retain_graph=True": _retained,
    "create_graph retains": _create_graph,
    "autograd.grad is a tuple": _grad_tuple,
    "autograd.grad of an intermediate": _grad_total,
    "autograd.grad unused inputs": _grad_unused,
    "autograd.grad second derivative": _grad_second,
    "autograd.grad grad_outputs": _grad_outputs,
    "autograd.backward": _autograd_backward,
    "backward(gradient, retain_graph)": _positional_retain,
}


@pytest.mark.parametrize("name", ANSWERS)
def test_same_gradients(name: str) -> None:
    values = [0.5, -1.25, 2.0]
    fn = ANSWERS[name]
    ours, theirs = fn(verigrad, _leaf(verigrad, values)), fn(torch, _leaf(torch, values))
    ours, theirs = (ours, theirs) if isinstance(theirs, tuple) else ((ours,), (theirs,))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if b is None:
            assert a is None
            continue
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12, atol=1e-12)
        assert a.requires_grad == b.requires_grad


# 4. gradients at NaN and singular points ------------------------------------------------------------
POINTS: dict[str, tuple[Callable[..., Any], list]] = {
    "maximum with NaN": (lambda t, x, y: t.maximum(x, y), [[NAN, 1.0, 2.0, 0.0], [1.0, NAN, 2.0, 5.0]]),
    "minimum with NaN": (lambda t, x, y: t.minimum(x, y), [[NAN, 1.0, 2.0, 0.0], [1.0, NAN, 2.0, 5.0]]),
    "clamp of NaN": (lambda t, x: x.clamp(-1.0, 1.0), [[NAN, 0.5, 3.0, -3.0, 1.0]]),
    "clamp(min) of NaN": (lambda t, x: t.clamp(x, min=0.0), [[NAN, 0.5, -3.0]]),
    "max() with NaN": (lambda t, x: x.max(), [[[NAN, 1.0, 3.0], [3.0, NAN, 0.0]]]),
    "min() with NaN": (lambda t, x: x.min(), [[[NAN, 1.0, 3.0], [3.0, NAN, 0.0]]]),
    "max() with ties": (lambda t, x: t.max(x), [[[1.0, 3.0, 3.0], [3.0, 2.0, 0.0]]]),
    "min() with ties": (lambda t, x: x.min(), [[[0.0, 3.0, 0.0], [3.0, 2.0, 0.0]]]),
    "amax() with NaN": (lambda t, x: x.amax(), [[[NAN, 1.0, 3.0], [3.0, NAN, 0.0]]]),
    "amax(1) with NaN and ties": (lambda t, x: x.amax(1), [[[NAN, 1.0, 3.0], [3.0, 3.0, 0.0]]]),
    "amin(0) with NaN and ties": (lambda t, x: t.amin(x, 0), [[[NAN, 1.0, 0.0], [3.0, 1.0, 0.0]]]),
    "max(1) with NaN": (lambda t, x: x.max(1).values, [[[1.0, NAN, NAN], [3.0, 3.0, 0.0]]]),
    "atan2 at the origin": (
        lambda t, y, x: t.atan2(y, x),
        [[0.0, -0.0, 0.0, -0.0, 1.0], [0.0, 0.0, -0.0, -0.0, 0.0]],
    ),
}


@pytest.mark.parametrize("name", POINTS)
def test_gradients_at_nan_and_singular_points(name: str) -> None:
    fn, inputs = POINTS[name]
    answers = []
    for lib in (verigrad, torch):
        leaves = [_leaf(lib, v) for v in inputs]
        out = fn(lib, *leaves)
        seed = np.linspace(0.5, 2.0, out.numel()).reshape(tuple(out.shape))
        cotangent = lib.tensor(seed, dtype=lib.float64)
        (out * cotangent).sum().backward()
        answers.append((out, [x.grad for x in leaves]))
    (ours, our_grads), (theirs, their_grads) = answers
    np.testing.assert_array_equal(_np(ours), _np(theirs))
    for a, b in zip(our_grads, their_grads):
        _same(a, b)


def test_pow_f32_base_f64_exponent_gradients() -> None:
    answers = []
    for lib in (verigrad, torch):
        base, exponent = _leaf(lib, [1.3, 2.7, 0.0, 0.4], "float32"), _leaf(lib, [0.3, 1.1, 2.0, -0.7])
        out = base**exponent
        out.sum().backward()
        answers.append((out, base.grad, exponent.grad))
    for a, b in zip(*answers):
        assert _np(a).dtype == _np(b).dtype
        tol = 1e-12 if _np(a).dtype == np.float64 else 1e-6
        np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=0)
