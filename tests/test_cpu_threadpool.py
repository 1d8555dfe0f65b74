"""The cpu backend's thread pool (threadpool.c, `vg_parallel_for`): the calling thread runs chunk 0 and
every chunk runs once with the dispatcher's bounds; and where no worker thread can be started
(pthread_create failing, made so in a child process by an LD_PRELOAD shim), the caller runs every chunk:
the same bits on 1, 2 and 3 threads, and a pool of no workers. Rapid tiny dispatches with late workers;
workers pinned only when asked, and woken off the caller's CPU."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from fresh_process import ROOT, run_python

import verigrad
from verigrad.backends import cpu
from verigrad.backends.cpu import build
from verigrad.ops import REGISTRY

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
same, sizes, chunks = [], [], []
for dtype, np_dtype in ((verigrad.f32, np.float32), (verigrad.f64, np.float64)):
    x, y = rng.standard_normal((2, 101)).astype(np_dtype)
    for op, args in (("relu", (x,)), ("add", (x, y)), ("mul", (x, y[:1]))):
        expected = REGISTRY[op].reference(*args).tobytes()
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            same.append(cpu.cpu.native(REGISTRY[op], dtype)(*args).tobytes() == expected)
            sizes.append(cpu.pool_size())
            with cpu.static_schedule():  # the chunks of workers that could not start: the caller's
                cpu.chunks_run()
                same.append(cpu.cpu.native(REGISTRY[op], dtype)(*args).tobytes() == expected)
                chunks.append(cpu.chunks_run())
print(json.dumps({"started": started, "same": same, "sizes": sizes, "chunks": chunks}))
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
    and the pool has no workers; in the static schedule too, the caller running every chunk."""
    env = {**os.environ, "PYTHONPATH": ROOT, "LD_PRELOAD": _shim(tmp_path), "OPENBLAS_NUM_THREADS": "1"}
    code = textwrap.dedent(NO_THREADS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["started"] is False  # the shim was in force
    assert all(result["same"]), result["same"]
    assert result["sizes"] == [0] * len(result["sizes"])
    assert result["chunks"] == [[threads] for _ in range(6) for threads in (1, 2, 3)]


needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="thread placement is tested on Linux with two usable CPUs or more",
)

PINNED = """
import json, os
import numpy as np
import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

verigrad.set_threads(2)
cpu.set_min_chunk(1)
cpu.cpu.native(REGISTRY["relu"], verigrad.f32)(np.ones(64, np.float32))  # starts the pool's worker
tasks = sorted(int(t) for t in os.listdir("/proc/self/task"))
print(json.dumps([sorted(os.sched_getaffinity(t)) for t in tasks]))
"""


def test_rapid_tiny_dispatches_with_late_workers_give_every_chunk_once():
    """Thousands of multi-threaded calls of a few microseconds each, with thread counts changing between
    them: the caller and the workers claim chunks from one counter, and a worker that wakes after its
    job is finished must not run a chunk of it (its arguments are gone) nor one of the next job."""
    add, relu = cpu.cpu.native(REGISTRY["add"], verigrad.f64), cpu.cpu.native(REGISTRY["relu"], verigrad.f64)
    total = cpu.cpu.native(REGISTRY["sum"], verigrad.f64)
    rng = np.random.default_rng(11)
    a, b, rows = rng.standard_normal(64), rng.standard_normal(64), rng.standard_normal((8, 64))
    cpu.set_min_chunk(1)
    try:  # kernels whose jobs differ in layout, one after another: a stale job would be read wrongly
        for k in range(9000):
            verigrad.set_threads(1 + k % 3)
            n = 2 + k % 63
            kind = k % 3
            if kind == 0:
                out, expected = add(a[:n], b[:n]), a[:n] + b[:n]
            elif kind == 1:
                out, expected = add(rows[:, :n], b[:n]), rows[:, :n] + b[:n]
            else:
                out, expected = relu(a[:n]), np.maximum(a[:n], 0.0)
            assert out.tobytes() == expected.tobytes(), (k, n)
            if k % 7 == 0:
                assert total(rows[:, :n], axis=(1,), keepdim=False).shape == (8,)
    finally:
        cpu.set_min_chunk(None)
        verigrad.set_threads(1)


@needs_two_cpus
@pytest.mark.parametrize("flag", ["1", "0"])
def test_pool_workers_are_pinned_only_when_asked(flag):
    done = run_python(PINNED, VERIGRAD_PIN_THREADS=flag)
    assert done.returncode == 0, done.stderr
    allowed = sorted(os.sched_getaffinity(0))
    pinned = [a for a in json.loads(done.stdout) if a != allowed]
    assert pinned == ([[allowed[1]]] if flag == "1" else [])  # worker 1 on the second usable CPU


