"""PyTorch's automatic mixed precision names: `autocast` and `GradScaler` (`verigrad.amp`, also
`verigrad.autocast` and `verigrad.cuda.amp`).

verigrad computes in f32 and f64. An autocast for a device verigrad does not have is disabled with a
warning, as PyTorch's is on a machine without that device; an enabled autocast on the CPU (which in
PyTorch computes matrix products in bf16 or f16) is refused when it is made, so no result is ever
silently computed in another precision than the program asked for. `GradScaler` on the CPU scales and
unscales as PyTorch's does (loss scaling, skipped steps on infinite gradients, the growth schedule);
for another device it is disabled with a warning, as PyTorch's is.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from .dtypes import as_dtype
from .ops import tensor
from .tensor import Tensor

_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "mtia", "meta", "ipu")
_ENABLED: list[bool] = [False]  # autocast is never on: what `is_autocast_enabled` answers


def _device_type(device_type: Any, where: str) -> str:
    name = str(getattr(device_type, "type", device_type))
    if name not in _DEVICES:
        known = ", ".join(_DEVICES)
        raise RuntimeError(f"{where}: unknown device_type {device_type!r}; expected one of {known}")
    return name


class autocast:
    """`torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`, as a context manager
    or a decorator: disabled for a device other than the CPU (with PyTorch's warning); refused when
    made enabled on the CPU (verigrad does not compute in bf16 or f16)."""

    def __init__(
        self,
        device_type: Any = "cpu",
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        self.device = _device_type(device_type, "autocast")
        self.fast_dtype = as_dtype(dtype) if dtype is not None else None
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be a bool, not {type(enabled).__name__}")
        self.enabled = enabled
        if enabled and self.device != "cpu":
            warnings.warn(
                f"{self.device.upper()} is not available (verigrad runs on the CPU). Disabling autocast.",
                stacklevel=2,
            )
            self.enabled = False
        if self.enabled:  # refused when made, before any work
            wanted = self.fast_dtype.name if self.fast_dtype is not None else "bf16"
            raise NotImplementedError(
                f"autocast on the CPU computes matrix products in {wanted}; verigrad computes in f32 and "
                "f64 only: pass enabled=False (or leave autocast out) to run in f32"
            )

    def __enter__(self) -> autocast:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
        return wrapped


def is_autocast_enabled(device_type: Any = None) -> bool:
    """False: verigrad never computes in a lower precision than asked."""
    return _ENABLED[-1]


def get_autocast_dtype(device_type: Any) -> Any:
    """PyTorch's default autocast dtype for the device (bf16 on the CPU, f16 elsewhere)."""
    from .dtypes import bf16, f16

    return bf16 if _device_type(device_type, "get_autocast_dtype") == "cpu" else f16


class GradScaler:
    """`torch.amp.GradScaler(device="cuda", init_scale=2**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True)`: PyTorch's loss scaling. On the CPU it scales the loss, unscales
    the gradients (multiplying by the scale's reciprocal in f32, as PyTorch's), skips `step` where a
    gradient is infinite or NaN and updates the scale by its schedule; for another device it is disabled
    with PyTorch's warning (then `scale` returns its input and `step` steps)."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        self._device = _device_type(device, "GradScaler")
        if enabled and self._device != "cpu":
            warnings.warn(
                f"torch.amp.GradScaler is enabled, but {self._device.upper()} is not available. Disabling.",
                stacklevel=2,
            )
            enabled = False
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._enabled = enabled
        self._scale = np.float32(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval, self._growth_tracker = int(growth_interval), 0
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    # scaling -------------------------------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """The outputs (a tensor, or tensors in lists, tuples and dicts) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * tensor(np.asarray(self._scale, dtype=np.float32)).cast(outputs.dtype)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        if isinstance(outputs, Iterable):
            return type(outputs)(self.scale(v) for v in outputs)  # type: ignore[call-arg]
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer.setdefault(id(optimizer), {"stage": "ready", "found_inf": False})

    def unscale_(self, optimizer: Any) -> None:
        """Divide the optimizer's gradients by the scale, in place (once between updates)."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == "unscaled":
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if state["stage"] == "stepped":
            raise RuntimeError("unscale_() is being called after step().")
        inverse = np.float32(np.float64(self._scale) ** -1)  # PyTorch: scale.double().reciprocal().float()
        found = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                found = found or not np.isfinite(p.grad.numpy()).all()
                p.grad.mul_(float(inverse))
        state["found_inf"], state["stage"] = found, "unscaled"

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (if not yet) and step the optimizer, unless a gradient is infinite or NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == "stepped":
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == "ready":
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = "stepped"
        return result

    def update(self, new_scale: Any = None) -> None:
        """The scale for the next iteration: backed off after an infinite gradient, grown after
        `growth_interval` steps without one; or `new_scale`."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, Tensor) else new_scale
            self._scale = np.float32(value)
        else:
            found = any(s["found_inf"] for s in self._per_optimizer.values())
            if found:
                self._scale = np.float32(self._scale * np.float32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale = np.float32(self._scale * np.float32(self._growth_factor))
                    self._growth_tracker = 0
        self._per_optimizer.clear()

    # queries and state ---------------------------------------------------------------------------
    def get_scale(self) -> float:
        return float(self._scale) if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {
            "scale": float(self._scale),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled instance "
                "of GradScaler."
            )
        self._scale = np.float32(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


class _CudaAmp:
    """`torch.cuda.amp`: its deprecated `autocast` and `GradScaler`, disabled with PyTorch's warnings."""

    @staticmethod
    def autocast(enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> autocast:
        return autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    @staticmethod
    def GradScaler(*args: Any, **kwargs: Any) -> GradScaler:
        return GradScaler("cuda", *args, **kwargs)


cuda_amp = _CudaAmp()
