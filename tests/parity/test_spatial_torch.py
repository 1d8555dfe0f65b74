"""Spatial layers against PyTorch in f64: pooling (1-D, 2-D, 3-D, adaptive, lp, integer), padding,
convolutions and interpolation: values, dtypes, shapes, indices and the gradients of sum(out * g)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import verigrad
import verigrad.nn as vnn
import verigrad.nn.functional as VF

RTOL = 1e-12
DTYPES = {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64", torch.uint8: "u8"}


def _both(x: np.ndarray, grad: bool) -> tuple[verigrad.Tensor, torch.Tensor]:
    ours = verigrad.from_numpy(x.copy())
    theirs = torch.from_numpy(x.copy())
    return (ours.requires_grad_(True), theirs.requires_grad_(True)) if grad else (ours, theirs)


def check(call: Callable[[Any, Any], Any], *arrays: np.ndarray, grad: bool = True, atol: float = 0) -> None:
    """call(F, *inputs) run with verigrad's functional (and nn) and PyTorch's: equal values, dtypes and
    shapes, equal indices where it returns (values, indices), and equal gradients of sum(out * g)."""
    pairs = [_both(a, grad) for a in arrays]
    out = call(VF, *(p[0] for p in pairs))
    expected = call(TF, *(p[1] for p in pairs))
    if isinstance(expected, tuple):
        np.testing.assert_array_equal(out[1].numpy(), expected[1].numpy())
        assert out[1].dtype.name == "i64" and expected[1].dtype == torch.int64
        out, expected = out[0], expected[0]
    assert out.shape == tuple(expected.shape)
    assert out.dtype.name == DTYPES[expected.dtype]
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=RTOL, atol=atol)
    if not grad:
        return
    g = np.random.default_rng(3).standard_normal(out.shape)
    out.backward(verigrad.from_numpy(g.copy()))
    expected.backward(torch.from_numpy(g.copy()))
    for (ours, theirs), _ in zip(pairs, arrays):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=RTOL, atol=max(atol, 1e-15))


def _module(name: str, *args: Any, **kwargs: Any) -> Callable[[Any, Any], Any]:
    """The layer `name` of verigrad.nn or torch.nn, picked by which functional module is passed."""
    return lambda F, x: getattr(vnn if F is VF else tnn, name)(*args, **kwargs)(x)


RNG = np.random.default_rng(0)
X5 = RNG.standard_normal((2, 3, 5, 6, 7))
TIES5 = np.maximum(np.round(X5), 0)  # ReLU-like: windows full of equal maxima
INPUTS = pytest.mark.parametrize("x5", [X5, TIES5], ids=["random", "ties"])


# pooling ------------------------------------------------------------------------------------------
@INPUTS
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": (2, 3, 2), "stride": (1, 2, 3), "ceil_mode": True},
        {"kernel_size": 3, "dilation": 2, "padding": 1},
        {"kernel_size": 2, "stride": 2, "ceil_mode": True, "return_indices": True},
        {"kernel_size": (3, 1, 2), "padding": (1, 0, 1), "return_indices": True},
    ],
)
def test_max_pool3d(x5: np.ndarray, window: dict) -> None:
    check(lambda F, x: F.max_pool3d(x, **window), x5)
    check(lambda F, x: F.max_pool3d(x, **window), x5[0])  # unbatched
    check(_module("MaxPool3d", **window), x5)


@INPUTS
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1},
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": (2, 3, 2), "stride": (1, 2, 3), "ceil_mode": True},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        {"kernel_size": 2, "divisor_override": 3},
    ],
)
def test_avg_pool3d(x5: np.ndarray, window: dict) -> None:
    check(lambda F, x: F.avg_pool3d(x, **window), x5)
    check(_module("AvgPool3d", **window), x5)


@INPUTS
@pytest.mark.parametrize("size", [1, 2, 3, (4, None, 5), (7, 8, 9)])
def test_adaptive_pool3d(x5: np.ndarray, size: Any) -> None:
    check(lambda F, x: F.adaptive_avg_pool3d(x, size), x5)
    check(lambda F, x: F.adaptive_max_pool3d(x, size, True), x5)
    check(_module("AdaptiveAvgPool3d", size), x5)
    check(_module("AdaptiveMaxPool3d", size), x5)


@INPUTS
@pytest.mark.parametrize("size", [1, 3, (4, 5), (5, 2), (None, 3), 8])
def test_adaptive_pool2d_any_size(x5: np.ndarray, size: Any) -> None:
    """Windows that do not divide the input; max: the gradient to each window's first maximum."""
    check(lambda F, x: F.adaptive_avg_pool2d(x, size), x5[0])
    check(lambda F, x: F.adaptive_max_pool2d(x, size, True), x5[0])
    check(lambda F, x: F.adaptive_max_pool2d(x, size), x5[0, 0])  # unbatched


