"""Checkpoints, written atomically and read with every tensor checked: PyTorch's own format for `.pt`,
`.pth` and `.bin` and for a file object (`torch.load` reads them; see `torch_format`), safetensors for
any other name. `save` and `load` take `torch.save`'s and `torch.load`'s arguments.

`save` writes to a temporary file in the same folder and renames it over the target, so a crash
never leaves a half-written checkpoint, and the temporaries of killed saves are removed by the next save
or load of the same file (`atomic`). The same tensors and metadata give the same file bytes. `load` tells
the formats apart by their first bytes.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from safetensors import SafetensorError, deserialize

from ..dtypes import bf16
from ..errors import WeightFileError
from ..modes import current
from ..ops import from_numpy
from ..tensor import Tensor
from . import torch_format
from .atomic import remove_stale_temporaries, write_atomically
from .map_location import location_map
from .safetensors_format import reading, safetensors_bytes

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


def save(
    obj: Any,
    f: str | os.PathLike | BinaryIO,
    pickle_module: Any = pickle,
    pickle_protocol: int = 2,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
    *,
    metadata: dict[str, str] | None = None,
) -> Path | None:
    """Write `obj` to `f`, a path or a binary file: as torch.save does for a file or a `.pt`, `.pth` or
    `.bin` name (tensors in nested dicts, lists and tuples, with numbers, strings and None), else a state
    dict (name -> tensor or array) in the safetensors format, with its `metadata`. Returns the path.

    The pickle inside is always protocol 2 (what `torch.save` writes by default); any `pickle_protocol`
    pickle has reads the same. PyTorch's legacy format (`_use_new_zipfile_serialization=False`) is refused.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise TypeError(f"save: pickle_module must be pickle (verigrad writes it), not {pickle_module!r}")
    if isinstance(pickle_protocol, bool) or not isinstance(pickle_protocol, int):
        raise TypeError(f"save: pickle_protocol must be an int, not {type(pickle_protocol).__name__}")
    if pickle_protocol > pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"save: pickle_protocol must be <= {pickle.HIGHEST_PROTOCOL}, got {pickle_protocol}")
    if not _use_new_zipfile_serialization:
        raise ValueError(
            "save: _use_new_zipfile_serialization=False asks for PyTorch's legacy format, which verigrad "
            "does not write; the default zip format is what torch.load reads"
        )
    if hasattr(f, "write"):
        if metadata is not None:
            raise TypeError("save: metadata is written to safetensors files, named by a path, only")
        torch_format.archive_writer(obj, not _disable_byteorder_record)(f)
        return None
    if not isinstance(f, str | os.PathLike):
        raise TypeError(f"save: f must be a path or a binary file, not {type(f).__name__}")
    path = Path(f)
    if path.suffix.lower() in torch_format.TORCH_SUFFIXES:
        if metadata is not None:
            raise TypeError(f"{path}: metadata is written to safetensors files only")
        write = torch_format.archive_writer(obj, not _disable_byteorder_record)
    else:
        blob = _safetensors_bytes(obj, metadata)
        write = lambda file: file.write(blob)
    write_atomically(path, write)
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
    return safetensors_bytes(arrays, metadata)


def load(
    f: str | os.PathLike | BinaryIO,
    map_location: Any = None,
    pickle_module: Any = None,
    *,
    weights_only: bool | None = None,
    mmap: bool | None = None,
    **pickle_load_args: Any,
) -> Any:
    """Read a checkpoint from a path or a binary file: a PyTorch one (any torch.save file, such as a
    `pytorch_model.bin` or an optimizer's state) gives the object saved, its tensors as verigrad tensors;
    a safetensors file gives its tensors by name.

    No code from the file is ever run: `weights_only=False` (or a `pickle_module`, pickle itself) reads
    with the same unpickler as the default, which refuses a file asking for anything but tensors and plain
    containers, naming it. `map_location` must keep every storage on the CPU (see `map_location`).
    `mmap` is accepted for a path; the file is read into memory. `encoding` is pickle's."""
    locate = _check_load_arguments(f, map_location, pickle_module, weights_only, mmap, pickle_load_args)
    encoding = pickle_load_args.get("encoding", "utf-8")
    if hasattr(f, "read"):
        return _load_file(f, locate, encoding)
    path = Path(f)
    remove_stale_temporaries(path)
    head = _read(path, 16)
    if torch_format.is_zip_archive(head):
        return torch_format.read_archive(path, path, locate, encoding)
    if torch_format.is_legacy_checkpoint(head):
        raise WeightFileError(f"{path}: {_LEGACY}")
    if path.suffix.lower() in torch_format.TORCH_SUFFIXES:
        raise WeightFileError(
            f"{path}: not a PyTorch checkpoint (torch.save writes a zip archive; this is not one)"
        )
    return _read_safetensors(path, _read(path))


def _check_load_arguments(
    f: Any, map_location: Any, pickle_module: Any, weights_only: Any, mmap: Any, pickle_load_args: dict
) -> Callable[[str], None]:
    """`load`'s arguments checked before the file is opened, as torch.load checks them; the check of
    each storage's location that `map_location` makes."""
    if not (hasattr(f, "read") or isinstance(f, str | os.PathLike)):
        raise TypeError(f"load: f must be a path or a binary file, not {type(f).__name__}")
    for name, value in (("weights_only", weights_only), ("mmap", mmap)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"load: {name} must be True, False or None, not {value!r}")
    if pickle_module is not None:
        if weights_only:
            raise RuntimeError("load: Can not safely load weights when explicit pickle_module is specified")
        if pickle_module is not pickle:
            raise TypeError(
                f"load: pickle_module must be pickle (verigrad reads with its own restricted unpickler), "
                f"not {pickle_module!r}"
            )
    unknown = sorted(set(pickle_load_args) - {"encoding"})
    if unknown:
        raise TypeError(f"load: unexpected keyword arguments {unknown}; of pickle's, it takes encoding")
    if not isinstance(pickle_load_args.get("encoding", ""), str):
        raise TypeError(f"load: encoding must be a string, not {pickle_load_args['encoding']!r}")
    if mmap and hasattr(f, "read"):
        raise ValueError("load: f must be a file path in order to use the mmap argument")
    return location_map(map_location)


def _load_file(f: BinaryIO, locate: Callable[[str], None], encoding: str) -> Any:
    """A checkpoint read from a binary file object (from where it stands), as `load` reads a path."""
    name = getattr(f, "name", None)
    name = name if isinstance(name, str) else f"<{type(f).__name__}>"
    try:
        blob = f.read()
    except OSError as e:
        raise WeightFileError(f"{name}: cannot be read ({e})") from None
    if not isinstance(blob, bytes | bytearray):
        raise TypeError(f"load: f must be opened in binary mode ('rb'), it gave {type(blob).__name__}")
    if torch_format.is_zip_archive(blob[:16]):
        return torch_format.read_archive(io.BytesIO(blob), name, locate, encoding)
    if torch_format.is_legacy_checkpoint(blob[:16]):
        raise WeightFileError(f"{name}: {_LEGACY}")
    return _read_safetensors(name, bytes(blob))


def _read(path: Path, size: int = -1) -> bytes:
    """The file's first `size` bytes (all of them if -1)."""
    with reading(path), open(path, "rb") as f:
        return f.read(size)


_LEGACY = (
    "PyTorch's legacy format (torch.save before 1.6, or _use_new_zipfile_serialization=False), which "
    "verigrad does not read; save it again with torch.save's default format"
)


def _read_safetensors(path: Path | str, blob: bytes) -> dict[str, Tensor]:
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
