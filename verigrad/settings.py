"""PyTorch's process-wide switches, as far as they mean something on verigrad.

verigrad's kernels are deterministic and compute f32 matrix products in f32, so the determinism and
matmul-precision switches are recorded and answered back but change no result. The default dtype is
f32 and the default device the CPU: asking for another is refused rather than ignored.
"""

from __future__ import annotations

import warnings
from typing import Any

from .devices import CPU, as_device, device
from .dtypes import DEFAULT_FLOAT, DType, as_dtype

_state: dict[str, Any] = {"deterministic": False, "warn_only": False, "matmul_precision": "highest"}

# what `set_printoptions` set (NumPy's names too); a tensor's repr passes them to `np.array2string`
PRINT_OPTIONS: dict[str, Any] = {}
_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "max_line_width": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "max_line_width": 80},
    "full": {"precision": 4, "threshold": 2**63 - 1, "edgeitems": 3, "max_line_width": 80},
}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """PyTorch's switch: recorded only, as every verigrad kernel is deterministic already."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(mode): mode must be a bool, not {type(mode).__name__}")
    _state["deterministic"], _state["warn_only"] = mode, bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether use_deterministic_algorithms(True) was set (verigrad's kernels are deterministic anyway)."""
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether use_deterministic_algorithms was set with warn_only=True."""
    return _state["warn_only"]


def set_float32_matmul_precision(precision: str) -> None:
    """PyTorch's switch ("highest", "high", "medium"): recorded only, f32 products are computed in f32.
    Another value is warned of and changes nothing, as PyTorch's."""
    if precision not in ("highest", "high", "medium"):
        warnings.warn(
            f"set_float32_matmul_precision: {precision!r} is not 'highest', 'high' or 'medium'; ignored",
            stacklevel=2,
        )
        return
    _state["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    """The f32 matmul precision set (verigrad computes f32 products in f32 whatever it is)."""
    return _state["matmul_precision"]


def get_default_dtype() -> DType:
    """The dtype of float tensors made from Python numbers: f32."""
    return DEFAULT_FLOAT


def set_default_dtype(dtype: DType | str) -> None:
    """Only f32, verigrad's default, is accepted: another default is refused rather than ignored."""
    d = as_dtype(dtype)
    if not d.is_float:
        raise TypeError(f"set_default_dtype: only floating dtypes can be the default, not {d.name}")
    if d is not DEFAULT_FLOAT:
        raise NotImplementedError(
            f"set_default_dtype({d.name}): verigrad's default dtype is always {DEFAULT_FLOAT.name}; "
            f"pass dtype={d.name} to the factories and convert modules with .to({d.name}) instead"
        )


def get_default_device() -> device:
    """The device tensors are made on: the CPU."""
    return CPU


def set_default_device(dev: Any) -> None:
    """Only the CPU (or None) is accepted: verigrad has no other device."""
    as_device(dev, "set_default_device")


def set_printoptions(
    precision: int | None = None,
    threshold: int | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """PyTorch's print options for a tensor's repr: precision, threshold, edgeitems, linewidth, profile.

    `sci_mode` is accepted; NumPy chooses between fixed and scientific notation itself.
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, not {profile!r}")
        PRINT_OPTIONS.update(_PROFILES[profile])
    given = {"precision": precision, "threshold": threshold, "edgeitems": edgeitems, "linewidth": linewidth}
    for key, value in given.items():
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"set_printoptions: {key} must be a whole number >= 0, not {value!r}")
            PRINT_OPTIONS["max_line_width" if key == "linewidth" else key] = value