@INPUTS
@pytest.mark.parametrize("size", [1, 3, 5, 9])
def test_adaptive_pool1d(x5: np.ndarray, size: int) -> None:
    check(lambda F, x: F.adaptive_avg_pool1d(x, size), x5[0, 0])
    check(lambda F, x: F.adaptive_max_pool1d(x, size, True), x5[0, 0])
    check(_module("AdaptiveMaxPool1d", size), x5[0, 0])


@INPUTS
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 2},
        {
            "kernel_size": 3,
            "stride": 2,
            "padding": 1,
            "dilation": 2,
            "ceil_mode": True,
            "return_indices": True,
        },
        {"kernel_size": 3, "stride": 2, "padding": 1, "return_indices": True},
    ],
)
def test_max_pool1d_options(x5: np.ndarray, window: dict) -> None:
    check(lambda F, x: F.max_pool1d(x, **window), x5[0, 0])
    check(_module("MaxPool1d", **window), x5[0, 0])


@pytest.mark.parametrize(
    "window", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}]
)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool1d_options(window: dict, count_include_pad: bool) -> None:
    check(lambda F, x: F.avg_pool1d(x, **window, count_include_pad=count_include_pad), X5[0, 0])
    check(_module("AvgPool1d", **window, count_include_pad=count_include_pad), X5[0, 0])


@pytest.mark.parametrize("window", [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "ceil_mode": True}])
def test_lp_pool(window: dict) -> None:
    x = np.abs(X5[0]) + 0.1
    check(lambda F, x: F.lp_pool2d(x, 2.5, **window), x)
    check(lambda F, x: F.lp_pool1d(x, 3, **window), x[0])
    check(_module("LPPool2d", 2, **window), x)
    check(_module("LPPool1d", 1.5, **window), x[0])


@pytest.mark.parametrize("dtype", [np.int64, np.uint8])
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 2},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "return_indices": True},
        {"kernel_size": 2, "dilation": 2, "return_indices": True},
    ],
)
def test_integer_max_pool(dtype: type, window: dict) -> None:
    """PyTorch's CPU max pools integers in their own dtype (its padding never wins)."""
    x = RNG.integers(-50 if dtype is np.int64 else 0, 50, (2, 3, 6, 7)).astype(dtype)
    check(lambda F, x: F.max_pool2d(x, **window), x, grad=False)
    check(lambda F, x: F.max_pool3d(x, **window), x[None], grad=False)
    check(lambda F, x: F.max_pool1d(x, 3, 2, 1, return_indices=True), x[0], grad=False)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_integer_refusals_match(dtype: type) -> None:
    """Where PyTorch's CPU has no integer kernel, verigrad refuses too."""
    x = np.ones((1, 2, 4, 4), dtype=dtype)
    for call in (
        lambda F, x: F.interpolate(x, scale_factor=2),
        lambda F, x: F.max_pool1d(x[0], 2),
        lambda F, x: F.adaptive_max_pool2d(x, 2),
    ):
        with pytest.raises((RuntimeError, NotImplementedError)):
            call(TF, torch.from_numpy(x))
        with pytest.raises(TypeError):
            call(VF, verigrad.from_numpy(x))


def test_max_pool3d_all_minus_inf_indices() -> None:
    """A window of -inf only: PyTorch's index is its first element inside the input, not the padding."""
    x = np.full((1, 1, 2, 3, 3), -np.inf)
    check(lambda F, x: F.max_pool3d(x, 3, 2, 1, return_indices=True), x)


