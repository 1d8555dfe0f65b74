"""Kernels that split their work between threads really do: on 2 threads each big kernel (GEMM, element-wise
and reductions over 4M elements, a convolution, quantized matrix-vector products) gives the pool's worker
chunks, and its result is the 1-thread result bit for bit.

threadpool.c counts the chunks each thread runs (`cpu.chunks_run`). Which thread claims a chunk depends on
timing (a worker that wakes late leaves its chunk to the caller), so the tests run inside
`cpu.static_schedule()`, where chunk k is pool thread k's: the counts depend on the kernels' splits alone,
never on the machine's load."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad.backends import cpu
from verigrad.ops.quant import qmatmul, qmatmul_q8, random_blocks

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

BIG = 1 << 22  # 4M elements


def _cases() -> dict[str, Callable[[], verigrad.Tensor]]:
    rng = np.random.default_rng(0)
    a, b = (verigrad.tensor(rng.standard_normal((512, 512)).astype(np.float32)) for _ in range(2))
    x, y = (verigrad.tensor(rng.standard_normal(BIG).astype(np.float32)) for _ in range(2))
    x64 = verigrad.tensor(rng.standard_normal(BIG))
    square = x.reshape(2048, 2048)
    images = verigrad.tensor(rng.standard_normal((4, 16, 64, 64)).astype(np.float32))
    weight = verigrad.tensor(rng.standard_normal((32, 16, 3, 3)).astype(np.float32))
    v = verigrad.tensor(rng.standard_normal((1, 2048)).astype(np.float32))
    q4, q8 = (verigrad.tensor(random_blocks(rng, q, 2048, 2048), dtype="u8") for q in ("q4_0", "q8_0"))
    return {
        "matmul 512x512 f32": lambda: a @ b,
        "add 4M f32": lambda: x + y,
        "exp 4M f32": lambda: x.exp(),
        "sum of 4M f32": lambda: x.sum(),
        "sum of 4M f64": lambda: x64.sum(),
        "mean of 4M f32": lambda: x.mean(),
        "max of 4M f32": lambda: x.max(),
        "min of 4M f64": lambda: x64.min(),
        "sum 2048x2048 f32, axis 1": lambda: square.sum(1),
        "sum 2048x2048 f32, axis 0": lambda: square.sum(0),
        "conv2d 4x16x64x64, 32 3x3 filters": lambda: F.conv2d(images, weight, padding=1),
        "qmatmul q4_0 decode 2048x2048": lambda: qmatmul(v, q4, qtype="q4_0"),
        "qmatmul q8_0 decode 2048x2048": lambda: qmatmul(v, q8, qtype="q8_0"),
        "qmatmul_q8 q4_0 decode 2048x2048": lambda: qmatmul_q8(v, q4, qtype="q4_0"),
        "qmatmul_q8 q8_0 decode 2048x2048": lambda: qmatmul_q8(v, q8, qtype="q8_0"),
    }


CASES = _cases() if cpu.available() else {}


@pytest.fixture
def on_cpu():
    """The cpu backend; one thread again afterwards."""
    try:
        with verigrad.backend("cpu"):
            yield
    finally:
        verigrad.set_threads(1)


def run(make: Callable[[], verigrad.Tensor], threads: int) -> tuple[bytes, tuple[int, ...]]:
    """The result's bytes and the chunks each thread ran, on `threads` threads in the static schedule."""
    verigrad.set_threads(threads)
    with cpu.static_schedule():
        cpu.chunks_run()
        result = make().numpy()
        counts = cpu.chunks_run()
    return result.tobytes(), counts


@pytest.mark.parametrize("name", list(CASES))
def test_a_big_kernel_runs_on_both_threads_with_the_1_thread_bits(on_cpu, name):
    one, on_one = run(CASES[name], 1)
    two, on_two = run(CASES[name], 2)
    assert on_one[0] > 0 and sum(on_one[1:]) == 0, on_one  # one thread: every chunk the caller's
    assert len(on_two) >= 2 and on_two[0] > 0 and on_two[1] > 0, f"{name} ran on one thread: {on_two}"
    assert sum(on_two[2:]) == 0, on_two
    assert two == one


CHUNK_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
PARALLEL_FOR = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, CHUNK_FN, ctypes.c_void_p)


def test_each_thread_counts_the_chunks_it_ran():
    """In the static schedule chunk k is thread k's; in the usual one each chunk is counted once, by
    whichever thread ran it; a call too small to split is one chunk of the caller's."""
    parallel_for = PARALLEL_FOR(("vg_parallel_for", cpu.cpu.library.cdll))
    noop = CHUNK_FN(lambda _ctx, lo, hi: None)
    cpu.chunks_run()
    with cpu.static_schedule():
        for _ in range(50):
            parallel_for(300, 100, 3, noop, None)
        assert cpu.chunks_run()[:3] == (50, 50, 50)
    for _ in range(50):
        parallel_for(300, 100, 3, noop, None)
    assert sum(cpu.chunks_run()) == 150
    parallel_for(300, 1000, 3, noop, None)
    parallel_for(0, 1, 3, noop, None)  # nothing to run: no chunk
    assert cpu.chunks_run()[:3] == (1, 0, 0)
    assert cpu.chunks_run(reset=False) == cpu.chunks_run() == (0,) * (cpu.pool_size() + 1)


SPLIT_SUMS = [  # (shape, axes, whether split): fewer outputs than threads (reduce.c's split_sum)
    ((100_003,), None, True),
    ((3, 70_001), (1,), True),
    ((2, 3, 20_000), (0, 2), True),
    ((5, 16_384), (0, 1), True),
    ((3, 8_191), (1,), False),  # runs shorter than a leaf: whole outputs, 3 threads at most
]


SPECIAL = {  # values put into the arrays: where max and min must fold exactly or ask the reference
    "finite": [],
    "an infinity": [np.inf],
    "a NaN": [np.nan],
    "both zeros": ["zeros", -0.0],  # every element 0 but one -0
    "-inf and +inf": [-np.inf, np.inf],
}


def reduced(name: str, axes: tuple[int, ...] | None) -> Callable[[verigrad.Tensor], verigrad.Tensor]:
    """x's sum, mean, max or min over `axes` (all where None)."""
    if name in ("max", "min") and axes is not None:
        return lambda x: getattr(x, "amax" if name == "max" else "amin")(axes)
    return lambda x: getattr(x, name)(axes) if axes is not None else getattr(x, name)()


@pytest.mark.parametrize("special", list(SPECIAL))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "axes", "split"), SPLIT_SUMS)
def test_reductions_split_inside_their_outputs_give_the_reference_bits(
    on_cpu, shape, axes, split, dtype, special
):
    rng = np.random.default_rng(7)
    values = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    for i, v in enumerate(SPECIAL[special]):
        if v == "zeros":
            values[...] = 0.0
        else:
            values.reshape(-1)[(i + 1) * values.size // 3] = v
    x = verigrad.tensor(values.astype(dtype))
    cpu.set_min_chunk(4096)
    try:
        for name in ("sum", "mean", "max", "min"):
            op = reduced(name, axes)
            with verigrad.backend("reference"):
                expected = op(x).numpy().tobytes()
            for threads in (1, 2, 3, 4):
                result, counts = run(lambda: op(x), threads)
                assert result == expected, (name, threads)
                busy = sum(1 for c in counts if c)
                assert busy == min(threads, 4 if split else shape[0]), (name, threads, counts)
    finally:
        cpu.set_min_chunk(None)
