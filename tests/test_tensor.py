"""Hand-computed examples for each primitive family, dtypes, autograd, interop and backends."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import Tensor, bf16, f16, f32, f64, i32, i64
from verigrad.backends import active


def _eq(t: Tensor, expected, dtype=None) -> None:
    """The tensor's values equal `expected` exactly (with dtype `dtype` when given)."""
    expected = np.asarray(expected)
    got = t.numpy()
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_array_equal(got, expected)
    if dtype is not None:
        assert t.dtype is dtype, (t.dtype, dtype)


# layout ----------------------------------------------------------------------------------------
def test_contiguous_strides() -> None:
    t = verigrad.zeros(2, 3, 4)
    assert t.stride() == (12, 4, 1)
    assert t.stride(1) == 4
    assert t.is_contiguous()
    assert verigrad.zeros(5).stride() == (1,)


def test_transpose_is_a_view_with_swapped_strides() -> None:
    a = verigrad.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for t in (a.T, a.transpose(0, 1), a.mT, a.permute(1, 0)):
        _eq(t, [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]], f32)
        assert t.shape == (3, 2)
        assert t.stride() == (1, 3)
        assert not t.is_contiguous()
        assert np.shares_memory(t.numpy(), a.numpy())
    c = a.T.contiguous()
    assert c.stride() == (2, 1) and not np.shares_memory(c.numpy(), a.numpy())
    _eq(c, [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]])
    assert a.contiguous().numpy() is a.numpy() or np.shares_memory(a.contiguous().numpy(), a.numpy())


def test_contiguous_of_a_scalar_stays_a_scalar() -> None:
    _eq(verigrad.tensor(2.5).contiguous(), np.float32(2.5), f32)


def test_expand_gives_zero_strides() -> None:
    row = verigrad.tensor([1.0, 2.0, 3.0])
    e = row.expand(4, 3)
    assert e.shape == (4, 3) and e.stride() == (0, 1)
    _eq(e, np.tile([1.0, 2.0, 3.0], (4, 1)))
    col = verigrad.tensor([[1.0], [2.0]]).expand(-1, 3)
    assert col.stride() == (1, 0)
    _eq(col, [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    assert np.shares_memory(e.numpy(), row.numpy())


def test_reshape_of_contiguous_is_a_view() -> None:
    a = verigrad.arange(6)
    r = a.reshape(2, 3)
    assert np.shares_memory(r.numpy(), a.numpy())
    _eq(r, [[0, 1, 2], [3, 4, 5]], i64)
    _eq(a.reshape(-1, 2), [[0, 1], [2, 3], [4, 5]])
    _eq(a.view(3, 2).flatten(), [0, 1, 2, 3, 4, 5])
    _eq(r.unsqueeze(0), [[[0, 1, 2], [3, 4, 5]]])
    _eq(r.unsqueeze(-1).squeeze(-1), [[0, 1, 2], [3, 4, 5]])
    _eq(verigrad.zeros(1, 3, 1).squeeze(), [0.0, 0.0, 0.0])


# element-wise ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([[1.0, 2.0, 3.0]] * 4, [10.0, 20.0, 30.0], [[11.0, 22.0, 33.0]] * 4),
        (
            [[1.0], [2.0], [3.0], [4.0]],
            [[10.0, 20.0, 30.0]],
            [[11.0, 21.0, 31.0], [12.0, 22.0, 32.0], [13.0, 23.0, 33.0], [14.0, 24.0, 34.0]],
        ),
        ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 100.0, [[101.0, 102.0, 103.0], [104.0, 105.0, 106.0]]),
    ],
)  # fmt: skip
def test_broadcasting_table_with_values(a, b, expected) -> None:
    ta, tb = verigrad.tensor(a), verigrad.tensor(b)
    _eq(ta + tb, expected, f32)
    _eq(tb + ta, expected, f32)
    assert (ta + tb).shape == np.broadcast_shapes(np.shape(a), np.shape(b))


def test_arithmetic_by_hand() -> None:
    x = verigrad.tensor([1.0, -2.0, 4.0])
    y = verigrad.tensor([2.0, 4.0, -8.0])
    _eq(x - y, [-1.0, -6.0, 12.0])
    _eq(x * y, [2.0, -8.0, -32.0])
    _eq(x / y, [0.5, -0.5, -0.5])
    _eq(-x, [-1.0, 2.0, -4.0])
    _eq(abs(x), [1.0, 2.0, 4.0])
    _eq(x**2, [1.0, 4.0, 16.0])
    _eq(2.0**x, [2.0, 0.25, 16.0])
    _eq(1.0 - x, [0.0, 3.0, -3.0])
    _eq(8.0 / y, [4.0, 2.0, -1.0])
    _eq(x.maximum(y), [2.0, 4.0, 4.0])
    _eq(verigrad.minimum(x, y), [1.0, -2.0, -8.0])
    _eq(x.relu(), [1.0, 0.0, 4.0])
    _eq(x > 0, [True, False, True], verigrad.bool_)
    _eq(x == y / 2, [True, False, False])
    _eq(x != -y / 2, [True, False, False])
    _eq((x > 0) & (y > 0), [True, False, False])
    _eq((x > 0) | (y > 0), [True, True, True])
    _eq(~(x > 0), [False, True, False])
    _eq(verigrad.where(x > 0, x, y), [1.0, 4.0, 4.0])
    _eq(x.where(x > 0, 0.0), [1.0, 0.0, 4.0])


def test_matmul_2x2_by_hand() -> None:
    a = verigrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    b = verigrad.tensor([[5.0, 6.0], [7.0, 8.0]])
    _eq(a @ b, [[19.0, 22.0], [43.0, 50.0]], f32)
    _eq(b @ a, [[23.0, 34.0], [31.0, 46.0]], f32)
    _eq(a @ verigrad.tensor([1.0, -1.0]), [-1.0, -1.0])
    _eq(verigrad.tensor([1.0, -1.0]) @ a, [-2.0, -2.0])
    _eq(verigrad.tensor([[1, 2], [3, 4]]) @ verigrad.tensor([[1], [1]]), [[3], [7]], i64)


