"""The thread settings every backend reads (backends/threads.py): VERIGRAD_THREADS and VERIGRAD_MIN_CHUNK
at start and at every call (a bad value ignored with a warning naming it), `set_threads` and
`set_min_chunk` (a bad count refused by name)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from fresh_process import ROOT, run_python

import verigrad
from verigrad.backends import cpu

HAS_CC = cpu.available()
needs_cc = pytest.mark.skipif(not HAS_CC, reason="the cpu backend could not be built here")


THREADS = "import verigrad; print(verigrad.get_backend().threads, verigrad.backends.reference.threads)"


@pytest.mark.parametrize("value", ["3", "1", None])
def test_verigrad_threads_sets_the_starting_thread_count(value):
    """VERIGRAD_THREADS, else the CPUs the process may use (at most 8), for every backend."""
    env = {k: v for k, v in os.environ.items() if k != "VERIGRAD_THREADS"}
    env |= {"PYTHONPATH": ROOT} if value is None else {"PYTHONPATH": ROOT, "VERIGRAD_THREADS": value}
    done = subprocess.run([sys.executable, "-c", THREADS], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    expected = int(value) if value else min(len(os.sched_getaffinity(0)), 8)
    assert done.stdout.split() == [str(expected)] * 2


def test_a_bad_verigrad_threads_is_ignored_with_a_warning_naming_it():
    done = run_python(THREADS, VERIGRAD_THREADS="two")
    assert done.returncode == 0, done.stderr
    cpus = min(len(os.sched_getaffinity(0)), 8)
    assert done.stdout.split() == [str(cpus)] * 2
    assert done.stderr.splitlines() == [
        f"<environment>:0: RuntimeWarning: VERIGRAD_THREADS='two' is ignored: it must be a whole number "
        f"from 1 to 1024; using {cpus} (the default)"
    ]


CHUNK = "from verigrad.backends import cpu; print(cpu.min_chunk())"


def test_verigrad_min_chunk_sets_the_starting_chunk():
    done = run_python(CHUNK, VERIGRAD_MIN_CHUNK="300")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["300"]


@pytest.mark.parametrize("text", ["0", "4k", "-2", "²", "2147483648"])
def test_a_bad_verigrad_min_chunk_is_ignored_with_a_warning_naming_it(text):
    done = run_python(CHUNK, VERIGRAD_MIN_CHUNK=text)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["16384"]
    assert (
        f"VERIGRAD_MIN_CHUNK='{text}' is ignored: it must be a whole number from 1 to 2147483647; "
        "using 16384 (the default)" in done.stderr
    )


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("2", TypeError, "threads must be a whole number, got str '2'"),
        (2.0, TypeError, "threads must be a whole number, got float 2.0"),
        (True, TypeError, "threads must be a whole number, got bool True"),
        (0, ValueError, "threads must be at least 1, got 0"),
        (1025, ValueError, "threads must be at most 1024, got 1025"),
        (10**20, ValueError, "threads must be at most 1024, got 100000000000000000000"),
    ],
)
def test_set_threads_refuses_what_is_not_a_count(value, error, message):
    before = verigrad.get_backend().threads
    with pytest.raises(error, match=re.escape(message)):
        verigrad.set_threads(value)
    assert verigrad.get_backend().threads == before


def test_set_threads_and_min_chunk_take_numpy_integers():
    before, chunk = verigrad.get_backend().threads, cpu.min_chunk()
    try:
        verigrad.set_threads(np.int64(3))
        cpu.set_min_chunk(np.int32(7))
        assert verigrad.get_backend().threads == 3 and type(verigrad.get_backend().threads) is int
        assert cpu.min_chunk() == 7 and type(cpu.min_chunk()) is int
        with pytest.raises(ValueError, match="min_chunk must be at least 1, got -5"):
            cpu.set_min_chunk(-5)
        with pytest.raises(TypeError, match=re.escape("min_chunk must be a whole number, got float 1.5")):
            cpu.set_min_chunk(1.5)
        assert cpu.min_chunk() == 7
    finally:
        verigrad.set_threads(before)
        cpu.set_min_chunk(chunk)


def test_the_environment_is_read_at_every_call(monkeypatch):
    """Without set_threads / set_min_chunk, VERIGRAD_THREADS and VERIGRAD_MIN_CHUNK are read at every
    call (and NumPy's BLAS follows the thread count); a call's setting wins until None gives it back."""
    before, chunk = verigrad.backends.threads.THREAD_COUNT.explicit, cpu.MIN_CHUNK.explicit
    try:
        verigrad.set_threads(None)
        cpu.set_min_chunk(None)
        for value in ("3", "1", "5"):
            monkeypatch.setenv("VERIGRAD_THREADS", value)
            monkeypatch.setenv("VERIGRAD_MIN_CHUNK", value + "00")
            assert (
                verigrad.get_threads() == cpu.cpu.threads == verigrad.backends.reference.threads == int(value)
            )
            assert cpu.min_chunk() == int(value) * 100
            assert verigrad.backends.blas_threads() in (None, int(value))
        monkeypatch.setenv("VERIGRAD_THREADS", "three")
        with pytest.warns(RuntimeWarning, match="VERIGRAD_THREADS='three' is ignored"):
            assert verigrad.get_threads() == min(len(os.sched_getaffinity(0)), 8)
        verigrad.set_threads(2)
        cpu.set_min_chunk(7)
        assert (verigrad.get_threads(), cpu.min_chunk()) == (2, 7)  # the call's setting wins
        monkeypatch.delenv("VERIGRAD_THREADS")
        monkeypatch.delenv("VERIGRAD_MIN_CHUNK")
        verigrad.set_threads(None)
        cpu.set_min_chunk(None)
        assert verigrad.get_threads() == min(len(os.sched_getaffinity(0)), 8)
        assert cpu.min_chunk() == 16384
    finally:
        verigrad.set_threads(before)
        cpu.set_min_chunk(chunk)


EVERY_CALL = """
import os
import numpy as np
import verigrad
from verigrad.backends import cpu
x = np.random.default_rng(0).standard_normal(200_000).astype(np.float32)
one = verigrad.tensor(x).sigmoid().numpy()
assert cpu.pool_size() == 0, cpu.pool_size()
os.environ["VERIGRAD_THREADS"] = "3"
three = verigrad.tensor(x).sigmoid().numpy()
assert cpu.pool_size() == 2, cpu.pool_size()  # the next call ran on three threads
assert one.tobytes() == three.tobytes()
print("ok")
"""


@needs_cc
def test_a_kernel_runs_on_the_threads_verigrad_threads_says_when_it_is_called():
    done = run_python(EVERY_CALL, VERIGRAD_THREADS="1", VERIGRAD_MIN_CHUNK="1000")
    assert done.returncode == 0 and done.stdout.split() == ["ok"], done.stderr
