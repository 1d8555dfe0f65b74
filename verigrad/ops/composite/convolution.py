"""Sliding windows and 2-D convolution.

`im2col` copies every window of a padded image into its own axes: NCHW [N, C, H, W] gives
[N, C, KH, KW, Ho, Wo] and NHWC [N, H, W, C] gives [N, Ho, Wo, KH, KW, C]. Padding uses `pad_value`
(0 for convolution and average pooling, -inf for max pooling). `col2im` is its adjoint: it adds each
window back at its place and drops the padding; each is the other's VJP.

`conv2d` (groups=1) is im2col followed by one matmul: NCHW weights are [O, C, KH, KW], NHWC weights
are [KH, KW, C, O] (HWIO). Output sizes follow PyTorch: (H + 2p - d*(k-1) - 1) // s + 1.

Its VJP is two ops of their own, so that a backend can run each as one kernel:
`conv2d_input_grad(g, w, size=(H, W))`, the columns W^T g added back into the image with col2im, and
`conv2d_weight_grad(g, x, kernel=(KH, KW))`, g times the transposed columns of x. Their decompositions
(their references) are what autograd computes through conv2d's decomposition. Each is linear in each
operand, so their own VJPs are conv2d and each other.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...dtypes import promote
from ...errors import ShapeError
from ...shapes import Spec, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ._common import float_inputs, layout_param, pair, spatial, window_out


def window_params(kernel, stride=1, padding=0, dilation=1, layout: str = "NCHW") -> dict:
    """Canonical window params: (h, w) pairs and the layout."""
    return {
        "kernel": pair(kernel, "kernel size", 1),
        "stride": pair(stride, "stride", 1),
        "padding": pair(padding, "padding", 0),
        "dilation": pair(dilation, "dilation", 1),
        "layout": layout_param(layout),
    }


def out_hw(h, w, kernel, stride, padding, dilation) -> tuple:
    """(Ho, Wo) for an input of (h, w)."""
    return (
        window_out(h, kernel[0], stride[0], padding[0], dilation[0], "height"),
        window_out(w, kernel[1], stride[1], padding[1], dilation[1], "width"),
    )


def cols_shape(n, c, ho, wo, kernel, layout: str) -> tuple:
    kh, kw = kernel
    return (n, c, kh, kw, ho, wo) if layout == "NCHW" else (n, ho, wo, kh, kw, c)


# im2col ----------------------------------------------------------------------------------------
def _im2col_canon(x: Spec, kernel, stride=1, padding=0, dilation=1, layout="NCHW", pad_value=0.0) -> dict:
    return {**window_params(kernel, stride, padding, dilation, layout), "pad_value": float(pad_value)}


def _im2col_shape(x: tuple, kernel, stride, padding, dilation, layout, pad_value) -> tuple:
    n, c, h, w = spatial(x, layout)
    ho, wo = out_hw(h, w, kernel, stride, padding, dilation)
    return cols_shape(n, c, ho, wo, kernel, layout)


def _im2col_reference(x: np.ndarray, kernel, stride, padding, dilation, layout, pad_value) -> np.ndarray:
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    hw = (1, 2) if layout == "NHWC" else (2, 3)
    ho, wo = out_hw(x.shape[hw[0]], x.shape[hw[1]], kernel, stride, padding, dilation)
    if ph or pw:
        widths = [(0, 0)] * 4
        widths[hw[0]], widths[hw[1]] = (ph, ph), (pw, pw)
        x = np.pad(x, widths, constant_values=np.array(pad_value).astype(x.dtype))
    s = x.strides
    if layout == "NCHW":
        shape = (x.shape[0], x.shape[1], kh, kw, ho, wo)
        strides = (s[0], s[1], dh * s[2], dw * s[3], sh * s[2], sw * s[3])
    else:
        shape = (x.shape[0], ho, wo, kh, kw, x.shape[3])
        strides = (s[0], sh * s[1], sw * s[2], dh * s[1], dw * s[2], s[3])
    return np.ascontiguousarray(as_strided(x, shape=shape, strides=strides, writeable=False))


def _im2col_vjp(g, out, x, kernel, stride, padding, dilation, layout, pad_value):
    _, _, h, w = spatial(x.shape, layout)
    params = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation}
    return (col2im(g, **params, layout=layout, size=(h, w)),)


def _torch_im2col(t, x, kernel, stride, padding, dilation, layout, pad_value):
    if layout == "NHWC":
        x = x.permute(0, 3, 1, 2)
    ph, pw = padding
    x = t.nn.functional.pad(x, (pw, pw, ph, ph), value=pad_value)
    cols = t.nn.functional.unfold(x, kernel, dilation=dilation, stride=stride)
    n, c = x.shape[:2]
    ho = (x.shape[2] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    wo = (x.shape[3] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    cols = cols.reshape(n, c, kernel[0], kernel[1], ho, wo)
    return cols if layout == "NCHW" else cols.permute(0, 4, 5, 2, 3, 1)


# (x shape in NCHW, kernel, stride, padding, dilation) for the window ops' samples
WINDOW_CASES = [
    ((1, 2, 5, 5), 3, 1, 1, 1),
    ((2, 1, 6, 5), (2, 3), 2, (1, 0), (1, 2)),
    ((2, 3, 4, 4), 2, 2, 0, 1),
    ((1, 1, 1, 1), 1, 1, 0, 1),
    ((1, 2, 7, 6), 3, (2, 1), 1, 2),
]


def to_layout(x: np.ndarray, layout: str) -> np.ndarray:
    return x if layout == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def _im2col_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for i, (shape, k, s, p, d) in enumerate(WINDOW_CASES):
        for layout in ("NCHW", "NHWC"):
            params = {"kernel": k, "stride": s, "padding": p, "dilation": d, "layout": layout}
            x = to_layout(uniform(rng, shape), layout)
            out.append(Sample((x,), {**params, "pad_value": -1.5 if i == 1 else 0.0}))
    return out


im2col = Op(
    "im2col",
    shape=_im2col_shape,
    dtype=lambda x, **_: float_inputs(x, what="image"),
    params=_im2col_canon,
    positional=("kernel", "stride", "padding", "dilation", "layout", "pad_value"),
    reference=_im2col_reference,
    vjp=_im2col_vjp,
    samples=_im2col_samples,
    torch=_torch_im2col,
    exact=True,
    doc="Every (dilated, strided) window of the padded image in its own axes; see the module docstring.",
)


# col2im ----------------------------------------------------------------------------------------
def _col2im_canon(cols: Spec, kernel, stride=1, padding=0, dilation=1, layout="NCHW", size=None) -> dict:
    if size is None or len(size) != 2:
        raise ShapeError(f"col2im needs the image size (H, W), got {size!r}")
    return {**window_params(kernel, stride, padding, dilation, layout), "size": tuple(size)}


def _col2im_shape(cols: tuple, kernel, stride, padding, dilation, layout, size) -> tuple:
    if len(cols) != 6:
        raise ShapeError(f"columns must be 6-D (as im2col makes them), got {shape_text(cols)}")
    h, w = size
    n, c = (cols[0], cols[1]) if layout == "NCHW" else (cols[0], cols[5])
    expect = cols_shape(n, c, *out_hw(h, w, kernel, stride, padding, dilation), kernel, layout)
    if tuple(cols) != expect:
        raise ShapeError(
            f"columns of an image of size ({h}, {w}) with these windows must be {shape_text(expect)}, "
            f"got {shape_text(cols)}"
        )
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def _col2im_reference(cols: np.ndarray, kernel, stride, padding, dilation, layout, size) -> np.ndarray:
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    h, w = size
    acc = np.float64 if cols.dtype.itemsize < 8 else cols.dtype  # f16/f32 add in f64, round once
    if layout == "NCHW":
        n, c, _, _, ho, wo = cols.shape
        out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=acc)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + sh * (ho - 1) + 1, sh)
                columns = slice(j * dw, j * dw + sw * (wo - 1) + 1, sw)
                out[:, :, rows, columns] += cols[:, :, i, j]
        return out[:, :, ph : ph + h, pw : pw + w].astype(cols.dtype)
    n, ho, wo, _, _, c = cols.shape
    out = np.zeros((n, h + 2 * ph, w + 2 * pw, c), dtype=acc)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (ho - 1) + 1, sh)
            columns = slice(j * dw, j * dw + sw * (wo - 1) + 1, sw)
            out[:, rows, columns, :] += cols[:, :, :, i, j, :]
    return out[:, ph : ph + h, pw : pw + w, :].astype(cols.dtype)


def _col2im_vjp(g, out, cols, kernel, stride, padding, dilation, layout, size):
    params = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation}
    return (im2col(g, **params, layout=layout, pad_value=0.0),)


def _torch_col2im(t, cols, kernel, stride, padding, dilation, layout, size):
    if layout == "NHWC":
        cols = cols.permute(0, 5, 3, 4, 1, 2)
    n, c, kh, kw, ho, wo = cols.shape
    out = t.nn.functional.fold(
        cols.reshape(n, c * kh * kw, ho * wo), size, kernel, dilation=dilation, padding=padding, stride=stride
    )
    return out if layout == "NCHW" else out.permute(0, 2, 3, 1)


def _col2im_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for shape, k, s, p, d in WINDOW_CASES:
        for layout in ("NCHW", "NHWC"):
            params = window_params(k, s, p, d, layout)
            n, c, h, w = shape
            ho, wo = out_hw(h, w, params["kernel"], params["stride"], params["padding"], params["dilation"])
            cols = uniform(rng, cols_shape(n, c, ho, wo, params["kernel"], layout))
            out.append(Sample((cols,), {**params, "size": (h, w)}))
    return out


col2im = Op(
    "col2im",
    shape=_col2im_shape,
    dtype=lambda cols, **_: float_inputs(cols, what="columns"),
    params=_col2im_canon,
    reference=_col2im_reference,
    vjp=_col2im_vjp,
    samples=_col2im_samples,
    torch=_torch_col2im,
    exact=False,
    doc="im2col's adjoint: windows added back into an image of `size`; f16/f32 accumulate in f64.",
)


# conv2d ----------------------------------------------------------------------------------------
def _conv_canon(x: Spec, w: Spec, stride=1, padding=0, dilation=1, layout="NCHW") -> dict:
    params = window_params(1, stride, padding, dilation, layout)
    del params["kernel"]  # the weight's shape gives it
    return params


def weight_dims(w: tuple, layout: str) -> tuple:
    """(O, C, KH, KW) of the weight shape."""
    if len(w) != 4:
        want = "[O, C, KH, KW]" if layout == "NCHW" else "[KH, KW, C, O]"
        raise ShapeError(f"the weight must be {want} for layout {layout}, got {shape_text(w)}")
    return tuple(w) if layout == "NCHW" else (w[3], w[2], w[0], w[1])


def _conv_shape(x: tuple, w: tuple, stride, padding, dilation, layout) -> tuple:
    n, c, h, wd = spatial(x, layout)
    o, wc, kh, kw = weight_dims(w, layout)
    if c != wc:
        raise ShapeError(f"the input has {c} channels but the weight expects {wc} (groups=1)")
    if not isinstance(kh, int) or not isinstance(kw, int):
        raise ShapeError(f"kernel sizes must be concrete, got ({kh}, {kw})")
    ho, wo = out_hw(h, wd, (kh, kw), stride, padding, dilation)
    return (n, o, ho, wo) if layout == "NCHW" else (n, ho, wo, o)


def _conv_vjp(g, out, x, w, stride, padding, dilation, layout):
    """conv2d_input_grad and conv2d_weight_grad, each only where it is wanted (the images of a first
    layer want none)."""
    window = {"stride": stride, "padding": padding, "dilation": dilation, "layout": layout}
    dx = conv2d_input_grad(g, w, **window, size=spatial(x.shape, layout)[2:]) if x.requires_grad else None
    kernel = weight_dims(w.shape, layout)[2:]
    return dx, conv2d_weight_grad(g, x, **window, kernel=kernel) if w.requires_grad else None


def _alike(a, b):
    """a and b in their promoted dtype: conv2d admits two float dtypes, its products one."""
    d = promote(a.dtype, b.dtype)
    return a.cast(d), b.cast(d)


def _conv_decompose(x, w, stride, padding, dilation, layout):
    x, w = _alike(x, w)
    o, c, kh, kw = weight_dims(w.shape, layout)
    cols = im2col(x, kernel=(kh, kw), stride=stride, padding=padding, dilation=dilation, layout=layout)
    if layout == "NCHW":
        n, _, _, _, ho, wo = cols.shape
        cols = cols.permute(1, 2, 3, 0, 4, 5).reshape(c * kh * kw, n * ho * wo)  # one 2-D product, not N
        out = w.reshape(o, c * kh * kw) @ cols
        return out.reshape(o, n, ho, wo).permute(1, 0, 2, 3)
    n, ho, wo = cols.shape[:3]  # one 2-D product, so the weight's gradient is one product too
    return (cols.reshape(n * ho * wo, kh * kw * c) @ w.reshape(kh * kw * c, o)).reshape(n, ho, wo, o)


def _torch_conv(t, x, w, stride, padding, dilation, layout):
    conv = t.nn.functional.conv2d
    if layout == "NCHW":
        return conv(x, w, stride=stride, padding=padding, dilation=dilation)
    # contiguous: torch's slow_conv2d backward refuses a strided weight ("grad_weight must be contiguous")
    w = w.permute(3, 2, 0, 1).contiguous()
    out = conv(x.permute(0, 3, 1, 2), w, stride=stride, padding=padding, dilation=dilation)
    return out.permute(0, 2, 3, 1)


def _conv_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for (n, c, h, w), k, s, p, d in WINDOW_CASES:
        kh, kw = pair(k, "kernel", 1)
        for layout, o in (("NCHW", 3), ("NHWC", 1)):
            x = to_layout(uniform(rng, (n, c, h, w)), layout)
            weight = uniform(rng, (o, c, kh, kw))
            if layout == "NHWC":
                weight = np.ascontiguousarray(weight.transpose(2, 3, 1, 0))
            out.append(Sample((x, weight), {"stride": s, "padding": p, "dilation": d, "layout": layout}))
    return out


conv2d = Op(
    "conv2d",
    shape=_conv_shape,
    dtype=lambda x, w, **_: float_inputs(x, w),
    params=_conv_canon,
    decompose=_conv_decompose,
    vjp=_conv_vjp,
    samples=_conv_samples,
    torch=_torch_conv,
    exact=False,
    doc="2-D cross-correlation (groups=1) as im2col and one matmul; NCHW with OIHW or NHWC with HWIO.",
)


# conv2d's VJP ------------------------------------------------------------------------------------
def _grad_params(g: Spec, other: Spec, stride=1, padding=0, dilation=1, layout="NCHW", **extra) -> dict:
    return {**_conv_canon(g, other, stride, padding, dilation, layout), **extra}


def _input_grad_canon(g: Spec, w: Spec, stride=1, padding=0, dilation=1, layout="NCHW", size=None) -> dict:
    if size is None or len(size) != 2:
        raise ShapeError(f"conv2d_input_grad needs the input's size (H, W), got {size!r}")
    return _grad_params(g, w, stride, padding, dilation, layout, size=tuple(size))


def _weight_grad_canon(g: Spec, x: Spec, kernel=None, stride=1, padding=0, dilation=1, layout="NCHW") -> dict:
    if kernel is None:
        raise ShapeError("conv2d_weight_grad needs the kernel size (KH, KW)")
    return _grad_params(g, x, stride, padding, dilation, layout, kernel=pair(kernel, "kernel size", 1))


def _check_grad(g: tuple, expect: tuple, of: str) -> None:
    if tuple(g) != tuple(expect):
        raise ShapeError(
            f"conv2d of {of} gives {shape_text(expect)}: the gradient must too, got {shape_text(g)}"
        )


def _input_grad_shape(g: tuple, w: tuple, stride, padding, dilation, layout, size) -> tuple:
    n = spatial(g, layout)[0]
    c = weight_dims(w, layout)[1]
    x = (n, c, *size) if layout == "NCHW" else (n, *size, c)
    _check_grad(g, _conv_shape(x, w, stride, padding, dilation, layout), f"an input {shape_text(x)}")
    return x


def _weight_grad_shape(g: tuple, x: tuple, kernel, stride, padding, dilation, layout) -> tuple:
    _, c, _, _ = spatial(x, layout)
    o = spatial(g, layout)[1]
    w = (o, c, *kernel) if layout == "NCHW" else (*kernel, c, o)
    of = f"{shape_text(x)} with a {kernel[0]}x{kernel[1]} kernel"
    _check_grad(g, _conv_shape(x, w, stride, padding, dilation, layout), of)
    return w


def _input_grad(g, w, stride, padding, dilation, layout, size):
    """The columns W^T g (one matmul over the batch, as in conv2d), added back with col2im."""
    g, w = _alike(g, w)
    o, c, kh, kw = weight_dims(w.shape, layout)
    if layout == "NCHW":
        n, _, ho, wo = g.shape
        cols = w.reshape(o, c * kh * kw).T @ g.permute(1, 0, 2, 3).reshape(o, n * ho * wo)
        cols = cols.reshape(c, kh, kw, n, ho, wo).permute(3, 0, 1, 2, 4, 5)
    else:
        n, ho, wo, _ = g.shape
        cols = (g.reshape(n * ho * wo, o) @ w.reshape(kh * kw * c, o).T).reshape(n, ho, wo, kh, kw, c)
    window = {"stride": stride, "padding": padding, "dilation": dilation}
    return col2im(cols, kernel=(kh, kw), **window, layout=layout, size=size)


def _weight_grad(g, x, kernel, stride, padding, dilation, layout):
    """g times the transposed columns of x, summed over the batch in one matmul."""
    g, x = _alike(g, x)
    cols = im2col(x, kernel=kernel, stride=stride, padding=padding, dilation=dilation, layout=layout)
    kh, kw = kernel
    if layout == "NCHW":
        n, c, _, _, ho, wo = cols.shape
        o = g.shape[1]
        cols = cols.permute(1, 2, 3, 0, 4, 5).reshape(c * kh * kw, n * ho * wo)
        return (g.permute(1, 0, 2, 3).reshape(o, n * ho * wo) @ cols.T).reshape(o, c, kh, kw)
    n, ho, wo, _, _, c = cols.shape
    o = g.shape[3]
    return (cols.reshape(n * ho * wo, kh * kw * c).T @ g.reshape(n * ho * wo, o)).reshape(kh, kw, c, o)


def _input_grad_vjp(gg, out, g, w, stride, padding, dilation, layout, size):
    """Linear in g (its adjoint is conv2d) and in w (a weight gradient with gg as the image)."""
    window = {"stride": stride, "padding": padding, "dilation": dilation, "layout": layout}
    kernel = weight_dims(w.shape, layout)[2:]
    dg = conv2d(gg, w, **window) if g.requires_grad else None
    return dg, conv2d_weight_grad(g, gg, **window, kernel=kernel) if w.requires_grad else None


def _weight_grad_vjp(gw, out, g, x, kernel, stride, padding, dilation, layout):
    """Linear in g (its adjoint is conv2d of x with gw) and in x (an input gradient with gw)."""
    window = {"stride": stride, "padding": padding, "dilation": dilation, "layout": layout}
    dg = conv2d(x, gw, **window) if g.requires_grad else None
    size = spatial(x.shape, layout)[2:]
    return dg, conv2d_input_grad(g, gw, **window, size=size) if x.requires_grad else None


def _nchw_weight(t, w, layout):
    return w if layout == "NCHW" else w.permute(3, 2, 0, 1).contiguous()


def _torch_input_grad(t, g, w, stride, padding, dilation, layout, size):
    w = _nchw_weight(t, w, layout)
    n, c = g.shape[0], w.shape[1]
    g = g if layout == "NCHW" else g.permute(0, 3, 1, 2)
    dx = t.nn.grad.conv2d_input((n, c, *size), w, g, stride=stride, padding=padding, dilation=dilation)
    return dx if layout == "NCHW" else dx.permute(0, 2, 3, 1)


def _torch_weight_grad(t, g, x, kernel, stride, padding, dilation, layout):
    if layout == "NHWC":
        g, x = g.permute(0, 3, 1, 2), x.permute(0, 3, 1, 2)
    shape = (g.shape[1], x.shape[1], *kernel)
    dw = t.nn.grad.conv2d_weight(x, shape, g, stride=stride, padding=padding, dilation=dilation)
    return dw if layout == "NCHW" else dw.permute(2, 3, 1, 0)


def _grad_samples(which: str):
    def samples(rng: np.random.Generator) -> list[Sample]:
        out = []
        for sample in _conv_samples(rng):
            x, w = sample.args
            params = _conv_canon(None, None, **sample.params)
            g = uniform(rng, _conv_shape(x.shape, w.shape, **params))
            layout = params["layout"]
            if which == "input":
                out.append(Sample((g, w), {**sample.params, "size": spatial(x.shape, layout)[2:]}))
            else:
                kernel = weight_dims(w.shape, layout)[2:]
                out.append(Sample((g, x), {**sample.params, "kernel": kernel}))
        return out

    return samples


conv2d_input_grad = Op(
    "conv2d_input_grad",
    shape=_input_grad_shape,
    dtype=lambda g, w, **_: float_inputs(g, w),
    params=_input_grad_canon,
    decompose=_input_grad,
    vjp=_input_grad_vjp,
    samples=_grad_samples("input"),
    torch=_torch_input_grad,
    exact=False,
    doc="conv2d's gradient for its input: the columns W^T g added back into an image of `size` (col2im).",
)

conv2d_weight_grad = Op(
    "conv2d_weight_grad",
    shape=_weight_grad_shape,
    dtype=lambda g, x, **_: float_inputs(g, x),
    params=_weight_grad_canon,
    decompose=_weight_grad,
    vjp=_weight_grad_vjp,
    samples=_grad_samples("weight"),
    torch=_torch_weight_grad,
    exact=False,
    doc="conv2d's gradient for its weight (of `kernel` size): g times the transposed columns of x.",
)