def test_transcendentals_by_hand() -> None:
    _eq(verigrad.tensor([0.0, 1.0]).exp(), [1.0, np.float32(np.e)])  # e rounded to f32 once
    _eq(verigrad.tensor([1.0, 4.0]).sqrt(), [1.0, 2.0])
    _eq(verigrad.tensor([4.0]).rsqrt(), [0.5])
    _eq(verigrad.tensor([0.0]).sigmoid(), [0.5])
    _eq(verigrad.tensor([0.0]).tanh(), [0.0])
    _eq(verigrad.tensor([0.0]).sin(), [0.0])
    _eq(verigrad.tensor([0.0]).cos(), [1.0])
    _eq(verigrad.tensor([1.0]).log(), [0.0])
    big = verigrad.tensor([-1000.0, 1000.0]).sigmoid()
    _eq(big, [0.0, 1.0])  # no overflow warning turned into NaN


def test_log_and_sqrt_of_negatives_are_nan() -> None:
    x = verigrad.tensor([-1.0, 0.0, 4.0])
    log = x.log().numpy()
    assert np.isnan(log[0]) and log[1] == -np.inf and log[2] == np.float32(np.log(4.0))
    sqrt = x.sqrt().numpy()
    assert np.isnan(sqrt[0]) and sqrt[1] == 0.0 and sqrt[2] == 2.0
    assert np.isnan(verigrad.tensor([-4.0], dtype="f64").sqrt().item())


def test_int_ops_promote_as_documented() -> None:
    a = verigrad.tensor([1, 2, 3])
    assert a.dtype is i64
    _eq(a + a, [2, 4, 6], i64)
    _eq(a / 2, [0.5, 1.0, 1.5], f32)
    _eq(a.exp(), np.exp(np.array([1.0, 2.0, 3.0])).astype(np.float32), f32)  # in f64, rounded once
    t = verigrad.tensor([True, True])
    _eq(t + t, [True, True], verigrad.bool_)  # or, as PyTorch (an integer sum needs a cast: t.long() + t)
    _eq(verigrad.tensor([1, 2], dtype="i32") + verigrad.tensor([1, 2]), [2, 4], i64)


# softmax (a composite op) ----------------------------------------------------------------------
def test_softmax_of_large_equal_values() -> None:
    _eq(verigrad.tensor([1000.0, 1000.0]).softmax(-1), [0.5, 0.5], f32)
    s = verigrad.tensor([[1.0, 2.0, 3.0], [-1000.0, 0.0, 1000.0]]).softmax(dim=1).numpy()
    e = np.exp([1.0, 2.0, 3.0])
    np.testing.assert_allclose(s[0], e / e.sum(), rtol=1e-6)
    np.testing.assert_array_equal(s[1], [0.0, 0.0, 1.0])


# reductions ------------------------------------------------------------------------------------
def test_reductions_with_keepdim_and_dim_keyword() -> None:
    x = verigrad.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    _eq(x.sum(), np.float32(21.0), f32)
    _eq(x.sum(dim=1), [6.0, 15.0])
    _eq(x.sum(dim=1, keepdim=True), [[6.0], [15.0]])
    _eq(x.sum(0), [5.0, 7.0, 9.0])
    _eq(x.sum(axis=(0, 1), keepdim=True), [[21.0]])
    _eq(x.sum(dim=-1), [6.0, 15.0])
    _eq(x.mean(dim=0), [2.5, 3.5, 4.5])
    _eq(x.mean(), np.float32(3.5))
    _eq(x.max(dim=1).values, [3.0, 6.0])  # PyTorch's (values, indices) along a dim
    _eq(x.max(dim=1).indices, [2, 2], i64)
    _eq(x.min(dim=0, keepdim=True).values, [[1.0, 2.0, 3.0]])
    _eq(x.amax(dim=1), [3.0, 6.0])
    _eq(x.max(), np.float32(6.0))
    _eq(verigrad.sum(x, dim=0), [5.0, 7.0, 9.0])
    _eq(verigrad.tensor([[1, 2], [3, 4]], dtype="i32").sum(dim=0), [4, 6], i64)
    _eq(verigrad.zeros(0, 3).sum(dim=0), [0.0, 0.0, 0.0])


def test_sum_and_mean_functions_take_dtype_as_pytorchs() -> None:
    """torch.sum(x, dtype=) and torch.mean(x, dtype=) cast first; the functions raised TypeError."""
    x = verigrad.tensor([[1, 2], [3, 4]], dtype="i32")
    _eq(verigrad.sum(x, dtype=f64), np.float64(10.0), f64)
    _eq(verigrad.sum(x, 1, True, dtype="i32"), [[3], [7]], i32)  # a small integer dtype asked for is kept
    _eq(verigrad.mean(x, dtype=f64), np.float64(2.5), f64)
    _eq(verigrad.mean(x.cast(f64), 0), [2.0, 3.0], f64)


def test_f32_sum_accumulates_in_double() -> None:
    tiny = np.float32(2.0**-24)  # half an ulp of 1.0 in f32
    values = np.array([1.0] + [tiny] * 4096, dtype=np.float32)
    naive = np.float32(0.0)
    for v in values:  # left to right in f32: every 1 + tiny rounds back to 1
        naive = np.float32(naive + v)
    rounded_once = np.float32(np.sum(values.astype(np.float64)))
    assert naive == np.float32(1.0) and rounded_once == np.float32(1.0 + 4096 * 2.0**-24)
    assert naive != rounded_once
    got = verigrad.from_numpy(values).sum()
    assert got.dtype is f32
    assert got.item() == rounded_once
    got2 = verigrad.from_numpy(values.reshape(1, -1)).sum(dim=1)
    assert got2.item() == rounded_once
    mean = verigrad.from_numpy(values).mean().item()
    assert mean == np.float32(np.sum(values.astype(np.float64)) / values.size)


def test_argmax() -> None:
    x = verigrad.tensor([[1.0, 7.0, 7.0], [9.0, 2.0, 3.0]])
    _eq(x.argmax(), np.int64(3), i64)
    _eq(x.argmax(dim=1), [1, 0], i64)  # the first of equal maxima
    _eq(x.argmax(dim=0), [1, 0, 0])
    _eq(x.argmax(dim=1, keepdim=True), [[1], [0]])
    _eq(verigrad.argmax(x, axis=-1), [1, 0])


