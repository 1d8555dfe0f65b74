"""The cpu backend's thread pool (threadpool.c, `vg_parallel_for`): the calling thread runs chunk 0 and every
chunk runs once with the dispatcher's bounds; and where no worker thread can be started (pthread_create
failing, made so in a child process by an LD_PRELOAD shim), the caller runs every chunk: the same bits
on 1, 2 and 3 threads, and a pool of no workers."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from verigrad.backends import cpu
from verigrad.backends.cpu import build

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

CHUNK_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
PARALLEL_FOR = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, CHUNK_FN, ctypes.c_void_p)


def _bounds(n: int, chunks: int) -> list[tuple[int, int]]:
    """The dispatcher's chunks: contiguous, the first n % chunks one longer."""
    base, rem = divmod(n, chunks)
    los = [i * base + min(i, rem) for i in range(chunks)]
    return [(lo, lo + base + (i < rem)) for i, lo in enumerate(los)]


def test_the_caller_runs_chunk_0_and_every_chunk_runs_once():
    """Over many dispatches (workers spinning, and some started afresh): a worker that reached a shared
    counter first took chunk 0 about once in 2000 dispatches here before the caller ran it unclaimed."""
    parallel_for = PARALLEL_FOR(("vg_parallel_for", cpu.cpu.library.cdll))
    ran: list[tuple[int, int, int]] = []

    @CHUNK_FN
    def chunk(_ctx, lo, hi):
        ran.append((lo, hi, threading.get_native_id()))

    caller = threading.get_native_id()
    for k in range(20000):
        threads = 2 + k % 3
        n = threads * 4 + k % 5
        ran.clear()
        parallel_for(n, 4, threads, chunk, None)
        assert sorted(r[:2] for r in ran) == _bounds(n, threads), (k, ran)
        assert [r[2] for r in ran if r[0] == 0] == [caller], (k, ran)
    assert cpu.pool_size() >= 3  # the workers did start


SHIM = """
#include <errno.h>
#include <pthread.h>
/* no thread can be started */
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*f)(void *), void *arg) {
    (void)t; (void)a; (void)f; (void)arg;
    return EAGAIN;
}
"""

NO_THREADS = """
import json, threading
import numpy as np
import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

try:  # the shim is in force
    threading.Thread(target=lambda: None).start()
    started = True
except RuntimeError:
    started = False
cpu.set_min_chunk(4)
rng = np.random.default_rng(3)
same, sizes = [], []
for dtype, np_dtype in ((verigrad.f32, np.float32), (verigrad.f64, np.float64)):
    x, y = rng.standard_normal((2, 101)).astype(np_dtype)
    for op, args in (("relu", (x,)), ("add", (x, y)), ("mul", (x, y[:1]))):
        expected = REGISTRY[op].reference(*args).tobytes()
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            same.append(cpu.cpu.native(REGISTRY[op], dtype)(*args).tobytes() == expected)
            sizes.append(cpu.pool_size())
print(json.dumps({"started": started, "same": same, "sizes": sizes}))
"""


def _shim(tmp_path) -> str:
    """The shim library, or a skip where LD_PRELOAD cannot put it in force."""
    if not sys.platform.startswith("linux"):
        pytest.skip("LD_PRELOAD interposition is the Linux loader's")
    try:
        cc = build.find_compiler()
    except build.BuildError as e:
        pytest.skip(f"no C compiler for the shim: {e}")
    (tmp_path / "shim.c").write_text(SHIM)
    out = tmp_path / "shim.so"
    done = subprocess.run(
        [*cc, "-shared", "-fPIC", "-o", str(out), str(tmp_path / "shim.c")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return str(out)


def test_a_worker_that_cannot_start_leaves_its_chunks_to_the_caller(tmp_path):
    """pthread_create fails (EAGAIN) in a child process using this process's built library (the cache is
    shared: the child compiles nothing): each kernel gives the reference's bits on 1, 2 and 3 threads,
    and the pool has no workers."""
    env = {**os.environ, "PYTHONPATH": ROOT, "LD_PRELOAD": _shim(tmp_path), "OPENBLAS_NUM_THREADS": "1"}
    code = textwrap.dedent(NO_THREADS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["started"] is False  # the shim was in force
    assert all(result["same"]), result["same"]
    assert result["sizes"] == [0] * len(result["sizes"])
