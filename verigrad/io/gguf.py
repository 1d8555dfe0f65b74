"""GGUF weight files (llama.cpp's format): metadata and tensors, memory-mapped, every size checked.

`read_gguf(path)` reads the header with the `gguf` package's `GGUFReader` and maps the file: a tensor's
`.raw` is a read-only view of its bytes, so nothing is copied until `.dequantize()`. On top of the
reader, every read stays inside the file and the header is held to what llama.cpp checks, and more:
counts and string and array lengths fit in the bytes left, no arrays of arrays, tensor names unique and
under 64 bytes, at most 4 dimensions each >= 1, element counts below 2^63, known types whose block
divides the row, and tensors packed in order (each at the previous one's end padded to
`general.alignment`) up to the file's end, so a shifted offset or a relabelled type is refused. Any
problem is a `WeightFileError` naming the file and the field or tensor, with long values cut short.

Shapes are given in PyTorch's order (GGUF lists dimensions fastest first): `blk.0.ffn_gate.weight` of a
model with d=576 and FFN 1536 has shape (1536, 576), like `nn.Linear.weight`.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import reprlib
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader, ReaderField
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from ..errors import WeightFileError
from ..ops.quant import FORMATS, dequantize

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NAME = 63  # GGML_MAX_NAME - 1: llama.cpp's tensor names are at most 63 bytes
MAX_ELEMENTS = 2**63 - 1  # llama.cpp counts elements in int64
SHOWN = 60  # characters of a value an error shows
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = SHOWN
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = 8
# tensor types whose values NumPy holds directly (the rest are blocks of bytes)
_VALUE_DTYPES = {"f32": "<f4", "f16": "<f2", "bf16": "<u2"}


_U64 = struct.Struct("<Q")


@dataclass(frozen=True)
class _Strings:
    """An array of strings as the file holds them: `data` views their bytes (each after its 8-byte length),
    `lengths` are the strings' lengths in bytes."""

    data: np.ndarray
    lengths: list[int]

    def decode(self) -> list[str]:
        """The strings (UnicodeDecodeError for one that is not UTF-8), decoded in one call: each length's
        high byte (0: no string is 2^56 bytes long) is kept as the separator, the other 7 bytes dropped."""
        if not self.lengths:
            return []
        lengths = np.asarray(self.lengths, dtype=np.int64)
        prefixes = np.cumsum(lengths + 8) - lengths - 8
        keep = np.ones(self.data.size, dtype=bool)
        keep[(prefixes[:, None] + np.arange(7)).ravel()] = False
        keep[7] = False
        joined = self.data[keep].tobytes()
        if joined.count(0) != len(self.lengths) - 1:  # a string holds a NUL byte: one at a time
            data = self.data.tobytes()
            return [data[a + 8 : a + 8 + n].decode("utf-8") for a, n in zip(prefixes.tolist(), self.lengths)]
        return joined.decode("utf-8").split("\x00")


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


def shown(value: Any) -> str:
    """A value for an error message, at most about SHOWN characters, made without first writing it all out
    (a hostile file's strings and arrays may be gigabytes long): a printable string as it is, else a repr."""
    if isinstance(value, str) and value[:SHOWN].isprintable():
        return value if len(value) <= SHOWN else f"{value[: SHOWN - 3]}... ({len(value)} characters)"
    if isinstance(value, bytes | bytearray) and len(value) > SHOWN:
        return f"{bytes(value[:SHOWN])!r}... ({len(value)} bytes)"
    return _REPR.repr(value)