# indexing --------------------------------------------------------------------------------------
A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)


@pytest.mark.parametrize(
    "key",
    [
        1,
        -1,
        (1, 2),
        (0, -1, 3),
        slice(1, 3),
        (slice(None), slice(1, None, 2)),
        (slice(None, None, 2), 1),
        (slice(5, 10),),
        (slice(2, 1),),
        None,
        (None, 1),
        (1, None, slice(1, 3)),
        Ellipsis,
        (Ellipsis, 2),
        (0, Ellipsis, None),
        (slice(None, None, 2), Ellipsis, None),
        np.array([2, 0]),
        [0, 0, 2],
        (slice(None), [1, 3]),
        (slice(None), [1, 3], 0),
        ([[0, 1], [2, 2]],),
        (slice(1, None), np.array([0, -1])),
        (Ellipsis, np.array([[4], [0]])),
    ],
    ids=repr,
)
def test_indexing_matches_numpy(key) -> None:
    t = verigrad.from_numpy(A)
    _eq(t[key], A[key], f32)


def test_basic_indexing_is_a_view() -> None:
    t = verigrad.from_numpy(A.copy())
    view = t[1, :, 1:4:2]
    assert np.shares_memory(view.numpy(), t.numpy())
    assert view.stride() == (5, 2)


