"""Pooling, as in `torch.nn.functional`: max and average pooling in 1-D, 2-D and 3-D, adaptive pooling,
lp pooling and max_unpool2d. Plain 2-D float windows run the pooling ops; PyTorch's further options run
`pooling_options`, and 3-D, adaptive and integer pooling the gathered windows of `pooling_windows`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import ops
from ...dtypes import i64
from ...shapes import shape_text
from ...tensor import Tensor
from . import pooling_options, pooling_windows
from ._windows import IntPair, as_2d, pair_1d, sizes_nd, unbatched


def max_pool2d(
    input: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
    layout: str = "NCHW",
) -> Any:
    """Window maxima (stride defaults to the kernel size; -inf padding); gradients go to each window's
    first maximum. ceil_mode keeps a last partial window; return_indices also gives each maximum's flat
    index h W + w (NCHW), for max_unpool2d; these and integer images (their dtype kept, as PyTorch's)
    take the gathered windows, where a window holding NaN gives its last NaN as PyTorch's."""
    if input.ndim == 3:
        return unbatched(
            max_pool2d, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, layout
        )
    if ceil_mode or return_indices or not (input.dtype.is_float or input.dtype.name == "bool"):
        _nchw_only(layout, "max_pool2d with ceil_mode, return_indices or an integer image")
        return _max_pool_nd(
            input, 2, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool2d"
        )
    window = {"kernel": kernel_size, "stride": stride, "padding": padding, "dilation": dilation}
    return ops.max_pool2d(input, **window, layout=layout)


def avg_pool2d(
    input: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
    layout: str = "NCHW",
) -> Tensor:
    """Window means, zero padding counted in the divisor (count_include_pad; else only the input's
    elements), or divided by divisor_override; ceil_mode keeps a last partial window (NCHW)."""
    if input.ndim == 3:
        return unbatched(
            avg_pool2d,
            input,
            kernel_size,
            stride,
            padding,
            ceil_mode,
            count_include_pad,
            divisor_override,
            layout,
        )
    if not input.dtype.is_float:
        _nchw_only(layout, "avg_pool2d of integers")
        options = (ceil_mode, count_include_pad, divisor_override)
        return _avg_pool_nd(input, 2, kernel_size, stride, padding, *options, "avg_pool2d")
    kernel_size, stride, padding, _ = _window_sizes(2, kernel_size, stride, padding, 1, "avg_pool2d")
    if ceil_mode or not count_include_pad or divisor_override is not None:
        _nchw_only(layout, "avg_pool2d with ceil_mode, count_include_pad=False or divisor_override")
        return pooling_options.avg_pool2d(
            input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
        )
    return ops.avg_pool2d(input, kernel=kernel_size, stride=stride, padding=padding, layout=layout)


def max_pool1d(
    input: Tensor,
    kernel_size: int,
    stride: int | None = None,
    padding: int = 0,
    dilation: int = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Window maxima of [N, C, L]: max_pool2d over [N, C, 1, L] (indices are positions along L)."""
    if input.ndim == 2:
        return unbatched(max_pool1d, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
    if not input.dtype.is_float and not return_indices:
        raise TypeError(
            f"max_pool1d of {input.dtype.name} needs return_indices=True (PyTorch has no other kernel)"
        )
    options = (pair_1d(dilation, 1), ceil_mode, return_indices)
    out = max_pool2d(
        ops.unsqueeze(input, 2), pair_1d(kernel_size, 1), pair_1d(stride, 1), pair_1d(padding, 0), *options
    )
    return (out[0].squeeze(2), out[1].squeeze(2)) if return_indices else out.squeeze(2)


def avg_pool1d(
    input: Tensor,
    kernel_size: int,
    stride: int | None = None,
    padding: int = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Window means of [N, C, L] (zero padding counted in the divisor unless count_include_pad=False)."""
    if input.ndim == 2:
        return unbatched(avg_pool1d, input, kernel_size, stride, padding, ceil_mode, count_include_pad)
    window = (pair_1d(kernel_size, 1), pair_1d(stride, 1), pair_1d(padding, 0))
    return as_2d(avg_pool2d, input, *window, ceil_mode, count_include_pad)


def _window_sizes(
    nd: int, kernel: Any, stride: Any, padding: Any, dilation: Any, what: str
) -> tuple[tuple[int, ...], ...]:
    """PyTorch's kernel, stride (default: the kernel), padding (at most half the kernel) and dilation,
    nd ints each."""
    k = sizes_nd(kernel, nd, f"{what}'s kernel_size", 1)
    empty = isinstance(stride, list | tuple) and not stride  # PyTorch's default too
    s = k if stride is None or empty else sizes_nd(stride, nd, f"{what}'s stride", 1)
    p, d = sizes_nd(padding, nd, f"{what}'s padding", 0), sizes_nd(dilation, nd, f"{what}'s dilation", 1)
    if any(2 * p[i] > k[i] for i in range(nd)):
        raise ValueError(f"{what}: padding {p} must be at most half the kernel_size {k}")
    return k, s, p, d


def _regular_axes(
    x: Tensor, sizes: tuple[tuple[int, ...], ...], ceil_mode: bool, what: str
) -> list[np.ndarray]:
    """Each spatial axis's window table for the window `sizes` (_window_sizes) and ceil_mode."""
    k, s, p, d = sizes
    nd = len(k)
    pooling_windows.check_input(x, nd, what)
    axes = []
    for i, n in enumerate(x.shape[-nd:]):
        out = pooling_options.out_size(n, k[i], s[i], p[i], d[i], ceil_mode)
        axes.append(pooling_windows.regular_axis(n, out, k[i], s[i], p[i], d[i]))
    return axes


def _max_pool_nd(
    x: Tensor,
    nd: int,
    kernel: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    indices: bool,
    what: str,
) -> Any:
    axes = _regular_axes(x, _window_sizes(nd, kernel, stride, padding, dilation, what), ceil_mode, what)
    return pooling_windows.max_pool(x, axes, what, indices)


def max_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Window maxima of [N, C, D, H, W] (or [C, D, H, W]); the gradient goes to each window's first maximum,
    whose flat index d H W + h W + w return_indices gives."""
    return _max_pool_nd(
        input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool3d"
    )


def avg_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Window means of [N, C, D, H, W] (or [C, D, H, W]) with PyTorch's divisors: the window clipped to
    the padded input (count_include_pad), or to the input, or `divisor_override`."""
    options = (ceil_mode, count_include_pad, divisor_override)
    return _avg_pool_nd(input, 3, kernel_size, stride, padding, *options, "avg_pool3d")


def _avg_pool_nd(
    x: Tensor,
    nd: int,
    kernel: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
    what: str,
) -> Tensor:
    """Average pooling over `nd` axes by gathered windows, each summed in window order (PyTorch's running
    sum); an i64 input's sums (wrapping) divided by truncation toward zero, as PyTorch's integer kernel
    (which has no other integer dtype)."""
    if x.dtype.kind in "iub" and x.dtype is not i64:
        raise TypeError(f"{what} of {x.dtype.name}: PyTorch has a kernel for float and i64 inputs only")
    sizes = _window_sizes(nd, kernel, stride, padding, 1, what)
    axes = _regular_axes(x, sizes, ceil_mode, what)
    spatial = tuple(x.shape[-nd:])
    if nd == 3 and any(isinstance(n, int) and n < k for n, k in zip(spatial, sizes[0])):
        # PyTorch's avg_pool3d checks the unpadded input against the kernel (its 1-D and 2-D do not)
        raise ValueError(
            f"{what}: input image {shape_text(spatial)} smaller than kernel size {shape_text(sizes[0])}"
        )
    sums = pooling_windows.sum_pool(x, axes, what)
    if divisor_override is not None:
        divisor = np.full((1,) * nd, pooling_options.checked_divisor(divisor_override, what))
    else:
        (k, s, p, _), divisor = sizes, np.ones((1,) * nd, np.int64)
        for i, (n, table) in enumerate(zip(x.shape[-nd:], axes)):
            count = pooling_options.window_counts(n, table.shape[0], k[i], s[i], p[i], count_include_pad)
            divisor = divisor * count.reshape([-1 if a == i else 1 for a in range(nd)])
    if x.dtype is i64:
        return ops.div_trunc(sums, ops.from_numpy(divisor.astype(np.int64)))
    return sums / ops.from_numpy(divisor.astype(np.float64)).cast(x.dtype)


def _adaptive_axes(x: Tensor, nd: int, output_size: Any, what: str) -> list[np.ndarray]:
    """Each spatial axis's adaptive windows for `output_size` (an int, or one per axis; None keeps the
    input's size)."""
    pooling_windows.check_input(x, nd, what)
    sizes = tuple(output_size) if isinstance(output_size, tuple | list) else (output_size,) * nd
    if len(sizes) != nd:
        raise ValueError(f"{what}: output_size must be an int or {nd} sizes, got {output_size!r}")
    sizes = tuple(n if o is None else o for n, o in zip(x.shape[-nd:], sizes))
    if not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in sizes):
        raise ValueError(f"{what}: output_size must be ints of at least 0 (or None), got {output_size!r}")
    return [pooling_windows.adaptive_axis(n, o) for n, o in zip(x.shape[-nd:], sizes)]


def _adaptive_avg(x: Tensor, nd: int, output_size: Any, what: str) -> Tensor:
    _float_only(x, what)
    axes = _adaptive_axes(x, nd, output_size, what)
    counts = ops.from_numpy(pooling_windows.adaptive_counts(axes)).cast(x.dtype)
    return pooling_windows.sum_pool(x, axes, what) / counts


def _adaptive_max(x: Tensor, nd: int, output_size: Any, return_indices: bool, what: str) -> Any:
    _float_only(x, what)
    return pooling_windows.max_pool(x, _adaptive_axes(x, nd, output_size, what), what, return_indices)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Means over PyTorch's adaptive windows of [N, C, L] (or [C, L])."""
    return _adaptive_avg(input, 1, output_size, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Tensor, output_size: Any, layout: str = "NCHW") -> Tensor:
    """Means over PyTorch's adaptive windows for an output_size grid (1 x 1: the global mean, any size;
    sizes that divide the input's: equal windows, one pooling call; others: the gathered windows)."""
    out_h, out_w = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    h, w = input.shape[-2:] if layout == "NCHW" else input.shape[1:3]
    out_h, out_w = (h if out_h is None else out_h), (w if out_w is None else out_w)
    if input.ndim == 4 and (out_h, out_w) == (1, 1):
        return input.mean((2, 3) if layout == "NCHW" else (1, 2), keepdim=True)
    if input.ndim == 4 and all(
        isinstance(d, int) and isinstance(o, int) and o > 0 and d % o == 0
        for d, o in ((h, out_h), (w, out_w))
    ):
        window = (h // out_h, w // out_w)
        return avg_pool2d(input, window, window, layout=layout)
    _nchw_only(layout, "adaptive_avg_pool2d to sizes that do not divide the input's")
    return _adaptive_avg(input, 2, (out_h, out_w), "adaptive_avg_pool2d")


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Means over PyTorch's adaptive windows of [N, C, D, H, W] (or [C, D, H, W])."""
    return _adaptive_avg(input, 3, output_size, "adaptive_avg_pool3d")


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Maxima over PyTorch's adaptive windows of [N, C, L]; return_indices: each maximum's position."""
    return _adaptive_max(input, 1, output_size, return_indices, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Maxima over PyTorch's adaptive windows (NCHW); the gradient goes to each window's first maximum,
    whose flat index h W + w return_indices gives."""
    return _adaptive_max(input, 2, output_size, return_indices, "adaptive_max_pool2d")


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Maxima over PyTorch's adaptive windows of [N, C, D, H, W]; indices d H W + h W + w."""
    return _adaptive_max(input, 3, output_size, return_indices, "adaptive_max_pool3d")


def _lp_pool(x: Tensor, norm_type: float, nd: int, kernel_size: Any, stride: Any, ceil_mode: bool) -> Tensor:
    """PyTorch's lp_pool: (sum of x^p over each window)^(1/p), as its average pool of x^p times the
    window size (a negative mean becomes 0 first)."""
    k = sizes_nd(kernel_size, nd, f"lp_pool{nd}d's kernel_size", 1)
    kernel = k[0] if nd == 1 else k
    stride = stride if stride is not None else kernel
    if norm_type in (math.inf, -math.inf):  # PyTorch's: the largest (smallest) magnitude of each window
        largest = (max_pool1d, max_pool2d, max_pool3d)[nd - 1]
        if norm_type == math.inf:
            return largest(x.abs(), kernel, stride, 0, 1, ceil_mode)
        return -largest(-x.abs(), kernel, stride, 0, 1, ceil_mode)
    pool = (avg_pool1d, avg_pool2d, avg_pool3d)[nd - 1]
    out = pool(x.pow(norm_type), kernel, stride, 0, ceil_mode)
    return (ops.sign(out) * ops.relu(out.abs())).mul(int(np.prod(k))).pow(1.0 / norm_type)


def lp_pool1d(
    input: Tensor, norm_type: float, kernel_size: int, stride: int | None = None, ceil_mode: bool = False
) -> Tensor:
    """The p-norm of each window of [N, C, L] (PyTorch's lp_pool1d)."""
    return _lp_pool(input, norm_type, 1, kernel_size, stride, ceil_mode)


def lp_pool2d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """The p-norm of each window of [N, C, H, W] (PyTorch's lp_pool2d)."""
    return _lp_pool(input, norm_type, 2, kernel_size, stride, ceil_mode)


def lp_pool3d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """The p-norm of each window of [N, C, D, H, W] (PyTorch's lp_pool3d)."""
    return _lp_pool(input, norm_type, 3, kernel_size, stride, ceil_mode)


def _float_only(x: Tensor, what: str) -> None:
    if not x.dtype.is_float:
        raise TypeError(
            f"{what} takes a float tensor, got {x.dtype.name} (as PyTorch, which has no kernel for it)"
        )


def max_unpool1d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """max_pool1d's values put back at their indices in zeros of the pooled-from length."""
    return pooling_options.max_unpool(input, indices, 1, kernel_size, stride, padding, output_size)


def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    output_size: Any = None,
) -> Tensor:
    """max_pool2d's values put back at their indices in zeros of the pooled-from size (NCHW)."""
    return pooling_options.max_unpool(input, indices, 2, kernel_size, stride, padding, output_size)


def max_unpool3d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """max_pool3d's values put back at their indices in zeros of the pooled-from size."""
    return pooling_options.max_unpool(input, indices, 3, kernel_size, stride, padding, output_size)


def _nchw_only(layout: str, what: str) -> None:
    if layout != "NCHW":
        raise ValueError(f"{what} takes NCHW images, got layout {layout!r}")
