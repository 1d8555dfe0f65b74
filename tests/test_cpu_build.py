"""How the cpu backend's C library is built (build.py): once per cache folder, anew when a cached one
does not load, the last one built serving where there is no compiler (and only for its sources, flags
and compiler), one line and the reference without one, compilations run side by side. A damaged cache
(cut, flipped bytes, records gone or wrong, killed or concurrent builds): test_kernel_cache.py."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from fresh_process import run_python

import verigrad
from verigrad import settings
from verigrad.backends import cpu
from verigrad.backends.cpu import cache, fastcall

HAS_CC = cpu.available()
needs_cc = pytest.mark.skipif(not HAS_CC, reason="the cpu backend could not be built here")


INFO = """
import json
from verigrad.backends import cpu
print(json.dumps(cpu.build_info()))
"""


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A cache folder a fresh process built the library into (once for the module), and its build_info;
    a test that changes the folder changes a copy."""
    folder = tmp_path_factory.mktemp("cache")
    done = run_python(INFO, VERIGRAD_CACHE=str(folder))
    assert done.returncode == 0, done.stderr
    return folder, json.loads(done.stdout)


@needs_cc
def test_the_library_is_built_once_per_cache_folder(built_cache):
    folder, info = built_cache
    assert info["available"] and not info["cached"] and info["build_seconds"] > 0
    assert os.path.dirname(info["path"]) == str(folder) and os.path.exists(info["path"])
    assert "-ffp-contract=off" in info["flags"] and not info["native"]
    libraries = sorted(p.name for p in folder.glob("*.so"))
    calls = [p for p in libraries if p.startswith("vg_call-")]
    assert libraries == sorted([os.path.basename(info["path"]), *calls])
    records = sorted(p.name for p in folder.glob("*.json"))  # one for each library; no temporary left
    assert [r.split("-")[0] for r in records] == [p.split("-")[0] for p in libraries]
    assert len(list(folder.iterdir())) == len(libraries) + len(records) + 1  # and the lock
    assert (folder / cache.LOCK).exists()
    ctypes_asked = settings.env_flag("VERIGRAD_CTYPES", False)
    assert (info["calls"] == "vg_call") == bool(calls) == (fastcall.supported() and not ctypes_asked)
    second = json.loads(run_python(INFO, VERIGRAD_CACHE=str(folder)).stdout)
    assert second["cached"] and second["path"] == info["path"] and second["build_seconds"] == 0
    assert cpu.build_info()["available"]


@needs_cc
@pytest.mark.parametrize("env", [{"PATH": "/nonexistent", "CC": None}, {"CC": "/nonexistent/cc"}])
def test_without_a_compiler_a_warm_cache_still_serves(built_cache, tmp_path, env):
    folder, first = built_cache
    cache = shutil.copytree(folder, tmp_path / "cache")
    done = run_python(INFO, VERIGRAD_CACHE=str(cache), **env)
    assert done.returncode == 0 and "unavailable" not in done.stderr, done.stderr
    info = json.loads(done.stdout)
    assert info["available"] and info["cached"] and info["path"] == str(cache / Path(first["path"]).name)
    assert all(info[key] == first[key] for key in ("compiler", "version", "calls"))
    assert info["compiler_missing"].startswith(("no C compiler found", "the C compiler CC='/nonexistent/cc'"))


PROBE = "int probe(void) { return %d; }\n"


@needs_cc
def test_without_a_compiler_a_record_serves_only_its_sources_flags_and_compiler(tmp_path, monkeypatch):
    from verigrad.backends.cpu import build

    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path))
    _, built = build.build("probe", PROBE % 1)
    monkeypatch.setenv("CC", "/nonexistent/cc")
    lib, info = build.build("probe", PROBE % 1)
    assert lib.probe() == 1 and info["cached"] and info["path"] == built["path"] and info["compiler_missing"]
    missing = r"^the C compiler CC='/nonexistent/cc' was not found$"
    with pytest.raises(build.BuildError, match=missing):
        build.build("probe", PROBE % 2)  # other sources: none built
    monkeypatch.setenv("VERIGRAD_NATIVE", "1")
    with pytest.raises(build.BuildError, match=missing):
        build.build("probe", PROBE % 1)  # other flags
    monkeypatch.delenv("VERIGRAD_NATIVE")
    record = tmp_path / build.record_name(build.flags(), "probe", PROBE % 1)
    record.write_text(json.dumps({**json.loads(record.read_text()), "version": "another"}))
    with pytest.raises(build.BuildError, match=missing):
        build.build("probe", PROBE % 1)  # a record that does not name what its compiler built


