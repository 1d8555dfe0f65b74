"""The cpu backend's convolution kernels (conv2d, conv2d_input_grad, conv2d_weight_grad) against the ops'
references: NCHW and NHWC, f32 and f64, strides, padding, dilation, batches that split into blocks, the
same bits on 1, 2 and 3 threads, each result within `error_bound`; the reference's bits in exact mode and
where a result is not finite; gradients through conv2d against autograd through its decomposition; and
the compiled CNN training step running the kernels."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

import verigrad
from verigrad import nn, optim
from verigrad.backends import cpu
from verigrad.backends.cpu import matmul as cpu_matmul
from verigrad.backends.cpu.convolution import CONVOLUTION, error_bound, implicit_path
from verigrad.backends.reference import composite_reference
from verigrad.cli.trainer import training_step
from verigrad.ops import REGISTRY

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

DTYPES = {"f32": np.float32, "f64": np.float64}
# (N, C, H, W), O, kernel, stride, padding, dilation
CASES = [
    ((2, 3, 7, 6), 4, 3, 1, 1, 1),
    ((3, 2, 9, 8), 5, (3, 2), (2, 3), (1, 0), (1, 2)),
    ((1, 1, 5, 5), 1, 1, 1, 0, 1),
    ((17, 3, 6, 7), 2, 3, 2, 2, 2),  # 17 images: blocks of 3, the last one short
    ((64, 1, 12, 12), 8, 3, 1, 1, 1),  # the digits CNN's first layer, smaller
    ((9, 16, 5, 5), 32, 3, 1, 1, 1),  # its second
    ((4, 2, 4, 9), 3, (2, 4), (1, 3), (0, 2), (2, 1)),
    ((5, 3, 4, 4), 2, 3, 1, 1, 1),  # rows of 4 and of 8: the fixed-length copies
    ((3, 2, 6, 8), 4, 3, 1, 1, 1),
    ((2, 2, 4, 8), 3, 3, 1, 0, 1),
    ((6, 1, 9, 19), 5, 3, 1, 1, 1),  # one channel: the direct path, a row's last vector overlapping
    ((3, 1, 7, 17), 6, (2, 5), 1, (0, 2), 1),  # the direct path's taps other than 3x3
    ((4, 1, 28, 28), 16, 3, 1, 1, 1),  # the digits CNN's first layer
]


def _case(rng: np.random.Generator, dtype, layout: str, shape, o, k, s, p, d) -> tuple:
    """(x, w, g, params) with x and w in `layout` and g of conv2d's output shape."""
    kh, kw = (k, k) if isinstance(k, int) else k
    x = rng.uniform(-2, 2, shape).astype(dtype)
    w = rng.uniform(-1, 1, (o, shape[1], kh, kw)).astype(dtype)
    if layout == "NHWC":
        x, w = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(w.transpose(2, 3, 1, 0))
    specs = (verigrad.from_numpy(x).spec, verigrad.from_numpy(w).spec)
    params = REGISTRY["conv2d"].canonical_params(*specs, stride=s, padding=p, dilation=d, layout=layout)
    out = composite_reference(REGISTRY["conv2d"])(x, w, **params)
    g = rng.uniform(-1, 1, out.shape).astype(dtype)
    return x, w, g, params


def _calls(x, w, g, params) -> dict[str, tuple[tuple, dict[str, Any]]]:
    """Each op's operands and params for one case."""
    layout = params["layout"]
    size = x.shape[2:] if layout == "NCHW" else x.shape[1:3]
    kernel = w.shape[2:] if layout == "NCHW" else w.shape[:2]
    return {
        "conv2d": ((x, w), params),
        "conv2d_input_grad": ((g, w), {**params, "size": tuple(size)}),
        "conv2d_weight_grad": ((g, x), {**params, "kernel": tuple(kernel)}),
    }