# interpolation --------------------------------------------------------------------------------------
INTERPOLATE_SHAPES = {3: (2, 3, 7), 4: (1, 2, 5, 7), 5: (1, 2, 3, 5, 4)}
INTERPOLATE_MODES = [
    (nd, mode, corners)
    for nd, modes in (
        (3, ("nearest", "nearest-exact", "linear", "area")),
        (4, ("nearest", "nearest-exact", "bilinear", "bicubic", "area")),
        (5, ("nearest", "nearest-exact", "trilinear", "area")),
    )
    for mode in modes
    for corners in ((None,) if mode in ("nearest", "nearest-exact", "area") else (False, True))
]
SIZES = [1, 2, 3, 4, 5, 6, 7, 9, 10, 13, 17]
SCALES = [0.5, 0.7, 1.0, 1.1, 1.5, 1.7, 2.0, 2.5, 3.0, 1 / 3, 2.3, 0.9999, 4.2]
# Where an axis keeps its size (or, for nearest, doubles it) by a scale_factor other than 1 (or 2),
# PyTorch's backward kernels copy (or halve) while their forward kernels step by 1 / scale_factor, so
# PyTorch's gradient is not its forward's; verigrad's is (README: Running PyTorch code). Values only there.
FORWARD_ONLY = {"nearest": (1, 2), "bicubic": (1,)}


def _torch_backward_differs(shape: tuple, mode: str, nd: int, scale: float | None, recompute: Any) -> bool:
    if scale is None or recompute or (mode == "nearest" and nd == 4):
        return False
    return any(int(n * scale) == m * n and scale != m for n in shape[2:] for m in FORWARD_ONLY.get(mode, ()))


@pytest.mark.parametrize(("nd", "mode", "align_corners"), INTERPOLATE_MODES)
def test_interpolate_sizes(nd: int, mode: str, align_corners: bool | None) -> None:
    """Up and down to every size, PyTorch's source positions and weights exactly. atol 1e-12 as in
    gradients.py: PyTorch's kernels fuse multiply-adds, so a value near 0 (a cancelling sum) can differ
    in its last bits."""
    x = RNG.standard_normal(INTERPOLATE_SHAPES[nd])
    for size in SIZES:
        check(lambda F, x: F.interpolate(x, size=size, mode=mode, align_corners=align_corners), x, atol=1e-12)


@pytest.mark.parametrize(("nd", "mode", "align_corners"), INTERPOLATE_MODES)
@pytest.mark.parametrize("recompute", [None, True])
def test_interpolate_scale_factors(nd: int, mode: str, align_corners: bool | None, recompute: Any) -> None:
    """Non-integer scale factors: the source position steps by 1 / scale_factor unless recomputed."""
    x = RNG.standard_normal(INTERPOLATE_SHAPES[nd])
    for scale in SCALES:
        options = {"mode": mode, "align_corners": align_corners, "recompute_scale_factor": recompute}
        grad = not _torch_backward_differs(x.shape, mode, nd, scale, recompute)
        check(lambda F, x: F.interpolate(x, scale_factor=scale, **options), x, atol=1e-12, grad=grad)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_antialias(mode: str, align_corners: bool) -> None:
    """Antialiased shrinking (the filter widened by the scale, weights normalised) and growing."""
    x = RNG.standard_normal((2, 3, 9, 13))
    options = {"mode": mode, "align_corners": align_corners, "antialias": True}
    for size in [(1, 1), (2, 3), (4, 5), (5, 13), (9, 6), (12, 20), (3, 30)]:
        check(lambda F, x: F.interpolate(x, size=size, **options), x, atol=1e-12)
    for scale in [0.3, 0.5, 0.77, 1.5, 2.2]:
        for recompute in (None, True):
            call = lambda F, x: F.interpolate(
                x, scale_factor=scale, recompute_scale_factor=recompute, **options
            )
            check(call, x, atol=1e-12)
    # 1.1 keeps 9 and 13: PyTorch's forward copies, its backward steps by 1 / 1.1 (README)
    check(lambda F, x: F.interpolate(x, scale_factor=1.1, **options), x, atol=1e-12, grad=False)


