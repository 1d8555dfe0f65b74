"""GGUF weight files (llama.cpp's format): metadata and tensors, memory-mapped, every size checked.

`read_gguf(path)` maps the file and reads its header itself (the `gguf` package's reader, and the import of
the package, took a third of a model's load): a tensor's `.raw` is a read-only view of its bytes, so nothing
is copied until `.dequantize()`. Every read stays inside the file and the header is held to what llama.cpp
checks, and more:
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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

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
_U32 = struct.Struct("<I")
# GGUF's value types (gguf.GGUFValueType): the numbers' NumPy dtypes, then STRING and ARRAY
_NUMBERS = {0: "u1", 1: "i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8"}
_NUMBERS[12] = "<f8"
STRING, ARRAY, UINT32 = 8, 9, 4
# GGML's tensor types (gguf.GGMLQuantizationType, GGML_QUANT_SIZES): id -> (name, block values, block bytes)
GGML_TYPES = {
    0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20), 6: ("q5_0", 32, 22),
    7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 9: ("q8_1", 32, 40), 10: ("q2_k", 256, 84),
    11: ("q3_k", 256, 110), 12: ("q4_k", 256, 144), 13: ("q5_k", 256, 176), 14: ("q6_k", 256, 210),
    15: ("q8_k", 256, 292), 16: ("iq2_xxs", 256, 66), 17: ("iq2_xs", 256, 74), 18: ("iq3_xxs", 256, 98),
    19: ("iq1_s", 256, 50), 20: ("iq4_nl", 32, 18), 21: ("iq3_s", 256, 110), 22: ("iq2_s", 256, 82),
    23: ("iq4_xs", 256, 136), 24: ("i8", 1, 1), 25: ("i16", 1, 2), 26: ("i32", 1, 4), 27: ("i64", 1, 8),
    28: ("f64", 1, 8), 29: ("iq1_m", 256, 56), 30: ("bf16", 1, 2), 34: ("tq1_0", 256, 54),
    35: ("tq2_0", 256, 66), 39: ("mxfp4", 32, 17), 40: ("nvfp4", 64, 36), 41: ("q1_0", 128, 18),
}  # fmt: skip


@dataclass(frozen=True)
class StringArray:
    """An array of strings as the file holds them: `data` views their bytes (each after its 8-byte length),
    `lengths` are the strings' lengths in bytes (i64). Nothing is decoded until asked (`decode`, `item`), so a
    vocabulary's 49k strings need not exist as Python objects (`verigrad.io.tokenizer` reads the bytes)."""

    data: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)

    def starts(self) -> np.ndarray:
        """Each string's first byte in `data` (i64), after its length."""
        return np.cumsum(self.lengths + 8) - self.lengths

    def joined(self, separator: bool = False) -> np.ndarray:
        """The strings' bytes one after the other (u8); with `separator`, a NUL byte between two strings
        (each length's high byte, 0: no string is 2^56 bytes long, kept and the other 7 dropped)."""
        n = len(self.lengths)
        if not n:
            return self.data[:0]
        # the mask of the bytes kept, in runs: each length dropped (but, with `separator`, its high byte: 0),
        # each string kept, then whatever follows them (np.repeat: half the time of a cumsum of edges)
        dropped = 7 if separator else 8
        runs = np.empty(2 * n + 1, np.int64)
        runs[0:-1:2] = dropped
        runs[1::2] = self.lengths + (8 - dropped)
        runs[-1] = self.data.size - 8 * n - int(self.lengths.sum())
        kept = np.ones(2 * n + 1, bool)
        kept[0:-1:2] = False
        keep = np.repeat(kept, runs)
        if separator:
            keep[7] = False
        return self.data[keep]

    def item(self, i: int) -> str:
        """String `i` (UnicodeDecodeError if it is not UTF-8)."""
        start = 8 * (i + 1) + int(self.lengths[:i].sum())
        return self.data[start : start + int(self.lengths[i])].tobytes().decode("utf-8")

    def check(self) -> None:
        """UnicodeDecodeError unless every string is UTF-8 (no list of strings is made)."""
        self.joined(separator=True).tobytes().decode("utf-8")

    def decode(self) -> list[str]:
        """The strings (UnicodeDecodeError for one that is not UTF-8), decoded in one call."""
        if not len(self.lengths):
            return []
        joined = self.joined(separator=True).tobytes()
        if joined.count(0) != len(self.lengths) - 1:  # a string holds a NUL byte: one at a time
            data = self.data.tobytes()
            starts = self.starts().tolist()
            return [data[a : a + n].decode("utf-8") for a, n in zip(starts, self.lengths.tolist())]
        return joined.decode("utf-8").split("\x00")


