"""`verigrad.save` and `verigrad.load` with `torch.save`'s and `torch.load`'s arguments: binary files as
well as paths, `map_location` onto the CPU (any other device refused before the file is read),
`weights_only=False` read with the same restricted unpickler, and PyTorch's refusals of bad arguments."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from test_torch_checkpoint import _assert_same, _hand_made, _mixed_state, _tensor_pickle, _text

import verigrad
from verigrad import Size
from verigrad.io.map_location import CpuStorage, MapLocationError

STORAGE = np.arange(6, dtype="<f4").tobytes()


def _saved(obj, **kwargs) -> io.BytesIO:
    buffer = io.BytesIO()
    assert verigrad.save(obj, buffer, **kwargs) is None
    buffer.seek(0)
    return buffer


def _on_device(tmp_path, location: str):
    """A checkpoint of one [2, 3] f32 tensor (0..5) whose storage was saved on `location`."""
    pickled = _tensor_pickle(6, 0, (2, 3), (3, 1)).replace(_text("cpu"), _text(location))
    return _hand_made(tmp_path / "on_device.pt", pickled, STORAGE)


def test_save_to_and_load_from_a_binary_file(rng, tmp_path) -> None:
    state = _mixed_state(rng)
    _assert_same(verigrad.load(_saved(state)), state)
    path = verigrad.save(state, tmp_path / "ck.pt")
    with open(path, "rb") as f:
        _assert_same(verigrad.load(f), state)
    assert _saved(state).getvalue() == path.read_bytes()  # the same archive, whichever way it is written


def test_a_file_object_reads_safetensors_too_and_names_itself_in_errors(tmp_path) -> None:
    path = verigrad.save({"w": verigrad.ones(2)}, tmp_path / "w.safetensors")
    with open(path, "rb") as f:
        assert verigrad.load(f)["w"].tolist() == [1.0, 1.0]
    with pytest.raises(verigrad.WeightFileError, match=r"<BytesIO>: not a valid safetensors file"):
        verigrad.load(io.BytesIO(b"not a checkpoint"))
    with open(tmp_path / "text.txt", "w") as f:
        f.write("x")
    with open(tmp_path / "text.txt") as f, pytest.raises(TypeError, match=r"binary mode \('rb'\)"):
        verigrad.load(f)


@pytest.mark.parametrize(
    "map_location",
    ["cpu", "cpu:0", verigrad.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"}, None],
    ids=repr,
)
def test_map_locations_onto_the_cpu_load_the_same(tmp_path, map_location) -> None:
    got = verigrad.load(_on_device(tmp_path, "cuda:0"), map_location=map_location)
    assert got.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and got.dtype is verigrad.f32


def test_a_map_location_function_gets_each_storage_and_its_saved_location(tmp_path) -> None:
    seen = []

    def keep(storage, location):
        seen.append((type(storage), location))
        return storage.cpu()

    assert verigrad.load(_on_device(tmp_path, "cuda:1"), map_location=keep).shape == (2, 3)
    assert seen == [(CpuStorage, "cuda:1")]
    assert verigrad.load(_on_device(tmp_path, "cuda:1"), map_location=lambda s, loc: None).shape == (2, 3)


@pytest.mark.parametrize(
    "map_location, message",
    [
        ("cuda", r"map_location is 'cuda': verigrad runs on the CPU"),
        ("cuda:1", "map_location is 'cuda:1'"),
        ("mps", "map_location is 'mps'"),
        ({"cuda:0": "cuda:1"}, r"map_location\['cuda:0'\] is 'cuda:1'"),
    ],
)
def test_a_map_location_off_the_cpu_is_refused_before_the_file_is_read(tmp_path, map_location, message):
    with pytest.raises(MapLocationError, match=message):
        verigrad.load(tmp_path / "absent.pt", map_location=map_location)  # no "no such checkpoint"


@pytest.mark.parametrize(
    "map_location, error, message",
    [
        (lambda s, loc: s.cuda(), MapLocationError, "moves a storage to CUDA"),
        (lambda s, loc: "cpu", MapLocationError, "returned a str for a storage saved on 'cuda:0'"),
        (lambda s, loc: s.pin_memory(), MapLocationError, r"raised on a storage saved on 'cuda:0': Attr"),
        (3, TypeError, "must name a device .* not int"),
        ({"cuda:0": 1}, TypeError, "values must name a device"),
    ],
    ids=["cuda", "other_value", "raises", "int", "dict_value"],
)
def test_a_bad_map_location_is_refused_naming_it(tmp_path, map_location, error, message) -> None:
    with pytest.raises(error, match=message):
        verigrad.load(_on_device(tmp_path, "cuda:0"), map_location=map_location)


def test_weights_only_false_reads_with_the_same_restricted_unpickler(rng, tmp_path) -> None:
    state = _mixed_state(rng)
    _assert_same(verigrad.load(_saved(state), weights_only=False), state)
    _assert_same(verigrad.load(_saved(state), None, pickle, weights_only=False), state)
    _assert_same(verigrad.load(_saved(state), pickle_module=pickle), state)  # weights_only left out
    marker = tmp_path / "ran"
    evil = b"\x80\x02cos\nsystem\n(" + _text(f"touch {marker}") + b"tR."
    with pytest.raises(verigrad.WeightFileError, match=r"asks for os\.system.*with weights_only=False too"):
        verigrad.load(_hand_made(tmp_path / "evil.pt", evil), weights_only=False)
    assert not marker.exists()


def test_load_refuses_what_torch_load_refuses(tmp_path) -> None:
    path = verigrad.save({"w": verigrad.ones(2)}, tmp_path / "w.pt")
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        verigrad.load(path, pickle_module=pickle, weights_only=True)
    with pytest.raises(TypeError, match="pickle_module must be pickle"):
        verigrad.load(path, pickle_module=json, weights_only=False)
    with pytest.raises(ValueError, match="must be a file path in order to use the mmap argument"):
        verigrad.load(_saved({"w": verigrad.ones(2)}), mmap=True)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['fix_imports'\]"):
        verigrad.load(path, fix_imports=False)
    with pytest.raises(TypeError, match="weights_only must be True, False or None, not 'yes'"):
        verigrad.load(path, weights_only="yes")
    with pytest.raises(TypeError, match="f must be a path or a binary file, not int"):
        verigrad.load(3)
    assert verigrad.load(path, mmap=True)["w"].tolist() == [1.0, 1.0]
    assert verigrad.load(path, encoding="latin1")["w"].tolist() == [1.0, 1.0]


def test_save_takes_torch_save_arguments_and_refuses_what_it_cannot_write(tmp_path) -> None:
    obj = {"w": verigrad.ones(2)}
    default = _saved(obj).getvalue()
    assert _saved(obj, pickle_module=pickle, pickle_protocol=4).getvalue() == default  # always protocol 2
    with zipfile.ZipFile(_saved(obj, _disable_byteorder_record=True)) as archive:
        assert "archive/byteorder" not in archive.namelist()
    assert verigrad.load(_saved(obj, _disable_byteorder_record=True))["w"].tolist() == [1.0, 1.0]
    for kwargs, error, message in [
        ({"_use_new_zipfile_serialization": False}, ValueError, "legacy format"),
        ({"pickle_protocol": pickle.HIGHEST_PROTOCOL + 1}, ValueError, "pickle_protocol must be <="),
        ({"pickle_protocol": "2"}, TypeError, "pickle_protocol must be an int"),
        ({"pickle_module": json}, TypeError, "pickle_module must be pickle"),
        ({"metadata": {"a": "b"}}, TypeError, "metadata is written to safetensors files"),
    ]:
        with pytest.raises(error, match=message):
            verigrad.save(obj, io.BytesIO(), **kwargs)
    with pytest.raises(TypeError, match="f must be a path or a binary file, not int"):
        verigrad.save(obj, 3)
    with pytest.raises(ValueError, match="legacy format"):
        verigrad.save(obj, tmp_path / "w.pt", _use_new_zipfile_serialization=False)
    assert not (tmp_path / "w.pt").exists()


def test_a_size_is_saved_as_torch_size_and_loads_as_a_size() -> None:
    buffer = _saved(OrderedDict(shape=verigrad.zeros(2, 3).shape, empty=Size(), plain=(2, 3)))
    with zipfile.ZipFile(buffer) as archive:
        assert b"ctorch\nSize\n" in archive.read("archive/data.pkl")
    buffer.seek(0)
    got = verigrad.load(buffer)
    assert type(got["shape"]) is Size and got["shape"] == (2, 3) and type(got["empty"]) is Size
    assert type(got["plain"]) is tuple


def test_views_loaded_from_a_checkpoint_still_share_their_storage_when_saved_again() -> None:
    base = np.arange(12.0).reshape(3, 4)
    loaded = verigrad.load(_saved({"base": base, "t": base.T, "slice": base[1:, ::2]}))
    again = _saved(loaded)
    with zipfile.ZipFile(again) as archive:
        assert [n for n in archive.namelist() if "/data/" in n] == ["archive/data/0"]  # one storage, not 3
    again.seek(0)
    back = verigrad.load(again)
    back["base"].numpy()[2, 2] = -1.0
    assert back["t"].numpy()[2, 2] == -1.0 and back["slice"].numpy()[1, 1] == -1.0
    assert back["slice"].stride() == (4, 2) and back["t"].stride() == (1, 4)