def test_interpolate_per_axis_sizes_and_layers() -> None:
    x = RNG.standard_normal((1, 2, 5, 7))
    check(lambda F, x: F.interpolate(x, size=(3, 11), mode="bicubic", align_corners=True), x, atol=1e-12)
    check(lambda F, x: F.interpolate(x, scale_factor=(0.5, 2.5), mode="nearest-exact"), x)
    check(_module("Upsample", scale_factor=1.7, mode="bilinear"), x, atol=1e-12)
    check(_module("Upsample", size=(4, 9, 3), mode="trilinear"), x[None], atol=1e-12)
    check(_module("UpsamplingNearest2d", scale_factor=3), x)
    check(_module("UpsamplingBilinear2d", size=(8, 4)), x, atol=1e-12)


def test_interpolate_nearest_of_integers() -> None:
    x = RNG.integers(0, 255, (1, 3, 4, 5)).astype(np.uint8)
    check(lambda F, x: F.interpolate(x, scale_factor=1.7), x, grad=False)


@pytest.mark.parametrize(
    "options",
    [
        {"size": 4, "scale_factor": 2},
        {},
        {"size": (2, 3), "mode": "linear"},
        {"size": 4, "mode": "bilinear"},
        {"size": 4, "mode": "nearest", "align_corners": True},
        {"size": 4, "mode": "linear", "recompute_scale_factor": True},
        {"size": 4, "mode": "linear", "antialias": True},
        {"size": 4, "mode": "cubic"},
    ],
)
def test_interpolate_refusals_match(options: dict) -> None:
    x = np.ones((1, 2, 6))
    with pytest.raises((ValueError, NotImplementedError, RuntimeError)):
        TF.interpolate(torch.from_numpy(x), **options)
    with pytest.raises((ValueError, NotImplementedError)):
        VF.interpolate(verigrad.from_numpy(x), **options)


# padding ------------------------------------------------------------------------------------------
PADS = {
    1: [(1, 2), (-1, 2), (2, -3), (-1, -2), (0, 4)],
    2: [(1, 2, 0, 3), (1, -2, -1, 1), (-1, -1, -1, -1), (2, -1, 3, 0)],
    3: [(1, 2, 0, 1, 2, 1), (-1, 1, 2, -2, 1, 0), (0, 0, -1, 1, 1, 1)],
}


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("axes", [1, 2, 3])
@pytest.mark.parametrize("batched", [True, False])
def test_pad_modes_and_negative_widths(mode: str, axes: int, batched: bool) -> None:
    """Each mode on 1 to 3 trailing axes, widths cropping (negative) as well as padding."""
    x = RNG.standard_normal((2, 3, 5, 6, 7)[4 - axes - batched :])
    for widths in PADS[axes]:
        check(lambda F, x: F.pad(x, widths, mode=mode), x)
    if mode == "constant":
        check(lambda F, x: F.pad(x, PADS[axes][1], value=2.5), x)


@pytest.mark.parametrize("axes", [1, 2, 3])
def test_padding_layers(axes: int) -> None:
    x = RNG.standard_normal((2, 3, 5, 6, 7)[3 - axes :])
    widths = PADS[axes][1]
    for kind in ("Zero", "Reflection", "Replication", "Circular"):
        check(_module(f"{kind}Pad{axes}d", widths), x)
        check(_module(f"{kind}Pad{axes}d", 1), x)
    check(_module(f"ConstantPad{axes}d", widths, -1.5), x)


@pytest.mark.parametrize(
    ("widths", "mode", "value", "shape"),
    [
        ((1, 1), "reflect", 1.0, (2, 6)),
        ((7, 0), "circular", None, (2, 6)),
        ((6, 0), "reflect", None, (2, 6)),
        ((1, 1), "reflect", None, (6,)),
        ((1, 1), "replicate", None, (1, 1, 1, 6)),
        ((-3, -4), "constant", None, (2, 6)),
    ],
)
def test_pad_refusals_match(widths: tuple, mode: str, value: Any, shape: tuple) -> None:
    x = np.ones(shape)
    with pytest.raises((RuntimeError, NotImplementedError, ValueError)):
        TF.pad(torch.from_numpy(x), widths, mode=mode, value=value)
    with pytest.raises((ValueError, NotImplementedError)):
        VF.pad(verigrad.from_numpy(x), widths, mode=mode, value=value)


