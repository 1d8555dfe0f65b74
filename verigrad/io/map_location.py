"""`load`'s `map_location`, as PyTorch's: where each storage of a checkpoint goes, which must be the CPU.

PyTorch takes None, a device (`"cpu"`, `device("cpu")`), a dict from the location a storage was saved on
to the one it loads on, or a function `f(storage, location)` returning the storage where it should be.
verigrad runs on the CPU: every mapping that lands on the CPU is taken, any other is refused naming it.
A storage saved on a GPU loads onto the CPU when nothing maps it elsewhere (PyTorch on a machine without
that GPU raises unless `map_location` moves it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

LocationMap = Callable[[str], None]  # checks that a storage saved at a location may load on the CPU


class MapLocationError(ValueError):
    """`map_location` sends a storage to a device verigrad does not have, or its function failed."""


def _device_name(value: Any, where: str) -> str:
    """A device given as a string or a device object (whose str is its name, as "cpu" or "cuda:1")."""
    if isinstance(value, str):
        return value
    if isinstance(getattr(value, "type", None), str):  # verigrad.device, or any device object
        return str(value)
    raise TypeError(f"{where} must name a device (a string as 'cpu', or a device), not {_name(value)}")


def _name(value: Any) -> str:
    return type(value).__name__


def _check_cpu(name: str, where: str) -> None:
    if name.partition(":")[0] != "cpu":
        raise MapLocationError(
            f"{where} is {name!r}: verigrad runs on the CPU and has no other device "
            "(load with map_location='cpu', or leave it out)"
        )


class CpuStorage:
    """What a `map_location` function is given for each storage: it is on the CPU, where it stays."""

    __slots__ = ()
    device = "cpu"

    def cpu(self) -> CpuStorage:
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> CpuStorage:
        raise MapLocationError(
            "load(map_location=...): the function moves a storage to CUDA, and verigrad runs on the CPU"
        )


def location_map(map_location: Any) -> LocationMap:
    """The check `load` runs on each storage's saved location; a mapping that leaves the CPU is refused
    here, before the file is read, where that can be known without the file."""
    if map_location is None:
        return lambda location: None
    if isinstance(map_location, Mapping):
        for saved, target in map_location.items():
            _device_name(saved, "load(map_location=...)'s keys")
            _check_cpu(_device_name(target, "load(map_location=...)'s values"), f"map_location[{saved!r}]")
        return lambda location: None  # keys that do not match stay where they were saved: the CPU
    if callable(map_location) and not isinstance(map_location, str):
        return _mapped_by(map_location)
    _check_cpu(_device_name(map_location, "load(map_location=...)"), "map_location")
    return lambda location: None


def _mapped_by(fn: Callable[[Any, str], Any]) -> LocationMap:
    storage = CpuStorage()

    def check(location: str) -> None:
        try:
            out = fn(storage, location)
        except MapLocationError:
            raise
        except Exception as e:
            raise MapLocationError(
                f"load(map_location={getattr(fn, '__name__', fn)!r}) raised on a storage saved on "
                f"{location!r}: {type(e).__name__}: {e}"
            ) from e
        if out is not None and out is not storage:
            raise MapLocationError(
                f"load(map_location=...): the function returned a {type(out).__name__} for a storage saved "
                f"on {location!r}; verigrad keeps storages on the CPU, so it must return the storage it is "
                "given (as `lambda storage, location: storage`)"
            )

    return check