class _CheckedReader(GGUFReader):
    """GGUFReader that reads only inside the file and refuses what llama.cpp refuses, naming the file and
    the field: a count, string or array longer than the bytes left, an unknown value type, an array of
    arrays, a repeated key, a tensor name that is not UTF-8. Arrays of numbers are read in one step; arrays
    of strings are kept as their bytes and lengths (`strings`, by key), which read_gguf decodes in one call
    (GGUFReader's NumPy view and decode per string take seconds on SmolLM2's tokenizer)."""

    def __init__(self, path: Path) -> None:
        self.path, self.what, self.plain = path, "the header", None
        self.strings: dict[str, _Strings] = {}  # the string arrays' bytes, by key
        self.pending: _Strings | None = None
        super().__init__(path)

    def contents(self, key: str) -> Any:
        """The value of metadata `key`, string arrays decoded (UnicodeDecodeError for one not UTF-8)."""
        return self.strings[key].decode() if key in self.strings else self.fields[key].contents()

    def refuse(self, reason: str) -> WeightFileError:
        return WeightFileError(f"{self.path}: {self.what}: {reason}")

    def _get(self, offset: int, dtype: Any, count: int = 1, override_order: Any = None) -> np.ndarray:
        if self.plain is None:  # a plain view of the map: slicing np.memmap costs ~10x more
            self.plain = self.data.view(np.ndarray)
        count, size = int(count), self.plain.size
        end = offset + np.dtype(dtype).itemsize * count
        if count < 0 or end > size:
            raise WeightFileError(
                f"{self.path}: the file ends inside the header ({self.what} needs bytes {offset}..{end}, "
                f"the file has {size} bytes); it is truncated or not a GGUF file"
            )
        return self.plain[offset:end].view(dtype)

    def _bound(self, count: int, at: int, least: int, what: str) -> int:
        """`count` items of at least `least` bytes each, refused unless they fit in the bytes after `at`."""
        if count * least > self.plain.size - at:
            raise WeightFileError(
                f"{self.path}: the file ends inside the header ({self.what}: {count} {what} need at least "
                f"{count * least} bytes, {self.plain.size - at} are left); it is truncated or not a GGUF file"
            )
        return count

    def _value_type(self, raw: int) -> GGUFValueType:
        try:
            return GGUFValueType(int(raw))
        except ValueError:
            raise self.refuse(f"unknown value type {int(raw)}") from None

    def _build_fields(self, offs: int, count: int) -> int:
        for i in range(self._bound(int(count), offs, 13, "metadata keys")):  # key length, type, value
            orig, self.what = offs, f"metadata key {i}"
            klen, kdata = self._get_str(offs)
            key = self._text(kdata)
            offs, self.what = offs + 8 + kdata.nbytes, f"metadata {shown(key)}"
            if key in self.fields:
                raise self.refuse("the key appears twice")
            vtype = self._get(offs, np.uint32)
            size, parts, idxs, types = self._get_field_parts(offs + 4, int(vtype[0]))
            if self.pending is not None:
                self.strings[key], self.pending = self.pending, None
            self.fields[key] = ReaderField(
                orig, key, [klen, kdata, vtype, *parts], [i + 3 for i in idxs], types
            )
            offs += 4 + size
        return offs

    def _get_field_parts(self, orig_offs: int, raw_type: int) -> tuple[int, list, list[int], list]:
        gtype = self._value_type(raw_type)
        if gtype != GGUFValueType.ARRAY:
            return super()._get_field_parts(orig_offs, raw_type)
        itype, alen = self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)
        item, n, at = self._value_type(itype[0]), int(alen[0]), orig_offs + 12
        if item == GGUFValueType.ARRAY:
            raise self.refuse("an array of arrays (llama.cpp reads none)")
        if item != GGUFValueType.STRING:
            values = self._get(at, self.gguf_scalar_to_np[item], n)
            return 12 + values.nbytes, [itype, alen, values], [2], [gtype, item]
        # Lengths are read one after the other (each string's place depends on the previous lengths); the
        # strings are decoded in read_gguf from one copy of their bytes, not one NumPy view each.
        unpack, plain, size, lengths = _U64.unpack_from, self.plain, self.plain.size, []
        for _ in range(self._bound(n, at, 8, "strings")):
            if at + 8 > size:
                self._get(at, np.uint64)  # the file-ends error
            (length,) = unpack(plain, at)
            at += 8
            if at + length > size:
                self._get(at, np.uint8, length)
            lengths.append(length)
            at += length
        self.pending = _Strings(plain[orig_offs + 12 : at], lengths)
        return at - orig_offs, [itype, alen], [], [gtype, item]

    def _text(self, data: np.ndarray) -> str:
        try:
            return str(bytes(data), encoding="utf-8")
        except UnicodeDecodeError:
            raise self.refuse(f"not UTF-8 text: {shown(bytes(data))}") from None

    def _build_tensor_info(self, offs: int, count: int) -> tuple[int, list[ReaderField]]:
        fields = []
        for i in range(self._bound(int(count), offs, 24, "tensors")):  # name length, dims, type, offset
            self.what = f"tensor {i}"
            name_len, name_data = self._get_str(offs)
            name = self._text(name_data)
            self.what = f"tensor {shown(name)}"
            if len(name_data) > MAX_NAME:
                raise self.refuse(f"the name is {len(name_data)} bytes long, llama.cpp allows {MAX_NAME}")
            at = offs + 8 + name_data.nbytes
            n_dims = self._get(at, np.uint32)
            if n_dims[0] > MAX_DIMS:
                raise self.refuse(f"{int(n_dims[0])} dimensions, at most {MAX_DIMS} are allowed")
            dims = self._get(at + 4, np.uint64, n_dims[0])
            at += 4 + dims.nbytes
            raw_dtype, offset = self._get(at, np.uint32), self._get(at + 4, np.uint64)
            parts = [name_len, name_data, n_dims, dims, raw_dtype, offset]
            fields.append(ReaderField(offs, name, parts, [1, 3, 4, 5]))
            offs = at + 12
        return offs, fields

    def _build_tensors(self, start_offs: int, fields: list[ReaderField]) -> None:
        self.what = "the tensors"
        _check_layout(self.path, fields, start_offs, int(self.alignment), self.plain.size)
        super()._build_tensors(start_offs, fields)


