"""The cpu backend's sliding-window kernels (im2col, col2im, max_pool2d, avg_pool2d, max_pool2d_grad)
against the ops' references, bit for bit: NCHW and NHWC, strides, padding, dilation, special values and
ties, strided/transposed/broadcast inputs, 1/2/3 threads; and the CNN training step running them."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import verigrad
from verigrad import nn, optim
from verigrad.backends import cpu
from verigrad.backends.cpu.convolution import COLUMNS
from verigrad.backends.cpu.pooling import POOL
from verigrad.cli.trainer import training_step
from verigrad.ops import REGISTRY
from verigrad.ops.composite.convolution import cols_shape, out_hw, to_layout

SMALL_CHUNK = 1  # the min chunk the `small_chunks` fixture (conftest.py) sets
WINDOW = COLUMNS + POOL  # the kernels of window.h: the convolution's columns and the pools

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

DTYPES = {"f32": np.float32, "f64": np.float64}
# (N, C, H, W), kernel, stride, padding, dilation: padding at most half the kernel (the pools' rule)
CASES = [
    ((2, 3, 7, 6), 3, 1, 1, 1),
    ((2, 2, 9, 8), (3, 2), (2, 3), (1, 1), (1, 2)),
    ((1, 4, 8, 8), 2, 2, 0, 1),
    ((2, 3, 5, 7), (2, 3), (2, 3), 1, 1),  # padded windows that do not overlap
    ((3, 2, 6, 7), 3, 2, 1, 2),
    ((2, 3, 5, 5), (1, 3), (1, 2), (0, 1), 1),
    ((1, 1, 1, 1), 1, 1, 0, 1),
    ((2, 3, 3, 3), 3, 1, 0, 1),  # a 1x1 output: NumPy reduces the windows in its inner loop there
    ((2, 1, 6, 6), 3, 1, 1, 1),  # one channel: the same in NHWC
    ((0, 2, 4, 4), 2, 2, 0, 1),  # empty batch
]
SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, 3.5]


def _params(k, s, p, d, layout: str) -> dict[str, Any]:
    return {"kernel": k, "stride": s, "padding": p, "dilation": d, "layout": layout}


def _values(rng: np.random.Generator, shape: tuple, dtype: str, kind: str) -> np.ndarray:
    """Random values; `ties`: few distinct values (ReLU-like zeros); `zeros`: 0, -0 and +-1; `special`:
    signed zeros, inf, NaN and normal values."""
    if kind == "zeros":
        a = rng.choice(np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0]), shape)
    elif kind == "ties":
        a = np.maximum(rng.integers(-2, 3, shape), 0).astype(np.float64) * 0.5
    elif kind == "special":
        a = rng.choice(SPECIAL, shape)
        mixed = rng.random(shape) < 0.5
        a[mixed] = rng.standard_normal(int(mixed.sum()))
    else:
        a = rng.standard_normal(shape) * 10.0 ** rng.uniform(-8, 8, shape)
    return a.astype(DTYPES[dtype])


def _operands(
    name: str, shape: tuple, params: dict, dtype: str, kind: str, seed: int = 0
) -> list[np.ndarray]:
    """Inputs of op `name` for an NCHW image `shape` in the params' layout."""
    rng = np.random.default_rng(seed)
    n, c, h, w = shape
    layout = params["layout"]
    window = REGISTRY["im2col"].canonical_params(
        None, **{k: v for k, v in params.items() if k in ("kernel", "stride", "padding", "dilation")}
    )
    ho, wo = out_hw(h, w, window["kernel"], window["stride"], window["padding"], window["dilation"])
    x = to_layout(_values(rng, shape, dtype, kind), layout)
    if name == "col2im":
        return [_values(rng, cols_shape(n, c, ho, wo, window["kernel"], layout), dtype, kind)]
    if name == "max_pool2d_grad":
        pooled = (n, c, ho, wo) if layout == "NCHW" else (n, ho, wo, c)
        return [_values(rng, pooled, dtype, "plain"), x]
    return [x]


def _op_params(name: str, shape: tuple, params: dict) -> dict:
    if name == "col2im":
        return {**params, "size": shape[2:]}
    if name == "im2col":
        return {**params, "pad_value": -1.5}
    if name == "avg_pool2d":
        return {k: v for k, v in params.items() if k != "dilation"} if params["dilation"] == 1 else None
    return params


