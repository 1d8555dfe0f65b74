"""Checkpoints: `verigrad.io.save` / `load` round trips, the atomic write (a crash midway leaves the old
file and no temporary), bad files refused with WeightFileError, and `load_state_dict` naming every
tensor a checkpoint gets wrong."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import verigrad
from verigrad import io, nn
from verigrad.io import checkpoint
from verigrad.io.safetensors_format import read_metadata
from verigrad.models import digits_cnn


def sample_state(rng) -> dict:
    return {
        "w32": verigrad.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
        "w64": verigrad.tensor(rng.standard_normal(5)),
        "steps": verigrad.tensor(np.array([2**40 + 1, -7], np.int64)),
        "mask": verigrad.tensor(rng.random((2, 3)) > 0.5),
        "scalar": verigrad.tensor(np.float64(2.5)),
        "empty": verigrad.tensor(np.zeros((0, 4), np.float32)),
        "array": rng.standard_normal((2, 2)),  # plain arrays are saved too
    }


def test_round_trip_keeps_dtypes_shapes_and_bits(tmp_path, rng):
    state = sample_state(rng)
    path = io.save(state, tmp_path / "ck.safetensors")
    assert path == tmp_path / "ck.safetensors" and verigrad.save is io.save
    loaded = io.load(path)
    assert set(loaded) == set(state)
    expected_dtypes = {
        "w32": "f32",
        "w64": "f64",
        "steps": "i64",
        "mask": "bool",
        "scalar": "f64",
        "empty": "f32",
        "array": "f64",
    }
    for name, value in state.items():
        got = loaded[name]
        assert isinstance(got, verigrad.Tensor) and got.dtype.name == expected_dtypes[name], name
        want = np.asarray(value.numpy() if isinstance(value, verigrad.Tensor) else value)
        assert got.numpy().shape == want.shape and np.array_equal(got.numpy(), want), name


def test_the_file_is_plain_safetensors(tmp_path, rng):
    state = sample_state(rng)
    io.save(state, tmp_path / "ck.safetensors", metadata={"note": "hello"})
    arrays = load_file(str(tmp_path / "ck.safetensors"))
    np.testing.assert_array_equal(arrays["w32"], state["w32"].numpy())
    from safetensors import safe_open

    with safe_open(str(tmp_path / "ck.safetensors"), framework="numpy") as f:
        assert f.metadata() == {"note": "hello"}


def test_a_model_survives_the_round_trip(tmp_path, rng):
    verigrad.manual_seed(1)
    model = digits_cnn()
    io.save(model.state_dict(), tmp_path / "m" / "deep" / "model.safetensors")  # folders are made
    verigrad.manual_seed(2)
    other = digits_cnn()
    x = verigrad.tensor(rng.random((3, 1, 8, 8)).astype(np.float32))
    assert not np.array_equal(model(x).numpy(), other(x).numpy())
    other.load_state_dict(io.load(tmp_path / "m" / "deep" / "model.safetensors"))
    assert np.array_equal(model(x).numpy(), other(x).numpy())


def test_save_leaves_no_temporary_and_replaces_the_old_file(tmp_path):
    path = tmp_path / "ck.safetensors"
    io.save({"a": np.zeros(3)}, path)
    io.save({"b": np.ones(2, np.float32)}, path)
    assert os.listdir(tmp_path) == ["ck.safetensors"]
    assert list(io.load(path)) == ["b"]


class _Crash(Exception):
    pass


@pytest.mark.parametrize("error", [OSError("No space left on device"), KeyboardInterrupt(), _Crash()])
def test_a_crash_midway_through_the_write_keeps_the_old_file(tmp_path, monkeypatch, error):
    path = tmp_path / "ck.safetensors"
    io.save({"old": np.arange(4.0)}, path)
    old_bytes = path.read_bytes()
    real_fdopen = os.fdopen
    written = []

    class HalfWriter:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, blob):
            self.f.write(blob[: len(blob) // 2])
            self.f.flush()
            written.append(len(blob) // 2)
            raise error

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(checkpoint.os, "fdopen", lambda fd, mode: HalfWriter(real_fdopen(fd, mode)))
    with pytest.raises(type(error)):
        io.save({"new": np.zeros((100, 100))}, path)
    monkeypatch.undo()
    assert written and written[0] > 1000  # the write really started
    assert path.read_bytes() == old_bytes
    assert os.listdir(tmp_path) == ["ck.safetensors"]  # no temporary left behind
    np.testing.assert_array_equal(io.load(path)["old"].numpy(), np.arange(4.0))


def test_a_crash_before_the_rename_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ck.safetensors"
    io.save({"old": np.arange(4.0)}, path)
    old_bytes = path.read_bytes()

    def fail(*args):
        raise OSError("rename failed")

    monkeypatch.setattr(checkpoint.os, "replace", fail)
    with pytest.raises(OSError, match="rename failed"):
        io.save({"new": np.zeros(10)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes and os.listdir(tmp_path) == ["ck.safetensors"]


def test_a_first_save_that_crashes_leaves_nothing(tmp_path, monkeypatch):
    def fail(fd):
        raise OSError("I/O error")

    monkeypatch.setattr(checkpoint.os, "fsync", fail)
    with pytest.raises(OSError, match="I/O error"):
        io.save({"a": np.zeros(3)}, tmp_path / "ck.safetensors")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_missing_file(tmp_path):
    with pytest.raises(verigrad.WeightFileError, match=r"absent\.safetensors: no such checkpoint"):
        io.load(tmp_path / "absent.safetensors")


def test_a_folder_is_not_a_checkpoint(tmp_path):
    with pytest.raises(verigrad.WeightFileError, match="cannot be read"):
        io.load(tmp_path)


def test_the_metadata_reader_refuses_as_load_does(tmp_path):
    """read_metadata (the trainers' resume) and load name a missing or unreadable file alike."""
    for read in (io.load, read_metadata):
        with pytest.raises(verigrad.WeightFileError, match=r"absent\.safetensors: no such checkpoint$"):
            read(tmp_path / "absent.safetensors")
        with pytest.raises(verigrad.WeightFileError, match=r": cannot be read \("):
            read(tmp_path)


@pytest.mark.parametrize(
    "make",
    [
        lambda good: b"",
        lambda good: b"this is not a checkpoint",
        lambda good: good[: len(good) // 2],  # truncated
        lambda good: b"\xff" * 8 + good[8:],  # a header length past the end
        lambda good: good[:8] + b"[" + good[9:],  # a header that is not JSON
        lambda good: os.urandom(256),
    ],
    ids=["empty", "text", "truncated", "huge_header", "bad_json", "random"],
)
def test_garbage_is_refused_naming_the_file(tmp_path, make):
    good = (io.save({"a": np.arange(50.0)}, tmp_path / "good.safetensors")).read_bytes()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(make(good))
    with pytest.raises(verigrad.WeightFileError) as info:
        io.load(bad)
    assert str(bad) in str(info.value) and "not a valid safetensors file" in str(info.value)


def test_save_refuses_what_it_cannot_write(tmp_path):
    with pytest.raises(TypeError, match="names must be strings"):
        io.save({1: np.zeros(2)}, tmp_path / "a.safetensors")
    with pytest.raises(TypeError, match="x: expected a tensor or an array, got list"):
        io.save({"x": [1.0, 2.0]}, tmp_path / "a.safetensors")
    assert os.listdir(tmp_path) == []


def test_load_state_dict_names_each_bad_tensor_of_a_checkpoint(tmp_path):
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    before = {k: v.copy() for k, v in state.items()}
    state.pop("2.bias")  # missing
    state["2.scale"] = np.ones(2, np.float32)  # extra
    state["0.weight"] = np.zeros((4, 3), np.float32)  # transposed shape
    state["0.bias"] = np.zeros((3, 1), np.float32)  # wrong shape too
    state["2.weight"] = state["2.weight"] + 1  # fine, but must not be copied either
    path = io.save(state, tmp_path / "bad.safetensors")
    with pytest.raises(ValueError) as info:
        model.load_state_dict(io.load(path))
    message = str(info.value)
    for expected in (
        "missing: 2.bias",
        "unexpected: 2.scale",
        "0.weight: shape [4, 3] in the state, [3, 4] in the model",
        "0.bias: shape [3, 1] in the state, [3] in the model",
    ):
        assert expected in message
    assert "2.weight" not in message
    for k, v in model.state_dict().items():
        assert np.array_equal(v.numpy(), before[k]), k


def test_a_f64_checkpoint_loads_into_a_f32_model_rounded_once(tmp_path):
    model = nn.Linear(2, 2)
    values = {k: v.numpy().astype(np.float64) + 0.1 for k, v in model.state_dict().items()}
    io.save(values, tmp_path / "c")
    model.load_state_dict(io.load(Path(tmp_path / "c")))  # PyTorch's copy_ casts
    for k, v in model.state_dict().items():
        assert v.dtype.name == "f32" and np.array_equal(v.numpy(), values[k].astype(np.float32)), k


def test_a_checkpoint_gets_the_usual_file_permissions(tmp_path):
    """The temporary file is private while it is written; the checkpoint it becomes is not."""
    import os

    import verigrad.io

    path = verigrad.io.save({"w": verigrad.ones(2)}, tmp_path / "ck.safetensors")
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
