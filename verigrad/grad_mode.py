"""Grad mode: whether ops record history for backward in this thread (no_grad, enable_grad,
set_grad_enabled, inference_mode), as context managers and as decorators (of generator functions too:
the mode holds each time the generator runs, as PyTorch's)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import threading
from collections.abc import Callable, Generator
from typing import Any

from . import modes


class _ModeDecorator(contextlib.ContextDecorator):
    """A grad mode as a decorator: a generator function runs inside the mode at each step (between its
    yields), not only while it makes its generator, as PyTorch's `_DecoratorContextManager`."""

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        if not inspect.isgeneratorfunction(fn):
            return super().__call__(fn)

        @functools.wraps(fn)
        def stepped(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
            gen = fn(*args, **kwargs)
            try:
                with self:
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self:
                            gen.close()
                        raise
                    except BaseException:
                        with self:
                            response = gen.throw(*sys.exc_info())
                    else:
                        with self:
                            response = gen.send(request)
            except StopIteration as stop:
                return stop.value

        return stepped


def is_grad_enabled() -> bool:
    """Whether operations are recorded for backward now (False inside no_grad)."""
    return modes.LOCAL.grad[-1]


class _grad_mode(_ModeDecorator):
    """Grad mode `enabled` inside the block, or the decorated function (a class, not a generator: every
    backward enters one)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __enter__(self) -> None:
        modes.LOCAL.grad.append(self.enabled)

    def __exit__(self, *exc: object) -> None:
        modes.LOCAL.grad.pop()


class no_grad(_ModeDecorator):
    """Ops inside record no gradient history (as a context manager or a decorator, `@no_grad()` or
    `@no_grad` as PyTorch's)."""

    def __new__(cls, fn: Callable[..., Any] | None = None) -> Any:
        self = super().__new__(cls)
        return self if fn is None else _decorate(self, fn, "no_grad takes a function to decorate, or nothing")

    def __enter__(self) -> None:
        modes.LOCAL.grad.append(False)

    def __exit__(self, *exc: object) -> None:
        modes.LOCAL.grad.pop()


def enable_grad(fn: Callable[..., Any] | None = None) -> Any:
    """Grad mode on inside the block (as a context manager or a decorator, with or without the call)."""
    if fn is None:
        return _grad_mode(True)
    return _decorate(_grad_mode(True), fn, "enable_grad takes a function to decorate, or nothing")


def inference_mode(mode: bool | Callable[..., Any] = True) -> Any:
    """PyTorch's inference_mode: grad mode off inside (as no_grad; verigrad makes no inference tensors);
    `inference_mode(False)` turns grad mode on, as PyTorch's guard does, even inside no_grad;
    `@inference_mode` decorates too."""
    if isinstance(mode, bool):
        return _inference_mode(mode)
    return _decorate(
        _inference_mode(True), mode, "inference_mode takes a bool (mode) or a function to decorate"
    )


_INFERENCE = threading.local()  # each thread's stack of inference_mode blocks: their `mode`s


def is_inference_mode_enabled() -> bool:
    """Whether the innermost inference_mode block around this code (in this thread) is enabled."""
    stack = getattr(_INFERENCE, "stack", None)
    return bool(stack) and stack[-1]


class _inference_mode(_ModeDecorator):
    """A block (or decorated function) with grad mode `not mode` and inference mode `mode`."""

    def __init__(self, mode: bool) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        modes.LOCAL.grad.append(not self.mode)
        _INFERENCE.__dict__.setdefault("stack", []).append(self.mode)

    def __exit__(self, *exc: object) -> None:
        modes.LOCAL.grad.pop()
        _INFERENCE.stack.pop()


def _decorate(mode: _ModeDecorator, fn: Any, takes: str) -> Callable[..., Any]:
    """`fn` run inside `mode` (a grad mode used as a decorator without its call: `@no_grad`); TypeError
    saying what the grad mode `takes` where fn is not a function."""
    if not callable(fn):
        raise TypeError(f"{takes}, got {type(fn).__name__} {fn!r}")
    return mode(fn)


class set_grad_enabled(_ModeDecorator):
    """Turn gradient recording on or off in this thread: as a call, from here on; as a context manager or
    a decorator, for its block, then back to what it was (decorating changes nothing, as PyTorch's).

    Grad mode is each thread's own (`modes.LOCAL`): a block pushes onto this thread's grad stack and
    pops, so one instance may decorate a function that several threads run at once."""

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):  # PyTorch's: no truthiness, a string or a NumPy bool raises
            raise TypeError(f"set_grad_enabled(): argument 'mode' must be bool, not {type(mode).__name__}")
        self.mode = mode
        grad = modes.LOCAL.grad
        self._call: tuple[int, bool] | None = (threading.get_ident(), grad[-1])  # the call's, to undo
        grad[-1] = self.mode

    def _undo_call(self) -> None:
        """Put back what the call (`__init__`) changed where this thread made it: `with
        set_grad_enabled(m):` and `@set_grad_enabled(m)` act for their block alone."""
        call = self._call
        if call is not None and call[0] == threading.get_ident():
            self._call = None
            modes.LOCAL.grad[-1] = call[1]

    def __enter__(self) -> None:
        self._undo_call()
        modes.LOCAL.grad.append(self.mode)

    def __exit__(self, *exc: object) -> None:
        modes.LOCAL.grad.pop()

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        self._undo_call()
        return super().__call__(fn)

    def clone(self) -> set_grad_enabled:
        """A new one of the same mode (PyTorch's clone: it sets the mode, as the call does)."""
        return self.__class__(self.mode)