def _kernel(op: str, dtype: str):
    kernel = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))
    assert kernel is not None, f"no cpu kernel for {op} {dtype}"
    return kernel


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", CASES, ids=[str(c[0]) for c in CASES])
def test_kernels_are_within_their_bound_and_thread_independent(dtype, layout, case, small_chunks):
    rng = np.random.default_rng(5)
    x, w, g, params = _case(rng, DTYPES[dtype], layout, *case)
    for op, (arrays, p) in _calls(x, w, g, params).items():
        kernel = _kernel(op, dtype)
        results = []
        for n in (1, 2, 3):
            verigrad.set_threads(n)
            results.append(kernel(*arrays, **p))
        ref = composite_reference(REGISTRY[op])(*arrays, **p)
        out = results[0]
        assert out.shape == ref.shape and out.dtype == ref.dtype, op
        for other in results[1:]:
            assert other.tobytes() == out.tobytes(), f"{op}: the bits depend on the thread count"
        err = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        bound = error_bound(op, *arrays, **p)
        assert (err <= bound).all(), f"{op}: error {err.max():.3g} over the bound at {np.argmax(err > bound)}"


def test_the_c_path_runs_and_is_not_the_reference(monkeypatch):
    """On f32 operands the kernels compute (the reference is never called), and give other bits than the
    reference somewhere: OpenBLAS sums in f32, the reference in double."""
    rng = np.random.default_rng(1)
    x, w, g, params = _case(rng, np.float32, "NCHW", *CASES[5])
    differs = set()
    for op, (arrays, p) in _calls(x, w, g, params).items():
        kernel = _kernel(op, "f32")

        def refuse(*_: Any, **__: Any) -> None:
            raise AssertionError("the reference ran")

        monkeypatch.setitem(kernel.__self__.reference, op, refuse)
        out = kernel(*arrays, **p)
        monkeypatch.undo()
        if out.tobytes() != composite_reference(REGISTRY[op])(*arrays, **p).tobytes():
            differs.add(op)
    assert differs == set(CONVOLUTION)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_one_channel_images_sum_each_elements_taps_in_order(dtype):
    """conv2d of one-channel images (stride and dilation 1) runs the direct path: each element is the
    sum of its products in tap order from 0, in the dtype, whatever column of a vector it falls in."""
    rng = np.random.default_rng(6)
    for shape, o, k, p in [((5, 1, 9, 19), 6, 3, 1), ((2, 1, 6, 12), 3, (2, 5), (0, 2))]:
        x, w, _, params = _case(rng, DTYPES[dtype], "NCHW", shape, o, k, 1, p, 1)
        out = _kernel("conv2d", dtype)(x, w, **params)
        (ph, pw), (kh, kw) = params["padding"], w.shape[2:]
        padded = np.pad(x[:, 0], ((0, 0), (ph, ph), (pw, pw)))
        ho, wo = out.shape[2:]
        expected = np.zeros(out.shape, x.dtype)
        for i in range(kh):
            for j in range(kw):
                window = padded[:, None, i : i + ho, j : j + wo]
                expected = expected + window * w[None, :, 0, i, j, None, None]
        assert out.tobytes() == expected.tobytes()


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """f32 a * b + c rounded once (as an FMA instruction): the product is exact in double, the sum's
    rounding error exact by TwoSum; the double sum rounds to the right f32 unless it is halfway between
    two f32 values, where the error's sign decides."""
    p = a.astype(np.float64) * b
    s = p + c
    v = s - p
    e = (p - (s - v)) + (c - v)
    r = s.astype(np.float32)
    other = np.nextafter(r, np.where(s > r, np.float32(np.inf), np.float32(-np.inf)))
    halfway = (s == (r.astype(np.float64) + other) / 2) & (e != 0)
    up = np.maximum(r, other)
    down = np.minimum(r, other)
    return np.where(halfway, np.where(e > 0, up, down), r).astype(np.float32)


def _fma_chain(x: np.ndarray, w: np.ndarray, padding: tuple, dilation: int = 1) -> np.ndarray:
    """conv2d (NCHW, stride 1) with each element one chain of f32 fused multiply-adds over the taps
    (c, i, j) in order from 0."""
    ph, pw = padding
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    o, c, kh, kw = w.shape
    d = dilation
    ho, wo = xp.shape[2] - (kh - 1) * d, xp.shape[3] - (kw - 1) * d
    acc = np.zeros((x.shape[0], o, ho, wo), np.float32)
    for ch in range(c):
        for i in range(kh):
            for j in range(kw):
                window = xp[:, None, ch, i * d : i * d + ho, j * d : j * d + wo]
                acc = _fma(np.broadcast_to(window, acc.shape), w[None, :, ch, i, j, None, None], acc)
    return acc