class Metadata(Mapping[str, Any]):
    """A GGUF file's metadata, in the file's order: numbers, strings and lists of numbers as plain Python
    values; an array of strings is decoded each time it is read (a new list: its strings live only as long
    as the reader keeps them), and its bytes are `strings(key)`."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values  # a StringArray for each array of strings

    def __getitem__(self, key: str) -> Any:
        value = self._values[key]
        return value.decode() if isinstance(value, StringArray) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def strings(self, key: str) -> StringArray | None:
        """The bytes of the array of strings under `key`; None where the value is something else."""
        value = self._values.get(key)
        return value if isinstance(value, StringArray) else None

    def __repr__(self) -> str:
        return f"Metadata({len(self)} keys)"


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
    """A parsed GGUF file: `metadata` (plain Python values: `read_gguf` gives a `Metadata`, whose arrays of
    strings are decoded when read) and `tensors` (name -> GGUFTensor)."""

    path: Path
    version: int
    metadata: Mapping[str, Any]
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

    def strings(self, key: str) -> StringArray | None:
        """The undecoded bytes of the array of strings under `key`, where the file was read by `read_gguf`
        (else None: a `GGUFFile` made of plain values)."""
        return self.metadata.strings(key) if isinstance(self.metadata, Metadata) else None

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


@dataclass(frozen=True)
class _TensorInfo:
    name: str
    dims: list[int]  # fastest first, as the file lists them
    type_id: int
    offset: int  # from the data section's start


class _CheckedReader:
    """A GGUF file's header, read from its map: each metadata key's value (`contents`: string arrays kept as
    their bytes and lengths until asked for, then decoded in one call) and value `types` (GGUFValueType
    numbers: [type], or [ARRAY, item type]), the tensor infos, `alignment` and `data_offset`. Reads only
    inside the file and refuses what llama.cpp refuses, naming the file and the field: a count, string or
    array longer than the bytes left, an unknown value type, an array of arrays, a repeated key, a key or
    tensor name that is not UTF-8, a bad `general.alignment` (ValueError), the tensors' layout
    (`_check_layout`)."""

    def __init__(self, path: Path) -> None:
        self.path, self.what = path, "the header"
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            self.map: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""
        self.plain = np.ndarray((self.size,), np.uint8, buffer=self.map)  # based on the map (`_drop_pages`)
        self.values: dict[str, Any] = {}  # numbers, strings, lists of numbers (string arrays: `strings`)
        self.strings: dict[str, StringArray] = {}
        self.types: dict[str, list[int]] = {}
        self._get(0, 24)  # magic, version, the tensor and key counts
        tensor_count, kv_count = _U64.unpack_from(self.map, 8)[0], _U64.unpack_from(self.map, 16)[0]
        offs = self._build_fields(24, kv_count)
        offs, self.infos = self._build_tensor_info(offs, tensor_count)
        self.alignment = DEFAULT_ALIGNMENT
        if "general.alignment" in self.types:
            if self.types["general.alignment"] != [UINT32]:
                raise ValueError("Bad type for general.alignment field")
            self.alignment = int(self.values["general.alignment"])
            if self.alignment == 0 or self.alignment & (self.alignment - 1):
                raise ValueError("Invalid alignment: must be a non-zero power of two")
        self.data_offset = -(-offs // self.alignment) * self.alignment
        self.what = "the tensors"
        _check_layout(self.path, self.infos, self.data_offset, self.alignment, self.size)

    def contents(self, key: str) -> Any:
        """The value of metadata `key` (UnicodeDecodeError for a string that is not UTF-8)."""
        if key in self.strings:
            return self.strings[key].decode()
        value = self.values[key]
        return str(value, encoding="utf-8") if isinstance(value, bytes) else value

    def refuse(self, reason: str) -> WeightFileError:
        return WeightFileError(f"{self.path}: {self.what}: {reason}")

    def _get(self, offset: int, nbytes: int) -> int:
        """`offset + nbytes`, refused past the file's end."""
        end = offset + nbytes
        if nbytes < 0 or end > self.size:
            raise WeightFileError(
                f"{self.path}: the file ends inside the header ({self.what} needs bytes {offset}..{end}, "
                f"the file has {self.size} bytes); it is truncated or not a GGUF file"
            )
        return end

    def _bound(self, count: int, at: int, least: int, what: str) -> int:
        """`count` items of at least `least` bytes each, refused unless they fit in the bytes after `at`."""
        if count * least > self.size - at:
            raise WeightFileError(
                f"{self.path}: the file ends inside the header ({self.what}: {count} {what} need at least "
                f"{count * least} bytes, {self.size - at} are left); it is truncated or not a GGUF file"
            )
        return count

    def _u32(self, at: int) -> int:
        self._get(at, 4)
        return _U32.unpack_from(self.map, at)[0]

    def _u64(self, at: int) -> int:
        self._get(at, 8)
        return _U64.unpack_from(self.map, at)[0]

    def _str(self, at: int) -> tuple[bytes, int]:
        """The bytes of the string at `at` (its 8-byte length, then its bytes) and the offset after it."""
        n = self._u64(at)
        end = self._get(at + 8, n)
        return self.map[at + 8 : end], end

    def _value_type(self, raw: int) -> int:
        if raw not in _NUMBERS and raw not in (STRING, ARRAY):
            raise self.refuse(f"unknown value type {raw}")
        return raw

    def _build_fields(self, offs: int, count: int) -> int:
        for i in range(self._bound(count, offs, 13, "metadata keys")):  # key length, type, value
            self.what = f"metadata key {i}"
            kdata, offs = self._str(offs)
            key = self._text(kdata)
            self.what = f"metadata {shown(key)}"
            if key in self.types:
                raise self.refuse("the key appears twice")
            offs = self._value(key, self._value_type(self._u32(offs)), offs + 4)
        return offs

    def _value(self, key: str, vtype: int, at: int) -> int:
        """Read `key`'s value of type `vtype` at `at`; the offset after it."""
        if vtype == STRING:
            self.types[key] = [STRING]
            self.values[key], end = self._str(at)
            return end
        if vtype != ARRAY:
            self.types[key] = [vtype]
            end = self._get(at, np.dtype(_NUMBERS[vtype]).itemsize)
            self.values[key] = self.plain[at:end].view(_NUMBERS[vtype])[0].item()
            return end
        item, n = self._value_type(self._u32(at)), self._u64(at + 4)
        at += 12
        if item == ARRAY:
            raise self.refuse("an array of arrays (llama.cpp reads none)")
        self.types[key] = [ARRAY, item]
        if item != STRING:
            dtype = np.dtype(_NUMBERS[item])
            end = self._get(at, dtype.itemsize * n)
            self.values[key] = self.plain[at:end].view(dtype).tolist()
            return end
        # Each string's place depends on the previous lengths: read at once where they are short (below
        # 256 bytes, a vocabulary's), else one after the other; decoded in one call when asked (`contents`).
        first = at
        found = _short_lengths(self.plain, at, self._bound(n, at, 8, "strings"))
        if found is not None:
            lengths, at = found
            self.strings[key] = StringArray(self.plain[first:at], lengths)
            return at
        unpack, data, size, listed = _U64.unpack_from, self.map, self.size, []
        for _ in range(n):
            if at + 8 > size:
                self._get(at, 8)  # the file-ends error
            (length,) = unpack(data, at)
            at += 8
            if at + length > size:
                self._get(at, length)
            listed.append(length)
            at += length
        self.strings[key] = StringArray(self.plain[first:at], np.array(listed, np.int64))
        return at

    def _text(self, data: bytes) -> str:
        try:
            return str(data, encoding="utf-8")
        except UnicodeDecodeError:
            raise self.refuse(f"not UTF-8 text: {shown(data)}") from None

    def _build_tensor_info(self, offs: int, count: int) -> tuple[int, list[_TensorInfo]]:
        infos = []
        for i in range(self._bound(count, offs, 24, "tensors")):  # name length, dims, type, offset
            self.what = f"tensor {i}"
            name_data, at = self._str(offs)
            name = self._text(name_data)
            self.what = f"tensor {shown(name)}"
            if len(name_data) > MAX_NAME:
                raise self.refuse(f"the name is {len(name_data)} bytes long, llama.cpp allows {MAX_NAME}")
            n_dims = self._u32(at)
            if n_dims > MAX_DIMS:
                raise self.refuse(f"{n_dims} dimensions, at most {MAX_DIMS} are allowed")
            end = self._get(at + 4, 8 * n_dims)
            dims = list(struct.unpack_from(f"<{n_dims}Q", self.map, at + 4))
            infos.append(_TensorInfo(name, dims, self._u32(end), self._u64(end + 4)))
            offs = end + 12
        return offs, infos

    def tensor(self, info: _TensorInfo) -> np.ndarray:
        """The bytes of tensor `info` (u8, a view of the map; `_check_layout` held them inside the file)."""
        _, block, nbytes = GGML_TYPES[info.type_id]
        count = 1
        for d in info.dims:
            count *= d
        start = self.data_offset + info.offset
        return self.plain[start : start + count // block * nbytes]


SHORT_WINDOW = 1 << 16  # bytes `_short_lengths` looks at a time


def _short_lengths(
    plain: np.ndarray, at: int, count: int, span: int = SHORT_WINDOW
) -> tuple[np.ndarray, int] | None:
    """The lengths (i64) of the `count` strings at `at` and the offset after them, found at once where every
    string is shorter than 256 bytes and holds no run of 7 NUL bytes, else None (read one at a time).
    A length then is one byte and 7 zeros, and no other place in the strings has 7 zeros after a byte: those
    places, a window of `span` bytes at a time, are the strings' starts exactly when each one is the previous
    one's end."""
    lengths, pos, size = [], at, plain.size
    while count:
        window = plain[pos : min(size, pos + span + 8)]
        if window.size < 8:
            return None
        nonzero = np.zeros(window.size + 1, np.int32)
        np.cumsum(window != 0, out=nonzero[1:])
        places = np.flatnonzero(nonzero[8:] - nonzero[1:-7] == 0)  # bytes i+1 ... i+7 are zeros
        places = places[places <= span]
        if not places.size or places[0] != 0:
            return None
        ends = places + 8 + window[places]
        chained = np.flatnonzero(places[1:] != ends[:-1])
        last = int(chained[0]) if chained.size else places.size - 1  # the last string of the unbroken chain
        taken = min(last + 1, count)
        if taken < count and chained.size and ends[last] <= span:  # a long string, or NULs in one
            return None
        if pos + int(ends[taken - 1]) > size:
            return None
        lengths.append(ends[:taken] - places[:taken] - 8)
        pos, count = pos + int(ends[taken - 1]), count - taken
    joined = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    return joined.astype(np.int64), pos


def _ggml_type(path: Path, name: str, type_id: int) -> tuple[str, int, int]:
    """(name, block size, bytes per block) of a GGML type id."""
    if type_id not in GGML_TYPES:
        raise WeightFileError(f"{path}: tensor {shown(name)} has unknown GGML type {type_id}")
    return GGML_TYPES[type_id]


def _check_layout(path: Path, infos: list[_TensorInfo], data_start: int, alignment: int, size: int) -> None:
    """Every tensor's shape, type and bytes: each one starts where the previous one ends (padded to
    `alignment`), as llama.cpp requires, and the last one ends at the file's end, so a shifted offset or
    a type relabelled to one of another size is refused instead of read as other weights."""
    names: set[str] = set()
    end, previous = 0, None
    for f in infos:
        name, dims, type_id, offset = f.name, f.dims, f.type_id, f.offset
        label = f"tensor {shown(name)}"
        if name in names:
            raise WeightFileError(f"{path}: {label} appears twice")
        names.add(name)
        kind, block, nbytes = _ggml_type(path, name, type_id)
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
                f"{path}: {label} has shape {shape}, but {kind} stores rows in blocks of "
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
                f"{path}: {label} ({kind}, shape {shape}) needs {length} bytes at offset "
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
    except ValueError as e:  # general.alignment
        raise WeightFileError(f"{path}: {shown(str(e))}") from None
    values: dict[str, Any] = {}
    for key in reader.types:  # arrays of strings are checked, not decoded (`Metadata` decodes them)
        try:
            if key in reader.strings:
                reader.strings[key].check()
                values[key] = reader.strings[key]
            else:
                values[key] = reader.contents(key)
        except UnicodeDecodeError:
            raise WeightFileError(f"{path}: metadata {shown(key)}: a string is not UTF-8 text") from None
    tensors = {t.name: _tensor(path, t, reader.tensor(t)) for t in reader.infos}
    return GGUFFile(path, int(version), Metadata(values), tensors)


def _tensor(path: Path, info: _TensorInfo, data: np.ndarray) -> GGUFTensor:
    """A GGUFTensor viewing `data`, the file's bytes of `info` (values for f32/f16/bf16, else rows of
    blocks)."""
    qtype = GGML_TYPES[info.type_id][0]
    shape = tuple(int(d) for d in reversed(info.dims))
    if qtype in _VALUE_DTYPES:
        raw = data.view(_VALUE_DTYPES[qtype]).reshape(shape)
    else:
        rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
        raw = data.reshape(rows, -1)
    return GGUFTensor(info.name, qtype, shape, raw, str(path))


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


def drop_header_pages(gguf: GGUFFile) -> None:
    """Drop the mapped file's header pages (its metadata: SmolLM2's tokens and merges, 1.7 MiB, resident
    since `read_gguf` parsed them) from this process's memory, once what reads them is made (the tokenizer
    keeps its own arrays); they are read again from the file if asked for."""
    first = min((t.raw for t in gguf.tensors.values()), key=lambda r: r.ctypes.data, default=None)
    plain = first
    while plain is not None and isinstance(plain.base, np.ndarray):
        plain = plain.base
    if plain is not None and isinstance(plain.base, mmap.mmap):
        _drop_pages(plain[: first.ctypes.data - plain.ctypes.data])


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
