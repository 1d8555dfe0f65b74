"""Rules the composite ops share: float-only dtypes, int-or-pair window params, window output sizes
(PyTorch's pooled lengths with ceil_mode too)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ...dtypes import DType, promote
from ...errors import DTypeError, ShapeError
from ...shapes import DimLike, shape_text

LAYOUTS = ("NCHW", "NHWC")


def float_inputs(*dtypes: DType, what: str = "inputs") -> DType:
    """The promoted dtype of float operands; ints, bool and bf16 are refused."""
    for d in dtypes:
        if not d.is_float or d.name == "bf16":
            hint = "call .float() first" if d.name == "bf16" else "cast it to a float dtype first"
            raise DTypeError(f"the {what} must be f16, f32 or f64, got {d.name}; {hint}")
    return promote(*dtypes)


def pair(value: Any, what: str, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints as a pair, each at least `minimum`."""
    items = (value, value) if isinstance(value, int) else value if isinstance(value, list | tuple) else ()
    if len(items) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ShapeError(f"{what} must be an int or a pair of ints, got {value!r}")
    if any(v < minimum for v in items):
        raise ShapeError(f"{what} must be at least {minimum}, got {value!r}")
    return tuple(items)  # type: ignore[return-value]


def layout_param(layout: str) -> str:
    if layout not in LAYOUTS:
        raise ShapeError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}")
    return layout


def window_out(size: DimLike, kernel: int, stride: int, padding: int, dilation: int, axis: str) -> DimLike:
    """PyTorch's output size (size + 2p - d*(k-1) - 1) // s + 1.

    For a symbolic size the constant is first reduced modulo s, so ``(H-2)//2 + 1`` is written ``H//2``
    and equal windows give equal dims.
    """
    reach = dilation * (kernel - 1) + 1
    span = size + 2 * padding - reach
    if isinstance(span, int):
        if span < 0:
            raise ShapeError(
                f"the window covers {reach} positions (kernel {kernel}, dilation {dilation}) but the "
                f"padded {axis} is only {size} + 2*{padding}"
            )
        return span // stride + 1
    const = sum((c for m, c in span.terms if not m), Fraction(0))
    if const.denominator != 1:
        return span // stride + 1
    whole = (int(const) // stride) * stride  # span = rest + whole with 0 <= rest's constant < stride
    return (span - whole) // stride + whole // stride + 1


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's pooled length: with ceil_mode a last partial window, if it starts inside the input or
    its left padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    if out <= 0:
        raise ShapeError(
            f"pooling a length {size} with a window of {kernel} (padding {padding}) leaves nothing"
        )
    return out


def spatial(shape: tuple, layout: str) -> tuple[DimLike, DimLike, DimLike, DimLike]:
    """(N, C, H, W) of a 4-D image shape in either layout."""
    if len(shape) != 4:
        raise ShapeError(f"expected a 4-D {layout} image batch, got {shape_text(shape)}")
    n, a, b, c = shape
    return (n, a, b, c) if layout == "NCHW" else (n, c, a, b)
