"""PyTorch's checkpoint format, written and read without torch and without running code from the file.

The format is the zip archive `torch.save` writes since PyTorch 1.6: `archive/data.pkl`, a protocol-2
pickle of the saved object in which each tensor is a call of `torch._utils._rebuild_tensor_v2` on a
storage named by a persistent id `("storage", torch.FloatStorage, key, location, numel)`, and
`archive/data/<key>`, that storage's raw little-endian bytes, beside `version` and `byteorder`.

Writing builds the pickle opcode by opcode (no torch to import), so `torch.load(path, weights_only=True)`
reads it. Reading uses an unpickler that admits only the names tensor rebuilding needs, as torch's
`weights_only` unpickler does; a file asking for anything else is refused naming what it asked for.
Tensors that shared a storage share one again after loading (views, slices, transposes, tied weights).
"""

from __future__ import annotations

import io
import pickle
import pickletools
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..devices import device
from ..dtypes import DType, as_dtype, bf16, from_numpy_dtype
from ..errors import WeightFileError
from ..modes import current
from ..shapes import Size
from ..tensor import Tensor
from .map_location import LocationMap, MapLocationError

TORCH_SUFFIXES = frozenset({".pt", ".pth", ".bin"})

# torch's legacy storage class -> the little-endian NumPy type of its bytes (bf16: its bits)
_STORAGE_TYPES = {
    "DoubleStorage": "<f8",
    "FloatStorage": "<f4",
    "HalfStorage": "<f2",
    "BFloat16Storage": "<u2",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
}
_STORAGE_OF_NUMPY = {np.dtype(t): name for name, t in _STORAGE_TYPES.items() if name != "BFloat16Storage"}

# torch's dtype names that verigrad holds (a pickled torch.float32 loads as verigrad's f32)
_TORCH_DTYPES = {
    "float64": "f64",
    "double": "f64",
    "float32": "f32",
    "float": "f32",
    "float16": "f16",
    "half": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "long": "i64",
    "int32": "i32",
    "int": "i32",
    "int16": "i16",
    "short": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "bool",
}
# verigrad's dtype -> torch's canonical name of it (the first listed above)
_TORCH_NAME_OF_DTYPE = {ours: theirs for theirs, ours in reversed(_TORCH_DTYPES.items())}

_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"  # pickled 0x1950a86a20f9469cfc6c
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_ALIGNMENT = 64  # torch aligns each storage's bytes in the archive, so that they can be memory-mapped
_ARCHIVE = "archive"
# what reading a damaged archive or pickle raises (a hostile one too: the rebuild functions check their
# arguments, but a wrong count of them is the call's TypeError)
_DAMAGE = (
    zipfile.BadZipFile,
    pickle.UnpicklingError,
    EOFError,
    KeyError,
    ValueError,
    TypeError,
    IndexError,
    AttributeError,
    struct.error,
    OverflowError,
    RecursionError,
    NotImplementedError,
)


def is_zip_archive(head: bytes) -> bool:
    """Whether a file starting with `head` is a zip archive (the format torch.save writes)."""
    return head.startswith(_ZIP_MAGICS)


def is_legacy_checkpoint(head: bytes) -> bool:
    """Whether a file starting with `head` is in torch's pre-1.6 format (a bare pickle stream)."""
    return head.startswith(_LEGACY_MAGIC)


# writing ------------------------------------------------------------------------------------------


def archive_writer(obj: Any, byteorder_record: bool = True) -> Callable[[BinaryIO], None]:
    """The function that writes a torch.save checkpoint of `obj` to a binary file: tensors and arrays
    (f64, f32, f16, bf16, i64, i32, i16, i8, u8, bool) in dicts, OrderedDicts, lists and tuples, with
    ints, floats, strings, bools and None. `obj` is pickled now, so what cannot be saved is refused before
    any file is made; the storages are written from the tensors' memory, not copied first. Without
    `byteorder_record` (torch.save's `_disable_byteorder_record`) the archive has no `byteorder` record."""
    storages = _StorageWriter()
    records: dict[str, bytes | memoryview] = {"data.pkl": _PickleWriter(storages).dump(obj)}
    records |= {".format_version": b"1", ".storage_alignment": str(_ALIGNMENT).encode()}
    if byteorder_record:
        records["byteorder"] = b"little"
    records |= {f"data/{key}": _bytes_of(array) for key, array in enumerate(storages.arrays)}
    records["version"] = b"3\n"
    return lambda file: _write_records(file, records)


