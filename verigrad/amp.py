"""`verigrad.amp` (`autocast`, `GradScaler`), as torch.amp on a machine without an accelerator: asked for
CUDA, PyTorch warns and disables them, and so does verigrad; disabled (enabled=False), they change
nothing. Mixed precision on the CPU (autocast to bfloat16, a gradient scaler that is enabled) is refused:
verigrad computes in the dtypes it is given."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

from .devices import DEVICE_TYPES


def _enabled(what: str, device_type: str, enabled: bool) -> bool:
    """Whether `what` on `device_type` would change the computation: False where PyTorch disables it."""
    if not isinstance(device_type, str) or device_type.partition(":")[0] not in DEVICE_TYPES:
        raise ValueError(f"{what}: device_type must be a device type as 'cpu' or 'cuda', got {device_type!r}")
    if not enabled:
        return False
    if device_type.partition(":")[0] != "cpu":
        warnings.warn(
            f"{what}: device_type {device_type!r} was asked for, but verigrad runs on the CPU. Disabling",
            stacklevel=3,
        )
        return False
    return True


class autocast(contextlib.ContextDecorator):
    """autocast(device_type, dtype=None, enabled=True, cache_enabled=None), as a block or a decorator:
    a no-op where PyTorch's is (disabled, or for a device verigrad does not have, with PyTorch's warning);
    NotImplementedError for autocasting on the CPU."""

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True, cache_enabled: Any = None):
        if _enabled("autocast", device_type, enabled):
            raise NotImplementedError(
                "autocast: automatic mixed precision on the CPU is not supported: verigrad computes in the "
                "dtypes it is given (cast the model and inputs with .to(dtype), or pass enabled=False)"
            )
        self.device, self.fast_dtype, self._enabled = device_type, dtype, False

    def __enter__(self) -> autocast:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class GradScaler:
    """GradScaler(device='cuda', init_scale=2.0**16, ..., enabled=True) where PyTorch's is disabled
    (enabled=False, or CUDA asked for on a machine without it, with PyTorch's warning): scale() returns
    its argument, step() calls the optimizer's, the scale reads 1.0. Enabled on the CPU:
    NotImplementedError."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        if _enabled("GradScaler", device, enabled):
            raise NotImplementedError(
                "GradScaler: gradient scaling on the CPU is not supported (f32 and f64 gradients need none; "
                "pass enabled=False)"
            )
        self._device, self._enabled = device, False

    def is_enabled(self) -> bool:
        return False

    def scale(self, outputs: Any) -> Any:
        return outputs

    def unscale_(self, optimizer: Any) -> None:
        return None

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        return None

    def get_scale(self) -> float:
        return 1.0

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        return None


class _CudaAmp:
    """`verigrad.cuda.amp`: PyTorch's deprecated torch.cuda.amp.autocast and GradScaler, whose device is
    CUDA (disabled here with PyTorch's warning)."""

    @staticmethod
    def autocast(enabled: bool = True, dtype: Any = None, cache_enabled: Any = None) -> autocast:
        return autocast("cuda", dtype, enabled, cache_enabled)

    @staticmethod
    def GradScaler(*args: Any, **kwargs: Any) -> GradScaler:
        return GradScaler("cuda", *args, **kwargs)


cuda_amp = _CudaAmp()
