"""The cpu backend's pooling fast paths (pooling_tiled.c): windows that tile the image (stride == kernel, no
padding or dilation, the innermost axis contiguous). Bit for bit against the references on rows of windows
that fill whole vectors, half vectors, overlapping last vectors and no vector at all, images with columns
and rows no window covers, special values and ties, views, and 1/2/3 threads; and which cases the fast
path takes (the rest run pooling.c's general kernels)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from test_cpu_window import _assert_same_bits, _native, _reference, _values

import verigrad
from verigrad.backends import cpu
from verigrad.backends.cpu import pooling
from verigrad.backends.cpu import window as cpu_window
from verigrad.ops import REGISTRY
from verigrad.ops.composite.convolution import to_layout

SMALL_CHUNK = 1  # the min chunk the `small_chunks` fixture (conftest.py) sets

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

POOLS = ("max_pool2d", "avg_pool2d", "max_pool2d_grad")
# (N, C, H, W), kernel: with f32's 4 lanes and f64's 2, rows of 4, 14 (the CNN's 28x28), 5 and 3 windows
# (whole vectors and an overlapping last one), 2 and 1 (half vectors, or none), odd sizes (uncovered
# columns and rows), and windows of other sizes (the general fold); C 5 and 3 for NHWC's channel vectors
TILED = [
    ((2, 3, 8, 8), 2),
    ((1, 2, 28, 28), 2),
    ((2, 5, 9, 11), 2),
    ((2, 3, 7, 6), 2),
    ((2, 3, 4, 5), 2),
    ((2, 2, 5, 3), 2),
    ((2, 3, 9, 10), 3),
    ((2, 5, 8, 13), (2, 4)),
    ((2, 3, 7, 6), (3, 1)),
    ((2, 3, 5, 4), 1),
    # NHWC with one channel: the pools run their decompositions, the gradient pooling_tiled.c
    ((2, 1, 6, 8), 2),
    # NCHW rows 8 and 4 wide, taken as one run of windows, 8 a step (AVX2): whole steps, steps and a
    # rest, and a rest only
    ((2, 3, 4, 4), 2),
    ((3, 5, 4, 4), 2),
    ((1, 3, 6, 8), 2),
    ((1, 1, 2, 4), 2),
    # NCHW rows of 8 windows or more on AVX-512, 16 a step with the last one's lanes masked: 8, 16 (and
    # an uncovered column), 35 (two whole steps and 3)
    ((2, 2, 4, 16), 2),
    ((1, 2, 6, 33), 2),
    ((1, 2, 4, 70), 2),
]
KINDS = ("plain", "ties", "zeros", "special")


def _params(name: str, kernel: Any, layout: str) -> dict[str, Any]:
    params = {"kernel": kernel, "stride": kernel, "padding": 0, "layout": layout}
    return params if name == "avg_pool2d" else {**params, "dilation": 1}


def _arrays(name: str, shape: tuple, kernel: Any, layout: str, dtype: str, kind: str) -> list[np.ndarray]:
    """The op's operands; the gradient of max_pool2d_grad has the image's kind of values (signed zeros,
    NaN: the sum from 0 turns -0 into +0)."""
    rng = np.random.default_rng(len(shape) + sum(shape))
    x = to_layout(_values(rng, shape, dtype, kind), layout)
    if name != "max_pool2d_grad":
        return [x]
    with verigrad.backend("reference"), verigrad.no_grad():
        pooled = REGISTRY["max_pool2d"](verigrad.from_numpy(x), **_params("max_pool2d", kernel, layout))
    g = _values(rng, pooled.shape, dtype, kind)
    return [g, x]


@pytest.mark.parametrize("name", POOLS)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", range(len(TILED)))
def test_tiling_windows_give_the_reference_bits(name: str, layout: str, case: int, small_chunks) -> None:
    shape, kernel = TILED[case]
    params = _params(name, kernel, layout)
    verigrad.set_threads(3)
    for dtype, kind in itertools.product(("f32", "f64"), KINDS):
        arrays = _arrays(name, shape, kernel, layout, dtype, kind)
        _assert_same_bits(
            _native(name, dtype, arrays, params),
            _reference(name, arrays, params),
            f"{name} {dtype} {kind}",
        )


def _tiled_views(a: np.ndarray) -> list[np.ndarray]:
    """The same values through views whose innermost axis stays contiguous: axis 1 or 2 reversed (a
    negative stride), and every other image of a larger batch, cropped on the last two axes."""
    flipped = [np.flip(np.ascontiguousarray(np.flip(a, axis)), axis) for axis in (1, 2)]
    big = np.zeros((2 * a.shape[0], a.shape[1], a.shape[2] + 1, a.shape[3] + 3), a.dtype)
    big[::2, :, 1:, 3:] = a
    return [*flipped, big[::2, :, 1:, 3:]]


@pytest.mark.parametrize("name", POOLS)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("shape", [(2, 4, 6, 14), (2, 4, 6, 8)])
def test_views_are_read_in_place(name: str, layout: str, shape: tuple, small_chunks) -> None:
    kernel = 2
    params = _params(name, kernel, layout)
    verigrad.set_threads(2)
    arrays = _arrays(name, shape, kernel, layout, "f32", "ties")
    expected = _reference(name, arrays, params)
    for i in range(len(arrays)):
        for view in _tiled_views(arrays[i]):
            args = [*arrays[:i], view, *arrays[i + 1 :]]
            _assert_same_bits(_native(name, "f32", args, params), expected, f"{name} view of input {i}")
    if name == "max_pool2d_grad":  # a gradient broadcast over the batch (stride 0)
        g = np.broadcast_to(arrays[0][:1], arrays[0].shape)
        expected = _reference(name, [g, arrays[1]], params)
        _assert_same_bits(_native(name, "f32", [g, arrays[1]], params), expected, "broadcast gradient")


@pytest.mark.parametrize("name", POOLS)
def test_every_thread_count_gives_the_same_bits(name: str, small_chunks) -> None:
    for (shape, kernel), layout in itertools.product(
        [((3, 5, 11, 14), 2), ((3, 5, 9, 10), 3), ((3, 5, 4, 4), 2), ((5, 3, 6, 8), 2)], ("NCHW", "NHWC")
    ):
        arrays = _arrays(name, shape, kernel, layout, "f32", "ties")
        results = []
        for threads in (1, 2, 3, 1):
            verigrad.set_threads(threads)
            results.append(_native(name, "f32", arrays, _params(name, kernel, layout)).tobytes())
        assert len(set(results)) == 1, f"{name} {layout} kernel {kernel}"


def _takes(name: str, x: np.ndarray, layout: str, g_view: Any = None, **window: Any) -> bool:
    """Whether pooling_tiled.c's kernel takes the case (returns 1) rather than leaving it to pooling.c's; the
    gradient (max_pool2d_grad) is zeros of the pooled shape, seen through `g_view`."""
    window = {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1), **window}
    x_strides = cpu_window.logical(cpu_window.elements(x), layout)
    geo, (n, c, ho, wo) = cpu_window.geometry(x.shape, layout, *window.values(), x_strides)
    pooled = pooling._pooled_shape(n, c, ho, wo, layout)
    fn = getattr(cpu.cpu.library.cdll, f"vg_tile_{name.replace('2d', '')}_f32")
    if name != "max_pool2d_grad":
        out = np.empty(pooled, x.dtype)
        return bool(fn(x.ctypes.data, out.ctypes.data, geo, 1 << 30, 1))
    g = np.zeros(pooled, x.dtype)
    g = g if g_view is None else g_view(g)
    g_strides = cpu_window.logical(cpu_window.elements(g), layout)
    geo, _ = cpu_window.geometry(x.shape, layout, *window.values(), x_strides, g_strides)
    out = np.empty(x.shape, x.dtype)
    return bool(fn(x.ctypes.data, g.ctypes.data, out.ctypes.data, geo, 1 << 30, 1))


def test_the_fast_path_takes_the_tiling_windows_only() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 10)).astype(np.float32)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    for name in POOLS:
        assert _takes(name, x, "NCHW")
        assert _takes(name, x, "NCHW", kernel=(3, 3), stride=(3, 3))
        assert _takes(name, x, "NCHW", kernel=(1, 1), stride=(1, 1), dilation=(2, 3))
        assert _takes(name, x[:, ::-1, ::-1], "NCHW")
        assert _takes(name, nhwc, "NHWC")
        assert not _takes(name, x, "NCHW", padding=(1, 1))
        assert not _takes(name, x, "NCHW", stride=(2, 3))  # windows apart
        assert not _takes(name, x, "NCHW", kernel=(3, 3))  # windows overlap
        assert not _takes(name, x, "NCHW", dilation=(1, 2))
        assert not _takes(name, x[..., ::-1], "NCHW")  # w not contiguous
        assert not _takes(name, x.transpose(0, 2, 3, 1), "NHWC")  # c not contiguous
    assert not _takes("max_pool2d_grad", x, "NCHW", g_view=lambda g: g[..., ::-1])
    assert not _takes("max_pool2d_grad", x, "NCHW", g_view=lambda g: np.broadcast_to(g[..., :1], g.shape))
    assert _takes("max_pool2d_grad", x, "NCHW", g_view=lambda g: np.broadcast_to(g[:1], g.shape))
    assert not _takes("max_pool2d_grad", nhwc, "NHWC", g_view=lambda g: g[..., ::-1])