def _implicit_rows(h: int, w: int) -> bool:
    """Whether a stride-1 convolution with this output size takes the implicit path."""
    return w >= 8 or (w == 4 and h % 2 == 0)


def test_stride_one_convolutions_are_one_fma_chain_per_element():
    """f32 conv2d of several channels, stride 1, on a CPU with AVX2 and FMA: the implicit-GEMM path
    (no columns), each element one FMA chain over its taps in order (rows of 8 and of 4 pixels); the
    input gradient takes the same path as a convolution of the output gradient with the flipped kernel,
    and the weight gradient sums each weight's products in one FMA chain per block of images."""
    if not implicit_path(cpu.cpu.library):
        pytest.skip("the implicit path needs AVX2 and FMA")
    rng = np.random.default_rng(7)
    # six channels or more each way (9 and 10: the weight gradient transposes blocks of 8 and a rest);
    # rows of 8 and of 4 (from images 4 wide with padding 1, 6 wide with none, and the input gradient
    # of padding 2); rows of 6 take the GEMM path
    for shape, o, pad in [
        ((2, 6, 4, 4), 9, 1),
        ((1, 6, 3, 10), 10, 1),
        ((2, 7, 6, 6), 6, 0),
        ((2, 6, 4, 4), 6, 2),
    ]:
        x = rng.uniform(-2, 2, shape).astype(np.float32)
        w = rng.uniform(-1, 1, (o, shape[1], 3, 3)).astype(np.float32)
        params = {"stride": (1, 1), "padding": (pad, pad), "dilation": (1, 1), "layout": "NCHW"}
        out = _kernel("conv2d", "f32")(x, w, **params)
        forward_implicit = _implicit_rows(*out.shape[2:])
        if forward_implicit:
            assert out.tobytes() == _fma_chain(x, w, (pad, pad)).tobytes()
        g = rng.uniform(-1, 1, out.shape).astype(np.float32)
        flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
        dx = _kernel("conv2d_input_grad", "f32")(g, w, **params, size=shape[2:])
        if _implicit_rows(*shape[2:]):
            assert dx.tobytes() == _fma_chain(g, flipped, (2 - pad, 2 - pad)).tobytes()
        if not forward_implicit:
            continue
        # the weight gradient: per image (a block of one, for so few), one FMA chain over its pixels in
        # order for each weight; the images' sums added in order in double and rounded once
        dw = _kernel("conv2d_weight_grad", "f32")(g, x, **params, kernel=(3, 3))
        per_image = [
            _fma_chain(x[b : b + 1].transpose(1, 0, 2, 3), g[b : b + 1].transpose(1, 0, 2, 3), (pad, pad))
            for b in range(shape[0])
        ]
        expected = np.sum([p.astype(np.float64) for p in per_image], axis=0).astype(np.float32)
        assert dw.tobytes() == np.ascontiguousarray(expected.transpose(1, 0, 2, 3)).tobytes()


@pytest.mark.parametrize("lanes", [False, True])
def test_output_channels_in_the_lanes_give_the_same_fma_chains(lanes):
    """On AVX-512 the implicit path puts 16 output channels in a vector's lanes and broadcasts the pixels
    (rows of 8 or more, 16 channels or more): each element is still one FMA chain over its taps in order,
    the same bits as the AVX2 path's. On and off (on a machine without AVX-512 both are the AVX2 path):
    rows in runs of 14 and of 8 with a last run overlapping, channel counts that leave a partial vector
    and a last block of one vector, dilation, and the input gradient of a layer of 16 input channels."""
    if not implicit_path(cpu.cpu.library):
        pytest.skip("the implicit path needs AVX2 and FMA")
    rng = np.random.default_rng(8)
    switch = cpu.cpu.library.fn("vg_conv_lanes", [ctypes.c_int])
    try:
        switch(int(lanes))
        for shape, o, pad, dil in [
            ((2, 6, 14, 14), 32, 1, 1),
            ((1, 5, 9, 20), 20, 1, 1),
            ((2, 3, 10, 10), 40, 1, 1),
            ((1, 4, 12, 13), 17, 2, 2),
            ((2, 16, 12, 12), 6, 1, 1),
        ]:
            x = rng.uniform(-2, 2, shape).astype(np.float32)
            w = rng.uniform(-1, 1, (o, shape[1], 3, 3)).astype(np.float32)
            params = {"stride": (1, 1), "padding": (pad, pad), "dilation": (dil, dil), "layout": "NCHW"}
            out = _kernel("conv2d", "f32")(x, w, **params)
            assert out.tobytes() == _fma_chain(x, w, (pad, pad), dil).tobytes(), shape
            if dil == 1 and pad == 1 and shape[1] >= 6:  # fewer channels: the input gradient's GEMM path
                g = rng.uniform(-1, 1, out.shape).astype(np.float32)
                flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
                dx = _kernel("conv2d_input_grad", "f32")(g, w, **params, size=shape[2:])
                assert dx.tobytes() == _fma_chain(g, flipped, (1, 1)).tobytes(), shape
    finally:
        switch(1)


