"""Checkpoints under hostile conditions: the same tensors give the same bytes in every process, saves
killed by SIGKILL leave no temporary behind once the file is saved or loaded again (and the file is the
old one or the new one, whole), and the temporaries of live writers or of other files are left alone."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fresh_process import ROOT, run_python
from hypothesis import given, settings
from hypothesis import strategies as st

import verigrad
from verigrad import io
from verigrad.io import atomic
from verigrad.io.safetensors_format import read_metadata

SAVE_TWICE = """
import hashlib, sys
import numpy as np
import verigrad
import verigrad
from verigrad import io
from verigrad.models import digits_cnn
verigrad.manual_seed(3)
state = {**digits_cnn().state_dict(), "steps": np.arange(5), "flag": np.array([True, False])}
meta = {"model": "digits_cnn", "height": "8", "width": "8", "note": "é", "a": "1", "z": "2"}
for name in sys.argv[1:]:
    io.save(state, name, **({"metadata": meta} if name.endswith(".safetensors") else {}))
    print(hashlib.sha256(open(name, "rb").read()).hexdigest())
"""


def _save_in_a_process(folder: Path) -> list[str]:
    names = [str(folder / "m.safetensors"), str(folder / "m.pt")]
    done = subprocess.run(
        [sys.executable, "-c", SAVE_TWICE, *names],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_same_state_saved_by_two_processes_has_the_same_sha256(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = _save_in_a_process(tmp_path / "a"), _save_in_a_process(tmp_path / "b")
    assert len(first) == 2 and first == second
    header = _header(tmp_path / "a" / "m.safetensors")
    assert list(header) == sorted(header)
    assert list(header["__metadata__"]) == sorted(header["__metadata__"])
    assert read_metadata(tmp_path / "a" / "m.safetensors")["note"] == "é"


def _header(path: Path) -> dict:
    blob = path.read_bytes()
    size = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8 : 8 + size])


@settings(database=None, derandomize=True, max_examples=25, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=6),
        st.sampled_from(["f8", "f4", "f2", "i8", "i4", "i2", "i1", "u1", "u2", "u4", "?"]),
        max_size=5,
    ),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4),
    st.randoms(use_true_random=False),
)
def test_any_order_of_the_same_tensors_and_metadata_gives_the_same_bytes(dtypes, metadata, random):
    """The bytes depend on the tensors and metadata, not on the order they were given in; the file reads
    back with every tensor's bits, and is a valid safetensors file (the package reads it)."""
    from safetensors.numpy import load

    from verigrad.io.safetensors_format import safetensors_bytes

    rng = np.random.default_rng(len(dtypes))
    arrays = {k: (rng.standard_normal(3 + i) * 100).astype(t) for i, (k, t) in enumerate(dtypes.items())}
    names, keys = list(arrays), list(metadata)
    random.shuffle(names)
    random.shuffle(keys)
    blob = safetensors_bytes(arrays, metadata)
    assert safetensors_bytes({n: arrays[n] for n in names}, {k: metadata[k] for k in keys}) == blob
    back = load(blob)
    assert set(back) == set(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].tobytes() == array.tobytes()
    header = json.loads(blob[8 : 8 + struct.unpack("<Q", blob[:8])[0]])
    assert header.get("__metadata__", {}) == metadata


def test_metadata_must_map_strings_to_strings(tmp_path):
    with pytest.raises(TypeError, match=r"metadata must map str to str; 'epoch': 3 is not"):
        io.save({"a": np.zeros(2)}, tmp_path / "m.safetensors", metadata={"epoch": 3})
    assert os.listdir(tmp_path) == []


SAVE_THEN_HANG = """
import os, sys, time
import numpy as np
from verigrad import io
path, saves = sys.argv[1], int(sys.argv[2])
big = np.zeros(1 << 20, np.float32)
for step in range(1, saves + 1):
    big[:] = step
    io.save({"big": big, "step": np.array(step)}, path)

def hang(fd):  # the next save stops with its temporary written, before the rename
    print("mid-save", flush=True)
    time.sleep(60)

os.fsync = hang
big[:] = saves + 1
io.save({"big": big, "step": np.array(saves + 1)}, path)
"""