def _native(name: str, dtype: str, arrays: list[np.ndarray], params: dict) -> np.ndarray:
    """The registered cpu kernel itself (not a fallback), on the op's canonical params."""
    op = REGISTRY[name]
    # only the operands' specs are read here (from_numpy refuses a negative stride, as PyTorch's)
    tensors = [verigrad.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    canon = op.canonical_params(*(t.spec for t in tensors), **params)
    kernel = cpu.cpu.native(op, getattr(verigrad, dtype))
    assert kernel is not None, f"no cpu kernel for {name} {dtype}"
    with np.errstate(all="ignore"):  # as eager mode runs kernels
        return kernel(*arrays, **canon)


def _reference(name: str, arrays: list[np.ndarray], params: dict) -> np.ndarray:
    """The op's definition: its NumPy reference, or its decomposition run on the reference backend."""
    with verigrad.backend("reference"), verigrad.no_grad(), np.errstate(all="ignore"):
        return REGISTRY[name](*(verigrad.from_numpy(a.copy()) for a in arrays), **params).numpy()


def _assert_same_bits(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    width = np.uint32 if actual.dtype == np.float32 else np.uint64
    same = (actual.view(width) == expected.view(width)) | (np.isnan(actual) & np.isnan(expected))
    assert same.all(), f"{what}: {int((~same).sum())} of {same.size} differ, first at {np.argwhere(~same)[0]}"


def _cases() -> list[Any]:
    out = []
    for name in WINDOW:
        for i, (shape, k, s, p, d) in enumerate(CASES):
            for layout in ("NCHW", "NHWC"):
                if _op_params(name, shape, _params(k, s, p, d, layout)) is not None:
                    out.append(pytest.param(name, i, layout, id=f"{name}-{i}-{layout}"))
    return out


@pytest.mark.parametrize(("name", "case", "layout"), _cases())
def test_kernels_give_the_reference_bits(name: str, case: int, layout: str, small_chunks) -> None:
    shape, k, s, p, d = CASES[case]
    params = _op_params(name, shape, _params(k, s, p, d, layout))
    verigrad.set_threads(3)
    for dtype in DTYPES:
        for kind in ("plain", "ties", "zeros", "special"):
            arrays = _operands(name, shape, params, dtype, kind, seed=case)
            _assert_same_bits(
                _native(name, dtype, arrays, params),
                _reference(name, arrays, params),
                f"{name} {dtype} {kind}",
            )


def _views(a: np.ndarray) -> list[np.ndarray]:
    """The same values through other strides: every other element of a larger buffer, reversed rows (a
    negative stride), and the other layout's storage seen through a transpose."""
    big = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
    big[..., ::2] = a
    flipped = np.ascontiguousarray(a[..., ::-1, :])[..., ::-1, :]
    order = list(range(a.ndim))
    order[1], order[-1] = order[-1], order[1]
    transposed = np.ascontiguousarray(a.transpose(order)).transpose(order)
    return [big[..., ::2], flipped, transposed]


@pytest.mark.parametrize("name", WINDOW)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_strided_inputs_are_read_in_place(name: str, layout: str, small_chunks) -> None:
    shape, k, s, p, d = CASES[1] if name != "avg_pool2d" else CASES[3]
    params = _op_params(name, shape, _params(k, s, p, 1 if name == "avg_pool2d" else d, layout))
    verigrad.set_threads(2)
    arrays = _operands(name, shape, params, "f32", "ties")
    expected = _reference(name, arrays, params)
    for i in range(len(arrays)):
        for view in _views(arrays[i]):
            assert not view.flags.c_contiguous
            args = [*arrays[:i], view, *arrays[i + 1 :]]
            _assert_same_bits(_native(name, "f32", args, params), expected, f"{name} view of input {i}")


def test_col2im_reads_a_broadcast_gradient() -> None:
    """avg_pool2d's backward hands col2im a gradient broadcast over the window axes (stride 0)."""
    g = np.random.default_rng(0).standard_normal((2, 3, 1, 1, 4, 4)).astype(np.float32)
    cols = np.broadcast_to(g, (2, 3, 2, 2, 4, 4))
    params = {"kernel": 2, "stride": 1, "padding": 0, "dilation": 1, "layout": "NCHW", "size": (5, 5)}
    _assert_same_bits(
        _native("col2im", "f32", [cols], params), _reference("col2im", [cols], params), "col2im"
    )


@pytest.mark.parametrize("name", WINDOW)
def test_every_thread_count_gives_the_same_bits(name: str, small_chunks) -> None:
    shape = (3, 5, 11, 10)
    for (k, s, p, d), layout in itertools.product([(3, 1, 1, 1), (2, 2, 1, 1)], ("NCHW", "NHWC")):
        params = _op_params(name, shape, _params(k, s, p, d, layout))  # overlapping windows, and not
        arrays = _operands(name, shape, params, "f32", "ties", seed=5)
        results = []
        for threads in (1, 2, 3, 1):
            verigrad.set_threads(threads)
            results.append(_native(name, "f32", arrays, params).tobytes())
        assert len(set(results)) == 1, f"{name} {layout} kernel {k}"
    assert cpu.pool_size() >= 2


def test_mixed_dtypes_are_refused_and_f16_runs_the_decomposition() -> None:
    params = _params(2, 2, 0, 1, "NCHW")
    rng = np.random.default_rng(0)
    g = verigrad.from_numpy(rng.standard_normal((1, 2, 2, 2)).astype(np.float32))
    x = verigrad.from_numpy(rng.standard_normal((1, 2, 4, 4)))
    with pytest.raises(verigrad.DTypeError, match="one dtype"):
        REGISTRY["max_pool2d_grad"](g, x, **params)
    assert cpu.cpu.native(REGISTRY["max_pool2d"], verigrad.f16) is None
    with verigrad.backend("cpu"):
        out = REGISTRY["max_pool2d"](x.cast(verigrad.f16), kernel=2)
    assert out.dtype is verigrad.f16


def test_max_pool_gradient_goes_to_the_first_maximum_on_cpu() -> None:
    x = np.array([[[[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]]]], np.float32)
    with verigrad.backend("cpu"):
        leaf = verigrad.from_numpy(x).requires_grad_()
        REGISTRY["max_pool2d"](leaf, kernel=2).sum().backward()
    assert leaf.grad.numpy().tolist() == [[[[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]]


def _cnn_step(backend: str):
    verigrad.manual_seed(0)
    with verigrad.backend(backend):
        model = verigrad.models.digits_cnn()
    opt = optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()

    step = training_step(model, opt, loss_fn)

    return model, step


def test_the_compiled_cnn_step_runs_the_window_kernels() -> None:
    """Every window op of the digits CNN's training step (max_pool2d, max_pool2d_grad; the convolutions
    run their own kernels, see test_cpu_convolution.py) runs its cpu kernel in the compiled plan, and the
    step gives the reference step's numbers."""
    rng = np.random.default_rng(0)
    x = verigrad.from_numpy(rng.standard_normal((8, 1, 8, 8)).astype(np.float32))
    y = verigrad.from_numpy(rng.integers(0, 10, 8))
    results = {}
    for backend in ("reference", "cpu"):
        model, step = _cnn_step(backend)
        with verigrad.backend(backend):
            compiled = verigrad.compile(step)
            losses = [float(compiled(x, y).numpy()) for _ in range(3)]
        results[backend] = (losses, [p.numpy().copy() for p in model.parameters()])
        if backend == "cpu":
            (plan,) = compiled._plans.values()
            ran = {}
            for s in plan.steps:
                if s.op.name in WINDOW:
                    kernel = getattr(s.kernel, "func", s.kernel)
                    ran[s.op.name] = kernel is cpu.cpu.native(s.op, s.spec.dtype)
            assert ran == {"max_pool2d": True, "max_pool2d_grad": True}
    # matmul may run another backend's GEMM (another summation order): close, not the same bits
    np.testing.assert_allclose(results["cpu"][0], results["reference"][0], rtol=1e-5)
    for a, b in zip(results["cpu"][1], results["reference"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_avg_pool_trains_through_its_own_vjp_and_kernel() -> None:
    """avg_pool2d has a VJP of its own (so its kernel runs under autograd); it gives the gradient of
    the decomposition bit for bit."""
    rng = np.random.default_rng(0)
    params = {"kernel": (2, 3), "stride": (2, 2), "padding": (1, 1)}
    for dtype in DTYPES.values():
        x = rng.standard_normal((2, 3, 6, 7)).astype(dtype)
        g = rng.standard_normal((2, 3, 4, 4)).astype(dtype)
        _assert_same_bits(*_avg_pool_grads(x, g, params), f"avg_pool2d gradient {dtype.__name__}")


def _avg_pool_grads(x: np.ndarray, g: np.ndarray, params: dict) -> list[np.ndarray]:
    """avg_pool2d's gradient through the op on cpu, and through its decomposition on the reference."""
    grads = []
    for run in ("op", "decomposition"):
        leaf = verigrad.from_numpy(x.copy()).requires_grad_()
        if run == "op":
            with verigrad.backend("cpu"):
                out = REGISTRY["avg_pool2d"](leaf, **params)
        else:
            canon = REGISTRY["avg_pool2d"].canonical_params(leaf.spec, **params)
            out = REGISTRY["avg_pool2d"].decompose(leaf, **canon)
        out.backward(verigrad.from_numpy(g))
        grads.append(leaf.grad.numpy())
    return grads