@pytest.mark.parametrize("case", CASES, ids=[str(c[0]) for c in CASES])
def test_exact_mode_gives_the_same_bits_on_every_thread_count(case, small_chunks):
    """Exact mode runs the reference, whose GEMMs NumPy's BLAS would split over the threads set (other
    bits for larger products, as (64, 1, 12, 12) gives): the kernels pin it to one."""
    rng = np.random.default_rng(6)
    for layout in ("NCHW", "NHWC"):
        x, w, g, params = _case(rng, np.float64, layout, *case)
        with cpu_matmul.exact_mode():
            for op, (arrays, p) in _calls(x, w, g, params).items():
                results = []
                for n in (1, 2, 3):
                    verigrad.set_threads(n)
                    results.append(_kernel(op, "f64")(*arrays, **p).tobytes())
                assert results[1:] == results[:1] * 2, (op, layout)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_exact_mode_gives_the_reference_bits(layout):
    rng = np.random.default_rng(2)
    x, w, g, params = _case(rng, np.float32, layout, *CASES[1])
    with cpu_matmul.exact_mode():
        for op, (arrays, p) in _calls(x, w, g, params).items():
            out = _kernel(op, "f32")(*arrays, **p)
            assert out.tobytes() == composite_reference(REGISTRY[op])(*arrays, **p).tobytes(), op


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_a_result_that_is_not_finite_is_the_references(layout):
    """An infinity or a NaN in the result sends the call to the reference: the same bits, NaN included."""
    rng = np.random.default_rng(3)
    x, w, g, params = _case(rng, np.float32, layout, *CASES[0])
    x.reshape(-1)[5] = np.inf
    g.reshape(-1)[3] = np.nan
    w.reshape(-1)[0] = 3e38  # finite, but an f32 partial sum overflows
    for op, (arrays, p) in _calls(x, w, g, params).items():
        before = cpu.cpu.reruns()
        out = _kernel(op, "f32")(*arrays, **p)
        assert cpu.cpu.reruns() == before + 1, op  # counted, for the verification's check
        ref = composite_reference(REGISTRY[op])(*arrays, **p)
        assert not np.isfinite(ref).all()
        np.testing.assert_array_equal(out, ref, strict=True)
    x, w, g, params = _case(rng, np.float32, layout, *CASES[0])
    before = cpu.cpu.reruns()
    for op, (arrays, p) in _calls(x, w, g, params).items():
        _kernel(op, "f32")(*arrays, **p)
    assert cpu.cpu.reruns() == before  # finite results: nothing computed again


