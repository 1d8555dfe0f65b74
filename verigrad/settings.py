"""PyTorch's process-wide switches, as far as they mean something on verigrad, and the environment
variables verigrad reads (`env_count`, `env_flag`, `env_choice`).

verigrad's kernels are deterministic and compute f32 matrix products in f32, so the determinism and
matmul-precision switches are recorded and answered back but change no result. The default dtype is
f32 and the default device the CPU: asking for another is refused rather than ignored.

An environment variable set to what it cannot mean is ignored with a one-line RuntimeWarning naming it,
its value, what it may be and what is used instead (as PyTorch ignores a bad OMP_NUM_THREADS): importing
verigrad never fails for it, and no variable verigrad reads changes a result, only how fast it comes.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from .devices import CPU, as_device, device
from .dtypes import DEFAULT_FLOAT, DType, as_dtype

FLAG_WORDS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def env_text(variable: str) -> str:
    """The environment variable's text, stripped ("" where it is unset)."""
    return os.environ.get(variable, "").strip()


def env_warning(variable: str, text: str, allowed: str, instead: str) -> None:
    """One line on stderr (a RuntimeWarning) saying the variable's text is ignored, and why."""
    warnings.warn_explicit(
        f"{variable}={text!r} is ignored: it must be {allowed}; using {instead}",
        RuntimeWarning,
        "<environment>",
        0,
    )


def env_count(
    variable: str, least: int = 1, most: int | None = None, default: str = "the default"
) -> int | None:
    """The environment variable as a whole number from `least` to `most`; None where it is unset or
    empty, and, with a warning naming `default` as what is used instead, where it is anything else."""
    text = env_text(variable)
    if not text:
        return None
    if text.isascii() and text.isdecimal() and int(text) >= least and (most is None or int(text) <= most):
        return int(text)
    allowed = (
        f"a whole number of at least {least}" if most is None else f"a whole number from {least} to {most}"
    )
    env_warning(variable, text, allowed, default)
    return None


def env_flag(variable: str, default: bool) -> bool:
    """The environment variable as a switch (1, true, yes, on / 0, false, no, off, in any case);
    `default` where it is unset, empty or anything else (with a warning)."""
    text = env_text(variable)
    if not text:
        return default
    if text.lower() in FLAG_WORDS:
        return FLAG_WORDS[text.lower()]
    env_warning(variable, text, "1, true, yes, on, 0, false, no or off", f"{int(default)} (the default)")
    return default


def env_choice(variable: str, choices: tuple[str, ...]) -> str | None:
    """The environment variable as one of `choices` (in any case); None where it is unset, empty or
    anything else (with a warning)."""
    text = env_text(variable)
    if not text:
        return None
    if text.lower() in choices:
        return text.lower()
    env_warning(variable, text, f"one of {', '.join(choices)}", "the default")
    return None


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
