"""Random corruptions of a small valid GGUF file: every one either loads, and then the model runs a forward
pass (its logits finite or not), or is refused with a WeightFileError; nothing else, quickly.

The file is tests/test_gguf_hostile.py's tiny Llama (f32, f16, q4_0, q4_1, q8_0, q4_k and q6_k tensors).
Mutations aim at the header (where a bad value changes what is read) more than at the weights.
"""

from __future__ import annotations

import struct
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from gguf_header import header_fields
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_gguf_hostile import tiny_llama

from verigrad.errors import WeightFileError
from verigrad.models.llama import Llama

FUZZ = settings(
    max_examples=50,
    deadline=None,  # each case is timed below (< 1 s), the first one includes compiling kernels
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
EDGES = [0, 1, 2, 31, 32, 255, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63, 2**64 - 1]


@pytest.fixture(scope="module")
def original() -> tuple[bytes, int]:
    """The valid file's bytes and where its header (metadata and tensor infos) ends."""
    with tempfile.TemporaryDirectory() as folder:
        data = tiny_llama(Path(folder) / "tiny.gguf").read_bytes()
    header = data.rindex(b"output.weight") + len(b"output.weight") + 4 + 16 + 4 + 8
    return data, header


@pytest.fixture(scope="module")
def fields() -> list[tuple[int, int]]:
    """(where, width) of every 4- or 8-byte number of the valid file's header: the counts, each key's
    value type, string and array lengths and scalar values, each tensor's dims count, dims, type and
    offset (found with the gguf package's own reader)."""
    with tempfile.TemporaryDirectory() as folder:
        found, _ = header_fields(tiny_llama(Path(folder) / "tiny.gguf"))
    return found


def load_and_run(data: bytes) -> None:
    """Load `data` as a GGUF file: a WeightFileError, or a model whose forward pass runs."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutant.gguf"
        path.write_bytes(data)
        try:
            model = Llama.from_gguf(path)
        except WeightFileError as e:
            assert len(str(e)) < 1000
        else:
            with np.errstate(all="ignore"):
                logits = model(np.array([[0, 1, 2]])).numpy()
            assert logits.shape == (1, 3, model.vocab_size)
            del model
    assert time.perf_counter() - start < 1.0


@FUZZ
@given(
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1, max_size=4), data=st.data()
)
def test_flipped_bytes(original, flips, data):
    blob, header = original
    mutant = bytearray(blob)
    for where, xor in flips:
        in_header = data.draw(st.booleans())
        at = int(where * ((header if in_header else len(blob)) - 1))
        mutant[at] ^= xor
    load_and_run(bytes(mutant))


@FUZZ
@given(cut=st.integers(0, 2**20))
def test_truncated(original, cut):
    blob, header = original
    load_and_run(blob[: cut % (header + 64) if cut % 2 else cut % len(blob)])


numbers = st.one_of(st.sampled_from(EDGES), st.integers(0, 2**64 - 1))


@FUZZ
@given(edits=st.lists(st.tuples(st.floats(0, 1), numbers), min_size=1, max_size=2))
def test_edited_fields(original, fields, edits):
    """One or two numbers of the header (a count, length, type, dim, offset or hyperparameter) overwritten."""
    mutant = bytearray(original[0])
    for where, value in edits:
        at, width = fields[int(where * (len(fields) - 1))]
        struct.pack_into("<I" if width == 4 else "<Q", mutant, at, value % 2 ** (8 * width))
    load_and_run(bytes(mutant))
