"""The stack of active modes. An op call checks its rule, then hands itself to the current mode.

Every mode answers the same two questions: `apply` (run or record an op whose output spec is known) and
`constant` (bring NumPy data in). `AbstractMode` answers with specs only: no data, no kernels.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from .shapes import Spec
from .tensor import Tensor


class Mode:
    """What an op call becomes: run now (eager), described (abstract) or recorded (trace)."""

    name = "mode"

    def apply(self, op: Any, args: tuple[Tensor, ...], params: dict, out: Spec) -> Tensor:
        raise NotImplementedError

    def constant(self, array: np.ndarray, dtype: Any) -> Tensor:
        raise NotImplementedError

    def assign(self, target: Tensor, value: Tensor) -> None:
        raise NotImplementedError(f"{self.name} mode cannot update a tensor in place")

    def draw_seed(self, generator: Any) -> int:
        """The seed of a random op's draw from `generator` (eagerly: its next seed)."""
        return generator.next_seed()

    def read_flag(self, obj: Any, name: str) -> None:
        """The op calls that follow depend on `obj.name` (a module's `training`): a trace notes its
        value, and a compiled function traces again where it has changed."""

    def begin_backward(self) -> None:
        """Called when a backward pass starts (a trace marks where its backward section begins)."""

    def made_view(self, view: Tensor, base: Tensor, key: Any) -> None:
        """`view` is `base[key]` (basic indices). Eagerly it shares base's memory; where a view is a value
        of its own (a trace), a write into it must also be written into base (`view_base`)."""

    def view_base(self, view: Tensor) -> tuple[Tensor, Any] | None:
        """The (base, key) that a write into `view` must also write; None where memory is shared."""
        return None

    def views_of(self, base: Tensor) -> list[tuple[Tensor, Any]]:
        """The (view, key) made of `base` that a write into base must refresh; none where memory is
        shared."""
        return []


class AbstractMode(Mode):
    """Shapes and dtypes only: every op returns a tensor that holds a spec and no data."""

    name = "abstract"

    def apply(self, op: Any, args: tuple[Tensor, ...], params: dict, out: Spec) -> Tensor:
        return Tensor(out, None)

    def constant(self, array: np.ndarray, dtype: Any) -> Tensor:
        return Tensor(Spec(tuple(array.shape), dtype), None)

    def assign(self, target: Tensor, value: Tensor) -> None:
        pass  # the shapes were already checked; there is no data to write

    def draw_seed(self, generator: Any) -> int:
        return 0  # no data is drawn: checking a function leaves the generator as it was


def eager_only(what: str, instead: str = "") -> None:
    """Refuse `what`, whose result's size depends on the values, outside eager mode (a trace or
    `check` knows shapes, not values)."""
    if current().name != "eager":
        hint = f"; {instead}" if instead else ""
        raise TypeError(f"{what}'s size depends on the values: it runs eagerly, not in a trace{hint}")


_DEFAULT: list[Mode] = []  # the bottom of every thread's stack (the eager mode)


class ThreadState(threading.local):
    """What each thread has of its own, as in PyTorch: the mode stack (a trace in one thread records
    nothing of another's ops) and grad mode (`grad[-1]`; `no_grad` pushes, `set_grad_enabled` sets)."""

    def __init__(self) -> None:
        self.stack: list[Mode] = list(_DEFAULT)
        self.grad: list[bool] = [True]


LOCAL = ThreadState()


def current() -> Mode:
    return LOCAL.stack[-1]


def set_default(mode: Mode) -> None:
    """Install the bottom of the stack (the eager mode does this when it is imported)."""
    _DEFAULT[:] = [mode]
    stack = LOCAL.stack
    if stack:
        stack[0] = mode
    else:
        stack.append(mode)


@contextlib.contextmanager
def using(mode: Mode) -> Iterator[Mode]:
    stack = LOCAL.stack
    stack.append(mode)
    try:
        yield mode
    finally:
        stack.pop()


def abstract() -> contextlib.AbstractContextManager[Mode]:
    """Inside ``with verigrad.abstract():`` tensors (parameters included) are specs without data."""
    return using(AbstractMode())
