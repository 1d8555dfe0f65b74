"""`torch.utils.checkpoint`: activation checkpointing trades memory for a second forward pass in
backward. verigrad runs the function once and keeps its activations, so the values and gradients are
those of the plain call (PyTorch's are the same); only the memory saved differs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Any = None,
    determinism_check: str = "default",
    debug: bool = False,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """`function(*args, **kwargs)` (PyTorch's keywords accepted)."""
    return function(*args, **kwargs)


def checkpoint_sequential(
    functions: Any, segments: int, input: Any, use_reentrant: bool | None = None, **kwargs: Any
) -> Any:
    """The modules of a Sequential (or a list of functions) applied in order to `input`."""
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be at least 1, got {segments}")
    steps: Sequence[Any] = list(functions.children()) if hasattr(functions, "children") else list(functions)
    for step in steps:
        input = step(input)
    return input