# joining and padding ---------------------------------------------------------------------------
def test_concat_stack_pad() -> None:
    a = verigrad.tensor([[1.0, 2.0]])
    b = verigrad.tensor([[3.0, 4.0], [5.0, 6.0]])
    _eq(verigrad.concat(a, b, axis=0), [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    _eq(verigrad.concat([a, a], axis=1), [[1.0, 2.0, 1.0, 2.0]])
    _eq(verigrad.concat(a, verigrad.zeros(1, 0), axis=-1), [[1.0, 2.0]])
    _eq(verigrad.concat(verigrad.tensor([1]), verigrad.tensor([2.5])), [1.0, 2.5], f32)
    u, v = verigrad.tensor([1.0, 2.0]), verigrad.tensor([3.0, 4.0])
    _eq(verigrad.stack(u, v), [[1.0, 2.0], [3.0, 4.0]])
    _eq(verigrad.stack([u, v], axis=1), [[1.0, 3.0], [2.0, 4.0]])
    _eq(verigrad.stack(u, v, axis=-1), [[1.0, 3.0], [2.0, 4.0]])
    _eq(a.pad(((1, 0), (0, 2)), value=9.0), [[9.0, 9.0, 9.0, 9.0], [1.0, 2.0, 9.0, 9.0]])
    _eq(verigrad.pad(u, ((1, 1),)), [0.0, 1.0, 2.0, 0.0])
    _eq(b.pad(((0, 1),)), [[3.0, 4.0, 0.0], [5.0, 6.0, 0.0]])  # widths apply to trailing axes
    _eq(verigrad.tensor(2.0).pad(()), np.float32(2.0))  # a 0-d tensor has nothing to pad


def test_concat_and_stack_promote_as_cast_does() -> None:
    b = verigrad.tensor([1.0, -2.5], dtype="bf16")
    h = verigrad.tensor([3.0], dtype="f16")
    _eq(verigrad.concat(b, verigrad.tensor([4.0])), [1.0, -2.5, 4.0], f32)  # bf16 values, not bits
    _eq(verigrad.concat(h, b), [3.0, 1.0, -2.5], f32)  # neither half format holds the other
    assert verigrad.concat(b, b).dtype is bf16
    _eq(verigrad.concat(b, b).float(), [1.0, -2.5, 1.0, -2.5])
    _eq(verigrad.stack(h, h[:1]), [[3.0], [3.0]], f16)
    _eq(verigrad.stack(h, b[:1]), [[3.0], [1.0]], f32)
    big = 2**54 + 2**30 + 1  # rounded once, i64 to f32, it goes up; through f64 it would tie down
    direct = np.array([big]).astype(np.float32)[0]
    assert direct == np.float32(2**54 + 2**31)
    _eq(verigrad.concat(verigrad.tensor([big]), verigrad.tensor([0.5])), [direct, 0.5], f32)


# creation --------------------------------------------------------------------------------------
def test_creation_ops() -> None:
    _eq(verigrad.zeros(2, 3), np.zeros((2, 3)), f32)
    _eq(verigrad.zeros((2, 3)), np.zeros((2, 3)), f32)
    _eq(verigrad.ones(2, dtype="i32"), [1, 1], i32)
    _eq(verigrad.full((2, 2), 7.5), [[7.5, 7.5], [7.5, 7.5]], f32)
    _eq(verigrad.full((2,), 3, dtype="f64"), [3.0, 3.0], f64)
    _eq(verigrad.arange(5), [0, 1, 2, 3, 4], i64)
    _eq(verigrad.arange(2, 11, 3), [2, 5, 8], i64)
    _eq(verigrad.arange(5, 0, -2), [5, 3, 1], i64)
    _eq(verigrad.arange(0), np.zeros(0, np.int64))
    _eq(verigrad.eye(3), np.eye(3), f32)
    _eq(verigrad.eye(2, 3, dtype="f64"), [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], f64)
    x = verigrad.tensor([[1.0, 2.0]], dtype="f64")
    _eq(verigrad.zeros_like(x), [[0.0, 0.0]], f64)
    _eq(verigrad.ones_like(x), [[1.0, 1.0]], f64)
    _eq(verigrad.tensor(3), np.int64(3), i64)
    _eq(verigrad.tensor(2.5), np.float32(2.5), f32)
    assert verigrad.tensor(2.5).shape == ()
    _eq(verigrad.tensor([True, False]), [True, False], verigrad.bool_)
    _eq(verigrad.tensor(np.array([1.5])), [1.5], f64)  # NumPy arrays keep their dtype
    _eq(verigrad.tensor(np.arange(3, dtype=np.uint8)), [0, 1, 2], verigrad.dtypes.u8)
    _eq(verigrad.tensor(np.arange(3, dtype=np.int8)), [0, 1, 2], verigrad.dtypes.i8)
    _eq(verigrad.tensor(np.arange(3, dtype=np.int16)), [0, 1, 2], verigrad.dtypes.i16)
    _eq(verigrad.tensor(np.arange(3, dtype=np.uint16)), [0, 1, 2], i32)
    z = verigrad.zeros(2, requires_grad=True)
    assert z.requires_grad and z.is_leaf


def test_tensor_of_a_tensor_keeps_its_dtype() -> None:
    for dtype in (bf16, f16, f32, f64, i32, i64, verigrad.bool_):
        src = verigrad.tensor([1, 0], dtype=dtype)
        copy = verigrad.tensor(src)
        assert copy.dtype is dtype
        assert not np.shares_memory(copy.payload, src.payload)
        np.testing.assert_array_equal(copy.payload, src.payload)
    assert verigrad.tensor(verigrad.tensor([1.0]), dtype="f64").dtype is f64


def test_from_numpy_takes_arrays_and_numpy_scalars() -> None:
    _eq(verigrad.from_numpy(np.float32(1.5)), np.float32(1.5), f32)
    _eq(verigrad.from_numpy(np.bool_(True)), np.bool_(True), verigrad.bool_)
    assert not verigrad.from_numpy(np.int64(3)).is_abstract
    with pytest.raises(TypeError):
        verigrad.from_numpy([1.0, 2.0])


def test_tensor_copies_its_data() -> None:
    a = np.arange(4.0)
    t = verigrad.tensor(a)
    a[0] = 100.0
    assert t.numpy()[0] == 0.0
    t2 = verigrad.tensor(np.arange(6.0).reshape(2, 3).T)
    assert t2.is_contiguous()
    _eq(t2, np.arange(6.0).reshape(2, 3).T)


def test_manual_seed_gives_the_same_bits() -> None:
    verigrad.manual_seed(5)
    a = verigrad.randn(3, 4).numpy()
    b = verigrad.rand(7).numpy()
    verigrad.manual_seed(5)
    assert np.array_equal(a.view(np.uint32), verigrad.randn(3, 4).numpy().view(np.uint32))
    assert np.array_equal(b.view(np.uint32), verigrad.rand(7).numpy().view(np.uint32))
    verigrad.manual_seed(6)
    assert not np.array_equal(a, verigrad.randn(3, 4).numpy())
    verigrad.manual_seed(5)
    first = verigrad.randn(3, 4).numpy()
    second = verigrad.randn(3, 4).numpy()
    assert not np.array_equal(first, second)  # consecutive draws differ
    assert a.dtype == np.float32
    assert verigrad.randn(2, dtype="f64").dtype is f64


def test_random_values_are_in_range() -> None:
    u = verigrad.rand(1000).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0
    r = verigrad.randint(-3, 4, (1000,))
    assert r.dtype is i64 and r.numpy().min() == -3 and r.numpy().max() == 3
    z = verigrad.randn(10000, dtype="f64").numpy()
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1.0) < 0.05
    with pytest.raises(ValueError):
        verigrad.randint(3, 3, (2,))
    with pytest.raises(TypeError):
        verigrad.randn(2, dtype="i64")


def test_generator_objects() -> None:
    g1, g2, g3 = verigrad.Generator(1), verigrad.Generator(1), verigrad.Generator(2)
    a = verigrad.rand(5, generator=g1).numpy()
    assert np.array_equal(a, verigrad.rand(5, generator=g2).numpy())
    assert not np.array_equal(a, verigrad.rand(5, generator=g3).numpy())
    # a private generator does not disturb the default one, nor the other way round
    verigrad.manual_seed(9)
    x = verigrad.randn(4).numpy()
    verigrad.manual_seed(9)
    verigrad.randn(4, generator=verigrad.Generator(3))
    assert not np.array_equal(x, verigrad.randn(4, generator=g1).numpy())
    assert np.array_equal(x, verigrad.randn(4).numpy())
    g1.manual_seed(1)
    assert np.array_equal(a, verigrad.rand(5, generator=g1).numpy())


# dtypes ----------------------------------------------------------------------------------------
def test_default_and_named_dtypes() -> None:
    assert verigrad.tensor([1.0]).dtype is f32
    assert verigrad.zeros(1).dtype is f32
    assert verigrad.tensor([1.0], dtype="f64").dtype is f64
    assert verigrad.tensor([1.0], dtype="float64").dtype is f64
    assert verigrad.tensor([1], dtype=i32).dtype is i32
    assert verigrad.tensor([1]).dtype is i64
    assert verigrad.tensor([True]).dtype is verigrad.bool_
    for dtype, np_dtype in [(f32, np.float32), (f64, np.float64), (i32, np.int32), (i64, np.int64)]:
        assert verigrad.zeros(2, dtype=dtype).numpy().dtype == np_dtype


def test_f16_load_and_cast() -> None:
    h = verigrad.from_numpy(np.array([1.0, 0.1, 65504.0], dtype=np.float16))
    assert h.dtype is f16
    _eq(h.float(), np.array([1.0, 0.1, 65504.0], dtype=np.float16).astype(np.float32), f32)
    _eq(verigrad.tensor([0.1, 70000.0]).cast("f16"), np.array([0.1, np.inf], np.float16), f16)
    _eq(h + h, np.array([2.0, 0.2, np.inf], np.float16), f16)  # f16 computes, and overflows to inf


@pytest.mark.parametrize(
    ("f32_bits", "bf16_bits"),
    [
        (0x3F800000, 0x3F80),  # 1.0 exactly
        (0x3F808000, 0x3F80),  # halfway, even below: stays
        (0x3F818000, 0x3F82),  # halfway, odd below: rounds up to even
        (0x3F808001, 0x3F81),  # just above halfway
        (0x3F807FFF, 0x3F80),  # just below halfway
        (0xBF808000, 0xBF80),  # negative tie to even
        (0xBF818000, 0xBF82),
        (0x7F800000, 0x7F80),  # +inf
        (0xFF800000, 0xFF80),  # -inf
        (0x7F7FFFFF, 0x7F80),  # the largest f32 rounds up to inf
        (0x00000000, 0x0000),
        (0x80000000, 0x8000),  # -0 keeps its sign
        (0x00000001, 0x0000),  # the smallest subnormal rounds to zero
    ],
)
def test_bf16_rounds_to_nearest_even(f32_bits: int, bf16_bits: int) -> None:
    x = verigrad.from_numpy(np.array([f32_bits], dtype=np.uint32).view(np.float32))
    b = x.cast("bf16")
    assert b.dtype is bf16
    assert b.payload.dtype == np.uint16 and int(b.payload[0]) == bf16_bits
    back = b.float().numpy().view(np.uint32)
    assert int(back[0]) == bf16_bits << 16


def test_bf16_nan_stays_nan() -> None:
    nan = np.array([0x7FC00000, 0x7F800001, 0xFFFFFFFF], dtype=np.uint32).view(np.float32)
    b = verigrad.from_numpy(nan).cast(bf16)
    assert np.isnan(b.float().numpy()).all()


def test_bf16_load_and_values() -> None:
    b = verigrad.tensor([1.0, -2.5, 3.140625], dtype="bf16")
    assert b.dtype is bf16
    _eq(b.float(), [1.0, -2.5, 3.140625], f32)
    np.testing.assert_array_equal(b.numpy(), [1.0, -2.5, 3.140625])  # numpy() widens the bits
    _eq(b.cast("f64"), [1.0, -2.5, 3.140625], f64)
    _eq(verigrad.tensor([1.0 + 2.0**-9], dtype="bf16").float(), [1.0])  # 8 bits of mantissa
    assert b.reshape(3, 1).dtype is bf16 and b[1:].dtype is bf16


def test_bf16_moves_keep_values() -> None:
    values = np.array([[1.0, -2.5, 3.140625], [0.5, 4.0, -0.0]], dtype=np.float32)
    b = verigrad.tensor(values, dtype="bf16")
    moves = {
        "T": (b.T, values.T),
        "reshape": (b.reshape(3, 2), values.reshape(3, 2)),
        "slice": (b[:, 1:], values[:, 1:]),
        "index": (b[:, [2, 0]], values[:, [2, 0]]),
        "expand": (b[None].expand(2, 2, 3), np.broadcast_to(values, (2, 2, 3))),
        "pad": (b.pad(((0, 1),), value=-1.5), np.pad(values, ((0, 0), (0, 1)), constant_values=-1.5)),
        "concat": (verigrad.concat(b, b, axis=0), np.concatenate([values, values])),
        "contiguous": (b.T.contiguous(), values.T),
    }
    for name, (moved, expected) in moves.items():
        assert moved.dtype is bf16, name
        np.testing.assert_array_equal(moved.float().numpy(), expected, err_msg=name)


def test_promotion_with_python_scalars() -> None:
    x = verigrad.tensor([1.0, 2.0])
    assert (x * 2.0).dtype is f32
    assert (2.0 * x).dtype is f32
    assert (x + 1).dtype is f32
    assert (x.double() * 2.0).dtype is f64
    i = verigrad.tensor([1, 2])
    _eq(i * 2.5, [2.5, 5.0], f32)
    _eq(i * 2, [2, 4], i64)
    assert (verigrad.tensor([1, 2], dtype="i32") * 2).dtype is i32
    assert (verigrad.tensor([1.0], dtype="f16") * 2.0).dtype is f16
    assert (x + x.double()).dtype is f64
    assert (x + i).dtype is f32
    assert (x + np.float64(1.0)).dtype is f32  # a NumPy scalar is a Python scalar to PyTorch
    assert (verigrad.tensor([1, 2], dtype="i8") + np.int64(1)).dtype is verigrad.i8


# autograd --------------------------------------------------------------------------------------
def test_backward_on_a_small_graph() -> None:
    x = verigrad.tensor([1.0, 2.0, 3.0], dtype="f64", requires_grad=True)
    w = verigrad.tensor([0.5, -1.0, 2.0], dtype="f64", requires_grad=True)
    b = verigrad.tensor(1.0, dtype="f64", requires_grad=True)
    y = ((x * w).sum() + b) ** 2  # (0.5 - 2 + 6 + 1)^2 = 5.5^2
    assert y.item() == 30.25
    y.backward()
    _eq(x.grad, 2 * 5.5 * np.array([0.5, -1.0, 2.0]), f64)
    _eq(w.grad, 2 * 5.5 * np.array([1.0, 2.0, 3.0]), f64)
    _eq(b.grad, np.float64(11.0), f64)


def test_backward_through_matmul_and_relu() -> None:
    x = verigrad.tensor([[1.0, -1.0]], dtype="f64", requires_grad=True)
    w = verigrad.tensor([[2.0, 0.0], [1.0, 3.0]], dtype="f64", requires_grad=True)
    h = (x @ w).relu()  # [[1, -3]] -> [[1, 0]]
    h.sum().backward()
    _eq(w.grad, [[1.0, 0.0], [-1.0, 0.0]])
    _eq(x.grad, [[2.0, 1.0]])


@pytest.mark.parametrize("batch", [(), (3,)])
def test_gradient_of_a_transposed_matmul_operand_is_row_major(batch: tuple) -> None:
    """x @ w.mT (Linear's x @ weight.T) and w.mT @ x: w's gradient is formed in w's own layout (a
    transposed product would make the optimizer read it column by column), with the same values."""
    rng = np.random.default_rng(3)
    x_np, w_np = rng.standard_normal((*batch, 4, 5)), rng.standard_normal((6, 5))
    g_np = rng.standard_normal((*batch, 4, 6))
    x, w = verigrad.tensor(x_np, requires_grad=True), verigrad.tensor(w_np, requires_grad=True)
    ((x @ w.mT) * verigrad.tensor(g_np)).sum().backward()
    expected = g_np.reshape(-1, 6).T @ x_np.reshape(-1, 5)  # dw = g^T x, summed over the batch
    assert w.grad.numpy().flags.c_contiguous and x.grad.numpy().flags.c_contiguous
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), g_np @ w_np, rtol=1e-12)
    a_np, y_np, h_np = rng.standard_normal((4, 6)), rng.standard_normal((4, 3)), rng.standard_normal((6, 3))
    a = verigrad.tensor(a_np, requires_grad=True)
    ((a.mT @ verigrad.tensor(y_np)) * verigrad.tensor(h_np)).sum().backward()  # da = y h^T
    assert a.grad.numpy().flags.c_contiguous
    np.testing.assert_allclose(a.grad.numpy(), y_np @ h_np.T, rtol=1e-12)


