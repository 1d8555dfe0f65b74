"""2-D max and average pooling over im2col windows.

max_pool2d pads with -inf and takes the window maximum. Its VJP sends each window's gradient to the
FIRST maximal element in window order (row-major over the kernel), as PyTorch does; a plain `max`
would share it among ties, and ReLU outputs are full of ties at 0. avg_pool2d pads with zeros and
divides by KH*KW (PyTorch's count_include_pad=True). Windows do not extend past the padded image
(ceil_mode=False).

`max_pool2d_grad(g, x)` is max_pool2d's VJP as an op of its own (one kernel for a backend; its
decomposition is the reference), and avg_pool2d's VJP is col2im of the gradient spread over each window,
which is what its decomposition's gradient computes.

`max_pool_grad_at(g, x, indices)` is aten's max_pool{1,2,3}d_with_indices_backward: the gradient added at
the flat positions a max pool with indices returned, in zeros shaped as its input x (whose own gradient is
zero: x gives the shape only).
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DType
from ...errors import DTypeError, ShapeError
from ...shapes import Spec, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ..binary import eq, where
from ..checks import checked
from ..creation import arange, zeros_like
from ..index import gather, gather_grad
from ._common import float_inputs, pair, spatial
from .convolution import WINDOW_CASES, col2im, cols_shape, im2col, out_hw, to_layout, window_params


def _canon(x: Spec, kernel, stride=None, padding=0, dilation=1, layout="NCHW") -> dict:
    params = window_params(kernel, kernel if stride is None else stride, padding, dilation, layout)
    if any(p > k // 2 for k, p in zip(params["kernel"], params["padding"])):
        raise ShapeError(f"padding {params['padding']} must be at most half the kernel {params['kernel']}")
    return params


def _shape(x: tuple, kernel, stride, padding, dilation, layout) -> tuple:
    n, c, h, w = spatial(x, layout)
    ho, wo = out_hw(h, w, kernel, stride, padding, dilation)
    return (n, c, ho, wo) if layout == "NCHW" else (n, ho, wo, c)


def _window_axes(layout: str) -> tuple[int, int]:
    return (2, 3) if layout == "NCHW" else (3, 4)


def _window(kernel, stride, padding, dilation) -> dict:
    return {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation}


def _max_pool(x, kernel, stride, padding, dilation, layout):
    cols = im2col(x, **_window(kernel, stride, padding, dilation), layout=layout, pad_value=-np.inf)
    return cols.amax(axis=_window_axes(layout))


def _max_pool_vjp(g, out, x, kernel, stride, padding, dilation, layout):
    return (max_pool2d_grad(g, x, **_window(kernel, stride, padding, dilation), layout=layout),)


def _first_max(x, kernel, stride, padding, dilation, layout):
    """Whether each window element is the window's first maximum: [n, c, k, ho, wo] (NCHW) or
    [n, ho, wo, k, c] (NHWC) booleans, k = KH*KW in window order."""
    cols = im2col(x, **_window(kernel, stride, padding, dilation), layout=layout, pad_value=-np.inf)
    kh, kw = kernel
    k = kh * kw
    if layout == "NCHW":
        n, c, _, _, ho, wo = cols.shape
        first = cols.reshape(n, c, k, ho, wo).argmax(axis=2, keepdim=True)  # [n, c, 1, ho, wo]
        return eq(arange(k).reshape(k, 1, 1), first)
    n, ho, wo, _, _, c = cols.shape
    first = cols.reshape(n, ho, wo, k, c).argmax(axis=3, keepdim=True)  # [n, ho, wo, 1, c]
    return eq(arange(k).reshape(k, 1), first)


def _max_pool_grad(g, x, kernel, stride, padding, dilation, layout):
    """Each window's gradient to its first maximal element, added back with col2im."""
    hit = _first_max(x, kernel, stride, padding, dilation, layout)
    n, c, h, w = spatial(x.shape, layout)
    ho, wo = (g.shape[2], g.shape[3]) if layout == "NCHW" else (g.shape[1], g.shape[2])
    spread = (n, c, 1, ho, wo) if layout == "NCHW" else (n, ho, wo, 1, c)
    gcols = where(hit, g.reshape(spread), 0.0).reshape(cols_shape(n, c, ho, wo, kernel, layout))
    return col2im(gcols, **_window(kernel, stride, padding, dilation), layout=layout, size=(h, w))


def _max_pool_grad_vjp(gg, out, g, x, kernel, stride, padding, dilation, layout):
    """For g, each window takes gg at its first maximum (the adjoint of the scatter); x only chooses
    where, so its gradient is zero (almost everywhere)."""
    window = _window(kernel, stride, padding, dilation)
    hit = _first_max(x, **window, layout=layout)
    cols = im2col(gg, **window, layout=layout, pad_value=0.0)
    cols = cols.reshape(hit.shape)  # the window axes as one, as in `hit`
    axis = 2 if layout == "NCHW" else 3
    return where(hit, cols, 0.0).sum(axis=axis), zeros_like(x)