def _bytes_of(array: np.ndarray) -> memoryview:
    """A contiguous array's memory as bytes, without a copy."""
    return memoryview(array.reshape(-1).view(np.uint8))


def _write_records(file: BinaryIO, records: dict[str, bytes | memoryview]) -> None:
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED) as archive:
        for name, blob in records.items():
            _write_aligned(archive, file.tell(), f"{_ARCHIVE}/{name}", blob)


def _write_aligned(archive: zipfile.ZipFile, offset: int, name: str, blob: bytes | memoryview) -> None:
    """One stored record whose bytes start at a multiple of _ALIGNMENT, padded as torch pads: an extra
    field 'FB' in the local header."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    zip64 = len(blob) * 1.05 > zipfile.ZIP64_LIMIT  # zipfile then adds a 20-byte zip64 field
    header = 30 + len(name.encode()) + 4 + (20 if zip64 else 0)
    padding = -(offset + header) % _ALIGNMENT
    info.extra = b"FB" + struct.pack("<H", padding) + b"Z" * padding
    archive.writestr(info, blob)


@dataclass(frozen=True)
class _StoredTensor:
    """Where a tensor's elements lie in a storage of the archive, in elements."""

    storage_type: str
    key: int
    numel: int
    offset: int
    strides: tuple[int, ...]