# convolutions -------------------------------------------------------------------------------------
CONV_WINDOWS = [
    {},
    {"stride": 2, "padding": 1, "dilation": 2},
    {"padding": "same", "dilation": 2},
    {"padding": "same"},
    {"padding": "valid", "stride": 3},
]
TRANSPOSED_WINDOWS = [
    {},
    {"stride": 2, "padding": 1},
    {"stride": 2, "padding": 1, "output_padding": 1, "dilation": 2},
    {"stride": 3, "output_padding": 2},
    {"dilation": 2, "output_padding": 1},  # output_padding past the stride: windows that read zeros
]
CONV_INPUTS = {1: (2, 4, 9), 2: (2, 4, 7, 8), 3: (2, 4, 5, 6, 7)}
KERNELS = {1: (3,), 2: (3, 2), 3: (2, 3, 2)}


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("window", CONV_WINDOWS)
def test_convolutions(dims: int, groups: int, window: dict) -> None:
    """conv1d/2d/3d, grouped (4: depthwise) and dilated, with padding "same" (odd and even totals) and
    "valid": values and the gradients of the input, the weight and the bias."""
    x = RNG.standard_normal(CONV_INPUTS[dims])
    w = RNG.standard_normal((8, 4 // groups, *KERNELS[dims]))
    b = RNG.standard_normal(8)
    name = f"conv{dims}d"
    check(lambda F, x, w, b: getattr(F, name)(x, w, b, groups=groups, **window), x, w, b, atol=1e-12)


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("window", TRANSPOSED_WINDOWS)
def test_transposed_convolutions(dims: int, groups: int, window: dict) -> None:
    x = RNG.standard_normal(CONV_INPUTS[dims])
    w = RNG.standard_normal((4, 2, *KERNELS[dims]))  # [C_in, C_out / groups, *kernel]
    b = RNG.standard_normal(2 * groups)
    name = f"conv_transpose{dims}d"
    check(lambda F, x, w, b: getattr(F, name)(x, w, b, groups=groups, **window), x, w, b, atol=1e-12)


def test_positional_arguments_are_pytorchs() -> None:
    """groups is conv's 7th argument and conv_transpose's 7th (dilation its 8th), as in PyTorch."""
    x, w = RNG.standard_normal((1, 4, 6, 6)), RNG.standard_normal((4, 2, 3, 3))
    check(lambda F, x, w: F.conv2d(x, w, None, 1, 1, 2, 2), x, w, atol=1e-12)
    check(lambda F, x, w: F.conv_transpose2d(x, w, None, 2, 1, 1, 2, 2), x, w, atol=1e-12)


def _load(ours: Any, theirs: Any) -> None:
    ours.load_state_dict({k: verigrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, "same", (2, 1, 0)])
def test_conv_layers_padding_modes(dims: int, padding_mode: str, padding: Any) -> None:
    """nn.Conv1d/2d/3d with PyTorch's positional arguments (stride, padding, dilation, groups, bias,
    padding_mode) and its state dict: outputs and every gradient."""
    padding = padding[:dims] if isinstance(padding, tuple) else padding
    args = (4, 6, KERNELS[dims], 1, padding, 2 if padding == "same" else 1, 2, True, padding_mode)
    theirs = getattr(tnn, f"Conv{dims}d")(*args).double()
    ours = getattr(vnn, f"Conv{dims}d")(*args).double()
    assert ours.weight.shape == tuple(theirs.weight.shape)
    _load(ours, theirs)
    x = RNG.standard_normal(CONV_INPUTS[dims])
    check(lambda F, x: ours(x) if F is VF else theirs(x), x, atol=1e-12)
    for name in ("weight", "bias"):
        np.testing.assert_allclose(
            getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(), rtol=RTOL, atol=1e-12
        )


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_conv_transpose_layers(dims: int) -> None:
    args = (
        4,
        6,
        KERNELS[dims],
        2,
        1,
        1,
        2,
        True,
        2,
    )  # stride, padding, output_padding, groups, bias, dilation
    theirs = getattr(tnn, f"ConvTranspose{dims}d")(*args).double()
    ours = getattr(vnn, f"ConvTranspose{dims}d")(*args).double()
    assert ours.weight.shape == tuple(theirs.weight.shape)
    _load(ours, theirs)
    check(lambda F, x: ours(x) if F is VF else theirs(x), RNG.standard_normal(CONV_INPUTS[dims]), atol=1e-12)


def test_conv_layer_refusals() -> None:
    with pytest.raises(ValueError, match="padding_mode must be one of zeros, reflect"):
        vnn.Conv2d(2, 2, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='only "zeros" padding_mode'):
        vnn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="divisible by groups"):
        vnn.Conv1d(4, 6, 3, groups=4)
    with pytest.raises(ValueError):
        tnn.Conv1d(4, 6, 3, groups=4)


# 2-D pooling options ------------------------------------------------------------------------------
@INPUTS
@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {"kernel_size": (2, 3), "stride": (2, 1), "dilation": (2, 1), "return_indices": True},
        {
            "kernel_size": 3,
            "stride": 2,
            "padding": 1,
            "dilation": 2,
            "ceil_mode": True,
            "return_indices": True,
        },
    ],
)
def test_max_pool2d_options(x5: np.ndarray, window: dict) -> None:
    check(lambda F, x: F.max_pool2d(x, **window), x5[0])
    check(_module("MaxPool2d", **window), x5[0])


