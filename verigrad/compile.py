"""`check`: run a function on abstract tensors (no data, no kernels) and return its output specs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import modes
from .shapes import Spec
from .tensor import Tensor


def _out_specs(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.spec
    if isinstance(value, tuple | list):
        return type(value)(_out_specs(v) for v in value)
    if isinstance(value, dict):
        return {k: _out_specs(v) for k, v in value.items()}
    return value


def check(fn: Callable[..., Any], *specs: Spec) -> Any:
    """Run `fn` on tensors that are only specs; return the output spec(s) or raise ShapeError.

    >>> n, din, dout = verigrad.dims("n din dout")
    >>> verigrad.check(lambda x, w: x @ w.T, verigrad.spec([n, din]), verigrad.spec([dout, din]))
    f32[n, dout]
    """
    for i, s in enumerate(specs):
        if not isinstance(s, Spec):
            raise TypeError(f"argument {i} of check must be a verigrad.spec, got {type(s).__name__}")
    with modes.abstract():
        return _out_specs(fn(*(Tensor(s, None) for s in specs)))
