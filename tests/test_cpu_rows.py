"""The cpu backend's row kernels (rows.c: softmax, log_softmax, cross_entropy, layer_norm, rms_norm and
their gradients) against their decompositions on the references: the reference's bits where the kernel
states EXACT, within its stated bound otherwise; the same bits for 1, 2 and 3 threads; in place, other
axes and views; and eager training on them."""

from __future__ import annotations

import ctypes
import math
import re

import numpy as np
import pytest
from test_cpu_reduce import DTYPES, REDUCE, _kernel, _reduce, assert_within

import verigrad
import verigrad.nn.functional as F
from verigrad.backends import cpu
from verigrad.backends.cpu import rows as cpu_rows
from verigrad.backends.kernel_table import Backend, tolerance, ulp
from verigrad.backends.reference import _References
from verigrad.backends.reference import composite_reference as decomposition
from verigrad.ops import REGISTRY

SMALL_CHUNK = 7  # the min chunk the `small_chunks` fixture (conftest.py) sets

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def test_f32_sums_follow_numpys_buffer_size():
    """NumPy adds an f32 run's pairwise sums per cast buffer, in order: with 1e18 in the first buffer
    of 1024 elements and -1e18 in the second, the ones of the third survive; in one buffer they do not."""
    x = np.ones((2, 3000), np.float32)
    x[:, 0], x[:, 2000] = 1e18, -1e18
    w, b = np.ones((2, 3000), np.float32)
    whole = REGISTRY["sum"].reference(x, (1,), False)
    old = np.setbufsize(1024)
    try:
        assert not np.array_equal(REGISTRY["sum"].reference(x, (1,), False), whole)
        for op in ("sum", "mean"):
            assert_within(*_reduce(op, "f32", x, (1,)), cpu.cpu.exactness(op, "f32"))
        _check_row_op("layer_norm", "f32", x, w, b, eps=1e-6)
    finally:
        np.setbufsize(old)


def _row_inputs(np_dtype, seed: int) -> list[np.ndarray]:
    """Rows of logits on several scales, past the pairwise (128) and buffer (8192) limits, with special
    values (NaN, inf, -inf, huge) in some rows."""
    rng = np.random.default_rng(seed)
    shapes = [(1, 1), (4, 5), (64, 10), (3, 129), (5, 1000), (2, 9000), (3, 2, 17)]
    out = [(rng.standard_normal(s) * scale).astype(np_dtype) for s in shapes for scale in (1, 30)]
    special = rng.standard_normal((6, 12)).astype(np_dtype)
    special[0, 3], special[1, 5], special[2, 0], special[3] = np.nan, np.inf, -np.inf, -np.inf
    special[4, :2] = np.finfo(np_dtype).max
    out.append(special)
    return out