@pytest.mark.parametrize("wanted", [(False, True), (True, False), (True, True)])
def test_backward_forms_only_the_matmul_gradients_wanted(monkeypatch, wanted: tuple) -> None:
    """A first layer's input wants no gradient: eagerly, its product (a third of an MLP step's) must
    not run; the gradients that are wanted keep their values."""
    from verigrad.eager import EagerMode

    products = []
    run = EagerMode.run

    def counting(self, op, args, params, plan):
        if op.name == "matmul":
            products.append(tuple(a.shape for a in args))
        return run(self, op, args, params, plan)

    rng = np.random.default_rng(4)
    x_np, w_np = rng.standard_normal((4, 5)), rng.standard_normal((6, 5))
    x, w = verigrad.tensor(x_np, requires_grad=wanted[0]), verigrad.tensor(w_np, requires_grad=wanted[1])
    loss = (x @ w.mT).sum()
    monkeypatch.setattr(EagerMode, "run", counting)
    loss.backward()
    assert len(products) == sum(wanted)
    if wanted[0]:
        np.testing.assert_allclose(x.grad.numpy(), np.ones((4, 6)) @ w_np, rtol=1e-12)
    if wanted[1]:
        np.testing.assert_allclose(w.grad.numpy(), np.ones((6, 4)) @ x_np, rtol=1e-12)
    assert (x.grad is None) != wanted[0] and (w.grad is None) != wanted[1]