class _StorageWriter:
    """The storages of an archive. An array that is a view of an array owning its memory is saved as a
    view of that memory, so tensors that share memory share one storage in the file, as torch saves."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []  # by key, each contiguous
        self._keys: dict[int, int] = {}  # id of the memory's owner -> storage key
        self._owners: list[np.ndarray] = []  # kept alive so that their ids stay theirs

    def add(self, array: np.ndarray, storage_type: str) -> _StoredTensor:
        owner = _memory_owner(array)
        if owner is None:
            array = np.asarray(array, array.dtype.newbyteorder("<"), order="C")  # 0-d stays 0-d
            key = self._new(array)
            return _StoredTensor(storage_type, key, array.size, 0, _element_strides(array))
        if id(owner) not in self._keys:
            self._keys[id(owner)] = self._new(owner)
            self._owners.append(owner)
        offset = (_address(array) - _address(owner)) // array.itemsize
        return _StoredTensor(storage_type, self._keys[id(owner)], owner.size, offset, _element_strides(array))

    def _new(self, array: np.ndarray) -> int:
        self.arrays.append(array)
        return len(self.arrays) - 1


def _memory_owner(array: np.ndarray) -> np.ndarray | None:
    """The contiguous little-endian array of the same dtype that owns `array`'s memory, if there is one
    and `array` lies in it at whole-element offsets and non-negative strides; else None (saved as a copy)."""
    owner = array
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    usable = (
        owner.base is None
        and array.size > 0
        and owner.dtype == array.dtype
        and array.dtype.byteorder in "<|="
        and owner.flags.c_contiguous
        and all(s >= 0 and s % array.itemsize == 0 for s in array.strides)
        and (_address(array) - _address(owner)) % array.itemsize == 0
    )
    return owner if usable else None


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(s // array.itemsize for s in array.strides)


class _PickleWriter:
    """Writes a protocol-2 pickle of plain containers and tensors, as torch.save pickles them."""

    def __init__(self, storages: _StorageWriter) -> None:
        self._storages = storages
        self._out = bytearray(b"\x80\x02")
        self._memo: dict[int, int] = {}  # id of a tensor already written -> its memo slot
        self._kept: list[Any] = []  # the objects in _memo, kept alive
        self._open: set[int] = set()  # containers being written (one inside itself cannot be saved)

    def dump(self, obj: Any) -> bytes:
        self._value(obj, "the object")
        self._out += b"."
        return bytes(self._out)

    def _value(self, value: Any, where: str) -> None:
        if value is None or isinstance(value, bool):
            self._out += {None: b"N", True: b"\x88", False: b"\x89"}[value]
        elif isinstance(value, int):
            self._int(value)
        elif isinstance(value, float):
            self._out += b"G" + struct.pack(">d", value)
        elif isinstance(value, str):
            self._str(value)
        elif isinstance(value, Tensor | np.ndarray):
            self._tensor(value, where)
        elif isinstance(value, DType):
            self._global("torch", _TORCH_NAME_OF_DTYPE[value.name])
        elif isinstance(value, Size):  # as torch.Size pickles: torch.Size((2, 3))
            self._global("torch", "Size")
            self._out += b"("
            self._value(tuple(value), where)
            self._out += b"tR"
        elif isinstance(value, tuple | list | dict):
            self._container(value, where)
        else:
            hint = "; use .item() or a 0-d tensor" if isinstance(value, np.generic) else ""
            if callable(getattr(value, "state_dict", None)):  # a whole module or optimizer: pickled code
                hint = "; save its state_dict() and load that with load_state_dict()"
            raise TypeError(f"{where}: cannot be saved in a PyTorch checkpoint: {type(value).__name__}{hint}")

    def _int(self, n: int) -> None:
        if 0 <= n < 256:
            self._out += b"K" + bytes([n])
        elif 0 <= n < 65536:
            self._out += b"M" + struct.pack("<H", n)
        elif -(2**31) <= n < 2**31:
            self._out += b"J" + struct.pack("<i", n)
        else:  # LONG1 or LONG4: the two's-complement bytes, least significant first
            body = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
            size = bytes([len(body)]) if len(body) < 256 else struct.pack("<i", len(body))
            self._out += (b"\x8a" if len(body) < 256 else b"\x8b") + size + body

    def _str(self, text: str) -> None:
        body = text.encode("utf-8", "surrogatepass")
        self._out += b"X" + struct.pack("<I", len(body)) + body

    def _global(self, module: str, name: str) -> None:
        self._out += b"c" + f"{module}\n{name}\n".encode()

    def _container(self, value: tuple | list | dict, where: str) -> None:
        if id(value) in self._open:
            raise ValueError(f"{where} contains itself and cannot be saved")
        self._open.add(id(value))
        if isinstance(value, tuple):
            self._out += b"("
            self._items(value, where)
            self._out += b"t"
        elif isinstance(value, list):
            self._out += b"]("
            self._items(value, where)
            self._out += b"e"
        else:
            if isinstance(value, OrderedDict):
                self._global("collections", "OrderedDict")
                self._out += b")R"
            else:
                self._out += b"}"
            self._out += b"("
            for key, item in value.items():
                self._value(key, f"{where}'s key {key!r}")
                self._value(item, f"{where}[{key!r}]")
            self._out += b"u"
        self._open.discard(id(value))

    def _items(self, items: tuple | list, where: str) -> None:
        for i, item in enumerate(items):
            self._value(item, f"{where}[{i}]")

    def _tensor(self, value: Tensor | np.ndarray, where: str) -> None:
        if id(value) in self._memo:  # the same tensor twice loads as one tensor, as in torch
            self._out += b"j" + struct.pack("<I", self._memo[id(value)])
            return
        array, storage_type = _array_and_storage_type(value, where)
        stored = self._storages.add(array, storage_type)
        self._global("torch._utils", "_rebuild_tensor_v2")
        self._out += b"(("  # the arguments, then the persistent id of the storage
        self._str("storage")
        self._global("torch", stored.storage_type)
        self._str(str(stored.key))
        self._str("cpu")
        self._int(stored.numel)
        self._out += b"tQ"
        self._int(stored.offset)
        self._value(tuple(int(d) for d in array.shape), where)
        self._value(stored.strides, where)
        self._value(bool(isinstance(value, Tensor) and value.requires_grad), where)
        self._global("collections", "OrderedDict")
        self._out += b")RtR"  # the backward hooks, an empty OrderedDict; the arguments; the call
        self._memo[id(value)] = len(self._memo)
        self._kept.append(value)
        self._out += b"r" + struct.pack("<I", self._memo[id(value)])


def _array_and_storage_type(value: Tensor | np.ndarray, where: str) -> tuple[np.ndarray, str]:
    """The array whose bytes a tensor is saved as (a bf16 tensor: its bits), and torch's storage type."""
    if isinstance(value, Tensor) and value.dtype is bf16:
        return (value.numpy().view(np.uint32) >> 16).astype(np.uint16), "BFloat16Storage"
    array = value.numpy() if isinstance(value, Tensor) else value
    storage_type = _STORAGE_OF_NUMPY.get(
        array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
    )
    if storage_type is None:
        raise TypeError(f"{where}: a {array.dtype} array has no PyTorch storage type verigrad writes")
    return array, storage_type


# reading ------------------------------------------------------------------------------------------