@needs_cc
@pytest.mark.parametrize("vouched", [True, False], ids=["its checksum recorded", "another recorded"])
def test_a_damaged_library_is_one_error_without_a_compiler_and_replaced_with_one(
    tmp_path, monkeypatch, vouched
):
    """Whether the record vouches for the file (it is whole but does not load) or not (it was cut after
    it was recorded), it is never loaded: one error naming it without a compiler, built anew with one."""
    from verigrad.backends.cpu import build

    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path))
    cc = build.find_compiler()
    version = build.compiler_version(cc)
    path = tmp_path / build.library_name(cc, version, build.flags(), "probe", PROBE % 3)
    path.write_bytes(b"\x7fELF, cut short")
    recorded = cache.checksum(path) if vouched else {"size": 16000, "sha256": "0" * 64}
    with cache.locked(tmp_path):
        cache.remember(
            tmp_path / build.record_name(build.flags(), "probe", PROBE % 3), path.name, cc, version, recorded
        )

    def no_compiler() -> list[str]:
        raise build.BuildError("no C compiler found")

    monkeypatch.setattr(build, "find_compiler", no_compiler)
    why = "it does not load: .*" if vouched else "15 bytes where 16000 were recorded"
    damaged = (
        rf"^the cached library {path} is damaged \({why}\); it cannot be built anew: no C compiler found$"
    )
    with pytest.raises(build.BuildError, match=damaged):
        build.build("probe", PROBE % 3)
    monkeypatch.setattr(build, "find_compiler", lambda: cc)
    lib, info = build.build("probe", PROBE % 3)
    assert lib.probe() == 3 and not info["cached"] and info["path"] == str(path)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == ["", ".json", ".so"]  # the lock; no temporary


def test_without_a_compiler_one_line_says_so_and_training_runs_on_the_reference(tmp_path):
    code = """
    import numpy as np, verigrad
    from verigrad import nn
    from verigrad.backends import cpu
    from verigrad.cli.trainer import training_step
    from verigrad.optim import Adam

    def steps(name):
        verigrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        opt = Adam(model.parameters(), lr=1e-2)
        x = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
        y = np.arange(16) % 3
        step = training_step(model, opt, nn.CrossEntropyLoss())
        with verigrad.backend(name):
            for _ in range(3):
                step(x, y)
        return [p.numpy() for p in model.parameters()]

    same = all(np.array_equal(a, b) for a, b in zip(steps("cpu"), steps("reference")))
    print(same, cpu.available(), cpu.build_info()["available"], cpu.cpu.report()["native"])
    """
    done = run_python(code, CC="/nonexistent/cc", VERIGRAD_CACHE=str(tmp_path))  # no library built before
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False", "[]"]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cpu backend unavailable" in lines[0] and "CC=" in lines[0]


@needs_cc
def test_digits_training_on_cpu_gives_the_reference_weights(monkeypatch):
    """With the exact kernels the weights are the reference's, bit for bit; with every kernel they do not
    depend on the threads."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from test_train import eager_steps
    finally:
        sys.path.pop(0)
    try:
        reference = eager_steps(1, steps=2)
        exact = {k: kernel for k, (kernel, exactness) in cpu.cpu.registered().items() if exactness.is_exact}
        with monkeypatch.context() as m:
            m.setattr(cpu.cpu, "_kernels", exact)
            with verigrad.backend("cpu"):
                on_cpu = eager_steps(1, steps=2)
        with verigrad.backend("cpu"):
            all_one, all_two = eager_steps(1, steps=2), eager_steps(2, steps=2)
    finally:
        verigrad.set_threads(1)
    for name in reference:
        assert on_cpu[name].tobytes() == reference[name].tobytes(), name
        assert all_one[name].tobytes() == all_two[name].tobytes(), name
        np.testing.assert_allclose(all_one[name], reference[name], rtol=1e-4, atol=1e-5)


def test_a_failing_compiler_is_one_error_and_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    from verigrad.backends.cpu import build

    fake = tmp_path / "bin" / "cc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'fake.c:1: error: broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    cache = tmp_path / "cache"
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("VERIGRAD_CACHE", str(cache))
    with pytest.raises(build.BuildError, match=r"the C build failed .*fake\.c:1: error: broken"):
        build.build()
    assert [p.name for p in cache.iterdir()] == [".lock"]  # no library, no object files, no temporary


def test_the_build_starts_the_next_compilation_when_any_finishes(tmp_path):
    """Two at once: a quick job frees its slot for the second long one while the first still runs, and a
    job that writes far more than a pipe holds does not block."""
    from verigrad.backends.cpu import build

    noisy = ["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' w >&2"]
    start = time.perf_counter()
    build._run_parallel([["sleep", "0.6"], noisy, ["sleep", "0.6"]], str(tmp_path), ["cc"], workers=2)
    assert time.perf_counter() - start < 1.0  # in order, the second sleep waited for the first: 1.2 s
    with pytest.raises(build.BuildError, match=r"the C build failed \(cc\): broken"):
        build._run_parallel([["sh", "-c", "echo broken >&2; exit 1"]], str(tmp_path), ["cc"], workers=2)
