"""Loaded arrays put into a model built under `verigrad.abstract()` (no random initialisation, no copy)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import WeightFileError
from ..io.gguf import shown
from ..nn import Module
from ..ops import from_numpy
from ..shapes import shape_text
from ..tensor import Tensor

MAX_CONTEXT = 2**24  # a GGUF file's llama.context_length (16M positions; the longest models have 10M)


def install(model: Module, arrays: dict[str, Any], source: str) -> None:
    """Give every parameter and buffer of `model` (by its state_dict name) the array of that name.

    A missing, extra or mis-shaped entry is a WeightFileError naming `source` and the first five tensors
    at fault; nothing is installed then. Parameters stay parameters (they require grad), buffers stay buffers.
    """
    own = model.state_dict()
    problems = [
        f"missing tensor {k} (expected {shape_text(t.shape)})" for k, t in own.items() if k not in arrays
    ]
    problems += [f"unexpected tensor {k}" for k in arrays if k not in own]
    problems += [
        f"tensor {k}: shape {shape_text(tuple(v.shape))}, expected {shape_text(own[k].shape)}"
        for k, v in arrays.items()
        if k in own and tuple(v.shape) != tuple(own[k].shape)
    ]
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise WeightFileError(f"{source}: " + "; ".join(problems[:5]) + more)
    params = dict(model.named_parameters())
    for name, value in arrays.items():
        *path, attr = name.split(".")
        owner = model
        for part in path:
            owner = getattr(owner, part)
        t = value if isinstance(value, Tensor) else from_numpy(np.asarray(value))
        if name in params:
            setattr(owner, attr, t.detach().requires_grad_(True))
        else:
            owner.register_buffer(attr, t)


def checked_integer(source: Any, key: str, value: Any, low: int, high: int | None = None) -> int:
    """A model file's hyperparameter `key`: an integer in low..high, or a WeightFileError naming `source`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise WeightFileError(f"{source}: {key} must be an integer, found {shown(value)}")
    if value < low or (high is not None and value > high):
        allowed = f"at least {low}" if high is None else f"in {low}..{high}"
        raise WeightFileError(f"{source}: {key} is {value}; it must be {allowed}")
    return value


def checked_real(source: Any, key: str, value: Any, high: float = math.inf) -> float:
    """A model file's hyperparameter `key`: a finite number in (0, high), or a WeightFileError."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise WeightFileError(f"{source}: {key} must be a number, found {shown(value)}")
    if not (0 < value < high and math.isfinite(value)):
        bound = "finite" if high == math.inf else f"below {high}"
        raise WeightFileError(f"{source}: {key} is {value}; it must be above 0 and {bound}")
    return float(value)
