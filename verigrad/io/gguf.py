"""GGUF weight files (llama.cpp's format): metadata and tensors, memory-mapped, every size checked.

`read_gguf(path)` parses the header (a few hundred kB even for large models) and maps the file: a
tensor's `.raw` is a read-only view of its bytes, so nothing is copied until `.dequantize()`. Every
tensor's type, shape and byte range are checked when the file is opened; a bad file raises
`WeightFileError` naming the file, the tensor, and the expected and found sizes.

Shapes are given in PyTorch's order (GGUF lists dimensions fastest first): `blk.0.ffn_gate.weight` of a
model with d=576 and FFN 1536 has shape (1536, 576), like `nn.Linear.weight`.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import WeightFileError
from ..ops.quant import FORMATS, dequantize

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# metadata value types: id -> struct code (8: string, 9: array)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_ARRAY_NUMPY = {  # arrays of numbers are read in one step
    **{0: "u1", 1: "i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?"},
    **{10: "<u8", 11: "<i8", 12: "<f8"},
}
# tensor types whose values NumPy holds directly (the rest are blocks of bytes)
_VALUE_DTYPES = {"f32": "<f4", "f16": "<f2", "bf16": "<u2"}
# GGML type ids of the formats verigrad reads; other ids are looked up in the `gguf` package
_GGML_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 8: "q8_0", 12: "q4_k", 14: "q6_k", 30: "bf16"}


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file: `raw` views the file (values for f32/f16/bf16, else u8 [rows, row
    bytes]); `dequantize()` gives f32 values of `shape`."""

    name: str
    qtype: str
    shape: tuple[int, ...]
    raw: np.ndarray = field(repr=False)
    file: str = field(default="", repr=False)

    @property
    def nbytes(self) -> int:
        return int(self.raw.nbytes)

    def dequantize(self) -> np.ndarray:
        """The tensor's values as a new f32 array of `shape`."""
        if self.qtype == "f32":
            return np.array(self.raw, dtype=np.float32)
        if self.qtype not in FORMATS:
            known = ", ".join(FORMATS)
            raise WeightFileError(
                f"{self.file}: tensor {self.name} is stored as {self.qtype}, which verigrad cannot "
                f"dequantize (it reads {known})"
            )
        return dequantize(self.raw.reshape(-1).view(np.uint8), self.qtype, self.shape)


