"""Random corruptions of a small safetensors file read by `io.hf.read_tensors` (the reader of Hugging Face
folders): every one either gives exactly the expected f32 arrays or is refused with a WeightFileError.

Mutations edit the header's JSON (dtypes relabelled, shapes and data offsets moved, out of range or
overlapping, entries dropped, repeated or malformed), its size field, its bytes, or truncate the file.
"""

from __future__ import annotations

import json
import struct
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verigrad.errors import WeightFileError
from verigrad.io.hf import read_tensors

FUZZ = settings(max_examples=60, deadline=None, database=None, derandomize=True)
EXPECTED = {"a": (3, 4), "b": (5,), "c": (2, 2)}
EDGES = [0, 1, 2, 7, 8, 47, 48, 2**31, 2**53, 2**63, 2**64, -1, -48]


def build(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.fixture(scope="module")
def original() -> tuple[dict, bytes]:
    """A valid header (f32 a, f16 b, f32 c and an ignored i64 `skip`) and its data."""
    rng = np.random.default_rng(0)
    arrays = {
        "a": rng.standard_normal(EXPECTED["a"]).astype(np.float32),
        "b": rng.standard_normal(EXPECTED["b"]).astype(np.float16),
        "skip": np.arange(3, dtype=np.int64),
        "c": rng.standard_normal(EXPECTED["c"]).astype(np.float32),
    }
    dtypes = {np.float32: "F32", np.float16: "F16", np.int64: "I64"}
    header, data = {"__metadata__": {"format": "np"}}, b""
    for name, array in arrays.items():
        header[name] = {
            "dtype": dtypes[array.dtype.type],
            "shape": list(array.shape),
            "data_offsets": [len(data), len(data) + array.nbytes],
        }
        data += array.tobytes()
    return header, data


def read(blob: bytes, data: bytes | None = None) -> None:
    """Read `blob`: the expected arrays (the valid file's values when its data is unchanged) or a
    WeightFileError, in under a second."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.safetensors"
        path.write_bytes(blob)
        try:
            arrays = read_tensors(path, EXPECTED, ignore=lambda name: name == "skip")
        except WeightFileError as e:
            assert str(e).startswith(str(path)) and len(str(e)) < 1500
        else:
            assert {k: v.shape for k, v in arrays.items()} == EXPECTED
            assert all(v.dtype == np.float32 for v in arrays.values())
    assert time.perf_counter() - start < 1.0


def test_the_valid_file_reads(original):
    header, data = original
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.safetensors"
        path.write_bytes(build(header, data))
        arrays = read_tensors(path, EXPECTED, ignore=lambda name: name == "skip")
    assert np.array_equal(arrays["b"], np.frombuffer(data[48:58], np.float16).astype(np.float32))


field = st.sampled_from(["dtype", "shape", "data_offsets"])
values = st.one_of(
    st.sampled_from(["F32", "F16", "BF16", "F64", "I64", "U8", "BOOL", "Q4", "", None, True, 1.5, {}]),
    st.lists(st.one_of(st.sampled_from(EDGES), st.integers(-10, 100)), max_size=3),
)


@FUZZ
@given(
    edits=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "skip"]), field, values), min_size=1, max_size=3)
)
def test_edited_entries(original, edits):
    """dtypes relabelled, shapes and offsets changed (out of range, overlapping, negative, not numbers)."""
    header, data = original
    header = json.loads(json.dumps(header))
    for name, key, value in edits:
        header[name][key] = value
    read(build(header, data))


@FUZZ
@given(
    change=st.sampled_from(["drop", "extra", "list", "metadata", "dup", "nested", "not-object"]),
    name=st.sampled_from(["a", "b", "c", "skip"]),
)
def test_malformed_headers(original, change, name):
    header, data = original
    header = json.loads(json.dumps(header))
    if change == "drop":
        del header[name]
    elif change == "extra":
        header[name]["extra"] = 1
    elif change == "list":
        header[name] = [header[name]["dtype"]]
    elif change == "metadata":
        header["__metadata__"] = {"format": 1}
    text = json.dumps(header).encode()
    if change == "dup":  # the same name twice: JSON allows it, the last would win
        text = text[:-1] + b', "' + name.encode() + b'": ' + json.dumps(header[name]).encode() + b"}"
    elif change == "nested":
        text = b"[" * 100000 + b"]" * 100000
    elif change == "not-object":
        text = b'"a string"'
    read(struct.pack("<Q", len(text)) + text + data)


@FUZZ
@given(
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1, max_size=4),
    size=st.one_of(st.none(), st.sampled_from([0, 1, 2**31, 2**63, 2**64 - 1]), st.integers(0, 400)),
    cut=st.one_of(st.none(), st.integers(0, 500)),
)
def test_flipped_bytes_sizes_and_truncations(original, flips, size, cut):
    header, data = original
    blob = bytearray(build(header, data))
    for where, xor in flips:
        blob[int(where * (len(blob) - 1))] ^= xor
    if size is not None:
        struct.pack_into("<Q", blob, 0, size)
    read(bytes(blob[:cut] if cut is not None else blob))