def test_broadcasting_reduces_gradients_to_the_operand_shape() -> None:
    x = verigrad.ones(4, 3, requires_grad=True)
    row = verigrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    col = verigrad.tensor([[1.0], [2.0], [3.0], [4.0]], requires_grad=True)
    s = verigrad.tensor(2.0, requires_grad=True)
    ((x * row + col) * s).sum().backward()
    assert row.grad.shape == (3,) and col.grad.shape == (4, 1) and s.grad.shape == ()
    _eq(row.grad, [8.0, 8.0, 8.0])
    _eq(col.grad, [[6.0], [6.0], [6.0], [6.0]])
    _eq(s.grad, np.float32(4 * 6 + 3 * 10))
    _eq(x.grad, np.tile([2.0, 4.0, 6.0], (4, 1)))


def test_gradients_accumulate_over_two_backward_calls() -> None:
    x = verigrad.tensor([1.0, 2.0], requires_grad=True)
    (x * 3.0).sum().backward()
    (x * x).sum().backward()
    _eq(x.grad, [3.0 + 2.0, 3.0 + 4.0])
    x.grad = None
    (x * 3.0).sum().backward()
    _eq(x.grad, [3.0, 3.0])


def test_a_tensor_used_twice_gets_both_gradients() -> None:
    x = verigrad.tensor(3.0, requires_grad=True)
    y = x * x + x
    y.backward()
    _eq(x.grad, np.float32(7.0))


def test_no_grad_and_detach() -> None:
    x = verigrad.tensor([1.0, 2.0], requires_grad=True)
    with verigrad.no_grad():
        y = x * 2.0
    assert not y.requires_grad and y.is_leaf
    assert verigrad.is_grad_enabled()

    @verigrad.no_grad()
    def double(t):
        return t * 2.0

    assert not double(x).requires_grad
    d = x.detach()
    assert not d.requires_grad and d.is_leaf
    assert np.shares_memory(d.numpy(), x.numpy())
    z = (x * d).sum()
    z.backward()
    _eq(x.grad, [1.0, 2.0])  # d is a constant
    with pytest.raises(RuntimeError):
        (d * 2.0).sum().backward()
    with verigrad.no_grad(), verigrad.enable_grad():
        assert (x * 2.0).requires_grad


def test_requires_grad_on_int_is_refused() -> None:
    with pytest.raises(RuntimeError, match="floating"):  # PyTorch's RuntimeError
        verigrad.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError):
        verigrad.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError):
        verigrad.zeros(2, dtype="i32", requires_grad=True)


def test_backward_needs_a_scalar_or_a_gradient() -> None:
    x = verigrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    with pytest.raises(RuntimeError):
        y.backward()
    y.backward(verigrad.tensor([1.0, 10.0]))
    _eq(x.grad, [2.0, 20.0])
    with pytest.raises(RuntimeError):
        (x * 2.0).backward(verigrad.tensor([1.0]))


def test_in_place_updates_under_no_grad() -> None:
    w = verigrad.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    data = w.numpy()
    with verigrad.no_grad():
        w -= w.grad * 0.5
    assert w.requires_grad and w.is_leaf
    _eq(w, [0.0, 0.0])
    assert w.numpy() is data  # updated in place
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w -= 1.0
    t = verigrad.zeros(2, 2)
    assert t.assign(verigrad.tensor([1.0, 2.0])) is t
    _eq(t, [[1.0, 2.0], [1.0, 2.0]])
    t += 1
    t *= 2.0
    t /= 4.0
    _eq(t, [[1.0, 1.5], [1.0, 1.5]])
    t.assign(3)
    _eq(t, [[3.0, 3.0], [3.0, 3.0]], f32)
    with pytest.raises(ValueError):
        t.assign(verigrad.zeros(3))
    with pytest.raises(RuntimeError):
        verigrad.zeros(3).expand(2, 3).assign(1.0)  # a broadcast view is read-only


def test_gradients_of_ties_and_kinks() -> None:
    x = verigrad.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    _eq(x.grad, [0.0, 0.5, 0.5])  # shared evenly among the maxima
    a = verigrad.tensor([1.0, 3.0, 3.0], requires_grad=True)
    b = verigrad.tensor([2.0, 3.0, 1.0], requires_grad=True)
    a.maximum(b).sum().backward()
    _eq(a.grad, [0.0, 0.5, 1.0])
    _eq(b.grad, [1.0, 0.5, 0.0])
    z = verigrad.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    (z.abs() + z.relu()).sum().backward()
    _eq(z.grad, [-1.0, 0.0, 2.0])  # |x|' and relu' are 0 at 0