def _check_row_op(op: str, dtype: str, *args, **params) -> None:
    expected = decomposition(REGISTRY[op])(*args, **params)
    actual = _kernel(op, dtype)(*args, **params)
    assert_within(actual, expected, cpu.cpu.exactness(op, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_reduces_its_row_losses_as_numpy_does(dtype):
    """The mean and the sum of the per-row losses (summed in C) have the bits of NumPy's sum of them in
    double (pairwise, in cast-buffer blocks for f32), rounded once; a NaN loss gives NumPy's own NaN."""
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(8)
    kernel = _kernel("cross_entropy", dtype)
    for rows in (1, 7, 64, 300, 9000):  # under 8, a pairwise block, several, several cast buffers
        x = rng.standard_normal((rows, 5)).astype(np_dtype) * 4
        target = rng.integers(0, 5, rows)
        losses = kernel(x, target, "none")
        total = np.add.reduce(losses, (0,), np.float64)
        assert kernel(x, target, "sum").tobytes() == total.astype(np_dtype).tobytes()
        assert kernel(x, target, "mean").tobytes() == (total / rows).astype(np_dtype).tobytes()
    x[3, 0] = np.nan
    mean = kernel(x, target, "mean")
    assert (
        np.isnan(mean)
        and mean.tobytes() == REGISTRY["mean"].reference(kernel(x, target, "none"), (0,), False).tobytes()
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_kernels_match_their_decompositions(dtype):
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(4)
    for x in _row_inputs(np_dtype, 5):
        n = x.shape[-1]
        for op in ("softmax", "log_softmax"):
            _check_row_op(op, dtype, x, axis=x.ndim - 1)
        if x.ndim == 2:
            target = rng.integers(0, n, x.shape[0])
            for reduction in ("none", "mean", "sum"):
                _check_row_op("cross_entropy", dtype, x, target.astype(np.int32), reduction=reduction)
                g = np.ones((), np_dtype) if reduction != "none" else rng.uniform(-3, 3, x.shape[0])
                _check_row_op("cross_entropy_grad", dtype, x, target, g.astype(np_dtype), reduction=reduction)
                for bad in (-1, n):  # the kernel refuses a target outside [0, n) as the reference does
                    wrong = target.copy()
                    wrong[-1] = bad
                    message = f"cross_entropy: target {bad} is out of range for {n} classes"
                    for run in (_kernel("cross_entropy", dtype), decomposition(REGISTRY["cross_entropy"])):
                        with pytest.raises(IndexError, match=re.escape(message)):
                            run(x, wrong, reduction=reduction)
                    with pytest.raises(IndexError, match=re.escape(message)):
                        _kernel("cross_entropy_grad", dtype)(
                            x, wrong, g.astype(np_dtype), reduction=reduction
                        )
        w, b = rng.standard_normal((2, n)).astype(np_dtype)
        g = rng.standard_normal(x.shape).astype(np_dtype)
        for eps in (1e-5, 0.1):
            _check_row_op("layer_norm", dtype, x, w, b, eps=eps)
            _check_row_op("rms_norm", dtype, x, w, eps=eps)
            _check_row_op("layer_norm_grad", dtype, g, x, w, eps=eps)
            _check_row_op("rms_norm_grad", dtype, g, x, w, eps=eps)
            _check_row_op("layer_norm_weight_grad", dtype, g, x, eps=eps)
            _check_row_op("rms_norm_weight_grad", dtype, g, x, eps=eps)


def test_quotients_give_the_divisions_bits_on_every_path():
    """quotients.c's (e / s) g (softmax's and the cross-entropy gradient's last pass) multiplies by 1 / s
    in double: on every vector path it has the f32 division's bits, on quotients of every magnitude (random
    bits: subnormal, overflowing, NaN and infinite ones among them) and by zero, infinite, NaN, tiny and
    huge divisors."""
    args = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_float]
    fn = cpu.cpu.library.fn("vg_quotients_f32", args)
    rng = np.random.default_rng(12)
    e = rng.integers(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = np.float32(2.0**-125) * rng.uniform(0.25, 4.0, 1000).astype(np.float32)  # about the subnormal edge
    special = np.array([0.0, -0.0, np.inf, np.nan, 1.0], np.float32)
    # 3 (2k + 1) 2^-149 / 6 is halfway between two subnormals: ties to even
    ties = (3 * (2 * np.arange(500) + 1) * 2.0**-149).astype(np.float32)
    e = np.concatenate([e, near, rng.uniform(0, 1, 3000).astype(np.float32), special, ties])
    divisors = [1.0, 3.0, 6.0, 4095.7, 0.1, 1e-30, 3e38, 0.0, -0.0, np.inf, np.nan, 1e-45, -7.3]
    divisors += rng.integers(0, 2**32, 20, dtype=np.uint64).astype(np.uint32).view(np.float32).tolist()
    chosen = cpu.vector_path()
    try:
        for path in cpu.vector_paths():
            cpu.vector_path(path)
            for s in np.array(divisors, np.float32):
                for g in np.array([1.0, -0.25, 3.0], np.float32):
                    out = e.copy()
                    fn(out.ctypes.data, out.size, s, g)
                    with np.errstate(all="ignore"):
                        expected = e / s * g
                    assert out.tobytes() == expected.tobytes(), (path, s, g)
    finally:
        cpu.vector_path(chosen)


def test_row_kernels_state_their_exactness():
    """Exact where the exp and log kernels they call are, else the derived bounds."""
    libm_exact = all(cpu.cpu.exactness(op, d).is_exact for op in ("exp", "log") for d in DTYPES)
    for dtype in DTYPES:
        for op in cpu.ROWS:
            assert cpu.cpu.exactness(op, dtype).is_exact == (libm_exact or op not in cpu_rows.CALLS_EXP)
    for op in REDUCE:
        assert cpu.cpu.exactness(op, "f32").is_exact
    assert cpu.cpu.exactness("argmax", "i64").is_exact and _kernel("argmax", "f32") is not None
    inexact = Backend("inexact")  # a machine where exp is 4 ulps from NumPy's
    inexact.register("exp", np.exp, "f32", ulp(4))
    inexact.register("log", np.log, "f32")
    eps = float(np.finfo(np.float32).eps)
    assert cpu_rows.exactness("softmax", "f32", inexact) == ulp(9)
    assert cpu_rows.exactness("log_softmax", "f32", inexact) == tolerance(8 * eps, 8 * eps)
    assert cpu_rows.exactness("cross_entropy_grad", "f32", inexact) == tolerance(32 * eps, 32 * eps)
    assert cpu_rows.exactness("layer_norm_grad", "f32", inexact).is_exact


def test_row_kernels_hand_computed():
    softmax, log_softmax = _kernel("softmax", "f64"), _kernel("log_softmax", "f64")
    x = np.array([[1000.0, 1000.0], [0.0, math.log(3.0)]])
    assert np.allclose(softmax(x, 1), [[0.5, 0.5], [0.25, 0.75]], rtol=1e-15)
    assert np.allclose(log_softmax(x, 1), np.log([[0.5, 0.5], [0.25, 0.75]]), rtol=1e-15)
    loss = _kernel("cross_entropy", "f64")(x, np.array([0, 1]), "none")
    assert np.allclose(loss, [math.log(2), math.log(4 / 3)], rtol=1e-15)
    ln = _kernel("layer_norm", "f64")(np.array([[1.0, 3.0]]), np.array([2.0, 1.0]), np.array([0.0, 1.0]), 0.0)
    assert ln.tolist() == [[-2.0, 2.0]]
    rms = _kernel("rms_norm", "f64")(np.array([[3.0, 4.0]]), np.array([1.0, 2.0]), 0.0)
    assert np.allclose(rms, [[3 / math.sqrt(12.5), 8 / math.sqrt(12.5)]], rtol=1e-15)


@pytest.mark.parametrize("op", cpu.ROWS)
def test_every_thread_count_gives_the_same_bits_in_rows(op, small_chunks):
    rng = np.random.default_rng(6)
    x, g = rng.standard_normal((2, 50, 37)).astype(np.float32) * 10
    w = rng.standard_normal(37).astype(np.float32)
    args = {
        "softmax": (x, 1),
        "log_softmax": (x, 1),
        "cross_entropy": (x, rng.integers(0, 37, 50), "none"),
        "layer_norm": (x, *rng.standard_normal((2, 37)).astype(np.float32), 1e-5),
        "cross_entropy_grad": (x, rng.integers(0, 37, 50), g[:, 0], "none"),
        "rms_norm": (x, w, 1e-6),
        "layer_norm_grad": (g, x, w, 1e-5),
        "rms_norm_grad": (g, x, w, 1e-6),
        "layer_norm_weight_grad": (g, x, 1e-5),
        "rms_norm_weight_grad": (g, x, 1e-6),
        "cross_entropy_step": (x, rng.integers(0, 37, 50), np.float32(0.5), "mean"),
        "cross_entropy_total": (g[:, 0], rng.integers(0, 37, 50), "mean"),
    }[op]
    results = []
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        results.append(_kernel(op, "f32")(*args).tobytes())
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_thread_count_gives_the_same_bits_on_long_rows(dtype, small_chunks):
    """Rows in pieces, the next one fetched meanwhile, the logs of a batch of rows in one call and the
    quotients by a product: the same bits for 1, 2 and 3 threads, and the decomposition's."""
    rng = np.random.default_rng(13)
    np_dtype = cpu.DTYPES[dtype]
    x = (rng.standard_normal((70, 1000)) * 8).astype(np_dtype)
    target, g = rng.integers(0, 1000, 70), rng.uniform(-3, 3, 70).astype(np_dtype)
    calls = {  # op: the kernel's arguments, the decomposition's
        "softmax": ((x, 1), ((x,), {"axis": 1})),
        "log_softmax": ((x, 1), ((x,), {"axis": 1})),
        "cross_entropy": ((x, target, "none"), ((x, target), {"reduction": "none"})),
        "cross_entropy_grad": ((x, target, g, "none"), ((x, target, g), {"reduction": "none"})),
    }
    for op, (args, (ref_args, params)) in calls.items():
        results = []
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            results.append(_kernel(op, dtype)(*args))
        assert results[0].tobytes() == results[1].tobytes() == results[2].tobytes()
        expected = decomposition(REGISTRY[op])(*ref_args, **params)
        assert_within(results[0], expected, cpu.cpu.exactness(op, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_norm_weight_grads_sum_the_rows_in_order(dtype, small_chunks):
    """The weight gradients add each column's g * xhat over the rows in order, in double, as the sum over
    the leading axes does (equal rows with g 1, 1e30, -1e30, 2 give 2 xhat in that order, xhat in the
    reverse one), on GPT-sized rows (128 and 768) and on batches that end mid-way; a zero or NaN column
    runs the reference, whose zero's sign and NaN's bits depend on NumPy's order."""
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(11)
    x = np.tile(rng.standard_normal(5).astype(np_dtype), (4, 1))
    g = np.array([[1.0] * 5, [1e30] * 5, [-1e30] * 5, [2.0] * 5], np_dtype)
    for op in ("layer_norm_weight_grad", "rms_norm_weight_grad"):
        actual = _kernel(op, dtype)(g, x, 1e-5)
        xhat = decomposition(REGISTRY[op])(np.ones((1, 5), np_dtype), x[:1], eps=1e-5)
        assert actual.tobytes() == (2 * xhat).tobytes()
    for shape in [(8, 128, 128), (3, 768), (37, 129), (2, 5, 3)]:
        x = rng.standard_normal(shape).astype(np_dtype)
        g = (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 1e3], shape)).astype(np_dtype)
        for op, eps in (("layer_norm_weight_grad", 1e-5), ("rms_norm_weight_grad", 1e-6)):
            _check_row_op(op, dtype, g, x, eps=eps)
    x, g = rng.standard_normal((2, 4, 6)).astype(np_dtype)
    g[:, 2], g[1, 4] = 0.0, np.nan
    for op in ("layer_norm_weight_grad", "rms_norm_weight_grad"):
        actual = _kernel(op, dtype)(g, x, 1e-5)
        assert actual.tobytes() == decomposition(REGISTRY[op])(g, x, eps=1e-5).tobytes()
        assert actual[2] == 0 and np.isnan(actual[4])
    # one column: the reference sums the rows pairwise (contiguous memory), which the kernel leaves to it
    x, g = rng.standard_normal((2, 600, 1)).astype(np_dtype) * 7
    for op in ("layer_norm_weight_grad", "rms_norm_weight_grad"):
        expected = decomposition(REGISTRY[op])(g, x, eps=1e-6)
        assert _kernel(op, dtype)(g, x, 1e-6).tobytes() == expected.tobytes()


@pytest.mark.parametrize("shape", [(6, 300), (3, 5000)])  # rows in batches; long rows in pieces
def test_softmax_in_place(shape):
    x = np.random.default_rng(7).standard_normal(shape)
    for op in ("softmax", "log_softmax"):
        expected = _kernel(op, "f64")(x, 1)
        y = x.copy()
        assert _kernel(op, "f64")(y, 1, out=y) is y and y.tobytes() == expected.tobytes()
        y = x.copy()  # along another axis: the decomposition, written into out
        assert _kernel(op, "f64")(y, 0, out=y) is y
        assert y.tobytes() == decomposition(REGISTRY[op])(x, axis=0).tobytes()


def test_other_axes_views_and_mixed_dtypes_run_the_decomposition():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    for op in ("softmax", "log_softmax"):
        for args in [(x, 1), (x, 0), (x.transpose(0, 2, 1), 2), (x[:, ::2], 2), (x[:, :0], 2)]:
            expected = decomposition(REGISTRY[op])(args[0], axis=args[1])
            assert_within(_kernel(op, "f32")(*args), expected, cpu.cpu.exactness(op, "f32"))
    w64, b = rng.standard_normal(5), rng.standard_normal(5).astype(np.float32)
    mixed = _kernel("layer_norm", "f64")(x, w64, b, 1e-5)
    assert mixed.tobytes() == decomposition(REGISTRY["layer_norm"])(x, w64, b, eps=1e-5).tobytes()
    assert mixed.dtype == np.float64
    empty = _kernel("cross_entropy", "f32")(np.zeros((0, 3), np.float32), np.zeros(0, np.int64), "sum")
    assert np.asarray(empty).tolist() == 0.0


def test_eager_training_ops_on_cpu_use_the_kernels_and_match_the_reference():
    """cross_entropy forward and backward (cross_entropy_grad), layer_norm and rms_norm forward and
    backward (their *_grad kernels and the weight and bias sums), op by op on the cpu backend."""
    rng = np.random.default_rng(9)
    logits, target = rng.standard_normal((32, 10)).astype(np.float32), rng.integers(0, 10, 32)
    w, b = rng.standard_normal((2, 10)).astype(np.float32)
    results = {}
    for name in ("reference", "cpu"):
        with verigrad.backend(name):
            z = verigrad.from_numpy(logits).requires_grad_(True)
            loss = F.cross_entropy(z, verigrad.from_numpy(target))
            loss.backward()
            x, weight, bias = (verigrad.from_numpy(a).requires_grad_(True) for a in (logits, w, b))
            (F.layer_norm(x, weight, bias) * 3 + F.rms_norm(x, x.shape[-1:], weight, 1e-6)).sum().backward()
            results[name] = [
                loss.numpy(),
                z.grad.numpy(),
                x.grad.numpy(),
                weight.grad.numpy(),
                bias.grad.numpy(),
                verigrad.from_numpy(logits).argmax(1).numpy(),
            ]
    # what each result's accuracy rests on; x.grad adds two exact gradients, weight.grad two exact sums
    ops = ("cross_entropy", "cross_entropy_grad", "layer_norm_grad", "sum", "sum", "argmax")
    for (actual, expected), op in zip(zip(*results.values()), ops):
        assert_within(actual, expected, cpu.cpu.exactness(op, "f32"))


def test_the_row_kernels_take_the_c_path(monkeypatch):
    """No row kernel runs its decomposition for C-contiguous operands of its dtype (the fallback would
    pass every comparison above)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the decomposition ran")

    monkeypatch.setattr(_References, "apply", refuse)
    rng = np.random.default_rng(10)
    x, g = rng.standard_normal((2, 4, 6))
    w, t = rng.standard_normal(6), rng.integers(0, 6, 4)
    for op, args in [
        ("softmax", (x, 1)),
        ("log_softmax", (x, 1)),
        ("cross_entropy", (x, t, "mean")),
        ("cross_entropy_grad", (x, t, np.float64(1.0).reshape(()), "mean")),
        ("layer_norm", (x, w, w, 1e-5)),
        ("rms_norm", (x, w, 1e-5)),
        ("layer_norm_grad", (g, x, w, 1e-5)),
        ("rms_norm_grad", (g, x, w, 1e-5)),
        ("layer_norm_weight_grad", (g, x, 1e-5)),
        ("rms_norm_weight_grad", (g, x, 1e-5)),
    ]:
        _kernel(op, "f64")(*args)
    with pytest.raises(AssertionError, match="decomposition"):
        _kernel("softmax", "f64")(x, 0)
