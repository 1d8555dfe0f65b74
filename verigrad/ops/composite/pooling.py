"""2-D max and average pooling over im2col windows.

max_pool2d pads with -inf and takes the window maximum. Its VJP sends each window's gradient to the
FIRST maximal element in window order (row-major over the kernel), as PyTorch does; a plain `max`
would share it among ties, and ReLU outputs are full of ties at 0. avg_pool2d pads with zeros and
divides by KH*KW (PyTorch's count_include_pad=True). Windows do not extend past the padded image
(ceil_mode=False).

`max_pool2d_grad(g, x)` is max_pool2d's VJP as an op of its own (one kernel for a backend; its
decomposition is the reference), and avg_pool2d's VJP is col2im of the gradient spread over each window,
which is what its decomposition's gradient computes.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ...errors import DTypeError, ShapeError
from ...shapes import Spec, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ..binary import eq, where
from ..creation import arange, zeros_like
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
