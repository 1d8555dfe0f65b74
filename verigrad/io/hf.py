"""Hugging Face model folders: `config.json` and `model.safetensors`, read with every tensor checked.

`read_config` reads the JSON and names any missing key; `read_tensors` memory-maps the safetensors
file and checks, before anything is converted, that every expected tensor is present with the expected
shape, a float dtype, and all its bytes inside the file. Any problem is a `WeightFileError` naming the
file, the tensor, what was expected and what was found.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import WeightFileError
from .gguf import shown

# safetensors float dtypes -> how their bytes are read (BF16: the top half of an f32)
_FLOATS = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}
# every safetensors dtype and its bytes per value (a file of any of them is read; the floats are loaded)
_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2}
_ITEMSIZE |= {"I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
MAX_HEADER = 100_000_000  # the safetensors library's limit on the header's size


def read_config(folder: str | os.PathLike, required: Iterable[str]) -> dict[str, Any]:
    """`folder/config.json` as a dict, refused if any of the `required` keys is missing."""
    path = Path(folder) / "config.json"
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such file (a Hugging Face model folder has one)") from None
    except RecursionError:
        raise WeightFileError(f"{path}: not a readable JSON file (nested too deeply)") from None
    except (OSError, ValueError) as e:
        raise WeightFileError(f"{path}: not a readable JSON file ({e})") from None
    if not isinstance(config, dict):
        raise WeightFileError(f"{path}: expected a JSON object, got {type(config).__name__}")
    missing = [k for k in required if k not in config]
    if missing:
        raise WeightFileError(f"{path}: missing key(s) {', '.join(missing)}")
    return config


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"key {shown(next(k for k in keys if keys.count(k) > 1))} appears twice")
    return dict(pairs)


def _header(path: Path, blob: np.ndarray) -> tuple[dict[str, Any], int]:
    """The tensors' entries (name -> (dtype, shape, begin, end), data offsets from the returned start),
    each checked as the safetensors library checks them: a known dtype, a shape of counts, as many bytes
    as they need, and together covering the data exactly, in some order, without overlap."""
    if blob.size < 8:
        raise WeightFileError(f"{path}: truncated: {blob.size} bytes, not even the 8-byte header size")
    (size,) = struct.unpack("<Q", blob[:8].tobytes())
    if size > MAX_HEADER or 8 + size > blob.size:
        raise WeightFileError(
            f"{path}: the header claims {size} bytes; the file has {blob.size} (and a header at most "
            f"{MAX_HEADER}): it is truncated or not a safetensors file"
        )
    try:
        header = json.loads(blob[8 : 8 + size].tobytes(), object_pairs_hook=_no_repeats)
    except (ValueError, RecursionError) as e:
        raise WeightFileError(f"{path}: not a safetensors file (bad header: {shown(str(e))})") from None
    if not isinstance(header, dict):
        raise WeightFileError(f"{path}: not a safetensors file (the header is not a JSON object)")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise WeightFileError(f"{path}: __metadata__ must map names to strings, found {shown(metadata)}")
    entries = {name: _entry(path, name, info) for name, info in header.items()}
    start, end = 8 + size, 0
    for name, (_, _, begin, stop) in sorted(entries.items(), key=lambda item: item[1][2:]):
        if begin != end:
            raise WeightFileError(
                f"{path}: tensor {shown(name)} starts at data offset {begin}, but the tensors before it end "
                f"at {end}: the data offsets overlap or leave a gap"
            )
        end = stop
    if start + end > blob.size:
        raise WeightFileError(
            f"{path}: truncated file: needs bytes up to {start + end}, the file has {blob.size}"
        )
    if start + end < blob.size:
        raise WeightFileError(
            f"{path}: the tensors' data ends at byte {start + end}, but the file has {blob.size} bytes: "
            "the header is wrong or something was appended"
        )
    return entries, start


def _entry(path: Path, name: str, info: Any) -> tuple[str, tuple[int, ...], int, int]:
    """(dtype, shape, begin, end) of a header entry, or a WeightFileError naming the tensor."""
    label = f"{path}: tensor {shown(name)}"
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        raise WeightFileError(f"{label}: expected dtype, shape and data_offsets, found {shown(info)}")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _ITEMSIZE:
        raise WeightFileError(
            f"{label}: unknown dtype {shown(dtype)} (safetensors has {', '.join(_ITEMSIZE)})"
        )
    if not isinstance(shape, list) or not all(_count(d) for d in shape):
        raise WeightFileError(f"{label}: the shape must be a list of counts, found {shown(shape)}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_count(o) for o in offsets)):
        raise WeightFileError(f"{label}: data_offsets must be [begin, end], found {shown(offsets)}")
    begin, end = offsets
    nbytes = math.prod(shape) * _ITEMSIZE[dtype]
    if end - begin != nbytes:
        raise WeightFileError(
            f"{label}: data_offsets {offsets} hold {end - begin} bytes, but {dtype}{shape} needs {nbytes}"
        )
    return dtype, tuple(shape), begin, end


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


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
    entries: dict[str, tuple[str, tuple]] = {}
    for raw, entry in header.items():
        name = rename(raw)
        if name in entries:
            raise WeightFileError(
                f"{path}: tensors {shown(entries[name][0])} and {shown(raw)} are both {name}"
            )
        entries[name] = (raw, entry)
    optional = set(optional)
    problems = [
        f"missing tensor {n} (expected {list(s)})"
        for n, s in expected.items()
        if n not in entries and n not in optional
    ]
    problems += [
        f"unexpected tensor {shown(raw)}"
        for n, (raw, _) in entries.items()
        if n not in expected and not ignore(n)
    ]
    found: dict[str, tuple[str, int, int]] = {}
    for name, shape in expected.items():
        if name not in entries:
            continue
        raw, (dtype, got, begin, end) = entries[name]
        if dtype not in _FLOATS:
            problems.append(
                f"tensor {shown(raw)}: dtype {dtype}, expected a float type ({', '.join(_FLOATS)})"
            )
        elif got != tuple(shape):
            problems.append(f"tensor {shown(raw)}: shape {shown(list(got))}, expected {list(shape)}")
        else:
            found[name] = (dtype, start + begin, start + end)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise WeightFileError(f"{path}: " + "; ".join(problems[:5]) + more)
    out = {}
    for name, (dtype, begin, end) in found.items():
        array = blob[begin:end].view(_FLOATS[dtype]).reshape(expected[name])
        if dtype == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        out[name] = np.ascontiguousarray(array, dtype=np.float32)
    return out


INDEX = "model.safetensors.index.json"


def read_folder_tensors(
    folder: str | os.PathLike,
    expected: Mapping[str, tuple[int, ...]],
    *,
    optional: Iterable[str] = (),
    ignore: Callable[[str], bool] = lambda name: False,
    rename: Callable[[str], str] = lambda name: name,
) -> dict[str, np.ndarray]:
    """`read_tensors` of a folder's weights: `model.safetensors`, or the shards its
    `model.safetensors.index.json` lists (each shard checked for the tensors the index puts in it, and
    every expected tensor placed in some shard before any is read)."""
    folder = Path(folder)
    if not (folder / INDEX).is_file():
        return read_tensors(
            folder / "model.safetensors", expected, optional=optional, ignore=ignore, rename=rename
        )
    path = folder / INDEX
    try:
        index = json.loads(path.read_text())
    except RecursionError:
        raise WeightFileError(f"{path}: not a readable JSON file (nested too deeply)") from None
    except (OSError, ValueError) as e:
        raise WeightFileError(f"{path}: not a readable JSON file ({e})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(v, str) and v and Path(v).name == v for v in weight_map.values()
    ):
        raise WeightFileError(f"{path}: weight_map must map tensor names to file names in the folder")
    shards: dict[str, dict[str, tuple[int, ...]]] = {}
    for raw, shard in weight_map.items():
        name = rename(raw)
        if name in expected:
            shards.setdefault(shard, {})[name] = expected[name]
        elif not ignore(name):
            raise WeightFileError(f"{path}: unexpected tensor {shown(raw)}")
        else:
            shards.setdefault(shard, {})
    placed = {n for names in shards.values() for n in names}
    missing = [n for n in expected if n not in placed and n not in set(optional)]
    if missing:
        raise WeightFileError(f"{path}: missing tensor {missing[0]} (expected {list(expected[missing[0]])})")
    absent = [s for s in shards if not (folder / s).is_file()]
    if absent:
        raise WeightFileError(f"{path}: lists shard {shown(absent[0])}, which the folder lacks")
    out: dict[str, np.ndarray] = {}
    for shard, names in shards.items():
        out |= read_tensors(folder / shard, names, ignore=ignore, rename=rename)
    return out