def read_archive(
    file: Path | BinaryIO,
    name: Path | str,
    location_map: LocationMap = lambda location: None,
    encoding: str = "utf-8",
) -> Any:
    """The object a torch.save checkpoint (a path or a binary file) holds, its tensors as verigrad tensors.
    Raises WeightFileError naming the file (`name`) for a damaged one or one that asks for anything but
    tensors and plain containers; `location_map` checks each storage's saved location (`map_location`);
    `encoding` decodes Python 2 strings, as pickle's."""
    try:
        with zipfile.ZipFile(file) as archive:
            return _Reader(name, archive, location_map, encoding).load()
    except (WeightFileError, MapLocationError):
        raise
    except (*_DAMAGE, OSError) as e:  # OSError: a zip directory's offset that no seek reaches
        raise WeightFileError(f"{name}: not a valid PyTorch checkpoint ({type(e).__name__}: {e})") from None


@dataclass(frozen=True)
class _StorageType:
    """A storage class the pickle names (torch.FloatStorage), standing for the type of its bytes."""

    name: str
    file_dtype: np.dtype


@dataclass(frozen=True)
class _Storage:
    """A storage read from the archive: its elements, in the verigrad dtype they load as."""

    array: np.ndarray
    dtype: DType
    storage_type: _StorageType


class _Reader:
    """One archive being read: its records' folder, byte order, and the storages read so far by key."""

    def __init__(
        self, path: Path | str, archive: zipfile.ZipFile, location_map: LocationMap, encoding: str
    ) -> None:
        self.path, self.archive = path, archive
        self.location_map, self.encoding = location_map, encoding
        self.prefix = self._prefix()
        self.byteorder = self._byteorder()
        self.storages: dict[str, _Storage] = {}

    def load(self) -> Any:
        pickled = io.BytesIO(self.archive.read(f"{self.prefix}/data.pkl"))
        return _RestrictedUnpickler(pickled, self, self.encoding).load()

    def _prefix(self) -> str:
        names = self.archive.namelist()
        if any(n.endswith("/constants.pkl") for n in names):
            raise WeightFileError(
                f"{self.path}: a TorchScript archive (torch.jit.save), which holds code; verigrad reads "
                "torch.save checkpoints"
            )
        found = [n.split("/")[0] for n in names if n.count("/") == 1 and n.endswith("/data.pkl")]
        if found:
            return found[0]
        raise WeightFileError(f"{self.path}: a zip archive without data.pkl, so not a PyTorch checkpoint")

    def _byteorder(self) -> str:
        try:
            order = self.archive.read(f"{self.prefix}/byteorder").decode("ascii", "replace")
        except KeyError:
            return "<"  # files written before torch recorded it are little-endian
        if order not in ("little", "big"):
            raise WeightFileError(f"{self.path}: byteorder {order!r} is neither 'little' nor 'big'")
        return "<" if order == "little" else ">"

    def storage(self, pid: Any) -> _Storage:
        """The storage a persistent id ("storage", type, key, location, numel) names, read once."""
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self.error(f"a persistent id {pid!r} that is not a storage")
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str):
            raise self.error(f"a storage of type {storage_type!r} under key {key!r}")
        if not isinstance(location, str):
            raise self.error(f"storage {key} saved on {location!r}, which is not a device's name")
        if key not in self.storages:
            self.location_map(location)  # map_location's say; every storage loads onto the CPU
            self.storages[key] = self._read_storage(storage_type, key, numel)
        storage = self.storages[key]
        if storage.array.size != numel or storage.storage_type != storage_type:
            raise self.error(
                f"storage {key} asked for as {storage_type.name} of {numel!r} elements, and as "
                f"{storage.storage_type.name} of {storage.array.size}"
            )
        return storage

    def _read_storage(self, storage_type: _StorageType, key: str, numel: Any) -> _Storage:
        name = f"{self.prefix}/data/{key}"
        try:
            size = self.archive.getinfo(name).file_size
        except KeyError:
            raise self.error(f"storage {key} has no record data/{key}") from None
        itemsize = storage_type.file_dtype.itemsize
        if not isinstance(numel, int) or isinstance(numel, bool) or numel < 0 or size != numel * itemsize:
            raise self.error(
                f"storage {key} ({storage_type.name}) should hold {numel!r} elements of {itemsize} bytes, "
                f"but its record has {size} bytes"
            )
        file_dtype = storage_type.file_dtype.newbyteorder(self.byteorder)
        array = np.frombuffer(self.archive.read(name), dtype=file_dtype)
        if storage_type.name == "BFloat16Storage":
            return _Storage(array.astype(np.uint16), bf16, storage_type)
        if storage_type.name == "BoolStorage":
            return _Storage(array.view(np.uint8) != 0, as_dtype("bool"), storage_type)
        dtype = from_numpy_dtype(array.dtype.newbyteorder("="))
        return _Storage(array.astype(dtype.np), dtype, storage_type)  # a native-order copy, writable

    def error(self, what: str) -> WeightFileError:
        return WeightFileError(f"{self.path}: not a valid PyTorch checkpoint: {what}")