def _grad_canon(g: Spec, x: Spec, kernel, stride, padding, dilation, layout="NCHW") -> dict:
    return _canon(x, kernel, stride, padding, dilation, layout)


def _grad_shape(g: tuple, x: tuple, kernel, stride, padding, dilation, layout) -> tuple:
    pooled = _shape(x, kernel, stride, padding, dilation, layout)
    if tuple(g) != pooled:
        raise ShapeError(
            f"the gradient of a max pool of {shape_text(x)} with these windows must be {shape_text(pooled)}, "
            f"got {shape_text(g)}"
        )
    return tuple(x)


def _grad_dtype(g: DType, x: DType, **_) -> DType:
    """One float dtype: the sums are rounded in the gradient's dtype, the maxima found in the image's."""
    if g is not x:
        raise DTypeError(f"the gradient ({g.name}) and the image ({x.name}) must have one dtype; cast one")
    return float_inputs(g, what="gradient and image")


def _grad_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for sample in _samples(dilated=True)(rng):
        (x,) = sample.args
        window = _canon(None, **sample.params)
        g = uniform(rng, _shape(x.shape, **window))
        out.append(Sample((g, x), sample.params))
    return out


def _avg_pool_vjp(g, out, x, kernel, stride, padding, dilation, layout):
    """Each window's gradient divided by KH*KW and added back with col2im (mean's VJP, then im2col's)."""
    n, c, h, w = spatial(x.shape, layout)
    ho, wo = (g.shape[2], g.shape[3]) if layout == "NCHW" else (g.shape[1], g.shape[2])
    spread = (n, c, 1, 1, ho, wo) if layout == "NCHW" else (n, ho, wo, 1, 1, c)
    count = float(kernel[0] * kernel[1])
    gcols = g.reshape(spread).broadcast_to(cols_shape(n, c, ho, wo, kernel, layout)) / count
    return (col2im(gcols, **_window(kernel, stride, padding, dilation), layout=layout, size=(h, w)),)


def _avg_pool(x, kernel, stride, padding, dilation, layout):
    cols = im2col(x, **_window(kernel, stride, padding, dilation), layout=layout)
    return cols.mean(axis=_window_axes(layout))


def _nchw(t, x, layout):
    return x if layout == "NCHW" else x.permute(0, 3, 1, 2)


def _back(out, layout):
    return out if layout == "NCHW" else out.permute(0, 2, 3, 1)


def _torch_max_pool(t, x, kernel, stride, padding, dilation, layout):
    out = t.nn.functional.max_pool2d(_nchw(t, x, layout), kernel, stride, padding, dilation)
    return _back(out, layout)


def _torch_avg_pool(t, x, kernel, stride, padding, dilation, layout):
    if dilation != (1, 1):
        raise ValueError("PyTorch's avg_pool2d has no dilation")
    return _back(t.nn.functional.avg_pool2d(_nchw(t, x, layout), kernel, stride, padding), layout)


