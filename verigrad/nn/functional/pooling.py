"""Pooling, as in `torch.nn.functional`: max and average pooling in 1-D and 2-D, adaptive pooling and
max_unpool2d. Plain windows run the pooling ops; PyTorch's further options run `pooling_options`."""

from __future__ import annotations

from typing import Any

from ... import ops
from ...tensor import Tensor
from . import pooling_options
from ._windows import IntPair, as_2d, pair_1d


def max_pool2d(
    x: Tensor,
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
    index h W + w (NCHW), for max_unpool2d."""
    if ceil_mode or return_indices:
        _nchw_only(layout, "max_pool2d with ceil_mode or return_indices")
        options = (ceil_mode, return_indices)
        return pooling_options.max_pool2d(x, kernel_size, stride, padding, dilation, *options)
    window = {"kernel": kernel_size, "stride": stride, "padding": padding, "dilation": dilation}
    return ops.max_pool2d(x, **window, layout=layout)


def avg_pool2d(
    x: Tensor,
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
    if ceil_mode or not count_include_pad or divisor_override is not None:
        _nchw_only(layout, "avg_pool2d with ceil_mode, count_include_pad=False or divisor_override")
        return pooling_options.avg_pool2d(
            x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
        )
    return ops.avg_pool2d(x, kernel=kernel_size, stride=stride, padding=padding, layout=layout)


def max_pool1d(x: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0) -> Tensor:
    """Window maxima of [N, C, L] (or [C, L]) along L."""
    return as_2d(max_pool2d, x, pair_1d(kernel_size, 1), pair_1d(stride, 1), pair_1d(padding, 0))


def avg_pool1d(x: Tensor, kernel_size: int, stride: int | None = None, padding: int = 0) -> Tensor:
    """Window means, zero padding counted in the divisor."""
    return as_2d(avg_pool2d, x, pair_1d(kernel_size, 1), pair_1d(stride, 1), pair_1d(padding, 0))


def adaptive_avg_pool2d(x: Tensor, output_size: Any, layout: str = "NCHW") -> Tensor:
    """Means over PyTorch's adaptive windows for an output_size grid (1 x 1: the global mean, any size;
    sizes that divide the input's: equal windows, one pooling call; others: NCHW of known size)."""
    out_h, out_w = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    h, w = x.shape[2:4] if layout == "NCHW" else x.shape[1:3]
    if (out_h, out_w) == (1, 1):
        return x.mean((2, 3) if layout == "NCHW" else (1, 2), keepdim=True)
    if all(
        isinstance(d, int) and isinstance(o, int) and o > 0 and d % o == 0
        for d, o in ((h, out_h), (w, out_w))
    ):
        window = (h // out_h, w // out_w)
        return avg_pool2d(x, window, window, layout=layout)
    _nchw_only(layout, "adaptive_avg_pool2d to sizes that do not divide the input's")
    return pooling_options.adaptive_pool2d(x, (out_h, out_w), "mean")


def adaptive_max_pool2d(x: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Maxima over PyTorch's adaptive windows for an output_size grid (NCHW of known size). The indices
    of the maxima (return_indices) are not given."""
    if return_indices:
        raise ValueError("adaptive_max_pool2d: return_indices is not supported (max_pool2d gives indices)")
    return pooling_options.adaptive_pool2d(x, output_size, "max")


def max_unpool2d(
    x: Tensor,
    indices: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    output_size: Any = None,
) -> Tensor:
    """max_pool2d's values put back at their indices in zeros of the pooled-from size (NCHW)."""
    return pooling_options.max_unpool2d(x, indices, kernel_size, stride, padding, output_size)


def _nchw_only(layout: str, what: str) -> None:
    if layout != "NCHW":
        raise ValueError(f"{what} takes NCHW images, got layout {layout!r}")