def test_gradients_through_indexing_and_joining() -> None:
    x = verigrad.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    x[1:, [0, 2, 2]].sum().backward()
    _eq(x.grad, [[0.0, 0.0, 0.0], [1.0, 0.0, 2.0]])  # a repeated index adds up
    y = verigrad.tensor([[1.0, 2.0]], requires_grad=True)
    (verigrad.concat(y, y * 3.0, axis=0).sum() + y.pad(((1, 1), (0, 1))).sum()).backward()
    _eq(y.grad, [[5.0, 5.0]])
    u = verigrad.tensor([1.0, 2.0], requires_grad=True)
    verigrad.stack(u, u * 2.0).sum().backward()
    _eq(u.grad, [3.0, 3.0])
    v = verigrad.tensor([[1.0, 2.0]], requires_grad=True)
    (v.expand(3, 2) * verigrad.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    _eq(v.grad, [[6.0, 6.0]])


def test_double_backward_of_cube() -> None:
    x = verigrad.tensor([1.0, 2.0, -3.0], dtype="f64", requires_grad=True)
    (x**3).sum().backward(create_graph=True)
    g = x.grad
    _eq(g, [3.0, 12.0, 27.0], f64)
    assert g.requires_grad
    x.grad = None
    g.sum().backward()
    _eq(x.grad, [6.0, 12.0, -18.0], f64)
    x.grad = None
    (x**3).sum().backward()
    assert not x.grad.requires_grad  # without create_graph no history is kept


# interop ---------------------------------------------------------------------------------------
def test_numpy_asarray_and_from_numpy_share_memory() -> None:
    a = np.arange(6.0).reshape(2, 3)
    t = verigrad.from_numpy(a)
    assert t.dtype is f64 and t.shape == (2, 3)
    a[0, 0] = 42.0
    assert t.numpy()[0, 0] == 42.0
    arr = np.asarray(t)
    assert np.shares_memory(arr, a)
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float32), a.astype(np.float32))
    assert np.asarray(verigrad.tensor([1.0, 2.0])).dtype == np.float32
    assert t.tolist() == a.tolist()
    assert float(verigrad.tensor(2.5)) == 2.5 and int(verigrad.tensor(3)) == 3


def test_dlpack_both_ways() -> None:
    t = verigrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.from_dlpack(t)
    assert np.shares_memory(a, t.numpy())
    np.testing.assert_array_equal(a, [[1.0, 2.0], [3.0, 4.0]])
    source = np.arange(5, dtype=np.int32)
    u = verigrad.from_dlpack(source)
    assert u.dtype is i32
    assert np.shares_memory(u.numpy(), source)
    source[0] = 7
    assert u.numpy()[0] == 7
    v = verigrad.from_dlpack(np.arange(6.0).reshape(2, 3).T)
    _eq(v, np.arange(6.0).reshape(2, 3).T, f64)


def test_ndarray_on_the_left_defers_to_the_tensor() -> None:
    out = np.array([1.0, 2.0], dtype=np.float32) + verigrad.tensor([1.0, 1.0])
    assert isinstance(out, Tensor)
    _eq(out, [2.0, 3.0], f32)


# backends --------------------------------------------------------------------------------------
def test_backend_switching() -> None:
    assert "reference" in verigrad.available_backends()
    assert verigrad.get_backend().name == "reference"
    default = active._DEFAULT[0].name
    try:
        assert verigrad.set_backend("reference").name == "reference"
    finally:
        verigrad.set_backend(default)  # the process default, which every thread starts from: as it was
    with verigrad.backend("reference") as b:
        assert b is verigrad.get_backend()
        _eq(verigrad.tensor([1.0]) + 1.0, [2.0])
    assert verigrad.get_backend().name == "reference"
    verigrad.set_threads(2)
    assert verigrad.get_backend().threads == 2
    verigrad.set_threads(1)
    with pytest.raises(ValueError):
        verigrad.set_threads(0)
    with pytest.raises(ValueError, match="unknown backend"):
        verigrad.set_backend("no-such-backend")
    with pytest.raises(ValueError, match="unknown backend"), verigrad.backend("no-such-backend"):
        pass
    assert verigrad.get_backend().name == "reference"
    report = verigrad.get_backend().report()
    assert set(report["fallback"]) | set(report["native"]) == set(verigrad.REGISTRY)


def test_repr() -> None:
    assert repr(verigrad.tensor([1.0, 2.0])) == "tensor([1., 2.], dtype=f32)"
    assert "requires_grad=True" in repr(verigrad.zeros(1, requires_grad=True))
    with verigrad.abstract():
        assert repr(verigrad.zeros(2, 3)) == "Tensor(spec=f32[2, 3])"


# item assignment and PyTorch's device idioms -----------------------------------------------------
def _writes(buf, x):
    with verigrad.no_grad():
        buf[1] = x.sum(0)
        buf[::2, 1:] = -1.0
        buf[buf > 9] = 0.0
        buf[None, 3, ..., 0] = 7
        buf[-1, 1:] += 0.5
        row = buf[2]  # a view held in a variable: writes into it reach buf, also through a view of it
        row += 1.0
        row[1:].mul_(3.0)
        buf.mul_(0.5)  # and it sees the writes into buf
    return buf.sum() + row.sum()


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_item_assignment_writes_the_same_values_eagerly_and_compiled(backend) -> None:
    """Traced, a slice is a value of its own: the write must reach the whole tensor all the same, also
    one into a slice held in a variable, and that slice must see later writes into the tensor."""
    expected = np.arange(12.0).reshape(4, 3)
    expected[1] = 2.0
    expected[::2, 1:] = -1.0
    expected[expected > 9] = 0.0
    expected[3, 0] = 7
    expected[-1, 1:] += 0.5
    expected[2] += 1.0
    expected[2, 1:] *= 3.0
    expected *= 0.5
    x = verigrad.tensor(np.ones((2, 3), np.float32))
    with verigrad.backend(backend):
        for compiled in (False, True):
            buf = verigrad.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
            run = (
                verigrad.compile(lambda x, buf=buf: _writes(buf, x))
                if compiled
                else (lambda x: _writes(buf, x))
            )
            total = run(x)
            _eq(buf, expected.astype(np.float32))
            assert total.item() == expected.sum() + expected[2].sum()


