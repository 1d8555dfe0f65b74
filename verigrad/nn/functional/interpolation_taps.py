"""F.interpolate's source positions and weights along one axis, as PyTorch's CPU kernels compute them
(ATen's UpSample.h), in NumPy and in the same precisions: the scale and positions in the kernel's
`opmath` type (f32 for f16 and f32 images, f64 for f64), nearest's index in f32 and every floor taken in
f32 (PyTorch's floorf), so indices agree exactly, not only nearly.

Each function returns a list of taps (index array, weight array or None): output position i reads
sum over taps of x[index[i]] * weight[i].
"""

from __future__ import annotations

import numpy as np

Taps = list[tuple[np.ndarray, np.ndarray | None]]
CUBIC_A = -0.75


def _scale(
    n_in: int, n_out: int, align_corners: bool, scale_factor: float | None, opmath: type
) -> np.generic:
    """PyTorch's area_pixel_compute_scale: input steps per output step."""
    if align_corners:
        return opmath(n_in - 1) / opmath(n_out - 1) if n_out > 1 else opmath(0)
    if scale_factor is not None and scale_factor > 0:
        return opmath(1.0 / scale_factor)
    return opmath(n_in) / opmath(n_out)


def nearest(n_in: int, n_out: int, scale_factor: float | None, exact: bool, shortcuts: bool) -> Taps:
    """nearest: min(floor(i * scale), n - 1) in f32; nearest-exact: min(floor((i + 0.5) * scale), n - 1).
    With `shortcuts` (PyTorch's 2-D nearest kernel, nearest_idx) a kept size copies and a doubled one
    halves whatever the scale_factor; its 1-D and 3-D kernels take floor(i * scale) throughout (so a
    scale_factor of 1.1 that keeps the size still moves pixels)."""
    i = np.arange(n_out)
    scale = np.float32(1.0 / scale_factor) if scale_factor else np.float32(n_in) / np.float32(n_out)
    if exact:
        src = np.floor(((i + 0.5) * np.float64(scale)).astype(np.float32))
    elif shortcuts and n_out == n_in:
        src = i
    elif shortcuts and n_out == 2 * n_in:
        src = i >> 1
    else:
        src = np.floor(i.astype(np.float32) * scale)
    return [(np.minimum(src.astype(np.int64), n_in - 1), None)]


def _source(
    n_in: int, n_out: int, align_corners: bool, scale_factor: float | None, opmath: type, cubic: bool
) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's area_pixel_compute_source_index and guard_index_and_lambda: each output's source
    position, as its floor (at most n - 1) and the fraction past it (in [0, 1])."""
    scale = _scale(n_in, n_out, align_corners, scale_factor, opmath)
    i = np.arange(n_out).astype(opmath)
    if align_corners:
        real = scale * i
    else:
        real = scale * (i + opmath(0.5)) - opmath(0.5)
        if not cubic:
            real = np.maximum(real, opmath(0))
    index = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), n_in - 1)
    return index, np.clip(real - index.astype(opmath), opmath(0), opmath(1))


def linear(n_in: int, n_out: int, align_corners: bool, scale_factor: float | None, opmath: type) -> Taps:
    """Two taps: the floor of the source position (weight 1 - t) and the next (weight t); the last
    input repeats at the end. A same size copies."""
    if n_in == n_out:
        return [(np.arange(n_out), None)]
    index, t = _source(n_in, n_out, align_corners, scale_factor, opmath, cubic=False)
    return [(index, opmath(1) - t), (index + (index < n_in - 1), t)]


def cubic(n_in: int, n_out: int, align_corners: bool, scale_factor: float | None, opmath: type) -> Taps:
    """Four taps at floor - 1 .. floor + 2 (clamped into the input) with Keys' cubic weights, A = -0.75."""
    index, t = _source(n_in, n_out, align_corners, scale_factor, opmath, cubic=True)
    a = opmath(CUBIC_A)

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    one = opmath(1)
    weights = (far(t + one), near(t), near(one - t), far(one - t + one))
    return [(np.clip(index - 1 + j, 0, n_in - 1), w) for j, w in enumerate(weights)]


