"""Reverse-mode autograd on eager tensors: each result remembers the op that made it (a `Node`);
`backward` walks those records in reverse topological order and applies each op's VJP.

The VJPs are written with verigrad ops, so with `create_graph=True` the backward pass is itself
recorded and can be differentiated again.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from . import modes
from .registry import FUNCS
from .tensor import Tensor

_GRAD_ENABLED = [True]


def is_grad_enabled() -> bool:
    return _GRAD_ENABLED[-1]


@contextlib.contextmanager
def _grad_mode(enabled: bool) -> Iterator[None]:
    _GRAD_ENABLED.append(enabled)
    try:
        yield
    finally:
        _GRAD_ENABLED.pop()


class no_grad(contextlib.ContextDecorator):
    """Ops inside record no gradient history (as a context manager or a decorator)."""

    def __enter__(self) -> None:
        _GRAD_ENABLED.append(False)

    def __exit__(self, *exc: object) -> None:
        _GRAD_ENABLED.pop()


def enable_grad() -> contextlib.AbstractContextManager[None]:
    return _grad_mode(True)


class Node:
    """How a tensor was made: the op, its input tensors and its params."""

    __slots__ = ("inputs", "op", "params")

    def __init__(self, op: Any, inputs: tuple[Tensor, ...], params: dict) -> None:
        self.op, self.inputs, self.params = op, inputs, params


def _topological(root: Tensor) -> list[Tensor]:
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        if t._node is not None:
            stack.extend((i, False) for i in t._node.inputs if i.requires_grad and id(i) not in seen)
    return order


def backward(root: Tensor, grad: Tensor | None = None, create_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into `.grad` of every leaf that requires grad."""
    if not root.requires_grad:
        raise RuntimeError("backward() on a tensor that does not require grad (no leaf needs it)")
    modes.current().begin_backward()
    if grad is None:
        if root.numel() != 1:
            raise RuntimeError(f"backward() without a gradient needs a single value, got {root.shape}")
        grad = FUNCS["ones_like"](root.detach())
    elif tuple(grad.shape) != tuple(root.shape):
        raise RuntimeError(f"gradient shape {grad.shape} does not match {root.shape}")
    grads: dict[int, Tensor] = {id(root): grad}
    with _grad_mode(create_graph):
        for t in reversed(_topological(root)):
            g = grads.pop(id(t), None)
            if g is None:
                continue
            if t._node is None:
                t.grad = g if t.grad is None else t.grad + g
                continue
            node = t._node
            for inp, gi in zip(node.inputs, node.op.vjp(g, t, *node.inputs, **node.params)):
                if gi is None or not inp.requires_grad:
                    continue
                if gi.shape != inp.shape:
                    raise RuntimeError(
                        f"the VJP of {node.op.name} gave a gradient of shape {gi.shape} "
                        f"for an input of shape {inp.shape}"
                    )
                if gi.dtype is not inp.dtype:  # mixed-dtype ops: each input's gradient in its own dtype
                    gi = gi.cast(inp.dtype)
                grads[id(inp)] = gi if id(inp) not in grads else grads[id(inp)] + gi


def grad_of(fn: Callable[..., Tensor]) -> Callable[..., Any]:
    """The gradient function of a scalar-valued function of tensors (eager, for tests and users)."""

    @functools.wraps(fn)
    def wrapper(*args: Tensor) -> tuple[Tensor | None, ...]:
        leaves = [a.detach().requires_grad_(True) for a in args]
        fn(*leaves).backward()
        return tuple(leaf.grad for leaf in leaves)

    return wrapper


FUNCS["backward"] = backward