@pytest.mark.parametrize(
    "window",
    [
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        {"kernel_size": (2, 3), "divisor_override": 4},
    ],
)
def test_avg_pool2d_options(window: dict) -> None:
    check(lambda F, x: F.avg_pool2d(x, **window), X5[0])
    check(_module("AvgPool2d", **window), X5[0])


def test_max_unpool2d() -> None:
    x = np.ascontiguousarray(X5[0, ..., :6])
    pooled, indices = TF.max_pool2d(torch.from_numpy(x), 2, return_indices=True)
    check(
        lambda F, p: F.max_unpool2d(p, verigrad.from_numpy(indices.numpy()) if F is VF else indices, 2),
        pooled.numpy(),
    )


def test_unbatched_inputs() -> None:
    """PyTorch's convolutions and pools take an input without its batch axis."""
    x1, x2, x3 = (
        RNG.standard_normal((4, 9)),
        RNG.standard_normal((4, 7, 8)),
        RNG.standard_normal((4, 5, 6, 7)),
    )
    w = RNG.standard_normal((6, 2, 3, 3, 3))
    check(lambda F, x, w: F.conv1d(x, w, groups=2), x1, w[:, :, 0, 0], atol=1e-12)
    check(lambda F, x, w: F.conv2d(x, w, padding=1, groups=2), x2, w[:, :, 0], atol=1e-12)
    check(lambda F, x, w: F.conv3d(x, w, groups=2), x3, w, atol=1e-12)
    wt = RNG.standard_normal((4, 3, 3, 3, 3))
    check(lambda F, x, w: F.conv_transpose1d(x, w, stride=2), x1, wt[:, :, 0, 0], atol=1e-12)
    check(lambda F, x, w: F.conv_transpose2d(x, w, stride=2), x2, wt[:, :, 0], atol=1e-12)
    check(lambda F, x, w: F.conv_transpose3d(x, w, stride=2), x3, wt, atol=1e-12)
    check(lambda F, x: F.max_pool1d(x, 2, return_indices=True), x1)
    check(lambda F, x: F.avg_pool1d(x, 3, 2, 1), x1)
    check(lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x2)
    check(lambda F, x: F.avg_pool2d(x, 2, ceil_mode=True), x2)
    check(lambda F, x: F.avg_pool3d(x, 2), x3)
    check(lambda F, x: F.adaptive_avg_pool2d(x, 3), x2)


