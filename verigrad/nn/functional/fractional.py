"""PyTorch's fractional max pooling (`F.fractional_max_pool2d`, `F.fractional_max_pool3d`), written with
the ops: each (sample, channel) plane draws one number u in [0, 1) per spatial axis (or takes them from
`_random_samples`, [N, C, 2] for (w, h) and [N, C, 3] for (t, h, w), as PyTorch's), which places its
windows as PyTorch's kernel does: window j of an axis of n positions, pooled to `out` windows of `k`,
starts at trunc((j + u) a) - trunc(u a) with a = (n - k) / (out - 1), computed in the input's dtype, and
the last one at n - k. Each window answers its first maximum (in row-major window order) and that
maximum's flat position in the plane; the gradient goes there."""

from __future__ import annotations

import math
from typing import Any

from ... import ops
from ...errors import DTypeError, ShapeError
from ...shapes import shape_text
from ...tensor import Tensor, describe
from ._windows import sizes_nd, unbatched


def _out_sizes(
    name: str, sizes: tuple[int, ...], kernel: tuple[int, ...], output_size: Any, output_ratio: Any
) -> tuple[int, ...]:
    nd = len(sizes)
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    if output_size is not None:
        out = sizes_nd(output_size, nd, f"{name}'s output_size", 1)
    else:
        ratio = (output_ratio,) * nd if isinstance(output_ratio, int | float) else tuple(output_ratio)
        if len(ratio) != nd or not all(0 < r < 1 for r in ratio):
            raise ValueError(f"{name}: output_ratio must be {nd} numbers in (0, 1), got {output_ratio!r}")
        out = tuple(int(n * r) for n, r in zip(sizes, ratio))
    # PyTorch's bounds: output + window - 1 at most the input in 2-D, below it in 3-D
    for axis, n, o, k in zip(("time", "height", "width")[-nd:], sizes, out, kernel):
        if o + k - 1 > n or (nd == 3 and o + k - 1 == n):
            raise ShapeError(
                f"{name}: pool {axis} {k} too large relative to input {axis} {n} (pooled to {o}: output + "
                f"pool - 1 must be {'below' if nd == 3 else 'at most'} the input)"
            )
    return out


def _starts(u: Tensor, n: int, out: int, k: int) -> Tensor:
    """Each plane's window starts along one axis, [N, C, out] int64, from its u [N, C] (PyTorch's
    generate_intervals, in u's dtype)."""
    last = ops.full((*u.shape, 1), n - k, dtype="i64")
    if out == 1:
        return last
    alpha = ops.full((), n - k, dtype=u.dtype) / ops.full((), out - 1, dtype=u.dtype)
    j = ops.arange(out - 1, dtype=u.dtype)
    u = u.unsqueeze(-1)
    first = ((j + u) * alpha).cast("i64") - (u * alpha).cast("i64")  # the cast truncates, as C's
    return ops.concat([first, last], axis=-1)


def _fractional_max_pool(
    name: str, x: Tensor, nd: int, kernel_size: Any, output_size: Any, output_ratio: Any,
    return_indices: bool, samples: Tensor | None,
) -> Any:  # fmt: skip
    if x.ndim == nd + 1:  # PyTorch's: a batch of one, _random_samples [1, C, nd]
        args = (nd, kernel_size, output_size, output_ratio, return_indices, samples)
        return unbatched(lambda t: _fractional_max_pool(name, t, *args), x)
    if x.ndim != nd + 2:
        raise ShapeError(f"{name} takes [N, C, {nd} sizes] or [C, {nd} sizes], got {shape_text(x.shape)}")
    if not x.dtype.is_float:
        raise DTypeError(f"{name}: input must be a float tensor, got {describe(x)}")
    kernel = sizes_nd(kernel_size, nd, f"{name}'s kernel_size", 1)
    sizes = tuple(x.shape[2:])
    out = _out_sizes(name, sizes, kernel, output_size, output_ratio)
    batch, channels = x.shape[0], x.shape[1]
    if samples is None:
        samples = ops.rand(batch, channels, nd, dtype=x.dtype)
    elif tuple(samples.shape) != (batch, channels, nd):
        raise ShapeError(
            f"{name}: _random_samples must be [N, C, {nd}] = [{batch}, {channels}, {nd}], got "
            f"{shape_text(samples.shape)}"
        )
    # each window element's flat position in its plane: [N, C, *out, *kernel]
    flat = None
    for axis in range(nd):
        u = samples.select(2, 1 - axis if nd == 2 else axis).cast(x.dtype)  # PyTorch's: (w, h) and (t, h, w)
        starts = _starts(u, sizes[axis], out[axis], kernel[axis])
        pos = starts.unsqueeze(-1) + ops.arange(kernel[axis])  # [N, C, out, k]
        placed = [1] * nd
        placed[axis] = out[axis]
        within = [1] * nd
        within[axis] = kernel[axis]
        term = pos.reshape(batch, channels, *placed, *within) * math.prod(sizes[axis + 1 :])
        flat = term if flat is None else flat + term
    windows, k = math.prod(out), math.prod(kernel)
    flat = flat.reshape(batch, channels, windows, k)
    plane = x.reshape(batch, channels, math.prod(sizes))
    values = ops.gather(plane, flat.reshape(batch, channels, windows * k), axis=2)
    values = values.reshape(batch, channels, windows, k)
    first = ops.argmax(values, axis=3, keepdim=True)  # the first maximum, as PyTorch's strict `>`
    pooled = ops.gather(values, first, axis=3).reshape(batch, channels, *out)
    if not return_indices:
        return pooled
    return pooled, ops.gather(flat, first, axis=3).reshape(batch, channels, *out)


def fractional_max_pool2d(
    input: Tensor, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
    return_indices: bool = False, _random_samples: Tensor | None = None,
) -> Any:  # fmt: skip
    """Max pooling over pseudo-random windows of kernel_size, to output_size (or output_ratio of the
    input) per plane; with return_indices also each maximum's flat position h W + w."""
    return _fractional_max_pool(
        "fractional_max_pool2d", input, 2, kernel_size, output_size, output_ratio, return_indices,
        _random_samples,
    )  # fmt: skip


def fractional_max_pool3d(
    input: Tensor, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
    return_indices: bool = False, _random_samples: Tensor | None = None,
) -> Any:  # fmt: skip
    """fractional_max_pool2d over volumes: positions (d H + h) W + w."""
    return _fractional_max_pool(
        "fractional_max_pool3d", input, 3, kernel_size, output_size, output_ratio, return_indices,
        _random_samples,
    )  # fmt: skip