def _ggml_type(path: Path, name: str, type_id: int) -> tuple[GGMLQuantizationType, int, int]:
    """(type, block size, bytes per block) of a GGML type id."""
    try:
        ggml = GGMLQuantizationType(type_id)
        block, nbytes = GGML_QUANT_SIZES[ggml]
    except (ValueError, KeyError):
        raise WeightFileError(f"{path}: tensor {shown(name)} has unknown GGML type {type_id}") from None
    return ggml, block, nbytes


def _check_layout(path: Path, fields: list[ReaderField], data_start: int, alignment: int, size: int) -> None:
    """Every tensor's shape, type and bytes: each one starts where the previous one ends (padded to
    `alignment`), as llama.cpp requires, and the last one ends at the file's end, so a shifted offset or
    a type relabelled to one of another size is refused instead of read as other weights."""
    names: set[str] = set()
    end, previous = 0, None
    for f in fields:
        name, dims, type_id, offset = f.name, f.parts[3].tolist(), int(f.parts[4][0]), int(f.parts[5][0])
        label = f"tensor {shown(name)}"
        if name in names:
            raise WeightFileError(f"{path}: {label} appears twice")
        names.add(name)
        ggml, block, nbytes = _ggml_type(path, name, type_id)
        shape = tuple(reversed(dims))
        if not all(d >= 1 for d in dims):
            raise WeightFileError(f"{path}: {label} has shape {shape}: every dimension must be at least 1")
        count = 1
        for d in dims:
            count *= d
        if count > MAX_ELEMENTS:
            raise WeightFileError(f"{path}: {label} has shape {shape}: {count} elements, more than 2^63 - 1")
        if dims and dims[0] % block:
            raise WeightFileError(
                f"{path}: {label} has shape {shape}, but {ggml.name.lower()} stores rows in blocks of "
                f"{block} values, so the last dimension ({dims[0]}) must be a multiple of {block}"
            )
        length = count // block * nbytes
        start = data_start + offset
        if offset != end:
            before = f"tensor {shown(previous)} before it ends" if previous else "the first tensor starts"
            raise WeightFileError(
                f"{path}: {label} starts at data offset {offset}, but {before} at {end} (tensors follow each "
                f"other, padded to {alignment} bytes): an offset, type or shape in the header is wrong"
            )
        if start + length > size:
            raise WeightFileError(
                f"{path}: {label} ({ggml.name.lower()}, shape {shape}) needs {length} bytes at offset "
                f"{start}, but the file has only {max(size - start, 0)} bytes there ({size} in all): the "
                "file is truncated; download it again"
            )
        end, previous = offset + -(-length // alignment) * alignment, name
    if previous is not None and size > data_start + end:
        raise WeightFileError(
            f"{path}: the file has {size - data_start - end} bytes after its last tensor {shown(previous)}: "
            "a type or shape in the header is wrong, or something was appended to the file"
        )


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Open a GGUF file: parse its metadata and map its tensors (no weights are read or copied)."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            start = f.read(8)
    except FileNotFoundError:
        raise WeightFileError(f"{path}: no such GGUF file") from None
    except OSError as e:
        raise WeightFileError(f"{path}: cannot read the file: {e}") from None
    if start[:4] != MAGIC:
        raise WeightFileError(
            f"{path}: not a GGUF file (it does not start with b'GGUF', found {start[:4]!r})"
        )
    version = int.from_bytes(start[4:], "little")
    if len(start) == 8 and version not in VERSIONS:  # big-endian files too: their version reads wrong
        raise WeightFileError(
            f"{path}: GGUF version {version} is not supported (verigrad reads little-endian versions 2 and 3)"
        )
    try:
        reader = _CheckedReader(path)
    except OSError as e:
        raise WeightFileError(f"{path}: cannot read the file: {e}") from None
    except WeightFileError:
        raise
    except (ValueError, KeyError) as e:  # what GGUFReader checks itself (general.alignment)
        raise WeightFileError(f"{path}: {shown(str(e))}") from None
    metadata = {}
    for key in reader.fields:
        if not key.startswith("GGUF."):
            try:
                metadata[key] = reader.contents(key)
            except UnicodeDecodeError:
                raise WeightFileError(f"{path}: metadata {shown(key)}: a string is not UTF-8 text") from None
    tensors = {t.name: _tensor(path, t) for t in reader.tensors}
    return GGUFFile(path, int(version), metadata, tensors)


def _tensor(path: Path, t: Any) -> GGUFTensor:
    """A GGUFTensor viewing the reader's bytes of `t` (values for f32/f16/bf16, else rows of blocks)."""
    qtype = t.tensor_type.name.lower()
    shape = tuple(int(d) for d in reversed(t.shape.tolist()))
    data = t.data.reshape(-1).view(np.uint8)
    if qtype in _VALUE_DTYPES:
        raw = data.view(_VALUE_DTYPES[qtype]).reshape(shape)
    else:
        rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
        raw = data.reshape(rows, -1)
    return GGUFTensor(t.name, qtype, shape, raw, str(path))


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
