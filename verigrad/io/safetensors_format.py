"""The safetensors format written byte for byte the same for the same tensors and metadata (the
`safetensors` package writes `__metadata__` in a hash map's order, which changes from process to
process), and a file's `__metadata__` read from its header alone.

A file is an 8-byte little-endian header length, a JSON header (tensor name -> dtype, shape and byte
range; `__metadata__` -> str -> str), padded with spaces to a multiple of 8, then the tensors' bytes.
Here the header's keys are sorted and the tensors laid out by decreasing item size, then name, so each
one starts at a multiple of its item size.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..errors import WeightFileError

# NumPy type -> the safetensors dtype of its bytes
_DTYPE_NAMES = {
    np.dtype(np.float64): "F64",
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.int16): "I16",
    np.dtype(np.int8): "I8",
    np.dtype(np.uint64): "U64",
    np.dtype(np.uint32): "U32",
    np.dtype(np.uint16): "U16",
    np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL",
}
MAX_HEADER = 100_000_000  # the largest header the safetensors package reads


def safetensors_bytes(arrays: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> bytes:
    """The safetensors file of `arrays` (name -> array) with `metadata`: the same bytes for the same
    names, dtypes, shapes, values and metadata, whatever their order."""
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise TypeError(f"save: metadata must be a dict of str -> str, not {type(metadata).__name__}")
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"save: metadata must map str to str; {key!r}: {value!r} is not")
    little = {}
    for name, array in arrays.items():
        dtype = np.dtype(array.dtype).newbyteorder("=")
        if dtype not in _DTYPE_NAMES:
            raise TypeError(
                f"{name}: a {array.dtype} array cannot be saved in safetensors "
                f"(it takes {', '.join(str(d) for d in _DTYPE_NAMES)})"
            )
        little[name] = np.asarray(array, dtype.newbyteorder("<"))
    order = sorted(little, key=lambda name: (-little[name].dtype.itemsize, name))
    header: dict[str, object] = {}
    offset = 0
    for name in order:
        end = offset + little[name].nbytes
        header[name] = {
            "dtype": _DTYPE_NAMES[little[name].dtype.newbyteorder("=")],
            "shape": list(little[name].shape),
            "data_offsets": [offset, end],
        }
        offset = end
    if metadata:
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return b"".join([struct.pack("<Q", len(text)), text, *(little[name].tobytes() for name in order)])


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """A checkpoint's OSErrors as WeightFileErrors naming it: not there, or not readable (and why)."""
    try:
        yield
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such checkpoint") from None
    except OSError as e:
        raise WeightFileError(f"{path}: cannot be read ({e})") from None


def read_metadata(path: Path) -> dict[str, str]:
    """The `__metadata__` of the safetensors file at `path` ({} where it has none), from its header
    alone; a file that is not safetensors is refused naming it."""
    with reading(path), open(path, "rb") as f:
        head = f.read(8)
        size = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 0 < size <= MAX_HEADER:
            raise WeightFileError(f"{path}: not a safetensors file (no header of a sane length)")
        text = f.read(size)
    try:
        header = json.loads(text) if len(text) == size else None
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict):
        raise WeightFileError(f"{path}: not a safetensors file (its header is not a JSON object)")
    metadata = header.get("__metadata__") or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise WeightFileError(f"{path}: its __metadata__ is not a map of strings")
    return metadata