WOKEN = """
import json, os, threading, time
import numpy as np
import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY


def asleep():  # until the pool's worker has stopped spinning and sleeps (at most 10 s)
    me = str(threading.get_native_id())
    for _ in range(1000):
        others = [t for t in os.listdir("/proc/self/task") if t != me]
        states = [open(f"/proc/self/task/{t}/stat").read().rsplit(")", 1)[1].split()[0] for t in others]
        if others and all(state == "S" for state in states):
            return
        time.sleep(0.01)


verigrad.set_threads(2)
cpu.set_min_chunk(1)
relu = cpu.cpu.native(REGISTRY["relu"], verigrad.f32)
x = np.ones(64, np.float32)
relu(x)  # starts the pool's worker
asleep()
before = relu(x).tobytes()
asleep()
assert relu(x).tobytes() == before  # woken again: the same bits
tasks = sorted(int(t) for t in os.listdir("/proc/self/task"))
print(json.dumps([sorted(os.sched_getaffinity(t)) for t in tasks]))
"""


@needs_two_cpus
@pytest.mark.parametrize("flag", ["1", "0"])
def test_a_worker_woken_after_a_pause_runs_off_the_callers_cpu(flag):
    """A sleeping worker is woken onto the process's CPUs but the caller's (Linux would queue it behind
    the caller, which keeps computing); a pinned worker keeps its CPU."""
    done = run_python(WOKEN, VERIGRAD_PIN_THREADS=flag)
    assert done.returncode == 0, done.stderr
    allowed = sorted(os.sched_getaffinity(0))
    masks = [a for a in json.loads(done.stdout) if a != allowed]
    if flag == "1":
        assert masks == [[allowed[1]]]
    else:
        assert len(masks) == 1 and len(masks[0]) == len(allowed) - 1 and set(masks[0]) < set(allowed)


def test_timed_chunks_count_each_threads_cpu_time():
    """Inside `timed_chunks()` a call run whole counts as one whole call and a split as one split whose
    slowest thread took part of all its threads' time (a sum over 4M elements on 2 threads in the static
    schedule: half each, about); a new block counts from nothing."""
    x = verigrad.tensor(np.random.default_rng(0).standard_normal(1 << 22).astype(np.float32))
    try:
        with verigrad.backend("cpu"), cpu.timed_chunks() as counted:
            verigrad.set_threads(1)
            x.sum()
            one = counted()
            verigrad.set_threads(2)
            with cpu.static_schedule():
                x.sum()
            two = counted()
        verigrad.set_threads(2)
        with verigrad.backend("cpu"):
            x.sum()
        with cpu.timed_chunks() as counted:
            after = counted()
    finally:
        verigrad.set_threads(1)
    assert (one.whole_calls, one.splits) == (1, 0) and one.whole > 0 and one.total == 0
    assert (two.whole_calls, two.splits) == (0, 1) and two.whole == 0
    assert 0 < two.slowest < two.total
    assert after == cpu.ThreadTimes()


SPUN = """
import json, os, time
import numpy as np
import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY


def states():  # the scheduler states of the threads the pool started (its worker)
    workers = [t for t in os.listdir("/proc/self/task") if t not in before]
    return [open(f"/proc/self/task/{t}/stat").read().rsplit(")", 1)[1].split()[0] for t in workers]


def asleep_after():  # seconds from a dispatch until the worker sleeps (at most 5 s)
    relu(x)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 5 and states() != ["S"]:
        time.sleep(0.005)
    return time.perf_counter() - t0


verigrad.set_threads(2)
cpu.set_min_chunk(1)
relu = cpu.cpu.native(REGISTRY["relu"], verigrad.f32)
x = np.ones(64, np.float32)
before = set(os.listdir("/proc/self/task"))
default = cpu.worker_spin()
cpu.worker_spin(0.0)
quick = asleep_after()
cpu.worker_spin(1.0)
relu(x)
time.sleep(0.3)
spinning = states()  # runnable or running, whether or not it has a CPU now
cpu.worker_spin(default)
workers = [t for t in os.listdir("/proc/self/task") if t not in before]
names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in workers]
result = {"default": default, "quick": quick, "spinning": spinning, "later": asleep_after(), "names": names}
print(json.dumps(result))
"""


@needs_two_cpus
def test_an_idle_worker_spins_as_long_as_set_then_sleeps():
    """An idle worker waits for the next dispatch spinning `worker_spin()` seconds of wall time, then
    sleeps: between a server's decode steps a worker that spun on took the CPU its event loop needed.
    Workers are named vg-pool-<k>."""
    done = run_python(SPUN)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["default"] == 0.0002
    assert result["spinning"] == ["R"]  # 0.3 s into a 1 s spin
    assert result["quick"] < 1 and result["later"] < 1
    assert result["names"] == ["vg-pool-1"]  # what a benchmark reading /proc counts as the pool's