def _samples(dilated: bool):
    def samples(rng: np.random.Generator) -> list[Sample]:
        out = []
        for shape, k, s, p, d in [*WINDOW_CASES, ((2, 2, 6, 6), 2, None, 0, 1), ((1, 3, 5, 7), 3, 2, 1, 1)]:
            kernel = pair(k, "kernel", 1)
            d = d if dilated else 1
            if any(pp > kk // 2 for kk, pp in zip(kernel, pair(p, "padding", 0))):
                continue
            for layout in ("NCHW", "NHWC"):
                x = to_layout(uniform(rng, shape), layout)
                params = {"kernel": k, "stride": s, "padding": p, "layout": layout}
                out.append(Sample((x,), {**params, "dilation": d} if dilated else params))
        return out

    return samples


max_pool2d = Op(
    "max_pool2d",
    shape=_shape,
    dtype=lambda x, **_: float_inputs(x, what="image"),
    params=_canon,
    positional=("kernel", "stride", "padding", "dilation", "layout"),
    decompose=_max_pool,
    vjp=_max_pool_vjp,
    samples=_samples(dilated=True),
    torch=_torch_max_pool,
    exact=True,
    doc="Window maxima (stride defaults to the kernel); the gradient goes to each window's first maximum.",
)

# No torch lambda: PyTorch sends the gradient of a window holding NaN to its last NaN, np.argmax (and so
# this op) to the first; the parity suite compares max_pool2d's gradient with PyTorch's instead.
max_pool2d_grad = Op(
    "max_pool2d_grad",
    shape=_grad_shape,
    dtype=_grad_dtype,
    params=_grad_canon,
    decompose=_max_pool_grad,
    vjp=_max_pool_grad_vjp,
    samples=_grad_samples,
    exact=False,
    doc="max_pool2d's VJP: each window's gradient added at its first maximum (f16/f32 add in f64).",
)

avg_pool2d = Op(
    "avg_pool2d",
    shape=_shape,
    dtype=lambda x, **_: float_inputs(x, what="image"),
    params=lambda x, kernel, stride=None, padding=0, layout="NCHW": _canon(
        x, kernel, stride, padding, 1, layout
    ),
    positional=("kernel", "stride", "padding", "layout"),
    decompose=_avg_pool,
    vjp=_avg_pool_vjp,
    samples=_samples(dilated=False),
    torch=_torch_avg_pool,
    exact=False,
    doc="Window means over KH*KW elements, zero padding included (count_include_pad=True).",
)


# max_pool_grad_at: aten's max_pool2d_with_indices_backward ----------------------------------------------
def _at_shape(g: tuple, x: tuple, idx: tuple, nd: int) -> tuple:
    lead = len(x) - nd
    if tuple(idx) != tuple(g) or len(g) != len(x) or tuple(g[:lead]) != tuple(x[:lead]):
        raise ShapeError(
            f"the gradient {shape_text(g)} and indices {shape_text(idx)} of a max pool of {shape_text(x)} "
            f"must have one shape, with the input's {lead} leading sizes"
        )
    return tuple(x)


def _at_dtype(g: DType, x: DType, idx: DType, nd: int) -> DType:
    if idx.kind != "i":
        raise DTypeError(f"indices must be an integer tensor, got {idx.name}")
    return _grad_dtype(g, x)


def _at_canon(g: Spec, x: Spec, idx: Spec, nd: int) -> dict:
    if not isinstance(nd, int) or isinstance(nd, bool) or not 1 <= nd <= x.ndim:
        raise ShapeError(f"nd must be the number of pooled axes of a {x.ndim}-D input, got {nd!r}")
    return {"nd": nd}


def _planes(t, lead: int, size):
    """t [*lead, *pooled axes] as [*lead, size]: each plane's positions in one axis."""
    return t.reshape(*t.shape[:lead], size)


def _max_pool_grad_at(g, x, idx, nd):
    """Each gradient added at its flat position in its plane (in order: overlapping windows add)."""
    lead = x.ndim - nd
    size, pooled = math.prod(x.shape[lead:]), math.prod(g.shape[lead:])
    at = checked(_planes(idx, lead, pooled), size, "max_pool_with_indices_backward")
    return gather_grad(_planes(g, lead, pooled), at, axis=lead, size=size).reshape(x.shape)


def _max_pool_grad_at_vjp(gg, out, g, x, idx, nd):
    """g's gradient gathered from its positions (max pooling of gg by the indices); none for x."""
    lead = x.ndim - nd
    size, pooled = math.prod(x.shape[lead:]), math.prod(g.shape[lead:])
    picked = gather(_planes(gg, lead, size), _planes(idx, lead, pooled), axis=lead)
    return picked.reshape(g.shape), zeros_like(x), None


def _at_samples(rng: np.random.Generator) -> list[Sample]:
    """Positions that repeat (overlapping windows) and cover part of each plane; unbatched, 1-D and 3-D."""
    out = []
    for x_shape, g_shape, nd in [
        ((2, 3, 5, 6), (2, 3, 2, 3), 2),
        ((3, 4, 4), (3, 3, 3), 2),
        ((2, 7), (2, 4), 1),
        ((1, 2, 3, 4, 4), (1, 2, 2, 2, 2), 3),
    ]:
        size = math.prod(x_shape[len(x_shape) - nd :])
        idx = rng.integers(0, size, g_shape)
        out.append(Sample((uniform(rng, g_shape), uniform(rng, x_shape), idx), {"nd": nd}))
    return out


def _torch_at(t, g, x, idx, nd):
    lead = x.ndim - nd
    flat = t.zeros_like(x).flatten(lead).scatter_add(lead, idx.flatten(lead), g.flatten(lead))
    return flat.view_as(x)


max_pool_grad_at = Op(
    "max_pool_grad_at",
    shape=_at_shape,
    dtype=_at_dtype,
    params=_at_canon,
    decompose=_max_pool_grad_at,
    vjp=_max_pool_grad_at_vjp,
    samples=_at_samples,
    torch=_torch_at,
    exact=False,
    doc="Zeros shaped as x, each gradient g added at its flat position (in the last `nd` axes) that "
    "indices names: a max pool's VJP from its indices (aten's max_pool2d_with_indices_backward).",
)
