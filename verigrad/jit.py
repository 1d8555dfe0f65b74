"""PyTorch's `torch.jit` decorators, for programs that use them to speed up code: verigrad runs the
function or module as written (`script` and `trace` return it unchanged, so the results are the
eager ones); saving or loading TorchScript is refused. To compile, use `verigrad.compile`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def script(obj: Any, *args: Any, **kwargs: Any) -> Any:
    """`torch.jit.script`: the function or module itself (it runs as Python)."""
    return obj


def trace(func: Any, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """`torch.jit.trace`: the function or module itself (it runs as Python, for any input)."""
    return func


def ignore(fn: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    return fn if fn is not None else (lambda f: f)


unused = export = ignore


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


def _refused(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"torch.jit.{what}: verigrad has no TorchScript; save the state dict with verigrad.save "
            "(PyTorch's format) and rebuild the module in Python"
        )

    refuse.__name__ = what
    return refuse


save = _refused("save")
load = _refused("load")