@dataclass(frozen=True)
class GGUFFile:
    """A parsed GGUF file: `metadata` (plain Python values) and `tensors` (name -> GGUFTensor)."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, GGUFTensor]

    @property
    def arch(self) -> str:
        """The model architecture (`general.architecture`), e.g. "llama"."""
        return str(self.require("general.architecture"))

    def require(self, key: str) -> Any:
        """The metadata value under `key`, or WeightFileError naming the file and the key."""
        if key not in self.metadata:
            raise WeightFileError(f"{self.path}: the GGUF metadata has no key {key!r}")
        return self.metadata[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def tensor(self, name: str) -> GGUFTensor:
        """The tensor called `name`, or WeightFileError naming the file and the tensor."""
        if name not in self.tensors:
            raise WeightFileError(
                f"{self.path}: no tensor {name!r} in the file ({len(self.tensors)} tensors)"
            )
        return self.tensors[name]

    def __repr__(self) -> str:
        return f"GGUFFile({str(self.path)!r}, arch={self.metadata.get('general.architecture')!r}, " + (
            f"{len(self.metadata)} keys, {len(self.tensors)} tensors)"
        )


class _Cursor:
    """Reads little-endian values from the mapped header, raising WeightFileError past the end."""

    def __init__(self, buf: mmap.mmap, path: Path) -> None:
        self.buf, self.path, self.pos, self.size = buf, path, 0, len(buf)

    def need(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or start + n > self.size:
            raise WeightFileError(
                f"{self.path}: the file ends inside the header ({what} needs bytes {start}..{start + n}, "
                f"the file has {self.size} bytes); it is truncated or not a GGUF file"
            )
        self.pos += n
        return start

    def scalar(self, code: str, what: str) -> Any:
        start = self.need(struct.calcsize(code), what)
        return struct.unpack_from("<" + code, self.buf, start)[0]

    def string(self, what: str) -> str:
        n = self.scalar("Q", what)
        start = self.need(n, what)
        try:
            return self.buf[start : start + n].decode("utf-8")
        except UnicodeDecodeError:
            raise WeightFileError(f"{self.path}: {what} is not valid UTF-8") from None

    def value(self, vtype: int, what: str) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype == _ARRAY:
            itype, count = self.scalar("I", what), self.scalar("Q", what)
            if itype in _ARRAY_NUMPY:
                dtype = np.dtype(_ARRAY_NUMPY[itype])
                start = self.need(count * dtype.itemsize, what)
                return np.frombuffer(self.buf, dtype, count, start).tolist()
            return [self.value(itype, what) for _ in range(count)]
        raise WeightFileError(f"{self.path}: {what} has unknown value type {vtype}")


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Open a GGUF file: parse its metadata and map its tensors (no weights are read or copied)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such GGUF file") from None
    except OSError as e:
        raise WeightFileError(f"{path}: cannot read the file: {e}") from None
    if buf[:4] != MAGIC:
        raise WeightFileError(f"{path}: not a GGUF file (it does not start with b'GGUF', found {buf[:4]!r})")
    cur = _Cursor(buf, path)  # type: ignore[arg-type]
    cur.pos = 4
    version = cur.scalar("I", "the version")
    if version not in (2, 3):
        raise WeightFileError(f"{path}: GGUF version {version} is not supported (verigrad reads 2 and 3)")
    n_tensors, n_keys = cur.scalar("Q", "the tensor count"), cur.scalar("Q", "the key count")
    metadata: dict[str, Any] = {}
    for i in range(n_keys):
        key = cur.string(f"metadata key {i}")
        metadata[key] = cur.value(cur.scalar("I", f"the type of {key}"), f"metadata {key}")
    infos = []
    for i in range(n_tensors):
        name = cur.string(f"tensor name {i}")
        ndim = cur.scalar("I", f"tensor {name}")
        dims = [cur.scalar("Q", f"tensor {name}") for _ in range(ndim)]
        infos.append((name, tuple(reversed(dims)), cur.scalar("I", f"tensor {name}"), cur.scalar("Q", name)))
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise WeightFileError(f"{path}: general.alignment must be a power of two, found {alignment!r}")
    data_start = -(-cur.pos // alignment) * alignment
    tensors = _map_tensors(buf, path, infos, data_start)  # type: ignore[arg-type]
    return GGUFFile(path, version, metadata, tensors)


def stacked_rows(tensors: list[GGUFTensor]) -> np.ndarray:
    """The rows of several tensors' blocks (u8 [rows, row bytes], equal row bytes) stacked in order: a view
    of the file where each tensor follows the previous one in it (no copy), else a copy, after which the
    file's pages that only these tensors occupy are dropped from memory (the copy is read from then on;
    the pages would otherwise stay resident beside it)."""
    raws = [t.raw for t in tensors]
    first = raws[0]
    if len(raws) == 1:
        return first
    adjacent = all(a.ctypes.data + a.nbytes == b.ctypes.data for a, b in itertools.pairwise(raws))
    if adjacent and all(r.flags.c_contiguous and r.shape[1:] == first.shape[1:] for r in raws):
        rows = sum(r.shape[0] for r in raws)
        return np.lib.stride_tricks.as_strided(
            first, (rows, *first.shape[1:]), first.strides, writeable=False
        )
    out = np.concatenate(raws)
    for raw in raws:
        _drop_pages(raw)
    return out


def _drop_pages(raw: np.ndarray) -> None:
    """Drop the mapped file's pages that lie wholly inside `raw` from this process's memory (they are read
    again from the file if used); nothing where the array does not view a mapped file or where the system
    cannot."""
    buf: Any = raw
    while isinstance(buf, np.ndarray):
        buf = buf.base
    if not isinstance(buf, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED") or not raw.nbytes:
        return
    start = raw.ctypes.data - np.frombuffer(buf, np.uint8, 1).ctypes.data
    page = mmap.PAGESIZE
    lo, hi = -(-start // page) * page, (start + raw.nbytes) // page * page
    if hi > lo:
        with contextlib.suppress(OSError, ValueError):
            buf.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


def _qtype(path: Path, name: str, type_id: int) -> tuple[str, int, int]:
    """(name, block size, bytes per block) of a GGML type id."""
    if type_id in _GGML_TYPES:
        fmt = FORMATS[_GGML_TYPES[type_id]]
        return fmt.name, fmt.block, fmt.nbytes
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType  # only for the rarer types

    try:
        ggml = GGMLQuantizationType(type_id)
        block, nbytes = GGML_QUANT_SIZES[ggml]
    except (ValueError, KeyError):
        raise WeightFileError(f"{path}: tensor {name} has unknown GGML type {type_id}") from None
    return ggml.name.lower(), block, nbytes


def _map_tensors(buf: mmap.mmap, path: Path, infos: list, data_start: int) -> dict[str, GGUFTensor]:
    size = len(buf)
    tensors: dict[str, GGUFTensor] = {}
    extents = []
    for name, shape, type_id, offset in infos:
        qtype, block, nbytes = _qtype(path, name, type_id)
        if name in tensors:
            raise WeightFileError(f"{path}: tensor {name} appears twice")
        k = shape[-1] if shape else 1
        if k % block:
            raise WeightFileError(
                f"{path}: tensor {name} has shape {shape}, but {qtype} stores rows in blocks of {block} "
                f"values, so the last dimension ({k}) must be a multiple of {block}"
            )
        rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
        row_bytes = k // block * nbytes
        start, length = data_start + offset, rows * row_bytes
        if start + length > size:
            raise WeightFileError(
                f"{path}: tensor {name} ({qtype}, shape {shape}) needs {length} bytes at offset {start}, "
                f"but the file has only {max(size - start, 0)} bytes there ({size} in all): the file is "
                "truncated; download it again"
            )
        extents.append((start, start + length, name))
        if qtype in _VALUE_DTYPES:
            raw = np.frombuffer(buf, _VALUE_DTYPES[qtype], rows * k, start).reshape(shape)
        else:
            raw = np.frombuffer(buf, np.uint8, length, start).reshape(rows, row_bytes)
        tensors[name] = GGUFTensor(name, qtype, tuple(int(d) for d in shape), raw, str(path))
    extents.sort()
    for (_, end, a), (next_start, _, b) in itertools.pairwise(extents):
        if end > next_start:
            raise WeightFileError(
                f"{path}: tensor {a} ends at byte {end}, after tensor {b} starts ({next_start}): the "
                "shapes in the header do not match the data"
            )
    return tensors