def _aa_filter(x: np.ndarray, cubic: bool, opmath: type) -> np.ndarray:
    """PyTorch's antialiasing filters: the triangle, or Keys' cubic with A = -0.5 (Pillow's)."""
    x = np.abs(x)
    if not cubic:
        return np.where(x < 1, opmath(1) - x, opmath(0))
    a = opmath(-0.5)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, opmath(0)))


def antialiased(
    n_in: int, n_out: int, align_corners: bool, scale_factor: float | None, opmath: type, cubic: bool
) -> Taps:
    """PyTorch's antialiased bilinear / bicubic (_compute_indices_min_size_weights_aa): when shrinking,
    the filter widens by the scale, so each output averages every input it covers; the weights are
    normalised to sum to 1. An axis that keeps its size is copied. A tap past an output's window reads
    index n_in (a zero the caller appends)."""
    if n_in == n_out:
        return [(np.arange(n_out), None)]
    scale = _scale(n_in, n_out, align_corners, scale_factor, opmath)
    half = opmath(2.0 if cubic else 1.0)
    support = half * scale if scale >= 1 else half
    invscale = opmath(1) / scale if scale >= 1 else opmath(1)
    size = int(np.ceil(support)) * 2 + 1
    center = (scale * (np.arange(n_out) + 0.5)).astype(opmath)
    start = np.maximum((center - support + 0.5).astype(np.int64), 0)
    count = np.clip(np.minimum((center + support + 0.5).astype(np.int64), n_in) - start, 0, size)
    j = np.arange(size)
    inside = j[None, :] < count[:, None]
    weights = _aa_filter(
        ((j[None, :] + start[:, None] - center[:, None] + 0.5) * invscale).astype(opmath), cubic, opmath
    )
    weights = np.where(inside, weights, opmath(0))
    total = np.zeros(n_out, dtype=opmath)
    for k in range(size):  # PyTorch's running total, one tap after another
        total = total + weights[:, k]
    weights = np.where(total[:, None] != 0, weights / np.where(total == 0, 1, total)[:, None], weights)
    index = np.where(inside, start[:, None] + j[None, :], n_in)
    return [(index[:, k], weights[:, k].astype(opmath)) for k in range(size)]


def linear_u8(
    n_in: int, n_out: int, align_corners: bool, scale_factor: float | None
) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
    """bilinear's taps for a u8 image as PyTorch's separable uint8 kernel takes them: each output's window
    of inputs (the triangle filter at its centre, cut to the input and normalised), its weights as int16
    fixed-point numbers with `precision` fraction bits (the most that keep the largest below 2^15), then
    (taps with integer weights, precision); a window shorter than the longest has weight 0 past its end."""
    scale = float(_scale(n_in, n_out, align_corners, scale_factor, np.float64))
    delta = 0.5 if align_corners else 0.0
    windows = []
    for i in range(n_out):
        centre = scale * (i + 0.5 - delta)
        low = max(int(centre - 1.0 + 0.5 + delta), 0)
        size = min(int(centre + 1.0 + 0.5 + delta), n_in) - low
        w = np.maximum(1 - np.abs(np.arange(size) + low - centre + 0.5 - delta), 0.0)
        windows.append((low, w / w.sum() if w.sum() else w))
    largest = max(float(w.max(initial=0.0)) for _, w in windows)
    precision = 0
    while precision < 15 and int(0.5 + largest * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    width = max(len(w) for _, w in windows)
    taps = []
    for j in range(width):
        index = np.array([min(low + j, n_in - 1) for low, _ in windows], np.int64)
        fixed = [w[j] * (1 << precision) if j < len(w) else 0.0 for _, w in windows]
        taps.append((index, np.array([int(v - 0.5) if v < 0 else int(v + 0.5) for v in fixed], np.int64)))
    return taps, precision