def test_float32_keeps_its_dtype() -> None:
    """f32 in, f32 out, PyTorch's values to f32 rounding (its kernels and ours round differently)."""
    x = RNG.standard_normal((1, 2, 9, 11)).astype(np.float32)
    w = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)  # [C_in, C_out, 3, 3]
    weights = {VF: verigrad.from_numpy(w), TF: torch.from_numpy(w)}
    calls = [
        lambda F, x: F.interpolate(x, scale_factor=2.3, mode="bicubic"),
        lambda F, x: F.interpolate(x, size=(4, 17), mode="bilinear", align_corners=True),
        lambda F, x: F.interpolate(x, scale_factor=0.7, mode="nearest-exact"),
        lambda F, x: F.max_pool3d(x, 2),
        lambda F, x: F.avg_pool3d(x, 2, ceil_mode=True),
        lambda F, x: F.adaptive_avg_pool2d(x, (4, 5)),
        lambda F, x: F.pad(x, (2, -1, 1, 1), mode="circular"),
        lambda F, x: F.conv_transpose2d(x, weights[F], stride=2),
    ]
    for call in calls:
        out, expected = call(VF, verigrad.from_numpy(x)), call(TF, torch.from_numpy(x))
        assert out.dtype.name == "f32" and out.shape == tuple(expected.shape)
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool(dims: int) -> None:
    """max_pool's values back at their indices, overlapping windows too (a position named twice)."""
    x = RNG.standard_normal((2, 3, 6, 4, 6)[3 - dims :])
    for kernel, stride in ((2, None), (3, 2)):
        pooled, indices = getattr(TF, f"max_pool{dims}d")(
            torch.from_numpy(x), kernel, stride, return_indices=True
        )
        given = {VF: verigrad.from_numpy(indices.numpy()), TF: indices}
        if stride is None:  # else the default size, (n - 1) stride + kernel, is 5 and misses index 5
            check(lambda F, p: getattr(F, f"max_unpool{dims}d")(p, given[F], kernel, stride), pooled.numpy())
        sizes = x.shape[2:]
        check(
            lambda F, p: getattr(F, f"max_unpool{dims}d")(p, given[F], kernel, stride, 0, sizes),
            pooled.numpy(),
        )
        unpool = {
            VF: getattr(vnn, f"MaxUnpool{dims}d")(kernel, stride),
            TF: getattr(tnn, f"MaxUnpool{dims}d")(kernel, stride),
        }
        check(lambda F, p: unpool[F](p, given[F], sizes), pooled.numpy())


def test_deprecated_upsample_functions() -> None:
    x = RNG.standard_normal((1, 2, 5, 7))
    check(lambda F, x: F.upsample(x, scale_factor=1.5, mode="bicubic"), x, atol=1e-12)
    check(lambda F, x: F.upsample_nearest(x, size=(3, 9)), x)
    check(lambda F, x: F.upsample_bilinear(x, scale_factor=2), x, atol=1e-12)


def test_max_pool_nan_windows() -> None:
    """A window holding NaN: NaN, and the index and gradient of its last NaN, as PyTorch's kernels."""
    x = RNG.standard_normal((1, 2, 4, 6, 6))
    x[RNG.random(x.shape) < 0.2] = np.nan
    check(lambda F, x: F.max_pool3d(x, 2, return_indices=True), x)
    check(lambda F, x: F.max_pool3d(x, 3, 2, 1, ceil_mode=True), x)
    check(lambda F, x: F.adaptive_max_pool3d(x, (3, 4, 5), return_indices=True), x)
    check(lambda F, x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x[0])
    check(lambda F, x: F.adaptive_max_pool2d(x, 4, return_indices=True), x[0])
    check(lambda F, x: F.max_pool1d(x, 2, return_indices=True), x[0, 0])


def test_empty_adaptive_outputs() -> None:
    """An output size of 0 gives PyTorch's empty output (area interpolation too); PyTorch's backward
    refuses an empty gradient, so values only."""
    x = RNG.standard_normal((1, 2, 3, 5, 4))
    check(lambda F, x: F.adaptive_avg_pool3d(x, (0, 2, 2)), x, grad=False)
    check(lambda F, x: F.adaptive_max_pool2d(x[0], (0, 2), True), x[0], grad=False)
    check(lambda F, x: F.interpolate(x, scale_factor=0.3, mode="area"), x, grad=False)
