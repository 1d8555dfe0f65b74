"""Images resampled, as PyTorch's: `interpolate` (nearest, nearest-exact, (bi/tri)linear, bicubic, area),
`affine_grid` (the sampling positions an affine map gives) and `grid_sample` (an image or a volume read
at positions in [-1, 1]: bilinear, nearest or bicubic, with zeros, border or reflection padding),
written with gathers and weights, so they differentiate in the image and in the grid. NCHW unless a
`layout` says otherwise.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np

from ... import functions, ops
from ...errors import ShapeError
from ...ops._op import floating_only
from ...shapes import shape_text
from ...tensor import Tensor
from . import interpolation_taps
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def _base(size: int, align_corners: bool) -> np.ndarray:
    """The normalised coordinates of `size` pixel centres (align_corners: of the corner pixels' centres)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
    return (2 * np.arange(size) + 1) / size - 1


def _default_align_corners(align_corners: bool | None) -> bool:
    """align_corners, False where not given, with PyTorch's warning of that default."""
    if align_corners is not None:
        return align_corners
    warnings.warn(
        "Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. Please "
        "specify align_corners=True if the old behavior is desired. See the documentation of grid_sample for "
        "details.",
        UserWarning,
        stacklevel=3,
    )
    return False


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """For theta [N, 2, 3] and size (N, C, H, W): grid[n, h, w] = theta[n] @ (x_w, y_h, 1), the sampling
    position of each output pixel, [N, H, W, 2] (x first)."""
    align_corners = _default_align_corners(align_corners)
    floating_only(theta.dtype, what="affine_grid")
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ShapeError(f"affine_grid takes theta [N, 2, 3], got {shape_text(theta.shape)}")
    n, _, h, w = size
    xs, ys = _base(w, align_corners), _base(h, align_corners)
    points = np.stack(
        [np.broadcast_to(xs, (h, w)), np.broadcast_to(ys[:, None], (h, w)), np.ones((h, w))], -1
    )
    base = ops.tensor(points.reshape(1, h * w, 3)).cast(theta.dtype)
    return (base @ theta.transpose(1, 2)).reshape(n, h, w, 2)


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """x reflected into [twice_low / 2, twice_high / 2] (PyTorch's reflect_coordinates)."""
    if twice_low == twice_high:
        return x * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    x = (x - low).abs()
    flips = (x / span).floor()
    extra = ops.fmod(x, span)
    return ops.where(ops.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _padded(x: Tensor, size: int, align_corners: bool, padding_mode: str) -> Tensor:
    """A pixel position padded as `padding_mode` says (zeros: as it is; PyTorch's compute_coordinates)."""
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
    if padding_mode in ("border", "reflection"):
        x = functions.clamp(x, 0, size - 1)
    return x


def _unnormalized(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    """A normalised coordinate in [-1, 1] as a pixel position (PyTorch's grid_sampler_unnormalize)."""
    return (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2


def _pixel(coord: Tensor, size: int, align_corners: bool, padding_mode: str) -> Tensor:
    """A normalised coordinate as a pixel position, padded as `padding_mode` says (zeros: as it is)."""
    return _padded(_unnormalized(coord, size, align_corners), size, align_corners, padding_mode)


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """Keys' cubic weights (A = -0.75) of the taps at floor - 1 .. floor + 2 for the fraction t (PyTorch's
    get_cubic_upsample_coefficients)."""
    a = interpolation_taps.CUBIC_A

    def near(x: Tensor) -> Tensor:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: Tensor) -> Tensor:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """input [N, C, H, W] read at grid [N, Ho, Wo, 2] (x, y in [-1, 1]): [N, C, Ho, Wo]; or a volume
    [N, C, D, H, W] at grid [N, Do, Ho, Wo, 3] (x, y, z). Bilinear weighs the 2^k nearest pixels (trilinear
    for a volume), nearest takes the closest (halves to even), bicubic (images only) the 4 x 4 nearest with
    Keys' weights (A = -0.75), each tap padded on its own; a pixel outside the image reads 0 (zeros), the
    edge (border) or its mirror image (reflection), as PyTorch's."""
    align_corners = _default_align_corners(align_corners)
    floating_only(input.dtype, grid.dtype, what="grid_sample")
    if mode not in MODES or padding_mode not in PADDINGS:
        raise ValueError(
            f"grid_sample: mode must be one of {MODES} and padding_mode one of {PADDINGS}, got {mode!r} "
            f"and {padding_mode!r}"
        )
    k = input.ndim - 2
    if k not in (2, 3) or grid.ndim != k + 2 or grid.shape[-1] != k or grid.shape[0] != input.shape[0]:
        raise ShapeError(
            "grid_sample takes input [N, C, H, W] and grid [N, Ho, Wo, 2], or [N, C, D, H, W] and "
            f"[N, Do, Ho, Wo, 3], got {shape_text(input.shape)} and {shape_text(grid.shape)}"
        )
    if mode == "bicubic" and k != 2:
        raise ShapeError(
            "grid_sample: bicubic takes a 4-D input [N, C, H, W] (as PyTorch's), got "
            f"{shape_text(input.shape)}"
        )
    n, c, sizes = input.shape[0], input.shape[1], tuple(input.shape[2:])
    out_shape = (n, c, *grid.shape[1:-1])
    # the grid's last entry is the position along the last axis (x along W), its first along the first
    coords = [grid[..., k - 1 - axis].reshape(n, 1, -1) for axis in range(k)]  # each [N, 1, P]
    strides = [math.prod(sizes[axis + 1 :]) for axis in range(k)]
    flat = input.reshape(n, c, math.prod(sizes))

    def read(at: list[Tensor]) -> Tensor:
        """input at integer positions (as floats), one per axis; 0 outside the input."""
        inside, index = None, None
        for p, size, stride in zip(at, sizes, strides):
            ok = (p >= 0) & (p <= size - 1)
            inside = ok if inside is None else inside & ok
            term = functions.clamp(p, 0, size - 1) * stride
            index = term if index is None else index + term
        index = index.cast("i64")
        values = ops.gather(flat, index.expand(n, c, index.shape[2]), axis=2)
        return ops.where(inside, values, 0.0)

    if mode == "bicubic":
        (y, x), (h, w) = [_unnormalized(p, size, align_corners) for p, size in zip(coords, sizes)], sizes
        x0, y0 = x.floor().detach(), y.floor().detach()
        wx, wy = _cubic_weights(x - x0), _cubic_weights(y - y0)

        def tap(p: Tensor, size: int) -> Tensor:
            return _padded(p, size, align_corners, padding_mode)

        out = None
        for i in range(4):
            row = tap(y0 + (i - 1), h)
            line = None
            for j in range(4):
                term = read([row, tap(x0 + (j - 1), w)]) * wx[j]
                line = term if line is None else line + term
            out = line * wy[i] if out is None else out + line * wy[i]
        return out.reshape(out_shape)
    pos = [_pixel(p, size, align_corners, padding_mode) for p, size in zip(coords, sizes)]
    if mode == "nearest":
        return read([p.round().detach() for p in pos]).reshape(out_shape)
    low = [p.floor().detach() for p in pos]
    frac = [p - p0 for p, p0 in zip(pos, low)]

    def blend(axis: int, at: list[Tensor]) -> Tensor:
        """Linear interpolation along `axis` and the axes after it (the last first), at `at` before it."""
        if axis == k:
            return read(at)
        below, above = blend(axis + 1, [*at, low[axis]]), blend(axis + 1, [*at, low[axis] + 1])
        return below * (1 - frac[axis]) + above * frac[axis]

    return blend(0, []).reshape(out_shape)


INTERPOLATE_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_SPATIAL = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}  # the modes of one rank


def interpolate(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
    *,
    layout: str = "NCHW",
) -> Tensor:
    """PyTorch's F.interpolate of [N, C, *spatial] (1 to 3 spatial axes; a 4-D NHWC image with
    `layout`): to `size`, or to floor(n * scale_factor) reading at 1 / scale_factor steps (unless
    recompute_scale_factor, which steps by n / size). Modes: nearest (PyTorch's floor(i * scale)),
    nearest-exact, linear / bilinear / trilinear and bicubic (A = -0.75, clamped at the border; both
    with align_corners), area (adaptive average pooling); antialias (bilinear, bicubic) widens the filter
    when shrinking, as PyTorch's (and Pillow's). Each axis in turn, last first, as gathers and weights, so
    it differentiates."""
    if layout == "NHWC":
        if input.ndim != 4:
            raise ShapeError(f"interpolate: layout 'NHWC' takes a 4-D image, got {shape_text(input.shape)}")
        args = (size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
        return interpolate(input.permute(0, 3, 1, 2), *args).permute(0, 2, 3, 1)
    if layout != "NCHW":
        raise ValueError(f"interpolate: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    sizes, scales = _output_sizes(input, size, scale_factor, mode, align_corners, recompute_scale_factor)
    if antialias and (mode not in ("bilinear", "bicubic") or input.ndim != 4):
        raise ValueError(
            "interpolate: anti-alias option is restricted to bilinear and bicubic modes and requires "
            "a 4-D tensor as input"
        )
    dims = input.ndim - 2
    if mode in _SPATIAL and _SPATIAL[mode] != dims:
        raise NotImplementedError(
            f"interpolate: got {input.ndim}D input, but {mode} mode needs {_SPATIAL[mode] + 2}D input"
        )
    if mode == "area":
        return _area(input, sizes)
    if input.dtype.name == "u8" and mode == "bilinear" and not antialias:
        x = input
        for axis in (3, 2):
            taps, precision = interpolation_taps.linear_u8(
                input.shape[axis], sizes[axis - 2], bool(align_corners), scales[axis - 2]
            )
            x = _resample_axis_u8(x, axis, taps, precision)
        return x
    if input.dtype.name == "u8" and mode in ("bicubic", "bilinear"):
        raise NotImplementedError(
            f"interpolate: mode {mode!r}{' with antialias' if antialias else ''} of a u8 tensor is not "
            "implemented (PyTorch's uint8 kernel rounds its own way); cast the image to a float dtype"
        )
    if not input.dtype.is_float and (mode not in ("nearest", "nearest-exact") or input.dtype.name != "u8"):
        allowed = "a float or u8 tensor" if mode.startswith("nearest") else "a float tensor"
        raise TypeError(f"interpolate: mode {mode!r} takes {allowed} (as PyTorch), got {input.dtype.name}")
    opmath = np.float64 if input.dtype.name == "f64" else np.float32
    x = input
    for axis in reversed(range(2, input.ndim)):
        n, out, scale = input.shape[axis], sizes[axis - 2], scales[axis - 2]
        if mode in ("nearest", "nearest-exact"):
            exact = mode == "nearest-exact"
            taps = interpolation_taps.nearest(n, out, scale, exact, shortcuts=dims == 2 and not exact)
        elif antialias:
            taps = interpolation_taps.antialiased(
                n, out, bool(align_corners), scale, opmath, mode == "bicubic"
            )
        elif mode == "bicubic":
            taps = interpolation_taps.cubic(n, out, bool(align_corners), scale, opmath)
        else:
            taps = interpolation_taps.linear(n, out, bool(align_corners), scale, opmath)
        x = _resample_axis(x, axis, taps)
    return x


def _output_sizes(
    x: Tensor, size: Any, scale_factor: Any, mode: str, align_corners: Any, recompute: Any
) -> tuple[list[int], list[float | None]]:
    """The output's spatial sizes and the scale factor each axis steps by (None: in / out), checked as
    PyTorch checks them."""
    if mode not in INTERPOLATE_MODES:
        raise NotImplementedError(
            f"interpolate: mode must be one of {', '.join(INTERPOLATE_MODES)}, got {mode!r}"
        )
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError(
            "interpolate: align_corners option can only be set with the interpolating modes: "
            "linear | bilinear | bicubic | trilinear"
        )
    if x.ndim not in (3, 4, 5):
        raise NotImplementedError(
            f"interpolate: only 3-D, 4-D and 5-D inputs are supported (got {x.ndim}-D) for mode {mode!r}"
        )
    dims, spatial = x.ndim - 2, tuple(x.shape[2:])
    if not all(isinstance(n, int) for n in spatial):
        raise ShapeError(f"interpolate needs concrete spatial sizes, got {shape_text(x.shape)}")
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if recompute and size is not None:
        raise ValueError("interpolate: recompute_scale_factor is not meaningful with an explicit size")
    given, what = (size, "output size") if size is not None else (scale_factor, "scale_factor")
    values = list(given) if isinstance(given, tuple | list) else [given] * dims
    if len(values) != dims:
        raise ValueError(
            f"interpolate: input and output must have the same number of spatial dimensions, but got input "
            f"with spatial dimensions of {list(spatial)} and {what} of {given!r}"
        )
    if size is not None:
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
            raise TypeError(f"interpolate: size must be ints, got {size!r}")
        sizes, scales = [int(v) for v in values], [None] * dims
    else:
        if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
            raise TypeError(f"interpolate: scale_factor must be numbers, got {scale_factor!r}")
        sizes = [math.floor(float(n) * float(f)) for n, f in zip(spatial, values)]
        scales = [None] * dims if recompute or mode == "area" else [float(f) for f in values]
    if any(n <= 0 for n in spatial) or any(
        o < (0 if mode == "area" else 1) for o in sizes
    ):  # area: empty too
        raise ValueError(
            f"interpolate: input and output sizes should be greater than 0, but got input {list(spatial)} "
            f"and output {sizes}"
        )
    return sizes, scales


def _resample_axis(x: Tensor, axis: int, taps: interpolation_taps.Taps) -> Tensor:
    """sum over taps of x[index] * weight along `axis` (one tap without a weight: a gather)."""
    shape = [1] * x.ndim
    shape[axis] = -1
    if any((index >= x.shape[axis]).any() for index, _ in taps):  # taps past a window read a zero
        zero = ops.zeros(*[1 if a == axis else d for a, d in enumerate(x.shape)], dtype=x.dtype)
        x = ops.concat([x, zero], axis=axis)
    out = None
    for index, weight in taps:
        term = ops.take(x, ops.from_numpy(index.astype(np.int64)), axis=axis)
        if weight is not None:
            term = term * ops.from_numpy(weight.reshape(shape)).cast(x.dtype)
        out = term if out is None else out + term
    return out


def _resample_axis_u8(
    x: Tensor, axis: int, taps: list[tuple[np.ndarray, np.ndarray]], precision: int
) -> Tensor:
    """A u8 image along `axis` as PyTorch's uint8 kernel: sum over taps of x[index] * weight in integers
    (weights with `precision` fraction bits), rounded half up by the shift and clamped to [0, 255]."""
    shape = [1] * x.ndim
    shape[axis] = -1
    wide = x.cast("i64")
    out = ops.full((), 1 << (precision - 1), dtype="i64") if precision else ops.full((), 0, dtype="i64")
    for index, weight in taps:
        out = out + ops.take(wide, ops.from_numpy(index), axis=axis) * ops.from_numpy(weight.reshape(shape))
    return functions.clamp(out >> precision, 0, 255).cast("u8")


def _area(x: Tensor, sizes: list[int]) -> Tensor:
    """area: PyTorch's adaptive average pooling to the output size."""
    pool = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d, 3: adaptive_avg_pool3d}[x.ndim - 2]
    return pool(x, tuple(sizes))


def upsample(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: Any = None,
) -> Tensor:
    """PyTorch's deprecated name for interpolate."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """PyTorch's deprecated nearest upsampling: interpolate(mode="nearest")."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """PyTorch's deprecated bilinear upsampling: interpolate(mode="bilinear", align_corners=True)."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
