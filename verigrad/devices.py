"""Devices: PyTorch's `torch.device`, and the refusal of every device but the CPU, where verigrad runs.

`device("cuda")` is made as PyTorch makes it (code picks a device before it uses one); placing a
tensor or module there raises `NoDeviceError`, which is an `AssertionError` as PyTorch's "Torch not
compiled with CUDA enabled" and a `RuntimeError` as its "not linked with support for mps devices", so
the `except` a PyTorch program wrote for a missing GPU catches it.
"""

from __future__ import annotations

from typing import Any

# PyTorch's device types: the names `torch.device` accepts (any other is an error there too)
DEVICE_TYPES = frozenset(
    [
        "cpu",
        "cuda",
        "ipu",
        "xpu",
        "mkldnn",
        "opengl",
        "opencl",
        "ideep",
        "hip",
        "ve",
        "fpga",
        "maia",
        "xla",
        "lazy",
        "vulkan",
        "mps",
        "meta",
        "hpu",
        "mtia",
        "privateuseone",
    ]
)


class NoDeviceError(ValueError, RuntimeError, AssertionError):
    """A device other than the CPU was asked for: verigrad has none here."""


class device:
    """PyTorch's `torch.device`: `device("cpu")`, `device("cpu", 0)`, `device("cpu:0")`, `device(d)`.

    Equal to a device of the same type and index (not to a string, as PyTorch's), hashable.
    """

    __slots__ = ("_index", "_type")

    def __init__(self, type: str | device, index: int | None = None) -> None:
        if isinstance(type, device):
            if index is not None:
                raise TypeError("device(d, index): a device and an index cannot be given together")
            self._type, self._index = type.type, type.index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            raise RuntimeError(f"device({type}): an index alone names an accelerator, and verigrad has none")
        if not isinstance(type, str):
            raise TypeError(f"device() takes a device type as a string, got {_name(type)}")
        kind, colon, number = type.partition(":")
        if colon:
            if index is not None:
                raise RuntimeError(f"device({type!r}, {index}): the string already holds an index")
            if not number.isdigit():
                raise RuntimeError(f"device({type!r}): invalid device string")
            index = int(number)
        if kind not in DEVICE_TYPES:
            raise RuntimeError(f"device({type!r}): expected one of {', '.join(sorted(DEVICE_TYPES))}")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
            raise RuntimeError(f"device({type!r}, {index!r}): the index must be a whole number >= 0")
        self._type, self._index = kind, index

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self) -> int | None:
        return self._index

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, device):
            return NotImplemented
        return (self._type, self._index) == (other._type, other._index)

    def __hash__(self) -> int:
        return hash((self._type, self._index))

    def __str__(self) -> str:
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self) -> str:
        index = "" if self._index is None else f", index={self._index}"
        return f"device(type={self._type!r}{index})"

    def __reduce__(self) -> tuple:
        return (device, (self._type, self._index))

    def __enter__(self) -> device:
        """`with device("cpu"):` as PyTorch's default-device block: the CPU is already the default."""
        as_device(self, "with device(...)")
        return self

    def __exit__(self, *exc: object) -> None:
        return None


CPU = device("cpu")


def _name(value: Any) -> str:
    return type(value).__name__


def is_device(value: Any) -> bool:
    """Whether `value` names a device (a `device`, or a string such as "cpu", "cuda:0"), not a dtype."""
    if isinstance(value, device):
        return True
    return isinstance(value, str) and value.partition(":")[0] in DEVICE_TYPES


def no_device(name: str, where: str) -> NoDeviceError:
    """The error for asking `where` for the device `name`."""
    if name.startswith("cuda"):
        why = "an AssertionError, as PyTorch's 'Torch not compiled with CUDA enabled'; code written for"
        why += " PyTorch can drop .cuda() and .to('cuda')"
    else:
        why = "a RuntimeError, as PyTorch's for a device it was not built with"
    return NoDeviceError(f"{where}: verigrad runs on the CPU: there is no {name!r} device ({why})")


def as_device(value: Any, where: str) -> device:
    """The device `value` names, which must be the CPU; any other is refused with a `NoDeviceError`."""
    if value is None or value is CPU:
        return CPU
    if isinstance(value, int) and not isinstance(value, bool):
        raise no_device(f"accelerator {value}", where)
    if not isinstance(value, device | str):
        raise TypeError(f"{where}: device must be a verigrad.device or a string as 'cpu', not {_name(value)}")
    found = device(value)
    if found.type != "cpu":
        raise no_device(str(found), where)
    return CPU
