"""Checkpoints, written atomically and read with every tensor checked: PyTorch's own format for `.pt`,
`.pth` and `.bin` (`torch.load` reads them; see `torch_format`), safetensors for any other name.

`save` writes to a temporary file in the same folder and renames it over the target, so a crash
never leaves a half-written checkpoint. `load` tells the formats apart by their first bytes.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from safetensors import SafetensorError, deserialize
from safetensors.numpy import save as _st_save

from ..dtypes import bf16
from ..errors import WeightFileError
from ..modes import current
from ..ops import from_numpy
from ..tensor import Tensor
from . import torch_format

# safetensors dtype -> the little-endian NumPy type its bytes are read as (BF16: its bits, which is
# how verigrad stores bf16); U8, I8 and I16 are u8, i8 and i16; U16 and U32 widen as `from_numpy` widens them
_FILE_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U32": "<u4",
    "U16": "<u2",
    "U8": "u1",
    "BOOL": "?",
}


def save(obj: Any, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> Path:
    """Write `obj` to `path`: as torch.save does for a `.pt`, `.pth` or `.bin` name (tensors in nested
    dicts, lists and tuples, with numbers, strings and None), else a state dict (name -> tensor or array)
    in the safetensors format, with its `metadata`."""
    path = Path(path)
    if path.suffix.lower() in torch_format.TORCH_SUFFIXES:
        if metadata is not None:
            raise TypeError(f"{path}: metadata is written to safetensors files only")
        write = torch_format.archive_writer(obj)
    else:
        blob = _safetensors_bytes(obj, metadata)
        write = lambda file: file.write(blob)
    _write_atomically(path, write)
    return path


def _safetensors_bytes(state: dict[str, Any], metadata: dict[str, str] | None) -> bytes:
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
        arrays[name] = np.asarray(value, order="C")  # not ascontiguousarray: it makes 0-d into 1-d
    return _st_save(arrays, metadata=metadata)


def _write_atomically(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """`write` into a temporary file beside `path`, then the file renamed over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file private; a checkpoint is not
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | os.PathLike) -> Any:
    """Read a checkpoint: a PyTorch one (any torch.save file, such as a `pytorch_model.bin` or an
    optimizer's state) gives the object saved, its tensors as verigrad tensors, without running code
    from the file; a safetensors file gives its tensors by name."""
    path = Path(path)
    head = _read(path, 16)
    if torch_format.is_zip_archive(head):
        return torch_format.read_archive(path)
    if torch_format.is_legacy_checkpoint(head):
        raise WeightFileError(
            f"{path}: PyTorch's legacy format (torch.save before 1.6, or _use_new_zipfile_serialization="
            "False), which verigrad does not read; save it again with torch.save's default format"
        )
    if path.suffix.lower() in torch_format.TORCH_SUFFIXES:
        raise WeightFileError(
            f"{path}: not a PyTorch checkpoint (torch.save writes a zip archive; this is not one)"
        )
    return _read_safetensors(path, _read(path))


def _read(path: Path, size: int = -1) -> bytes:
    """The file's first `size` bytes (all of them if -1)."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such checkpoint") from None
    except OSError as e:
        raise WeightFileError(f"{path}: cannot be read ({e})") from None


def _read_safetensors(path: Path, blob: bytes) -> dict[str, Tensor]:
    try:
        views = deserialize(blob)
    except (SafetensorError, ValueError, TypeError) as e:
        raise WeightFileError(f"{path}: not a valid safetensors file ({e})") from None
    out = {}
    for name, view in views:
        if view["dtype"] not in _FILE_DTYPES:
            raise WeightFileError(
                f"{path}: tensor {name!r} is {view['dtype']}, which verigrad cannot hold "
                f"(it reads {', '.join(_FILE_DTYPES)})"
            )
        array = np.frombuffer(view["data"], dtype=_FILE_DTYPES[view["dtype"]]).reshape(view["shape"])
        array = array.astype(array.dtype.newbyteorder("="))  # a native-order copy that can be written
        out[name] = current().constant(array, bf16) if view["dtype"] == "BF16" else from_numpy(array)
    return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
