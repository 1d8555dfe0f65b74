"""The cache of built libraries (cache.py, build.py) holds whole files only: a library cut short or with
damaged bytes (which crashed the next process inside dlopen, SIGBUS, or ran wrong code), or one whose
record is missing or names another checksum, is never loaded: the next process says which file it was,
builds it anew and runs right kernels. A build that fails or is killed half way leaves nothing under the
library's name, and processes building at once build it once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fresh_process import ROOT, run_python

from verigrad.backends import cpu
from verigrad.backends.cpu import build, cache

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

RUN = """
import json
import numpy as np
import verigrad
from verigrad.backends import cpu

x = np.random.default_rng(0).standard_normal((300, 200)).astype(np.float32)

def results(name):
    with verigrad.backend(name):
        t = verigrad.tensor(x)
        return [(t * t + t).numpy(), t.exp().numpy(), t.sum(1).numpy(), t.abs().mean(0).numpy()]

same = [a.tobytes() == b.tobytes() for a, b in zip(results("cpu"), results("reference"))]
print(json.dumps({"info": cpu.build_info(), "same": same}))
"""


def run(folder: Path) -> tuple[dict, list[str]]:
    """What RUN finds in a fresh process on cache `folder`, and its lines on stderr."""
    done = run_python(RUN, VERIGRAD_CACHE=str(folder))
    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(done.stdout), done.stderr.splitlines()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder a fresh process built the libraries into (once for the module); tests change
    copies of it."""
    folder = tmp_path_factory.mktemp("cache")
    found, _ = run(folder)
    assert found["info"]["available"] and not found["info"]["cached"]
    (folder / "calls").write_text(found["info"]["calls"])  # how kernels were called: "vg_call" here
    return folder


def libraries(folder: Path) -> dict[str, Path]:
    """The cached libraries by prefix: "cpu", and "vg_call" where it is built here."""
    return {p.name.split("-")[0]: p for p in folder.glob("*.so")}


def records(folder: Path) -> dict[str, Path]:
    return {p.name.split("-")[0]: p for p in folder.glob("*.json")}


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip(path: Path) -> None:
    """64 bytes in the middle of the file (the code) inverted: the library still loads."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def whole(folder: Path) -> None:
    """Every library's size and SHA-256 are its record's."""
    for prefix, path in libraries(folder).items():
        assert cache.damage(path, records(folder)[prefix]) is None, path


@pytest.mark.parametrize("damage", [cut, flip], ids=["cut in half", "bytes flipped"])
def test_a_damaged_library_is_named_built_anew_and_runs_right_kernels(built, tmp_path, damage):
    folder = shutil.copytree(built, tmp_path / "cache")
    damaged = libraries(folder)
    sizes = {prefix: path.stat().st_size for prefix, path in damaged.items()}
    for path in damaged.values():
        damage(path)
    found, lines = run(folder)  # before: SIGBUS inside dlopen for a library cut in half
    assert found["same"] == [True] * 4 and not found["info"]["cached"]
    assert found["info"]["calls"] == (folder / "calls").read_text()
    for prefix, path in damaged.items():
        named = [line for line in lines if str(path) in line]
        assert len(named) == 1 and named[0].startswith("verigrad: the cached library"), lines
        assert "building it anew" in named[0]
        assert path.stat().st_size == sizes[prefix]
    whole(folder)
    again, lines = run(folder)
    assert again["info"]["cached"] and again["same"] == [True] * 4 and lines == []


def forget(record: Path) -> None:
    record.unlink()


def misstate(record: Path) -> None:
    found = json.loads(record.read_text())
    for entry in found["libraries"].values():
        entry["sha256"] = "0" * 64
    record.write_text(json.dumps(found))


@pytest.mark.skipif("vg_call" not in cpu.build_info()["calls"], reason="vg_call is not built here")
@pytest.mark.parametrize("damage", [forget, misstate], ids=["record deleted", "record with another hash"])
def test_a_library_its_record_does_not_vouch_for_is_built_anew(built, tmp_path, damage):
    """vg_call's record (the extension is a Python module loaded from the cache: checked as the others)."""
    folder = shutil.copytree(built, tmp_path / "cache")
    path, record = libraries(folder)["vg_call"], records(folder)["vg_call"]
    damage(record)
    found, lines = run(folder)
    assert found["same"] == [True] * 4 and found["info"]["calls"] == "vg_call"
    why = (
        f"no size and SHA-256 recorded for it in {record.name}"
        if damage is forget
        else "its SHA-256 is not the one recorded"
    )
    assert lines == [f"verigrad: the cached library {path} is damaged ({why}); building it anew"]
    whole(folder)


PROBE = "int probe(void) { return %d; }\n"


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("VERIGRAD_CACHE", str(folder))
    return folder


def probe_path(folder: Path, n: int) -> Path:
    cc = build.find_compiler()
    return folder / build.library_name(cc, build.compiler_version(cc), build.flags(), "probe", PROBE % n)


