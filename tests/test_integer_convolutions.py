"""Integer convolutions wrap as PyTorch's integer kernels (products and sums in the input's dtype), checked
against hand-computed values and a direct loop in NumPy's wrapping integers; the dtype rules of the
input, weight and bias."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import verigrad

F = verigrad.nn.functional


def _direct(x: np.ndarray, w: np.ndarray, stride: tuple, padding: tuple, dilation: tuple, groups: int):
    """The convolution of x [N, C, *spatial] with w [O, C / groups, *kernel] by its definition, one output
    element at a time, in x's dtype (NumPy's integers wrap)."""
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    kernel = w.shape[2:]
    outs = [(x.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    out = np.zeros((x.shape[0], w.shape[0], *outs), dtype=x.dtype)
    per_group_in, per_group_out = w.shape[1], w.shape[0] // groups
    with np.errstate(over="ignore"):
        for n, o in itertools.product(range(x.shape[0]), range(w.shape[0])):
            first = (o // per_group_out) * per_group_in
            for place in itertools.product(*(range(s) for s in outs)):
                total = x.dtype.type(0)
                for c in range(per_group_in):
                    for tap in itertools.product(*(range(k) for k in kernel)):
                        at = tuple(place[i] * stride[i] + tap[i] * dilation[i] for i in range(nd))
                        total = total + x[(n, first + c, *at)] * w[(o, c, *tap)]
                out[(n, o, *place)] = total
    return out


def test_i64_sums_past_2_to_the_53_are_exact() -> None:
    x = verigrad.full((1, 1, 1, 3, 3), 2**25 + 1, dtype=verigrad.int64)
    w = verigrad.full((1, 1, 1, 2, 2), 2**30 + 1, dtype=verigrad.int64)
    want = 4 * (2**25 + 1) * (2**30 + 1)  # 144115192505040900: f64 rounds it to ...896
    assert F.conv3d(x, w).tolist() == [[[[[want, want], [want, want]]]]]
    x1, w1 = (
        verigrad.full((1, 1, 3), 2**25 + 1, dtype=verigrad.int64),
        verigrad.full((1, 1, 2), 2**31 + 3, dtype=verigrad.int64),
    )
    assert F.conv1d(x1, w1).tolist() == [[[2 * (2**25 + 1) * (2**31 + 3)] * 2]]


def test_i64_sums_wrap_modulo_2_to_the_64() -> None:
    x = verigrad.full((1, 1, 3, 3), 2**40, dtype=verigrad.int64)
    w = verigrad.full((1, 1, 2, 2), 2**30, dtype=verigrad.int64)
    assert F.conv2d(x, w).tolist() == [[[[0, 0], [0, 0]]]]  # 4 * 2^70 = 0 mod 2^64
    b = verigrad.tensor([2**62])
    x1, w1 = (
        verigrad.full((1, 1, 2), 2**62, dtype=verigrad.int64),
        verigrad.ones(1, 1, 2, dtype=verigrad.int64),
    )
    assert F.conv1d(x1, w1, b).tolist() == [[[-(2**63) + 2**62]]]  # 3 * 2^62 wraps to -2^62


@pytest.mark.parametrize(
    ("dtype", "value", "want"),
    [("int8", 100, 64), ("uint8", 200, 0), ("int16", 300, 32_320), ("int32", 2**16 + 1, 2**19 + 4)],
)
def test_narrow_integer_sums_wrap_in_their_dtype(dtype: str, value: int, want: int) -> None:
    """4 products of value * value, in the dtype: 40_000 mod 256 = 64, 160_000 mod 256 = 0, 360_000 mod
    2^16 = 32_320, 4 (2^32 + 2^17 + 1) mod 2^32 = 2^19 + 4."""
    d = getattr(verigrad, dtype)
    out = F.conv2d(verigrad.full((1, 1, 2, 2), value, dtype=d), verigrad.full((1, 1, 2, 2), value, dtype=d))
    with np.errstate(over="ignore"):
        expected = np.array(value, dtype=dtype) * np.array(value, dtype=dtype) * np.array(4, dtype=dtype)
    assert out.dtype is d and out.item() == int(expected) == want


WINDOWS = [(1, 2, 1, 1, 2), (2, (2, 1), (0, 2), 1, 1), (3, (1, 2, 1), (1, 0, 1), 1, 2)]
DILATED = [(2, 1, 1, 2, 2), (3, 1, (0, 1, 0), (2, 1, 2), 1)]  # PyTorch dilates i64 only


@pytest.mark.parametrize(
    ("dtype", "dims", "stride", "padding", "dilation", "groups"),
    [(d, *w) for d in ("int8", "uint8", "int16", "int32", "int64") for w in WINDOWS]
    + [("int64", *w) for w in DILATED],
)
def test_integer_convolutions_equal_the_direct_loop(dtype, dims, stride, padding, dilation, groups) -> None:
    rng = np.random.default_rng(dims)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (2, 4, *(5, 6, 4)[:dims]), endpoint=True).astype(dtype)
    w = rng.integers(info.min, info.max, (4, 4 // groups, *(2, 3, 2)[:dims]), endpoint=True).astype(dtype)
    s, p, d = ((v,) * dims if isinstance(v, int) else v for v in (stride, padding, dilation))
    got = getattr(F, f"conv{dims}d")(verigrad.from_numpy(x), verigrad.from_numpy(w), None, s, p, d, groups)
    assert got.dtype.name == verigrad.from_numpy(x).dtype.name
    np.testing.assert_array_equal(got.numpy(), _direct(x, w, s, p, d, groups))


def test_integer_padding_same_and_bias() -> None:
    x = np.arange(12, dtype=np.int32).reshape(1, 1, 3, 4)
    w = np.array([[[[1, 2], [3, 4]]]], dtype=np.int32)
    got = F.conv2d(
        verigrad.from_numpy(x),
        verigrad.from_numpy(w),
        verigrad.tensor([10], dtype=verigrad.int32),
        padding="same",
    )
    # PyTorch's "same" for an even kernel: the extra row and column after
    want = _direct(np.pad(x, [(0, 0), (0, 0), (0, 1), (0, 1)]), w, (1, 1), (0, 0), (1, 1), 1) + 10
    np.testing.assert_array_equal(got.numpy(), want)


def test_narrow_integers_are_not_dilated() -> None:
    x, w = verigrad.ones(1, 1, 5, dtype=verigrad.int32), verigrad.ones(1, 1, 2, dtype=verigrad.int32)
    with pytest.raises(verigrad.DTypeError, match=r"of i32 with dilation \(1, 2\): PyTorch's dilated"):
        F.conv1d(x, w, dilation=2)
    assert F.conv1d(x.cast(verigrad.int64), w.cast(verigrad.int64), dilation=2).tolist() == [[[2, 2, 2]]]


@pytest.mark.parametrize(
    ("x", "w", "b", "match"),
    [
        ("f32", "f64", None, "the input is f32 and the weight f64"),
        ("i64", "i32", None, "the input is i64 and the weight i32"),
        ("f32", "f32", "f64", "the input is f32 and the bias f64"),
        ("i64", "i64", "f32", "the input is i64 and the bias f32"),
        ("bool", "bool", None, "conv2d of bool: PyTorch convolves floats and u8, i8, i16, i32, i64 only"),
    ],
)
def test_convolutions_refuse_mixed_dtypes_as_pytorch(x, w, b, match) -> None:
    bias = None if b is None else verigrad.ones(1, dtype=getattr(verigrad, b))
    xs = verigrad.ones(1, 1, 3, 3, dtype=getattr(verigrad, x))
    ws = verigrad.ones(1, 1, 2, 2, dtype=getattr(verigrad, w))
    with pytest.raises(verigrad.DTypeError, match=match):
        F.conv2d(xs, ws, bias)
    with pytest.raises(verigrad.DTypeError, match=match.replace("conv2d", "conv3d")):
        F.conv3d(xs.unsqueeze(2), ws.unsqueeze(2), bias)


def test_transposed_convolutions_add_the_bias_in_the_inputs_dtype() -> None:
    """As PyTorch: an f64 bias on f32 images is added in f64 and rounded once to f32; an i32 bias on i64
    images is added in i64; a float bias on integers, a bias of another dtype on f16 or in 3-D raise."""
    x, w = verigrad.ones(1, 1, 1, 1), verigrad.ones(1, 1, 1, 1)
    out = F.conv_transpose2d(x, w, verigrad.tensor([2.0**-30], dtype=verigrad.float64))
    assert out.dtype is verigrad.float32 and out.item() == np.float32(1 + 2.0**-30)
    xi = verigrad.ones(1, 1, 2, dtype=verigrad.int64)
    out = F.conv_transpose1d(xi, xi.reshape(1, 1, 2), verigrad.tensor([2**31 - 1], dtype=verigrad.int32))
    assert out.dtype is verigrad.int64 and out.tolist() == [[[2**31, 2**31 + 1, 2**31]]]
    with pytest.raises(verigrad.DTypeError, match="the input is i64 and the bias f32"):
        F.conv_transpose1d(xi, xi.reshape(1, 1, 2), verigrad.ones(1))
    with pytest.raises(verigrad.DTypeError, match="the input is f16 and the bias f32"):
        F.conv_transpose2d(x.half(), w.half(), verigrad.ones(1))
    with pytest.raises(verigrad.DTypeError, match="conv_transpose3d: the input is f32 and the bias f64"):
        F.conv_transpose3d(x.unsqueeze(2), w.unsqueeze(2), verigrad.ones(1, dtype=verigrad.float64))
    with pytest.raises(verigrad.DTypeError, match="the input is f32 and the weight f64"):
        F.conv_transpose2d(x, w.double())
