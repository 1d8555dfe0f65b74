"""PyTorch's accelerator queries (`torch.accelerator`, `torch.cuda`), answered as PyTorch answers them on
a machine without one: verigrad runs on the CPU.

Queries PyTorch answers there (`is_available()`, `device_count()`, `memory_allocated()`) give its
answers, and what it lets pass (`manual_seed`, `empty_cache`) does nothing; what it refuses
(`synchronize()`, `current_device()`, ...) raises `NoDeviceError`, an `AssertionError` as PyTorch's.
"""

from __future__ import annotations

from typing import Any

from .amp import cuda_amp
from .devices import device, no_device


def is_available() -> bool:
    """Whether an accelerator is there: never, verigrad runs on the CPU."""
    return False


def current_accelerator(check_available: bool = False) -> device | None:
    """The accelerator's device type: None, as PyTorch's on a machine without one."""
    return None


def device_count() -> int:
    return 0


def current_device_index() -> int:
    raise no_device("accelerator", "verigrad.accelerator.current_device_index()")


class _Cuda:
    """`verigrad.cuda`: PyTorch's `torch.cuda` on a machine without CUDA."""

    def is_available(self) -> bool:
        return False

    def device_count(self) -> int:
        return 0

    def is_initialized(self) -> bool:
        return False

    def is_bf16_supported(self, including_emulation: bool = True) -> bool:
        return False

    def manual_seed(self, seed: int) -> None:
        """Nothing to seed: there is no CUDA generator (PyTorch's call is harmless without CUDA too)."""

    def manual_seed_all(self, seed: int) -> None:
        """Nothing to seed (as `manual_seed`)."""

    def seed(self) -> None:
        """Nothing to seed (as `manual_seed`)."""

    def seed_all(self) -> None:
        """Nothing to seed (as `manual_seed`)."""

    def empty_cache(self) -> None:
        """Nothing cached: there is no CUDA memory."""

    def memory_allocated(self, device: Any = None) -> int:
        return 0

    def max_memory_allocated(self, device: Any = None) -> int:
        return 0

    def memory_reserved(self, device: Any = None) -> int:
        return 0

    amp = cuda_amp

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Refused(f"verigrad.cuda.{name}")

    def __repr__(self) -> str:
        return "verigrad.cuda (no CUDA: verigrad runs on the CPU)"


class _Refused:
    """Anything else of `torch.cuda`: calling it or reading from it raises `NoDeviceError`."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise no_device("cuda", f"{self._path}()")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise no_device("cuda", f"{self._path}.{name}")


cuda = _Cuda()