def test_other_dtypes_and_mixed_operands_run_the_reference():
    rng = np.random.default_rng(4)
    x, w, g, params = _case(rng, np.float64, "NCHW", *CASES[0])
    assert cpu.cpu.native(REGISTRY["conv2d"], verigrad.f16) is None
    out = _kernel("conv2d", "f64")(x.astype(np.float32), w, **params)  # f32 image, f64 weight
    ref = composite_reference(REGISTRY["conv2d"])(x.astype(np.float32), w, **params)
    assert out.dtype == np.float64 and out.tobytes() == ref.tobytes()
    empty = _kernel("conv2d_weight_grad", "f64")(g[:0], x[:0], **params, kernel=(3, 3))
    assert empty.shape == w.shape and not empty.any()


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_gradients_through_conv2d_match_autograd_through_its_decomposition(layout):
    """conv2d's VJP (its two ops, run by the cpu kernels) against the gradient of the decomposition on
    the reference backend, in f64."""
    rng = np.random.default_rng(6)
    x, w, g, params = _case(rng, np.float64, layout, *CASES[3])
    grads = {}
    for backend in ("cpu", "reference"):
        with verigrad.backend(backend):
            xt, wt = (verigrad.from_numpy(a.copy()).requires_grad_() for a in (x, w))
            if backend == "cpu":
                out = REGISTRY["conv2d"](xt, wt, **params)
                assert out._node.op is REGISTRY["conv2d"]  # one tape node: the VJP runs the two ops
            else:
                out = REGISTRY["conv2d"].decompose(xt, wt, **params)
            (out * verigrad.from_numpy(g)).sum().backward()
            grads[backend] = (xt.grad.numpy(), wt.grad.numpy())
    for ours, theirs in zip(grads["cpu"], grads["reference"]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_the_first_layers_input_gradient_is_not_computed():
    """Images that want no gradient get none: the VJP skips conv2d_input_grad for them."""
    rng = np.random.default_rng(7)
    x, w, _, params = _case(rng, np.float32, "NCHW", *CASES[0])
    with verigrad.backend("cpu"):
        xt, wt = verigrad.from_numpy(x), verigrad.from_numpy(w).requires_grad_()
        out = REGISTRY["conv2d"](xt, wt, **params)
        dx, dw = REGISTRY["conv2d"].vjp(verigrad.ones_like(out), out, xt, wt, **params)
    assert dx is None and dw.shape == w.shape


def _cnn_run(backend: str, x, y, steps: int = 2) -> tuple[list[float], list[np.ndarray], Any]:
    verigrad.manual_seed(0)
    with verigrad.backend(backend):
        model = verigrad.models.digits_cnn(12, 12)
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        compiled = verigrad.compile(training_step(model, opt, nn.CrossEntropyLoss()))
        losses = [float(compiled(x, y).numpy()) for _ in range(steps)]
    return losses, [p.numpy().copy() for p in model.parameters()], compiled


def test_the_compiled_cnn_step_runs_the_convolution_kernels():
    """The compiled training step calls the three kernels (the first layer's input gradient is not in
    the program) and comes close to the reference step; in exact mode it gives its bits."""
    rng = np.random.default_rng(8)
    x = verigrad.from_numpy(rng.standard_normal((16, 1, 12, 12)).astype(np.float32))
    y = verigrad.from_numpy(rng.integers(0, 10, 16))
    ref_losses, ref_params, _ = _cnn_run("reference", x, y)
    losses, params, compiled = _cnn_run("cpu", x, y)
    (plan,) = compiled._plans.values()
    ran = [s.op.name for s in plan.steps if s.op.name in CONVOLUTION]
    assert sorted(ran) == ["conv2d", "conv2d", "conv2d_input_grad", *["conv2d_weight_grad"] * 2]
    for s in plan.steps:
        if s.op.name in CONVOLUTION:
            assert getattr(s.kernel, "func", s.kernel) == cpu.cpu.native(s.op, s.spec.dtype)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for a, b in zip(params, ref_params):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    with cpu_matmul.exact_mode():
        exact_losses, exact_params, _ = _cnn_run("cpu", x, y)
    assert exact_losses == ref_losses
    for a, b in zip(exact_params, ref_params):
        assert a.tobytes() == b.tobytes()


def test_the_gradient_ops_refuse_mismatched_shapes():
    x, w = verigrad.zeros(2, 3, 7, 6), verigrad.zeros(4, 3, 3, 3)
    g = verigrad.zeros(2, 4, 5, 4)  # conv2d(x, w) without padding
    assert REGISTRY["conv2d_input_grad"](g, w, size=(7, 6)).shape == (2, 3, 7, 6)
    assert REGISTRY["conv2d_weight_grad"](g, x, kernel=3).shape == (4, 3, 3, 3)
    with pytest.raises(
        verigrad.ShapeError, match=r"conv2d_input_grad.*an input \[2, 3, 7, 6\] gives \[2, 4, 7, 6\]"
    ):
        REGISTRY["conv2d_input_grad"](g, w, size=(7, 6), padding=1)
    with pytest.raises(verigrad.ShapeError, match="needs the input's size"):
        REGISTRY["conv2d_input_grad"](g, w)
    with pytest.raises(verigrad.ShapeError, match=r"conv2d_weight_grad.*5x5 kernel gives \[2, 4, 3, 2\]"):
        REGISTRY["conv2d_weight_grad"](g, x, kernel=(5, 5))
