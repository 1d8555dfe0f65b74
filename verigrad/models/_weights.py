"""Loaded arrays put into a model built under `verigrad.abstract()` (no random initialisation, no copy)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import WeightFileError
from ..nn import Module
from ..ops import from_numpy
from ..shapes import shape_text
from ..tensor import Tensor


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
