"""Eager reshapes that copy and concatenations in C (vg_eager's `reshape_copied` and `copied_together`):
the pool's threads split the copy (movement.c's vg_copy and vg_join), with NumPy's bytes on any thread
count; a reshape NumPy makes a view stays a view, and what the pool does not take is NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import eager
from verigrad.backends import cpu
from verigrad.backends.cpu import fastcall
from verigrad.dtypes import from_numpy_dtype
from verigrad.ops import REGISTRY
from verigrad.shapes import Spec
from verigrad.tensor import Tensor

SMALL_CHUNK = 16  # the min chunk the `small_chunks` fixture (conftest.py) sets


@pytest.fixture
def c_calls(small_chunks):
    """The cpu backend with the eager calls in C bound, small arrays split between threads."""
    with verigrad.backend("cpu") as backend:
        if not backend.load() or not eager.install_c_calls():
            pytest.skip(f"no C calls here: {fastcall.eager_status()}")
        was = eager.c_calls(True)
        try:
            yield backend
        finally:
            eager.c_calls(was)


def _tensor(a: np.ndarray) -> Tensor:
    return Tensor(Spec(a.shape, from_numpy_dtype(a.dtype)), a)  # the array itself, any strides


def _random(shape: tuple, dtype: type, seed: int = 0) -> np.ndarray:
    """Random bit patterns of `dtype` (NaN payloads and all for floats)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.frombuffer(np.random.default_rng(seed).bytes(nbytes), dtype=dtype).reshape(shape).copy()


def _split_calls(call) -> list[tuple[bytes, int]]:
    """call()'s result bytes on 1, 2 and 3 threads, with how many threads ran a chunk of it (the second
    call: the first one of an op makes its plan in Python)."""
    out = []
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        call()
        cpu.chunks_run()
        with cpu.static_schedule():
            result = call()
        out.append((result.payload.tobytes(), sum(c > 0 for c in cpu.chunks_run())))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8])
def test_a_reshape_that_copies_gives_numpys_bytes_on_every_thread_count(c_calls, dtype) -> None:
    base = _random((4, 3, 10, 8), dtype)
    for view, shape in [
        (base.transpose(0, 2, 1, 3), (4, 10, 24)),  # attention's heads back to rows
        (base[:, ::2, ::-1], (4, 160)),
        (base.transpose(3, 2, 1, 0), (-1,)),
        (base[..., 1].transpose(0, 2, 1), (4, 30)),
    ]:
        x = _tensor(view)
        want = view.reshape(shape)
        runs = _split_calls(lambda: x.reshape(*shape))
        assert all(got == want.tobytes() for got, _ in runs)
        assert [used for _, used in runs] == [1, 2, 3], (view.strides, shape)
        out = x.reshape(*shape)
        assert out.shape == want.shape and out.payload.flags.c_contiguous
        assert not np.shares_memory(out.payload, view)


def test_a_reshape_numpy_makes_a_view_stays_a_view(c_calls) -> None:
    base = _random((4, 6, 8), np.float32)
    views = [(base[:, :, :4], (4, 6, 2, 2)), (base[::2], (2, 6, 2, 4)), (base[:, 0], (4, 2, 4))]
    for view, shape in [*views, (base.transpose(1, 0, 2), (6, 2, 2, 8))]:
        x = _tensor(view)
        for threads in (1, 2):
            verigrad.set_threads(threads)
            for _ in range(2):
                out = x.reshape(*shape)
            assert np.shares_memory(out.payload, view)
            assert out.payload.strides == view.reshape(shape).strides


def test_a_reshape_the_pool_does_not_take_is_numpys(c_calls) -> None:
    x5 = _random((2, 3, 2, 4, 5), np.float32).transpose(4, 3, 2, 1, 0)  # rank 5: NumPy's copy
    verigrad.set_threads(2)
    for view, shape in [(x5, (20, 12)), (x5[:, :0], (0, 12))]:
        x = _tensor(view)
        x.reshape(*shape)
        cpu.chunks_run()
        out = x.reshape(*shape)
        assert out.payload.tobytes() == view.reshape(shape).tobytes() and out.shape == shape
        assert sum(cpu.chunks_run()) == 0
    with pytest.raises(Exception, match=r"reshape|shape"):
        _tensor(x5[0]).reshape(7, 7)  # a refused shape: the shape rule's error, before any copy


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_a_concatenation_gives_numpys_bytes_on_every_thread_count(c_calls, dtype) -> None:
    pieces = [_random((5, 7, n), np.uint8).astype(dtype) for n in (3, 1, 4)]
    tensors = [_tensor(p) for p in pieces]
    for axis, used in [(2, [1, 2, 3]), (-1, [1, 2, 3]), (1, [1, 2, 3]), (0, [1, 1, 1])]:
        parts = tensors if axis in (2, -1) else [_tensor(_random((5, 7, 3), np.uint8).astype(dtype))] * 2
        want = np.concatenate([t.payload for t in parts], axis)
        runs = _split_calls(lambda parts=parts, axis=axis: REGISTRY["concat"](*parts, axis=axis))
        assert all(got == want.tobytes() for got, _ in runs)
        assert [threads for _, threads in runs] == used  # along the first axis: one row, one copy


def test_a_concatenation_the_pool_does_not_take_is_numpys(c_calls) -> None:
    a = _random((6, 4), np.float32)
    verigrad.set_threads(2)
    for parts in ([a, a[:, :2]], [a] * 17):  # a view; more pieces than vg_join takes
        tensors = [_tensor(p) for p in parts]
        REGISTRY["concat"](*tensors, axis=1)
        cpu.chunks_run()
        out = REGISTRY["concat"](*tensors, axis=1)
        assert out.payload.tobytes() == np.concatenate(parts, 1).tobytes()
        assert sum(cpu.chunks_run()) == 0


def test_the_reference_backends_copies_are_numpys(c_calls) -> None:
    a = _random((8, 6), np.float32)
    x, view = _tensor(a), _tensor(a.T)
    verigrad.set_threads(2)
    with verigrad.backend("reference"):
        for call in (lambda: REGISTRY["concat"](x, x, axis=1), lambda: view.reshape(48)):
            call()
            cpu.chunks_run()
            out = call()
            assert sum(cpu.chunks_run()) == 0
        assert out.payload.tobytes() == a.T.reshape(48).tobytes()
