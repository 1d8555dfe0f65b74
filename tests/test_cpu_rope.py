"""The cpu backend's rope kernel: the decomposition's bits on both layouts, any offset, views, special
values and thread counts; layouts it does not take run the reference."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad.backends import cpu
from verigrad.backends.cpu import rope
from verigrad.backends.reference import composite_reference
from verigrad.errors import ShapeError
from verigrad.ops import REGISTRY

SMALL_CHUNK = 5  # the min chunk the `small_chunks` fixture (conftest.py) sets

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def _kernel(dtype: str):
    return cpu.cpu.native(REGISTRY["rope"], getattr(verigrad, dtype))


def _tables(rng: np.random.Generator, rows: int, half: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    angles = rng.uniform(-4, 4, (rows, half))
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def _with_specials(x: np.ndarray) -> np.ndarray:
    flat = x.reshape(-1)
    flat[: min(6, flat.size)] = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-42], x.dtype)[: flat.size]
    return x


def _views(rng: np.random.Generator, dtype) -> list[np.ndarray]:
    """x [..., T, D]: contiguous, a slice of a wider last axis (the decode step's q/k), transposed leading
    axes, a token axis with a gap, and one whose leading axes do not merge."""
    base = _with_specials(rng.uniform(-3, 3, (2, 3, 5, 8)).astype(dtype))
    wide = rng.uniform(-3, 3, (1, 1, 14 * 8 + 40)).astype(dtype)
    return [
        base,
        wide[..., : 14 * 8].reshape(1, 14, 1, 8),
        base.transpose(1, 0, 2, 3),
        rng.uniform(-3, 3, (3, 10, 8)).astype(dtype)[:, ::2],
        rng.uniform(-3, 3, (4, 6, 5, 8)).astype(dtype)[::2, ::2],
    ]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("interleaved", [True, False])
def test_rope_gives_the_decompositions_bits(dtype, interleaved, small_chunks):
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(7)
    kernel, reference = _kernel(dtype), composite_reference(REGISTRY["rope"])
    for x in _views(rng, np_dtype):
        t, half = x.shape[-2], x.shape[-1] // 2
        cos, sin = _tables(rng, t + 4, half, np_dtype)
        for offset in (0, 4):
            with np.errstate(all="ignore"):
                expected = reference(x, cos, sin, offset=offset, interleaved=interleaved)
            for threads in (1, 2, 3):
                verigrad.set_threads(threads)
                before = x.copy()
                with np.errstate(all="ignore"):
                    out = kernel(x, cos, sin, offset=offset, interleaved=interleaved)
                assert out.dtype == expected.dtype and out.shape == x.shape
                assert out.tobytes() == np.ascontiguousarray(expected).tobytes(), (x.shape, x.strides, offset)
                assert x.tobytes() == before.tobytes()  # views it copies are rotated in the copy
    verigrad.set_threads(1)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("interleaved", [True, False])
def test_rope_in_place_gives_the_out_of_place_bits(dtype, interleaved, small_chunks):
    """out=x rotates x itself (each pair read before it is written), out=a new array fills it: both the
    bits of the result in a new array, on rows split between threads."""
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(11)
    kernel = _kernel(dtype)
    x = _with_specials(rng.uniform(-3, 3, (3, 7, 8)).astype(np_dtype))
    cos, sin = _tables(rng, 10, 4, np_dtype)
    for offset in (0, 3):
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            with np.errstate(all="ignore"):
                expected = kernel(x, cos, sin, offset=offset, interleaved=interleaved)
                y, into = x.copy(), np.full_like(x, 7)
                assert kernel(y, cos, sin, offset=offset, interleaved=interleaved, out=y) is y
                assert kernel(x, cos, sin, offset=offset, interleaved=interleaved, out=into) is into
            assert y.tobytes() == expected.tobytes(), (offset, threads)
            assert into.tobytes() == expected.tobytes(), (offset, threads)


@pytest.mark.parametrize("offset", [7, np.int64(7), np.array(7), verigrad.tensor(np.array(7)), 10])
def test_an_offset_past_the_tables_raises_before_writing(offset):
    """Table rows offset .. offset+T must exist, the offset given as an int or as a value (an array or
    tensor of no dimensions) at run time: else a ShapeError, with x and `out=` as they were."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, (2, 5, 8)).astype(np.float32)
    cos, sin = _tables(rng, 9, 4, np.float32)
    kernel, before, into = _kernel("f32"), x.copy(), np.full_like(x, 7)
    for out in (None, x, into):
        with pytest.raises(
            ShapeError, match=r"positions \d+\.\.\d+ need \d+ table rows, but the tables have 9"
        ):
            kernel(x, cos, sin, offset=offset, interleaved=True, out=out)
    assert x.tobytes() == before.tobytes() and (into == 7).all()


def test_the_offset_is_checked_against_both_tables_and_must_be_a_non_negative_int():
    rng = np.random.default_rng(4)
    x = rng.uniform(-3, 3, (2, 5, 8)).astype(np.float64)
    cos, sin = _tables(rng, 9, 4, np.float64)
    kernel = _kernel("f64")
    ok = kernel(x, cos, sin, offset=np.array(4), interleaved=False)
    assert ok.tobytes() == kernel(x, cos, sin, offset=4, interleaved=False).tobytes()
    short = np.ascontiguousarray(sin[:8])  # the strides of the layout just run: no stale layout
    with pytest.raises(
        ShapeError, match=r"rope\(f64\[2, 5, 8\], f64\[9, 4\], f64\[8, 4\]\): positions 4\.\.8"
    ):
        kernel(x, cos, short, offset=4, interleaved=False)
    for offset in (-1, 1.0, np.array([1])):
        with pytest.raises(ShapeError, match="offset must be a non-negative int"):
            kernel(x, cos, sin, offset=offset, interleaved=False)


def test_rows_of_merges_evenly_strided_leading_axes():
    f = np.zeros((4, 6, 5, 8), np.float32)
    assert rope.rows_of(f.shape, f.strides, 4) == (24, 40, 8)
    assert rope.rows_of(f[:, :, :, :].transpose(1, 0, 2, 3).shape, f.transpose(1, 0, 2, 3).strides, 4) is None
    assert rope.rows_of(f[:, ::2].shape, f[:, ::2].strides, 4) == (12, 80, 8)  # 4 x 3 rows, evenly apart
    assert rope.rows_of(f[::2].shape, f[::2].strides, 4) is None  # 6 rows, a gap, 6 rows
    assert rope.rows_of(f[..., ::2].shape, f[..., ::2].strides, 4) is None  # the last axis strided
    assert rope.rows_of((5, 8), (32, 4), 4) == (1, 0, 8)


def test_the_kernel_runs_for_a_compiled_decode_rotation():
    """In a compiled function the rope op is one step of the kernel (not its decomposition's steps)."""
    x = verigrad.tensor(np.random.default_rng(1).standard_normal((1, 12, 1, 64), dtype=np.float32))
    cos, sin = (verigrad.tensor(a) for a in _tables(np.random.default_rng(2), 1, 32, np.float32))
    fn = verigrad.compile(lambda x, c, s: verigrad.nn.functional.rope(x, c, s, interleaved=True))
    with verigrad.backend("cpu"):
        out = fn(x, cos, sin)
    reference = composite_reference(REGISTRY["rope"])
    expected = reference(x.numpy(), cos.numpy(), sin.numpy(), offset=0, interleaved=True)
    assert out.numpy().tobytes() == expected.tobytes()
    (plan,) = fn._plans.values()
    assert [s.op.name for s in plan.steps] == ["rope"]
