"""Hugging Face model folders: `config.json` and `model.safetensors`, read with every tensor checked.

`read_config` reads the JSON and names any missing key; `read_tensors` memory-maps the safetensors
file and checks, before anything is converted, that every expected tensor is present with the expected
shape, a float dtype, and all its bytes inside the file. Any problem is a `WeightFileError` naming the
file, the tensor, what was expected and what was found.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import WeightFileError

# safetensors float dtypes -> how their bytes are read (BF16: the top half of an f32)
_FLOATS = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}
_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8}


def read_config(folder: str | os.PathLike, required: Iterable[str]) -> dict[str, Any]:
    """`folder/config.json` as a dict, refused if any of the `required` keys is missing."""
    path = Path(folder) / "config.json"
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such file (a Hugging Face model folder has one)") from None
    except (OSError, ValueError) as e:
        raise WeightFileError(f"{path}: not a readable JSON file ({e})") from None
    if not isinstance(config, dict):
        raise WeightFileError(f"{path}: expected a JSON object, got {type(config).__name__}")
    missing = [k for k in required if k not in config]
    if missing:
        raise WeightFileError(f"{path}: missing key(s) {', '.join(missing)}")
    return config


def _header(path: Path, blob: np.ndarray) -> tuple[dict[str, Any], int]:
    if blob.size < 8:
        raise WeightFileError(f"{path}: truncated: {blob.size} bytes, not even the 8-byte header size")
    (size,) = struct.unpack("<Q", blob[:8].tobytes())
    if 8 + size > blob.size:
        raise WeightFileError(f"{path}: truncated: the header needs {8 + size} bytes, found {blob.size}")
    try:
        header = json.loads(blob[8 : 8 + size].tobytes())
    except ValueError as e:
        raise WeightFileError(f"{path}: not a safetensors file (bad header: {e})") from None
    if not isinstance(header, dict):
        raise WeightFileError(f"{path}: not a safetensors file (the header is not a JSON object)")
    header.pop("__metadata__", None)
    return header, 8 + size


def read_tensors(
    path: str | os.PathLike,
    expected: Mapping[str, tuple[int, ...]],
    *,
    optional: Iterable[str] = (),
    ignore: Callable[[str], bool] = lambda name: False,
    rename: Callable[[str], str] = lambda name: name,
) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as f32 arrays, by `rename(name_in_file)`.

    Every name in `expected` must be present (unless listed in `optional`) with exactly that shape;
    a tensor the file has but `expected` lacks is an error unless `ignore(name)` says to skip it.
    """
    path = Path(path)
    try:
        blob = np.memmap(path, dtype=np.uint8, mode="r")
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such file") from None
    except (OSError, ValueError) as e:
        raise WeightFileError(f"{path}: cannot be read ({e})") from None
    header, start = _header(path, blob)
    entries = {rename(name): (name, info) for name, info in header.items()}
    optional = set(optional)
    problems = [
        f"missing tensor {n} (expected {list(s)})"
        for n, s in expected.items()
        if n not in entries and n not in optional
    ]
    problems += [
        f"unexpected tensor {raw}" for n, (raw, _) in entries.items() if n not in expected and not ignore(n)
    ]
    found: dict[str, tuple[str, int, int]] = {}
    for name, shape in expected.items():
        if name not in entries:
            continue
        raw, info = entries[name]
        dtype, got, (begin, end) = info.get("dtype"), tuple(info.get("shape", ())), info.get("data_offsets")
        if dtype not in _FLOATS:
            problems.append(f"tensor {raw}: dtype {dtype}, expected a float type ({', '.join(_FLOATS)})")
        elif got != tuple(shape):
            problems.append(f"tensor {raw}: shape {list(got)}, expected {list(shape)}")
        elif end - begin != int(np.prod(shape)) * _ITEMSIZE[dtype]:
            problems.append(
                f"tensor {raw}: {end - begin} bytes, expected {int(np.prod(shape)) * _ITEMSIZE[dtype]} "
                f"for {dtype}{list(shape)}"
            )
        elif start + end > blob.size:
            problems.append(
                f"tensor {raw}: truncated file: needs bytes up to {start + end}, the file has {blob.size}"
            )
        else:
            found[name] = (dtype, start + begin, start + end)
    if problems:
        raise WeightFileError(f"{path}: " + "; ".join(problems))
    out = {}
    for name, (dtype, begin, end) in found.items():
        array = blob[begin:end].view(_FLOATS[dtype]).reshape(expected[name])
        if dtype == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        out[name] = np.ascontiguousarray(array, dtype=np.float32)
    return out
