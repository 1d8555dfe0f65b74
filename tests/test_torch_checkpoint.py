"""PyTorch's checkpoint format without torch: `verigrad.save` to a `.pt`, `.pth` or `.bin` name writes the
zip archive torch.save writes, `verigrad.load` reads it back (views sharing their storage again), and a
hostile or damaged file is refused with a WeightFileError naming it, without running anything it asks for.
"""

from __future__ import annotations

import os
import pickle
import struct
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from fresh_process import run_python
from nested import assert_nested

import verigrad
from verigrad import io
from verigrad.io import checkpoint


def _records(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write_archive(path: Path, records: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, blob in records.items():
            archive.writestr(name, blob)
    return path


def _text(s: str) -> bytes:
    """BINUNICODE: a string in a pickle."""
    return b"X" + struct.pack("<I", len(s.encode())) + s.encode()


def _small(n: int) -> bytes:
    """BININT1: an int below 256 in a pickle."""
    return b"K" + bytes([n])


def _tuple(*parts: bytes) -> bytes:
    return b"(" + b"".join(parts) + b"t"


def _tensor_pickle(
    numel: int, offset: int, size: tuple, stride: tuple, storage: bytes = b"FloatStorage"
) -> bytes:
    """A protocol-2 pickle of one tensor as torch.save writes it, made opcode by opcode."""
    pid = (
        _tuple(_text("storage"), b"ctorch\n" + storage + b"\n", _text("0"), _text("cpu"), _small(numel))
        + b"Q"
    )
    hooks = b"ccollections\nOrderedDict\n)R"
    args = _tuple(
        pid, _small(offset), _tuple(*map(_small, size)), _tuple(*map(_small, stride)), b"\x89", hooks
    )
    return b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R."


def _hand_made(path: Path, data_pkl: bytes, storage: bytes = b"") -> Path:
    return _write_archive(
        path, {"archive/data.pkl": data_pkl, "archive/byteorder": b"little", "archive/data/0": storage}
    )


def _mixed_state(rng) -> dict:
    return {
        "f32": verigrad.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
        "f64": verigrad.tensor(rng.standard_normal(5)),
        "f16": verigrad.tensor(np.array([1.5, -0.0, np.inf], np.float16)),
        "bf16": verigrad.tensor(np.array([1.0, -2.5, 3.140625], np.float32)).to(verigrad.bf16),
        "i64": verigrad.tensor(np.array([2**40 + 1, -7], np.int64)),
        "i32": verigrad.tensor(np.array([[1, -2]], np.int32)),
        "u8": verigrad.tensor(np.array([0, 255], np.uint8)),
        "bool": verigrad.tensor(np.array([True, False])),
        "scalar": verigrad.tensor(np.float64(2.5)),
        "empty": verigrad.tensor(np.zeros((0, 4), np.float32)),
        "foreign": np.frombuffer(np.float32(1.5).tobytes(), np.float32).reshape(()),  # saved as a copy
        "big_endian": np.array([[1, -2], [3, 4]], ">i4").T,
        "nested": OrderedDict(
            steps=[1, 2**70, -3, (0.5, "adam", None, True)],
            arrays=(np.array([-3, 4], np.int16), np.array([-128, 127], np.int8)),
        ),
    }


def _same_leaf(got, want, where: str) -> None:
    """A tensor of the same dtype and values, or an equal plain value."""
    if isinstance(want, verigrad.Tensor | np.ndarray):
        assert isinstance(got, verigrad.Tensor), where
        expected = want.numpy() if isinstance(want, verigrad.Tensor) else want
        if isinstance(want, verigrad.Tensor):
            assert got.dtype is want.dtype, where
        assert got.shape == expected.shape and np.array_equal(got.numpy(), expected), where
    else:
        assert type(got) is type(want) and got == want, where


def _assert_same(got, want) -> None:
    """Equal values, container by container (tests/nested.py)."""
    assert_nested(got, want, _same_leaf)


@pytest.mark.parametrize("suffix", [".pt", ".pth", ".bin"])
def test_round_trip_of_nested_containers_dtypes_and_values(tmp_path, rng, suffix):
    state = _mixed_state(rng)
    path = verigrad.save(state, tmp_path / f"model{suffix}")
    assert path == tmp_path / f"model{suffix}" and zipfile.is_zipfile(path)
    loaded = verigrad.load(path)
    _assert_same(loaded, state)
    assert loaded["nested"]["arrays"][0].dtype.name == "i16" and loaded["bf16"].dtype.name == "bf16"
    assert loaded["nested"]["arrays"][1].dtype.name == "i8"


def test_the_archive_is_laid_out_as_torch_save_lays_it_out(tmp_path):
    records = _records(io.save({"w": verigrad.ones(2, 3)}, tmp_path / "w.pt"))
    assert records["archive/version"] == b"3\n" and records["archive/byteorder"] == b"little"
    assert records["archive/data.pkl"].startswith(b"\x80\x02")  # pickle protocol 2
    assert b"ctorch._utils\n_rebuild_tensor_v2\n" in records["archive/data.pkl"]
    assert b"ctorch\nFloatStorage\n" in records["archive/data.pkl"]
    assert np.array_equal(np.frombuffer(records["archive/data/0"], "<f4"), np.ones(6))
    with zipfile.ZipFile(tmp_path / "w.pt") as archive, open(tmp_path / "w.pt", "rb") as f:
        for info in archive.infolist():  # each record's bytes start at a multiple of 64, as torch's
            assert info.compress_type == zipfile.ZIP_STORED
            f.seek(info.header_offset + 26)
            name_length, extra_length = struct.unpack("<HH", f.read(4))
            assert (info.header_offset + 30 + name_length + extra_length) % 64 == 0, info.filename


def test_views_of_one_array_share_one_storage_in_the_file_and_after_loading(tmp_path):
    base = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    state = {"base": base, "transposed": base.T, "slice": base[1:, 2:], "row": base[2]}
    path = io.save(state, tmp_path / "views.pt")
    assert [n for n in _records(path) if "/data/" in n] == ["archive/data/0"]  # one storage of 12 floats
    loaded = io.load(path)
    for name, array in state.items():
        assert np.array_equal(loaded[name].numpy(), array), name
    assert loaded["transposed"].stride() == (1, 4) and loaded["slice"].stride() == (4, 1)
    loaded["base"].numpy()[2, 3] = -1.0  # the loaded tensors share memory, as torch.load's do
    assert loaded["transposed"].numpy()[3, 2] == -1.0 and loaded["slice"].numpy()[1, 1] == -1.0
    assert loaded["row"].numpy()[3] == -1.0


def test_the_same_tensor_twice_loads_as_one_tensor(tmp_path):
    w = verigrad.ones(2)
    loaded = io.load(io.save({"embed": w, "head": w, "other": verigrad.ones(2)}, tmp_path / "tied.pt"))
    assert loaded["embed"] is loaded["head"] and loaded["other"] is not loaded["head"]


def test_loaded_tensors_are_writable_and_parameters_keep_requires_grad(tmp_path):
    w = verigrad.nn.Parameter(verigrad.ones(3))
    loaded = io.load(io.save([w, verigrad.zeros(2)], tmp_path / "p.pt"))
    assert isinstance(loaded, list) and loaded[0].requires_grad and not loaded[1].requires_grad
    loaded[1].assign(loaded[1] + 2.0)
    assert np.array_equal(loaded[1].numpy(), [2.0, 2.0])


def test_other_names_still_get_safetensors(tmp_path):
    path = io.save({"w": verigrad.ones(2)}, tmp_path / "w.safetensors")
    assert not zipfile.is_zipfile(path) and list(io.load(path)) == ["w"]


def test_save_refuses_what_a_weights_only_load_could_not_read(tmp_path):
    for value, message in [
        ({1, 2}, "the object: cannot be saved in a PyTorch checkpoint: set"),
        ({"x": np.float32(1.0)}, r"the object\['x'\]: .*float32; use .item\(\) or a 0-d tensor"),
        ([np.zeros(2, np.uint16)], r"the object\[0\]: a uint16 array has no PyTorch storage type"),
        (verigrad.nn.Linear(2, 2), r"Linear; save its state_dict\(\) and load that with load_state_dict"),
    ]:
        with pytest.raises(TypeError, match=message):
            io.save(value, tmp_path / "bad.pt")
    looped: list = [1]
    looped.append(looped)
    with pytest.raises(ValueError, match="contains itself"):
        io.save(looped, tmp_path / "bad.pt")
    with pytest.raises(TypeError, match="metadata is written to safetensors files only"):
        io.save({"w": verigrad.ones(1)}, tmp_path / "bad.pt", metadata={"a": "b"})
    assert os.listdir(tmp_path) == []


def test_a_crash_midway_keeps_the_old_torch_checkpoint(tmp_path, monkeypatch):
    path = io.save({"old": verigrad.ones(2)}, tmp_path / "ck.pt")
    old_bytes = path.read_bytes()
    monkeypatch.setattr(checkpoint.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError("I/O error")))
    with pytest.raises(OSError, match="I/O error"):
        io.save({"new": verigrad.zeros(100)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes and os.listdir(tmp_path) == ["ck.pt"]


def test_a_hand_made_tensor_pickle_loads(tmp_path):
    storage = np.arange(6, dtype="<f4").tobytes()
    path = _hand_made(tmp_path / "t.pt", _tensor_pickle(6, 1, (2, 2), (1, 2)), storage)
    np.testing.assert_array_equal(io.load(path).numpy(), [[1.0, 3.0], [2.0, 4.0]])


@pytest.mark.parametrize(
    "payload, asked",
    [
        (b"\x80\x02cposix\nsystem\n" + _tuple(_text("touch {marker}")) + b"R.", "posix.system"),
        (b"\x80\x02cos\nsystem\n" + _tuple(_text("touch {marker}")) + b"R.", "os.system"),
        (b"\x80\x02cbuiltins\neval\n" + _tuple(_text("open('{marker}', 'w')")) + b"R.", "builtins.eval"),
        (  # protocol 4's STACK_GLOBAL takes the names from the stack
            b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93" + _tuple(_text("touch {marker}")) + b"R.",
            "os.system",
        ),
        (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\n)R.", "numpy.core.multiarray._reconstruct"),
        (b"\x80\x02c__main__\nModel\n)\x81.", "__main__.Model"),  # NEWOBJ of a user's class
    ],
    ids=["posix.system", "os.system", "eval", "stack_global", "numpy", "user_class"],
)
def test_a_pickle_asking_for_anything_else_is_refused_naming_it_and_nothing_runs(tmp_path, payload, asked):
    marker = tmp_path / "ran"
    path = _hand_made(tmp_path / "evil.pt", payload.replace(b"{marker}", str(marker).encode()))
    with pytest.raises(verigrad.WeightFileError) as info:
        io.load(path)
    assert str(path) in str(info.value) and f"asks for {asked}" in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    "pickled, storage, message",
    [
        (
            _tensor_pickle(6, 0, (2, 3), (3, 1)),
            b"\0" * 20,
            "should hold 6 elements of 4 bytes, but its record has 20",
        ),
        (
            _tensor_pickle(6, 1, (2, 3), (3, 1)),
            b"\0" * 24,
            r"size \[2, 3\], stride \[3, 1\] and offset 1 reaches past",
        ),
        (_tensor_pickle(6, 0, (4,), (2,)), b"\0" * 24, "reaches past its storage of 6 elements"),
        (_tensor_pickle(6, 0, (2,), (1, 1)), b"\0" * 24, r"size \(2,\) and stride \(1, 1\)"),
        (_tensor_pickle(6, 0, (2,), (1,), b"ComplexFloatStorage"), b"\0" * 48, "torch.ComplexFloatStorage"),
        (
            b"\x80\x02" + _tuple(_text("blob"), _text("0")) + b"Q.",
            b"",
            "a persistent id .* that is not a storage",
        ),
        (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n" + _tuple(_small(1)) + b"R.", b"", "TypeError"),
        (b"\x80\x02]", b"", "not a valid PyTorch checkpoint"),  # a pickle cut short
    ],
    ids=[
        "short_storage",
        "offset_past_end",
        "stride_past_end",
        "ranks_differ",
        "complex",
        "pid",
        "args",
        "cut",
    ],
)
def test_a_damaged_pickle_or_storage_is_a_weight_file_error(tmp_path, pickled, storage, message):
    path = _hand_made(tmp_path / "bad.bin", pickled, storage)
    with pytest.raises(verigrad.WeightFileError, match=message) as info:
        io.load(path)
    assert str(path) in str(info.value)


def test_a_missing_storage_record_is_named(tmp_path):
    path = _write_archive(tmp_path / "bad.pt", {"archive/data.pkl": _tensor_pickle(6, 0, (6,), (1,))})
    with pytest.raises(verigrad.WeightFileError, match="storage 0 has no record data/0"):
        io.load(path)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda good: good[: len(good) // 2], "not a valid PyTorch checkpoint"),  # truncated
        (lambda good: good[:-30], "not a valid PyTorch checkpoint"),  # the end of the directory cut off
        (lambda good: b"PK\x03\x04" + os.urandom(200), "not a valid PyTorch checkpoint"),
        (lambda good: b"this is text, not a checkpoint", "not a PyTorch checkpoint .*not one"),
        (lambda good: b"", "not a PyTorch checkpoint"),
        (lambda good: pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + good, "legacy format"),
    ],
    ids=["truncated", "no_directory", "zip_magic_then_noise", "text", "empty", "legacy"],
)
def test_a_damaged_or_unreadable_file_is_refused_naming_it(tmp_path, damage, message):
    good = io.save({"w": verigrad.arange(100.0)}, tmp_path / "good.pt").read_bytes()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(damage(good))
    with pytest.raises(verigrad.WeightFileError, match=message) as info:
        io.load(bad)
    assert str(bad) in str(info.value)


def test_a_changed_storage_byte_fails_the_checksum(tmp_path):
    path = io.save({"w": verigrad.arange(100.0)}, tmp_path / "w.pt")
    blob = bytearray(path.read_bytes())
    start = blob.index(np.arange(100.0, dtype=np.float32).tobytes())
    blob[start + 40] ^= 0xFF
    path.write_bytes(bytes(blob))
    with pytest.raises(verigrad.WeightFileError, match="Bad CRC-32"):
        io.load(path)


def test_archives_that_are_not_torch_save_checkpoints_are_named_so(tmp_path):
    script = _write_archive(
        tmp_path / "s.pt", {"s/constants.pkl": b"", "s/code/s.py": b"", "s/data.pkl": b""}
    )
    with pytest.raises(verigrad.WeightFileError, match="TorchScript archive"):
        io.load(script)
    other = _write_archive(tmp_path / "o.pt", {"readme.txt": b"hello"})
    with pytest.raises(verigrad.WeightFileError, match=r"without data\.pkl"):
        io.load(other)


def test_a_big_endian_archive_reads_its_byte_order(tmp_path):
    storage = np.arange(6, dtype=">f4").tobytes()
    records = {"archive/data.pkl": _tensor_pickle(6, 0, (6,), (1,)), "archive/byteorder": b"big"}
    path = _write_archive(tmp_path / "be.pt", records | {"archive/data/0": storage})
    np.testing.assert_array_equal(io.load(path).numpy(), np.arange(6.0))


def test_bytes_devices_dtypes_and_sizes_load_as_plain_values(tmp_path):
    pickled = (
        b"\x80\x02]("
        + b"c_codecs\nencode\n"
        + _tuple(_text("\u00ff\u0001"), _text("latin1"))
        + b"R"
        + b"ctorch\ndevice\n"
        + _tuple(_text("cuda"), _small(1))
        + b"R"
        + b"ctorch\nbfloat16\n"
        + b"ctorch\nSize\n"
        + _tuple(_tuple(_small(2), _small(3)))
        + b"Re."
    )
    loaded = io.load(_hand_made(tmp_path / "v.pt", pickled))
    assert loaded == [b"\xff\x01", "cuda:1", verigrad.bf16, (2, 3)]


def test_plain_values_are_pickled_as_python_reads_them(tmp_path):
    edges = [0, 255, 256, 65535, 65536, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63, -(2**2100)]
    values = {"ints": edges, "floats": (0.1, -0.0, float("inf")), "text": "\u00e9\ud800", "nothing": None}
    path = io.save(OrderedDict(values), tmp_path / "plain.pt")
    assert pickle.loads(_records(path)["archive/data.pkl"]) == OrderedDict(values)
    assert io.load(path) == OrderedDict(values)


def test_saving_and_loading_need_no_torch(tmp_path):
    """In a process where `import torch` fails, a checkpoint is written and read back."""
    done = run_python(
        f"""
        import sys
        sys.modules["torch"] = None  # any import of torch now raises ImportError
        import verigrad
        path = verigrad.save({{"w": verigrad.ones(2, 3), "step": 4}}, {str(tmp_path / "w.pt")!r})
        state = verigrad.load(path)
        assert state["w"].shape == (2, 3) and state["step"] == 4
        print("ok")
        """
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