def _kill_midway(path: Path, saves: int) -> int:
    """Start a process that saves `path` `saves` times, then SIGKILL it in the middle of one more save;
    its process id."""
    child = subprocess.Popen(
        [sys.executable, "-c", SAVE_THEN_HANG, str(path), str(saves)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": ROOT},
        cwd=ROOT,
    )
    try:
        assert child.stdout.readline().strip() == b"mid-save"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return child.pid


def _check_whole(path: Path, step: int) -> None:
    state = io.load(path)
    big = state["big"].numpy()
    assert int(state["step"].item()) == step and big.shape == (1 << 20,) and (big == step).all()


def test_saves_killed_midway_leave_no_temporary_after_the_next_save(tmp_path):
    """A SIGKILL in the middle of a save leaves its temporary (nothing can remove it then); the next
    save, by the next process, removes it, so they never pile up (before, each kill left one more), and
    the file is whole all along: the last save that finished."""
    path = tmp_path / "ck.safetensors"
    io.save({"big": np.zeros(1 << 20, np.float32), "step": np.array(0)}, path)
    last = 0
    for saves in (0, 2, 1, 0):
        pid = _kill_midway(path, saves)
        last = saves or last
        assert [p for _, p in atomic.temporaries(path)] == [pid]  # the killed save's, alone
        _check_whole(path, last)
    io.save({"big": np.full(1 << 20, 7, np.float32), "step": np.array(7)}, path)
    assert os.listdir(tmp_path) == ["ck.safetensors"]
    _check_whole(path, 7)


def test_a_save_to_a_folder_is_refused_before_writing(tmp_path):
    """Before, the whole file was written to a temporary, then the rename failed naming the temporary."""
    for name in ("ck.safetensors", "ck.pt"):
        (tmp_path / name).mkdir()
        with pytest.raises(IsADirectoryError, match=f"{name}: is a directory; the file to write must be"):
            io.save({"a": np.zeros(3)}, tmp_path / name)
    assert sorted(os.listdir(tmp_path)) == ["ck.pt", "ck.safetensors"]


def test_a_load_removes_the_temporaries_of_killed_saves_too(tmp_path):
    path = tmp_path / "ck.pt"
    io.save({"a": np.arange(3.0)}, path)
    dead = _dead_pid()
    for token in ("abcdef01", "0000ffff"):
        (tmp_path / f".ck.pt.{dead}.{token}.tmp").write_bytes(b"half")
    assert len(atomic.temporaries(path)) == 2
    np.testing.assert_array_equal(io.load(path)["a"].numpy(), np.arange(3.0))
    assert os.listdir(tmp_path) == ["ck.pt"]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_stale_temporaries_of_the_same_file_are_removed(tmp_path):
    """Kept: a live writer's temporary (this process's, another thread may be saving), a recent one of an
    earlier verigrad (no pid in its name), other files' temporaries and other files. Removed: a dead
    writer's, and any untouched for longer than STALE_AFTER."""
    path = tmp_path / "m.safetensors"
    dead = _dead_pid()
    keep = [
        f".m.safetensors.{os.getpid()}.abcdef01.tmp",  # this process: alive
        ".m.safetensors.k3x_9a2b.tmp",  # an earlier version's, recent
        f".m.safetensors.1.{dead}.abcdef01.tmp",  # the temporary of "m.safetensors.1"
        f".other.safetensors.{dead}.abcdef01.tmp",
        f".m.safetensors.{dead}.abcdef01.tmp.bak",
        "m.safetensors.tmp",
    ]
    gone = [f".m.safetensors.{dead}.abcdef01.tmp", ".m.safetensors.oldoldol.tmp"]
    for name in keep + gone:
        (tmp_path / name).write_bytes(b"x")
    old = time.time() - atomic.STALE_AFTER - 60
    os.utime(tmp_path / ".m.safetensors.oldoldol.tmp", (old, old))
    io.save({"a": np.zeros(2)}, path)
    assert sorted(os.listdir(tmp_path)) == sorted([*keep, "m.safetensors"])


def test_a_pt_save_goes_through_the_same_atomic_write(tmp_path):
    path = tmp_path / "ck.pt"
    (tmp_path / f".ck.pt.{_dead_pid()}.abcdef01.tmp").write_bytes(b"half")
    io.save({"a": np.arange(3.0)}, path)
    assert os.listdir(tmp_path) == ["ck.pt"]


def test_a_checkpoint_in_a_read_only_folder_still_loads(tmp_path):
    """Removing stale temporaries is best effort: a folder that cannot be written does not stop a load."""
    path = tmp_path / "ck.safetensors"
    io.save({"a": np.arange(3.0)}, path)
    (tmp_path / f".ck.safetensors.{_dead_pid()}.abcdef01.tmp").write_bytes(b"half")
    tmp_path.chmod(0o555)
    try:
        np.testing.assert_array_equal(io.load(path)["a"].numpy(), np.arange(3.0))
    finally:
        tmp_path.chmod(0o755)


def test_a_fresh_process_saving_gets_the_same_bytes_as_this_one(tmp_path):
    done = run_python(
        f"""
        import numpy as np
        from verigrad import io
        io.save({{"w": np.arange(12, dtype=np.float32).reshape(3, 4)}}, {str(tmp_path / "b.safetensors")!r},
                metadata={{"k2": "v", "k1": "v"}})
        """
    )
    assert done.returncode == 0, done.stderr
    io.save(
        {"w": np.arange(12, dtype=np.float32).reshape(3, 4)},
        tmp_path / "a.safetensors",
        metadata={"k1": "v", "k2": "v"},
    )
    a, b = (hashlib.sha256((tmp_path / n).read_bytes()).digest() for n in ("a.safetensors", "b.safetensors"))
    assert a == b


def test_threads_saving_the_same_file_at_once_leave_one_whole_file(tmp_path):
    """Each save is atomic on its own: eight threads saving the same file five times each leave one of
    their states, whole, with the usual permissions, and no temporary (a thread's temporary is never taken
    for a dead writer's, as they share the process id)."""
    path = tmp_path / "ck.safetensors"
    errors = []

    def save_often(k: int) -> None:
        try:
            for i in range(5):
                io.save({"w": np.full(50_000, 10 * k + i, np.float32)}, path, metadata={"k": str(k)})
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=save_often, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert os.listdir(tmp_path) == ["ck.safetensors"]
    w = io.load(path)["w"].numpy()
    k = int(read_metadata(path)["k"])
    assert (w == w[0]).all() and w[0] == 10 * k + 4  # the last state of one thread
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FLIPS = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=6)


@settings(database=None, derandomize=True, max_examples=150, deadline=None)
@given(FLIPS, st.integers(0, 400))
def test_a_corrupted_checkpoint_is_read_whole_or_refused_naming_the_file(tmp_path_factory, flips, cut):
    """Bytes changed or cut anywhere (header length, JSON, metadata, data): `load` and `read_metadata`
    give a WeightFileError naming the file, or what the file now says; never another exception."""
    from verigrad.io.safetensors_format import safetensors_bytes

    blob = bytearray(safetensors_bytes({"w": np.arange(6, dtype=np.float32)}, {"model": "digits_cnn"}))
    for where, value in flips:
        if where < len(blob):
            blob[where] = value
    path = tmp_path_factory.mktemp("fuzz") / "ck.safetensors"
    path.write_bytes(bytes(blob[: len(blob) - cut // 10]))
    for read in (io.load, read_metadata):
        try:
            got = read(path)
        except verigrad.WeightFileError as e:
            assert str(path) in str(e)
        else:
            assert isinstance(got, dict)
            assert all(isinstance(k, str) for k in got)
