"""Shared test setup. The parity suite (tests/parity, needs PyTorch) runs only when named:
`python -m pytest tests/parity`; a plain `python -m pytest` runs the main suite.

The suite runs on the cpu backend's default build and settings, whose kernels give the reference's bits
where they say so: tests of another setting set it themselves (`cpu_matmul.exact_mode()` for
VERIGRAD_EXACT_GEMM=1, `replay.BUDGET` for VERIGRAD_REPLAY_MIB), and test_native_build.py builds and
verifies the native library (VERIGRAD_NATIVE=1) in a process of its own."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

import verigrad
import verigrad.distributed  # imported lazily by verigrad: its collectives are registry ops every suite sees
from verigrad.backends.cpu import matmul as cpu_matmul
from verigrad.ir import replay

PARITY_DIR = Path(__file__).parent / "parity"
os.environ.pop("VERIGRAD_NATIVE", None)  # read when the first kernel builds the library
os.environ.pop("VERIGRAD_EXACT_GEMM", None)
cpu_matmul.set_exact(None)  # what the environment says, now the default
os.environ.pop("VERIGRAD_REPLAY_MIB", None)
replay.BUDGET = replay.budget()
# The tokenizer files that loading a model writes go to a temporary folder, never to the user's cache, in
# this process and the commands it starts (the compiled kernels stay in the user's cache, built once there)
os.environ["VERIGRAD_TOKENIZER_CACHE"] = tempfile.mkdtemp(prefix="verigrad-tokenizers-")
atexit.register(shutil.rmtree, os.environ["VERIGRAD_TOKENIZER_CACHE"], ignore_errors=True)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path == PARITY_DIR:
        named = any(Path(a.split("::")[0]).resolve().is_relative_to(PARITY_DIR) for a in config.args)
        return not named
    return None


@pytest.fixture(autouse=True)
def _fresh_state():
    """Each test starts on the reference backend, one thread, with the default generator seeded (a test
    that sets threads and fails, or forgets, leaves no other test on its count)."""
    verigrad.manual_seed(0)
    verigrad.set_threads(1)
    with verigrad.backend("reference"):
        yield


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture
def small_chunks(request: pytest.FixtureRequest):
    """The cpu backend's min chunk set to the test module's `SMALL_CHUNK` (1 where it has none), so that
    small arrays are split between threads; the default chunk and one thread again afterwards."""
    from verigrad.backends import cpu

    cpu.set_min_chunk(getattr(request.module, "SMALL_CHUNK", 1))
    yield
    cpu.set_min_chunk(None)
    verigrad.set_threads(1)