def test_item_assignment_refusals() -> None:
    x = verigrad.zeros(3, 4)
    with pytest.raises(verigrad.ShapeError, match=r"values of shape \[3\] cannot be broadcast"):
        x[verigrad.tensor([0, 2])] = verigrad.ones(3)
    with pytest.raises(verigrad.ShapeError, match=r"cannot assign \[2\] to \[4\]"):
        x[0] = verigrad.ones(2)
    w = verigrad.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w[0] = 3.0


def test_pytorch_device_idioms_and_retain_graph() -> None:
    x = verigrad.tensor([1.0, 2.0], requires_grad=True)
    assert x.cpu() is x and x.device.type == "cpu" and x.to("cpu") is x and x.to("f64").dtype is f64
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()  # the graph is kept either way
    _eq(x.grad, np.array([4.0, 8.0], np.float32))
    assert x.detach().cpu().numpy().tolist() == [1.0, 2.0]


def test_pytorchs_creation_comparison_and_grad_mode_helpers() -> None:
    a, b = verigrad.tensor([1.0, 2.0, 3.0]), verigrad.tensor([3.0, 1.0, 2.0])
    _eq(a.max(b), np.array([3.0, 2.0, 3.0], np.float32))  # a tensor argument: element-wise
    _eq(a.min(b), np.array([1.0, 1.0, 2.0], np.float32))
    assert a.max().item() == 3.0
    assert (
        verigrad.allclose(a, a + 1e-9) and not a.allclose(b) and verigrad.equal(a, a) and not a.equal(a[:2])
    )
    assert verigrad.allclose(verigrad.tensor([np.nan]), verigrad.tensor([np.nan]), equal_nan=True)
    with pytest.raises(TypeError, match="allclose reads values, but this tensor is abstract"):
        verigrad.check(lambda x: verigrad.allclose(x, x), verigrad.spec([2]))
    _eq(verigrad.linspace(-1, 1, 5), np.linspace(-1, 1, 5).astype(np.float32))
    assert verigrad.linspace(0, 1, 0).shape == (0,)
    _eq(verigrad.full_like(a, 7, dtype="i64"), np.array([7, 7, 7]))
    _eq(verigrad.empty(2, 3), np.zeros((2, 3), np.float32))
    assert verigrad.empty_like(a).shape == (3,) and a.nelement() == 3
    verigrad.manual_seed(0)
    r = verigrad.randn_like(verigrad.zeros(4, 5, dtype="f64"))
    assert r.shape == (4, 5) and r.dtype is f64 and verigrad.rand_like(a).shape == (3,)
    x = verigrad.ones(2, requires_grad=True)
    with verigrad.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    verigrad.set_grad_enabled(False)
    try:
        assert not verigrad.is_grad_enabled()
    finally:
        verigrad.set_grad_enabled(True)
    with verigrad.inference_mode():
        assert not (x * 2).requires_grad
    with verigrad.inference_mode(False):
        assert (x * 2).requires_grad


def test_eager_result_specs_are_remembered_per_operands_and_params() -> None:
    """Eager calls remember the rules' answer by the operands' specs and the params: another dtype,
    shape or param gets its own; a refusal is not remembered; the memory stays bounded."""
    from verigrad.ops import _op

    add, total = verigrad.ops.REGISTRY["add"], verigrad.ops.REGISTRY["sum"]
    a, b = verigrad.ones(2, 3), verigrad.ones(3)
    assert (a + b).shape == (2, 3) and (a + b).dtype is verigrad.f32
    assert (a.double() + b).dtype is f64 and (a[:1] + b).shape == (1, 3)
    assert a.sum(0).shape == (3,) and a.sum(1).shape == (2,) and a.sum(1, keepdim=True).shape == (2, 1)
    assert {"axis": (1,), "keepdim": True} in [params for params, _ in total._eager_plans.values()]
    for _ in range(2):
        with pytest.raises(verigrad.ShapeError, match="add"):
            a + verigrad.ones(4)
    assert (a.shape, a.dtype, (4,), a.dtype) not in add._eager_plans
    for n in range(_op.SPECS_KEPT + 5):
        verigrad.ones(n) + 1.0
    assert len(add._eager_plans) <= _op.SPECS_KEPT


def test_gradient_hooks_replace_watch_and_are_checked():
    x = verigrad.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g * 0 + 1)  # every gradient of y replaced by ones
    handle = x.register_hook(lambda g: g * 2)
    (y * 5).sum().backward(retain_graph=True)  # y's node is passed again below
    _eq(x.grad, [4.0, -8.0, 12.0])  # 2 x (ones), doubled
    handle.remove()
    handle.remove()  # a second remove does nothing
    x.grad = None
    (y * 5).sum().backward(retain_graph=True)
    _eq(x.grad, [2.0, -4.0, 6.0])
    (g,) = verigrad.autograd.gradients((y * 5).sum(), [x])  # the hooks on the path run here too
    _eq(g, [2.0, -4.0, 6.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        verigrad.tensor([1.0]).register_hook(lambda g: g)
    with pytest.raises(TypeError, match="function of the gradient"):
        x.register_hook(3)
    y.register_hook(lambda g: g.sum())  # the wrong shape: refused when it runs
    with pytest.raises(RuntimeError, match="gradient hook returned"):
        y.sum().backward()
    z = x * 3
    z.retain_grad()
    z.retain_grad()  # once is enough
    (z * z).sum().backward()
    _eq(z.grad, [6.0, -12.0, 18.0])


def test_a_hook_in_a_compiled_step_is_part_of_the_program():
    w = verigrad.tensor([1.0, 2.0], requires_grad=True)
    w.register_hook(lambda g: g.clamp(-1.0, 1.0))  # gradient clipping, per element

    def step(x):
        loss = ((w * x).sum() - 10.0) ** 2
        w.grad = None
        loss.backward()
        return w.grad

    compiled = verigrad.compile(step)
    for value in ([3.0, 4.0], [0.01, 0.02]):
        x = verigrad.tensor(value)
        _eq(compiled(x), step(x).numpy())