def _rebuild_tensor(reader: _Reader) -> Callable[..., Tensor]:
    def rebuild_tensor_v2(
        storage: Any,
        offset: Any,
        size: Any,
        stride: Any,
        requires_grad: Any,
        hooks: Any = None,
        meta: Any = None,
    ) -> Tensor:
        if not isinstance(storage, _Storage):
            raise reader.error(f"a tensor rebuilt from {type(storage).__name__}, not a storage")
        _check_layout(reader, storage, offset, size, stride)
        array = storage.array
        # an ndarray whose base is the storage's array (as_strided's is not), so that saving it again
        # finds the storage it shares, as torch.save does
        view = np.ndarray(
            size, array.dtype, array, offset * array.itemsize, tuple(s * array.itemsize for s in stride)
        )
        tensor = current().constant(view, storage.dtype)
        return _with_requires_grad(reader, tensor, requires_grad)

    return rebuild_tensor_v2


def _check_layout(reader: _Reader, storage: _Storage, offset: Any, size: Any, stride: Any) -> None:
    """Sizes and strides that fit in the storage: a file cannot make a view past its memory."""
    counts = (offset, *size, *stride) if isinstance(size, tuple) and isinstance(stride, tuple) else None
    if counts is None or len(size) != len(stride) or not all(_is_count(c) for c in counts):
        raise reader.error(f"a tensor with offset {offset!r}, size {size!r} and stride {stride!r}")
    last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) if all(size) else offset - 1
    if last >= storage.array.size or offset > storage.array.size:
        raise reader.error(
            f"a tensor of size {list(size)}, stride {list(stride)} and offset {offset} reaches past its "
            f"storage of {storage.array.size} elements"
        )


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _with_requires_grad(reader: _Reader, tensor: Any, requires_grad: Any) -> Tensor:
    if not isinstance(tensor, Tensor) or not isinstance(requires_grad, bool):
        raise reader.error(f"requires_grad={requires_grad!r} on a {type(tensor).__name__}")
    if requires_grad and not tensor.dtype.is_float:
        raise reader.error(f"a {tensor.dtype.name} tensor that requires grad")
    return tensor.requires_grad_(requires_grad) if requires_grad else tensor


def _rebuild_parameter(reader: _Reader) -> Callable[..., Tensor]:
    def rebuild_parameter(data: Any, requires_grad: Any, hooks: Any, state: Any = None) -> Tensor:
        return _with_requires_grad(reader, data, requires_grad)

    return rebuild_parameter


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
    """A tensor pickled with Python attributes: rebuilt by `func` (one of the rebuild functions above,
    the only callables a file can name); its attributes are not restored."""
    if not callable(func) or not isinstance(args, tuple):
        raise TypeError(f"_rebuild_from_type_v2 of {func!r} on {type(args).__name__}")
    return func(*args)


def _device(kind: Any, index: Any = None) -> Any:
    """A pickled torch.device: a `verigrad.device` for the CPU, the name of another ("cuda:0")."""
    if not isinstance(kind, str) or not (index is None or _is_count(index)):
        raise TypeError(f"torch.device({kind!r}, {index!r})")
    name = kind if index is None or ":" in kind else f"{kind}:{index}"
    return device(name) if name.split(":")[0] == "cpu" else name


