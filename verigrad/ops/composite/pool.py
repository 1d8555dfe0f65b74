"""2-D max and average pooling over im2col windows.

max_pool2d pads with -inf and takes the window maximum. Its VJP sends each window's gradient to the
FIRST maximal element in window order (row-major over the kernel), as PyTorch does; a plain `max`
would share it among ties, and ReLU outputs are full of ties at 0. avg_pool2d pads with zeros and
divides by KH*KW (PyTorch's count_include_pad=True). Windows do not extend past the padded image
(ceil_mode=False).
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...shapes import Spec
from .._op import Op, Sample
from .._samples import uniform
from ..binary import eq, where
from ..creation import arange
from ._common import float_inputs, pair, spatial
from .conv import WINDOW_CASES, col2im, cols_shape, im2col, out_hw, to_layout, window_params


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


def _max_pool(x, kernel, stride, padding, dilation, layout):
    window = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation, "layout": layout}
    return im2col(x, **window, pad_value=-np.inf).max(axis=_window_axes(layout))


def _max_pool_vjp(g, out, x, kernel, stride, padding, dilation, layout):
    """Each window's gradient to its first maximal element, added back with col2im."""
    window = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation}
    cols = im2col(x, **window, layout=layout, pad_value=-np.inf)
    kh, kw = kernel
    k = kh * kw
    if layout == "NCHW":
        n, c, _, _, ho, wo = cols.shape
        first = cols.reshape(n, c, k, ho, wo).argmax(axis=2, keepdim=True)  # [n, c, 1, ho, wo]
        hit = eq(arange(k).reshape(k, 1, 1), first)  # [n, c, k, ho, wo]
        gcols = where(hit, g.reshape(n, c, 1, ho, wo), 0.0)
    else:
        n, ho, wo, _, _, c = cols.shape
        first = cols.reshape(n, ho, wo, k, c).argmax(axis=3, keepdim=True)  # [n, ho, wo, 1, c]
        hit = eq(arange(k).reshape(k, 1), first)  # [n, ho, wo, k, c]
        gcols = where(hit, g.reshape(n, ho, wo, 1, c), 0.0)
    _, _, h, w = spatial(x.shape, layout)
    gcols = gcols.reshape(cols_shape(n, c, ho, wo, kernel, layout))
    return (col2im(gcols, **window, layout=layout, size=(h, w)),)


def _avg_pool(x, kernel, stride, padding, dilation, layout):
    cols = im2col(x, kernel=kernel, stride=stride, padding=padding, dilation=dilation, layout=layout)
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

avg_pool2d = Op(
    "avg_pool2d",
    shape=_shape,
    dtype=lambda x, **_: float_inputs(x, what="image"),
    params=lambda x, kernel, stride=None, padding=0, layout="NCHW": _canon(
        x, kernel, stride, padding, 1, layout
    ),
    positional=("kernel", "stride", "padding", "layout"),
    decompose=_avg_pool,
    samples=_samples(dilated=False),
    torch=_torch_avg_pool,
    exact=False,
    doc="Window means over KH*KW elements, zero padding included (count_include_pad=True).",
)
