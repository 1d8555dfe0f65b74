"""Checkpoints in the safetensors format: written atomically, read with every tensor checked.

`save` writes to a temporary file in the same folder and renames it over the target, so a crash
never leaves a half-written checkpoint. The files are plain safetensors: PyTorch reads them with
`safetensors.torch.load_file`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as _st_load
from safetensors.numpy import save as _st_save

from ..errors import WeightFileError
from ..ops import from_numpy
from ..tensor import Tensor


def save(state: dict[str, Any], path: str | os.PathLike, metadata: dict[str, str] | None = None) -> Path:
    """Write a state dict (name -> tensor or array) to `path` in the safetensors format."""
    path = Path(path)
    arrays = {}
    for name, value in state.items():
        if not isinstance(name, str):
            raise TypeError(f"checkpoint names must be strings, got {name!r}")
        if isinstance(value, Tensor):
            if value.dtype.name == "bf16":
                raise TypeError(f"{name}: bf16 tensors cannot be saved yet; cast to f32 first")
            value = value.numpy()
        if not isinstance(value, np.ndarray):
            raise TypeError(f"{name}: expected a tensor or an array, got {type(value).__name__}")
        arrays[name] = np.ascontiguousarray(value)
    blob = _st_save(arrays, metadata=metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: str | os.PathLike) -> dict[str, Tensor]:
    """Read a safetensors file into tensors (name -> Tensor)."""
    path = Path(path)
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such checkpoint") from None
    except OSError as e:
        raise WeightFileError(f"{path}: cannot be read ({e})") from None
    try:
        arrays = _st_load(blob)
    except (SafetensorError, ValueError, TypeError) as e:
        raise WeightFileError(f"{path}: not a valid safetensors file ({e})") from None
    return {name: from_numpy(np.array(a)) for name, a in arrays.items()}