def _encode(text: Any, encoding: str = "utf-8") -> bytes:
    """`_codecs.encode`, as protocol 2 pickles bytes: latin-1 text back to its bytes."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise TypeError(f"_codecs.encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


class _TensorClass:
    """torch.Tensor or torch.nn.Parameter named as `new_type` by _rebuild_from_type_v2; not callable."""


def _allowed_names(reader: _Reader) -> dict[str, Any]:
    """What a checkpoint may name: what torch's weights_only unpickler admits that verigrad can hold."""
    allowed: dict[str, Any] = {
        "collections.OrderedDict": OrderedDict,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor(reader),
        "torch._utils._rebuild_parameter": _rebuild_parameter(reader),
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter(reader),
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.Tensor": _TensorClass(),
        "torch.nn.parameter.Parameter": _TensorClass(),
        "torch.Size": Size,
        "torch.device": _device,
        "_codecs.encode": _encode,
        "builtins.set": set,
        "__builtin__.set": set,  # Python 2's name, which protocol 2 pickles write
    }
    allowed |= {f"torch.{name}": _StorageType(name, np.dtype(t)) for name, t in _STORAGE_TYPES.items()}
    allowed |= {f"torch.{name}": as_dtype(ours) for name, ours in _TORCH_DTYPES.items()}
    return allowed


class _RestrictedUnpickler(pickle._Unpickler):
    """Admits only `_allowed_names`; every other global is refused, naming it, before anything runs.

    pickle's Python unpickler, not its C one: the C one trusts a memo index to size its memo table (a
    5-byte `r` opcode with index 2**32 - 1 asks for 32 GiB); this one keeps the memo in a dict, and every
    other length it reads is read as far as the stream goes, but BYTEARRAY8's, checked here first."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file: io.BytesIO, reader: _Reader, encoding: str) -> None:
        super().__init__(file, encoding=encoding)
        self._reader = reader
        self._allowed = _allowed_names(reader)
        self._size = len(file.getbuffer())

    def _load_bytearray8(self) -> None:
        (size,) = struct.unpack("<Q", self.read(8))
        if size > self._size:
            raise pickle.UnpicklingError(f"a bytearray of {size} bytes in a pickle of {self._size}")
        self.append(bytearray(self.read(size)))

    dispatch[pickle.BYTEARRAY8[0]] = _load_bytearray8

    def find_class(self, module: str, name: str) -> Any:
        found = self._allowed.get(f"{module}.{name}")
        if found is None:
            raise WeightFileError(
                f"{self._reader.path}: the checkpoint asks for {module}.{name}, which a weights-only load "
                "refuses (loading it could run code); verigrad reads tensors and plain containers only, "
                "with weights_only=False too"
            )
        return found

    def persistent_load(self, pid: Any) -> Any:
        return self._reader.storage(pid)


def _only_on(opcode: bytes, kinds: tuple[type, ...], target: Callable[[Any], Any]) -> Callable[[Any], None]:
    """pickle's `opcode`, which calls a method of the object `target(unpickler)` finds on its stack, run
    only where that object is of one of `kinds`: a file's SETITEM on a tensor called its __setitem__
    (writing into another tensor's memory), its BUILD on a dtype or a storage set their attributes."""
    run = pickle._Unpickler.dispatch[opcode[0]]
    name = pickletools.code2op[opcode.decode("latin-1")].name

    def load(self: _RestrictedUnpickler) -> None:
        found = target(self)
        if type(found) not in kinds:
            raise pickle.UnpicklingError(f"{name} on a {type(found).__name__}")
        if opcode == pickle.BUILD and not (
            isinstance(self.stack[-1], dict) and all(isinstance(k, str) for k in self.stack[-1])
        ):
            raise pickle.UnpicklingError(f"BUILD of an OrderedDict with a {type(self.stack[-1]).__name__}")
        run(self)

    return load


def _under_mark(unpickler: Any) -> Any:
    return unpickler.metastack[-1][-1]


# the containers each opcode that changes an object may change: those torch.save writes (an OrderedDict's
# BUILD sets its attributes, as a state dict's _metadata)
_RestrictedUnpickler.dispatch |= {
    pickle.SETITEM[0]: _only_on(pickle.SETITEM, (dict, OrderedDict), lambda u: u.stack[-3]),
    pickle.SETITEMS[0]: _only_on(pickle.SETITEMS, (dict, OrderedDict), _under_mark),
    pickle.APPEND[0]: _only_on(pickle.APPEND, (list,), lambda u: u.stack[-2]),
    pickle.APPENDS[0]: _only_on(pickle.APPENDS, (list,), _under_mark),
    pickle.ADDITEMS[0]: _only_on(pickle.ADDITEMS, (set,), _under_mark),
    pickle.BUILD[0]: _only_on(pickle.BUILD, (OrderedDict,), lambda u: u.stack[-2]),
}
