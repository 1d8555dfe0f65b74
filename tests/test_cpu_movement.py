"""The cpu backend's copy kernel (movement.c): `contiguous` of any view, dtype and item size with the
reference's bits, a contiguous input returned itself, large views over threads, and the fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
from test_cpu_elementwise import _bits

import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

SMALL_CHUNK = 64  # the min chunk the `small_chunks` fixture (conftest.py) sets

HAS_CC = cpu.available()
needs_cc = pytest.mark.skipif(not HAS_CC, reason="the cpu backend could not be built here")


COPY_DTYPES = [np.float32, np.float64, np.int64, np.int32, np.bool_, np.float16, np.int8, np.uint16]


def _copy_source(np_dtype: type, shape: tuple, seed: int) -> np.ndarray:
    """Random bit patterns (NaN payloads and all) for floats, random values for the rest."""
    rng = np.random.default_rng(seed)
    if np.dtype(np_dtype) == np.bool_:
        return rng.random(shape) < 0.5
    nbytes = int(np.prod(shape)) * np.dtype(np_dtype).itemsize
    return np.frombuffer(rng.bytes(nbytes), dtype=np_dtype).reshape(shape).copy()


def _views(x: np.ndarray) -> list[np.ndarray]:
    """Non-contiguous views of a rank-4 array, ranks 1 to 5."""
    return [
        x.transpose(3, 2, 1, 0),
        x.transpose(0, 2, 1, 3),
        x[:, ::2, 1::3, ::-1],
        x[::-1, :, ::-2],
        x[1, :, ::-1].T,
        x[..., 0],
        x[:, 0, :, 1],
        x[0, 0, ::-1, 2],
        x[0, 1, 1, ::2],
        x[0, 0, 0, ::-3],
        x[:1, :, :1, ::-1],
        x[:, :0, ::2],  # size 0
        x[:, 2:3, ::-1, :1],  # size-1 dims
        np.broadcast_to(x[:, :1], (3, 4, 5, 6)),  # zero strides
        np.broadcast_to(x[0, 0, 0, ::-2], (2, 3, 4, 3)),
        np.broadcast_to(x[0, 0, 0, 0], (5, 7)),
        np.broadcast_to(x[:, 0, 0, 0][:, None, None, None], (3, 2, 1, 4)),
        # rank 5: x[0]'s copy for each index of the first axis (vg_copy_outer)
        x.reshape(3, 2, 2, 5, 6).transpose(3, 0, 2, 1, 4),
        x.reshape(3, 4, 5, 3, 2)[::-1, :, ::2, :, ::-1],
        np.broadcast_to(x[:, None, :1, ::2, ::-3], (3, 2, 1, 3, 2)),
        x.reshape(3, 4, 5, 3, 2)[:, :, :0],  # size 0
    ]


@needs_cc
@pytest.mark.parametrize("np_dtype", COPY_DTYPES, ids=lambda t: np.dtype(t).name)
def test_contiguous_copies_any_view_with_the_reference_bits(np_dtype, small_chunks):
    kernel = cpu.cpu.native(REGISTRY["contiguous"], verigrad.f32)
    reference = REGISTRY["contiguous"].reference
    cpu.set_min_chunk(3)
    x = _copy_source(np_dtype, (3, 4, 5, 6), seed=np.dtype(np_dtype).itemsize)
    views = _views(x)
    assert any(v.size == 0 for v in views) and any(0 in v.strides for v in views)
    assert any(s < 0 for v in views for s in v.strides) and {v.ndim for v in views} == {1, 2, 3, 4, 5}
    for view in views:
        assert not view.flags.c_contiguous or view.size == 0  # NumPy calls every empty array contiguous
        expected = reference(view)
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            actual = kernel(view)
            assert actual.flags.c_contiguous and actual.shape == expected.shape
            assert actual.dtype == expected.dtype
            assert actual.tobytes() == expected.tobytes(), (view.shape, view.strides, threads)
            if expected is view:  # the empty views
                assert actual is view
            else:
                assert actual.flags.owndata and actual.flags.writeable and not np.shares_memory(actual, x)


@needs_cc
def test_contiguous_returns_a_contiguous_input_itself(small_chunks):
    kernel = cpu.cpu.native(REGISTRY["contiguous"], verigrad.i64)
    reference = REGISTRY["contiguous"].reference
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    for a in [x, x[1], x[:, :1].reshape(2, 4)[:1], np.array(2, np.float32), np.zeros((0, 3)), x[0, 0, 1:2]]:
        assert a.flags.c_contiguous
        assert kernel(a) is a and reference(a) is a
    zero_d = x[1, 2, 3]  # a scalar, not an array: the reference's answer
    assert _bits(kernel(zero_d)) == _bits(reference(zero_d))
    view0 = x[1, 2, 3:4].reshape(())
    assert kernel(view0) is view0 and view0.ndim == 0


@needs_cc
def test_contiguous_large_views_split_over_threads():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 257)).astype(np.float32)
    try:
        # the last: a GPT's q/k/v gradients (batch, heads, 3, tokens, head width) as (batch, tokens, 3, heads,
        # head width), each thread's chunk starting and ending inside a batch item
        qkv = x.reshape(-1)[: 5 * 4 * 3 * 20 * 32].reshape(5, 4, 3, 20, 32).transpose(0, 3, 2, 1, 4)
        for view in [x.T, x[::-1, ::3], np.broadcast_to(x[:, :1], (300, 257)).T, qkv]:
            results = []
            for threads in (1, 2, 3):
                verigrad.set_threads(threads)
                results.append(cpu.cpu.native(REGISTRY["contiguous"], verigrad.f32)(view))
            for r in results:
                assert r.tobytes() == np.ascontiguousarray(view).tobytes()
        with verigrad.backend("cpu"):
            out = verigrad.from_numpy(x).permute((1, 0)).contiguous().numpy()
        assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()
    finally:
        verigrad.set_threads(1)


@needs_cc
def test_contiguous_falls_back_for_other_ranks_item_sizes_and_types(small_chunks):
    kernel = cpu.cpu.native(REGISTRY["contiguous"], verigrad.f32)
    verigrad.set_threads(2)
    deep = np.arange(144, dtype=np.float32).reshape(2, 3, 2, 3, 2, 2).transpose(5, 4, 3, 2, 1, 0)  # rank 6
    wide = (np.arange(12) + 1j * np.arange(12)).reshape(3, 4).T  # item size 16
    objects = np.array([[1, "a"], [None, 2.5]], dtype=object).T  # item size 8, but references
    triples = np.zeros((4, 5), dtype="V3")[:, ::2]  # item size 3
    for view in (deep, wide, objects, triples):
        actual = kernel(view)
        assert actual.flags.c_contiguous and actual.shape == view.shape and actual.dtype == view.dtype
        assert np.array_equal(actual, view) if view.dtype != "V3" else actual.tobytes() == _bits(view)
    unaligned = np.frombuffer(bytearray(8 * 12 + 1), dtype=np.float64, offset=1, count=12)
    unaligned = unaligned.reshape(3, 4).T  # unaligned and strided: bytes are copied as they are
    assert not unaligned.flags.aligned
    assert kernel(unaligned).tobytes() == np.ascontiguousarray(unaligned).tobytes()
    assert kernel([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]  # not an ndarray: the reference
