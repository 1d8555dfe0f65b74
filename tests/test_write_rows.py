"""Backend.write_rows, which writes a batched step's new keys and values into their cache rows (every layer
in one call): the cpu backend's C copy against NumPy's fancy-index write, the addresses it remembers for a
cache's arrays, and the cases it leaves to NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu import movement

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def _case(rng, dtype=np.float32, layers: int = 3, rows: int = 4, heads: int = 3, width: int = 8):
    """Stores [rows + 1, H, 16, width] per layer's keys and values, news [rows, H, width] of two layouts
    (a step's keys and values come from different products), positions."""
    stores = [rng.integers(0, 100, (rows + 1, heads, 16, width)).astype(dtype) for _ in range(2 * layers)]
    news = []
    for p in range(2 * layers):
        new = rng.integers(100, 200, (heads, rows, width)).astype(dtype)  # as the step leaves them
        news.append(new.swapaxes(0, 1) if p % 2 else np.ascontiguousarray(new.swapaxes(0, 1)))
    return stores, news, np.array([5, 0, 15, 9][:rows], np.int64)


def _numpy(stores, news, at):
    out = [s.copy() for s in stores]
    for s, n in zip(out, news):
        s[np.arange(len(at)), :, at] = n
    return out


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_one_call_writes_each_row_where_numpy_writes_it(dtype):
    stores, news, at = _case(np.random.default_rng(0), dtype)
    want = _numpy(stores, news, at)
    assert movement.write_rows(stores, news, at)  # the C copy, not the fallback
    for got, w in zip(stores, want):
        np.testing.assert_array_equal(got, w)


@needs_cc
def test_a_cache_that_grew_is_written_in_its_new_arrays():
    """The stores' addresses are remembered per arrays: new arrays of the same layout get their own."""
    rng = np.random.default_rng(1)
    stores, news, at = _case(rng)
    assert movement.write_rows(stores, news, at)
    grown = [s.copy() for s in stores]
    news = [n + 1 for n in news]
    want = _numpy(grown, news, at)
    before = [s.copy() for s in stores]
    assert movement.write_rows(grown, news, at)
    for got, w, old, b in zip(grown, want, stores, before):
        np.testing.assert_array_equal(got, w)
        np.testing.assert_array_equal(old, b)  # the old arrays untouched


@needs_cc
@pytest.mark.parametrize("case", ["f16 store", "position past the end", "negative position", "mixed layouts"])
def test_what_the_c_copy_does_not_take_numpy_writes_or_refuses(case):
    stores, news, at = _case(np.random.default_rng(2))
    if case == "f16 store":  # an f16 cache: NumPy rounds the f32 values
        stores = [s.astype(np.float16) for s in stores]
    elif case == "position past the end":
        at[1] = 16
    elif case == "negative position":
        at[1] = -1
    else:
        stores[1] = np.asfortranarray(stores[1])
    assert not movement.write_rows([s.copy(order="K") for s in stores], news, at)
    with vg.backend("cpu") as backend:
        if case == "position past the end":
            with pytest.raises(IndexError):
                backend.write_rows(stores, news, at)
            return
        want = _numpy(stores, news, at)
        backend.write_rows(stores, news, at)
    for got, w in zip(stores, want):
        np.testing.assert_array_equal(got, w)