def test_another_library_under_the_name_is_never_run(private_cache, tmp_path, monkeypatch, capfd):
    """A whole library of other code under a library's name loads without complaint: only its checksum
    tells it from the right one."""
    done = run_python(BUILD_PROBE % 1, VERIGRAD_CACHE=str(private_cache))  # loaded there, not here
    assert done.returncode == 0, done.stderr
    path = probe_path(private_cache, 1)
    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path / "other"))
    _, other = build.build("probe", PROBE % 2, load=False)
    shutil.copyfile(other["path"], tmp_path / "copy.so")
    os.replace(tmp_path / "copy.so", path)
    monkeypatch.setenv("VERIGRAD_CACHE", str(private_cache))
    capfd.readouterr()
    lib, info = build.build("probe", PROBE % 1)
    assert lib.probe() == 1 and not info["cached"] and info["path"] == str(path)
    why = "its SHA-256 is not the one recorded"
    assert (
        capfd.readouterr().err
        == f"verigrad: the cached library {path} is damaged ({why}); building it anew\n"
    )


def test_a_build_that_fails_half_way_leaves_nothing_under_the_name(private_cache, monkeypatch):
    """Half a library written, then the compiler fails: the name holds what it held (nothing, or the
    damaged file, still refused), the record is unchanged, and no temporary is left."""
    path = probe_path(private_cache, 3)

    def half_then_fail(cc, opts, objects, out, srcs):
        Path(out).write_bytes(b"\x7fELF" + b"\0" * 4000)
        raise build.BuildError("the C build failed (cc): killed")

    monkeypatch.setattr(build, "_compile_and_link", half_then_fail)
    with pytest.raises(build.BuildError, match="killed"):
        build.build("probe", PROBE % 3)
    assert sorted(p.name for p in private_cache.iterdir()) == [cache.LOCK]
    monkeypatch.undo()
    monkeypatch.setenv("VERIGRAD_CACHE", str(private_cache))
    build.build("probe", PROBE % 3, load=False)
    record = private_cache / build.record_name(build.flags(), "probe", PROBE % 3)
    before = record.read_text()
    cut_copy = private_cache / "cut"  # this process has the library mapped: cut a copy, moved onto it
    cut_copy.write_bytes(path.read_bytes()[:100])
    os.replace(cut_copy, path)
    monkeypatch.setattr(build, "_compile_and_link", half_then_fail)
    with pytest.raises(build.BuildError, match="killed"):
        build.build("probe", PROBE % 3)
    assert path.stat().st_size == 100 and record.read_text() == before
    assert sorted(p.name for p in private_cache.iterdir()) == sorted([cache.LOCK, path.name, record.name])
    assert (
        cache.damage(path, record)
        == f"100 bytes where {json.loads(before)['libraries'][path.name]['size']} were recorded"
    )


SLOW_CC = """#!/bin/sh
# the real compiler, after a pause when it compiles: builds overlap, or one is killed while it builds
case "$*" in *--version*) ;; *) sleep {pause} ;; esac
exec {cc} "$@"
"""


def slow_compiler(folder: Path, pause: float) -> str:
    script = folder / "slow-cc"
    script.write_text(SLOW_CC.format(pause=pause, cc=" ".join(build.find_compiler())))
    script.chmod(0o755)
    return str(script)


BUILD_PROBE = """
import json
from verigrad.backends.cpu import build
lib, info = build.build("probe", "int probe(void) { return %d; }\\n")
print(json.dumps({"probe": lib.probe(), "cached": info["cached"]}))
"""


def test_processes_building_at_once_build_once(tmp_path):
    folder = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": ROOT, "VERIGRAD_CACHE": str(folder), "CC": slow_compiler(tmp_path, 1)}
    command = [sys.executable, "-c", BUILD_PROBE % 7]
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    found = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        found.append(json.loads(out))
    assert sorted(f["cached"] for f in found) == [False, True, True] and all(f["probe"] == 7 for f in found)
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 3 and names[0] == cache.LOCK  # the lock, the library and its record
    (library,) = folder.glob("*.so")
    (record,) = folder.glob("*.json")
    assert cache.damage(library, record) is None


def test_a_killed_build_leaves_nothing_under_the_name_and_its_leftovers_go(tmp_path):
    folder = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": ROOT, "VERIGRAD_CACHE": str(folder), "CC": slow_compiler(tmp_path, 60)}
    proc = subprocess.Popen(
        [sys.executable, "-c", BUILD_PROBE % 7],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".objects-") for p in folder.glob(".*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    left = sorted(p.name for p in folder.iterdir())
    assert not [n for n in left if n.endswith((".so", ".json")) and not n.startswith(".")], left
    for entry in folder.iterdir():  # a day old: a killed process's
        os.utime(entry, (time.time() - 86400, time.time() - 86400))
    done = run_python(BUILD_PROBE % 7, VERIGRAD_CACHE=str(folder))
    assert done.returncode == 0 and json.loads(done.stdout) == {"probe": 7, "cached": False}, done.stderr
    assert not [p.name for p in folder.iterdir() if p.name.startswith(cache.TEMPORARY)]


def test_a_record_that_cannot_be_written_costs_a_build_not_the_library(private_cache, monkeypatch):
    """A cache folder where the record cannot be written (full, read-only): the library just built (or
    found whole) still serves; unrecorded, it is built anew by the next process."""

    def cannot_write(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache, "remember", cannot_write)
    lib, info = build.build("probe", PROBE % 4)
    assert lib.probe() == 4 and not info["cached"]
    assert not list(private_cache.glob("*.json"))
    done = run_python(BUILD_PROBE % 4, VERIGRAD_CACHE=str(private_cache))
    assert done.returncode == 0 and json.loads(done.stdout) == {"probe": 4, "cached": False}, done.stderr
    assert "no size and SHA-256 recorded for it" in done.stderr
