"""unslice in C (movement.c): the reference's bits (np.zeros, then g assigned at the slice's positions) for
every layout of g, slice steps on any axis, clipped stops, empty slices and item sizes, on 1 to 3 threads,
which split the rows; the cases it does not take go to the reference."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

# (out's shape, the slice as the op's params give it: per axis (start, stop, step), trailing axes left out)
CASES = [
    ((8, 4, 16, 33), ((0, 8, 1), (0, 4, 1), (0, 16, 1), (0, 32, 1))),  # an attention output's gradient
    ((5, 4), ((1, 4, 1), (0, 4, 2))),
    ((6,), ((2, 6, 1),)),
    ((3, 4), ((2, 2, 1),)),  # nothing selected
    ((2, 3, 4), ((0, 2, 1), (1, 2, 1))),  # the last axis whole
    ((7, 9, 11), ((1, 7, 3), (2, 9, 2), (3, 11, 4))),
    ((4, 6), ((1, 9, 1), (5, 9, 1))),  # stops beyond the sizes, clipped
    ((2, 3, 2, 2, 2, 5), ((1, 2, 1), (0, 3, 2), (0, 2, 1), (1, 2, 1), (0, 2, 1), (1, 5, 3))),
]


def _slice_of(g_shape_of: tuple, index: tuple) -> tuple:
    return np.zeros(g_shape_of)[tuple(slice(*i) for i in index)].shape


def _layouts(rng: np.random.Generator, shape: tuple, dtype: np.dtype) -> list[np.ndarray]:
    """g C-contiguous, axes reversed in memory (every stride other than the item size), a negative
    stride, and every other element of a wider array."""
    g = (rng.standard_normal(shape) * 1e3).astype(dtype)
    if g.size and dtype.kind == "f":
        g.flat[0] = -0.0  # signed zeros and NaNs kept as they are
        g.flat[-1] = np.nan
    reversed_axes = np.ascontiguousarray(g.transpose(*range(g.ndim)[::-1])).transpose(*range(g.ndim)[::-1])
    wide = np.repeat(g, 2, axis=-1)[..., ::2]
    return [g, reversed_axes, g[..., ::-1].copy()[..., ::-1], wide]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.float16, np.int8])
def test_unslice_kernel_gives_the_reference_bits(dtype, small_chunks):
    kernel = cpu.cpu.native(REGISTRY["unslice"], verigrad.dtypes.from_numpy_dtype(np.dtype(dtype)))
    reference = REGISTRY["unslice"].reference
    rng = np.random.default_rng(30)
    split = False
    for shape, index in CASES:
        for g in _layouts(rng, _slice_of(shape, index), np.dtype(dtype)):
            want = reference(g, shape, index)
            for threads in (1, 2, 3):
                verigrad.set_threads(threads)
                cpu.chunks_run()
                with cpu.static_schedule():
                    got = kernel(g, shape, index)
                assert got.shape == want.shape and got.tobytes() == want.tobytes(), (shape, index, threads)
                split = split or sum(c > 0 for c in cpu.chunks_run()) > 1
    verigrad.set_threads(1)
    assert split  # the rows were split over the threads


def test_unslice_kernel_leaves_to_the_reference_what_it_does_not_take():
    """A g not shaped as the slice (the reference's error) and a 0-d one."""
    kernel = cpu.cpu.native(REGISTRY["unslice"], verigrad.f32)
    reference = REGISTRY["unslice"].reference
    g = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError) as ours:
        kernel(g, (5, 4), ((1, 3, 1), (0, 4, 2)))
    with pytest.raises(ValueError) as theirs:
        reference(g, (5, 4), ((1, 3, 1), (0, 4, 2)))
    assert str(ours.value) == str(theirs.value)
    scalar = np.float32(2.0) * np.ones((), np.float32)
    assert kernel(scalar, (), ()).tobytes() == reference(scalar, (), ()).tobytes()
