"""Hostile and careless GGUF files: each is refused with a short WeightFileError naming the file and the
field, quickly and before anything large is allocated, or (a wrong context length) costs nothing.

`tiny_llama` writes a valid two-block Llama with every format the loader meets (f32, f16, q4_0, q4_1,
q8_0, q4_k, q6_k); each test corrupts one field or a few bytes of it. The fuzz tests in tests/fuzz/
mutate the same file at random.
"""

from __future__ import annotations

import io
import math
import mmap
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import gguf
import numpy as np
import pytest

import verigrad as vg
from verigrad.errors import WeightFileError
from verigrad.io.gguf import _CheckedReader, read_gguf
from verigrad.models import llama
from verigrad.models.catalog import load_gguf
from verigrad.models.llama import MAX_CONTEXT, Llama
from verigrad.nn.quant import QLinear

Q = gguf.GGMLQuantizationType
V = gguf.GGUFValueType
VOCAB, DIM, HEADS, KV_HEADS, FFN, LAYERS = 11, 64, 4, 2, 256, 2
BLOCK_TYPES = {  # the formats of each block's tensors; ffn_down (rows of 256) is a k-quant
    "attn_norm": Q.F32,
    "attn_q": Q.Q4_0,
    "attn_k": Q.Q4_0,
    "attn_v": Q.Q4_0,
    "attn_output": Q.Q4_1,
    "ffn_norm": Q.F32,
    "ffn_gate": Q.Q8_0,
    "ffn_up": Q.Q8_0,
    "ffn_down": None,  # q4_k in block 0, q6_k in block 1
}
SHAPES = {
    "attn_norm": (DIM,),
    "attn_q": (HEADS * DIM // HEADS, DIM),
    "attn_k": (KV_HEADS * DIM // HEADS, DIM),
    "attn_v": (KV_HEADS * DIM // HEADS, DIM),
    "attn_output": (DIM, DIM),
    "ffn_norm": (DIM,),
    "ffn_gate": (FFN, DIM),
    "ffn_up": (FFN, DIM),
    "ffn_down": (DIM, FFN),
}


def k_quant_rows(rng: np.random.Generator, rows: int, qtype: Q) -> np.ndarray:
    """Random q4_k or q6_k rows of 256 values (bytes [rows, block bytes]) with small finite scales."""
    nbytes = gguf.GGML_QUANT_SIZES[qtype][1]
    raw = rng.integers(0, 256, (rows, nbytes), dtype=np.uint8)
    scale = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    for at in [0, 2] if qtype == Q.Q4_K else [208]:  # d (and dmin) of each block
        raw[:, at : at + 2] = scale
    return raw


def tiny_tensors(seed: int = 0) -> dict[str, tuple[np.ndarray, Q]]:
    """The tensors of the tiny model in the file's order: name -> (array or bytes, GGML type)."""
    rng = np.random.default_rng(seed)
    out = {"token_embd.weight": (rng.normal(0, 0.5, (VOCAB, DIM)).astype(np.float16), Q.F16)}
    for i in range(LAYERS):
        for part, qtype in BLOCK_TYPES.items():
            shape = SHAPES[part]
            if part == "ffn_down":
                qtype = (Q.Q4_K, Q.Q6_K)[i % 2]
                out[f"blk.{i}.{part}.weight"] = (k_quant_rows(rng, shape[0], qtype), qtype)
            elif qtype == Q.F32:
                out[f"blk.{i}.{part}.weight"] = (rng.uniform(0.5, 1.5, shape).astype(np.float32), qtype)
            else:
                values = rng.normal(0, 0.2, shape).astype(np.float32)
                out[f"blk.{i}.{part}.weight"] = (gguf.quants.quantize(values, qtype), qtype)
    out["output_norm.weight"] = (np.ones(DIM, np.float32), Q.F32)
    # 11 rows of 68 bytes: 748 bytes, padded to 768
    out["output.weight"] = (
        gguf.quants.quantize(rng.normal(0, 0.2, (VOCAB, DIM)).astype(np.float32), Q.Q8_0),
        Q.Q8_0,
    )
    return out


def metadata(**changes) -> dict:
    """The tiny model's hyperparameters, with `changes` (None drops a key)."""
    keys = {
        "llama.context_length": 64,
        "llama.embedding_length": DIM,
        "llama.block_count": LAYERS,
        "llama.feed_forward_length": FFN,
        "llama.attention.head_count": HEADS,
        "llama.attention.head_count_kv": KV_HEADS,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "llama.rope.freq_base": 10000.0,
    }
    keys.update({k.replace("__", "."): v for k, v in changes.items()})
    return {k: v for k, v in keys.items() if v is not None}


def tiny_llama(
    path: Path, meta: dict | None = None, tensors: dict | None = None, arch: str = "llama"
) -> Path:
    """Write the tiny model (or `tensors`) with `meta` (an int is a u32, a float an f32, (value, type)
    a value of that GGUF type)."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in (metadata() if meta is None else meta).items():
        if isinstance(value, tuple):
            w.add_key_value(key, value[0], value[1], *value[2:])
        elif isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, list):
            w.add_array(key, value)
        else:
            w.add_float32(key, value)
    for name, (array, qtype) in (tiny_tensors() if tensors is None else tensors).items():
        if qtype in (Q.F32, Q.F16):
            w.add_tensor(name, array)
        else:
            w.add_tensor(name, array, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def tensor_info(data: bytes | bytearray, name: str) -> tuple[int, list[int], int]:
    """(where the tensor's dims count is, its dims, where its type id is) in the header."""
    at = bytes(data).index(struct.pack("<Q", len(name)) + name.encode()) + 8 + len(name)
    (ndim,) = struct.unpack_from("<I", data, at)
    dims = list(struct.unpack_from(f"<{ndim}Q", data, at + 4))
    return at, dims, at + 4 + 8 * ndim


def patch(path: Path, name: str, *, qtype: int | None = None, offset_delta: int = 0, dims=None) -> None:
    """Overwrite tensor `name`'s type id, shift its data offset, or overwrite its dims, in place."""
    data = bytearray(path.read_bytes())
    at, old_dims, type_at = tensor_info(data, name)
    if qtype is not None:
        struct.pack_into("<I", data, type_at, qtype)
    if offset_delta:
        (offset,) = struct.unpack_from("<Q", data, type_at + 4)
        struct.pack_into("<Q", data, type_at + 4, offset + offset_delta)
    if dims is not None:
        struct.pack_into(f"<{len(old_dims)}Q", data, at + 4, *dims)
    path.write_bytes(bytes(data))


def refused(path: Path, match: str, load=Llama.from_gguf) -> WeightFileError:
    """The WeightFileError loading `path` raises: in under a second and 100 MB, short, naming the file and
    matching `match`."""
    start = time.perf_counter()
    tracemalloc.start()
    try:
        with pytest.raises(WeightFileError, match=match) as info:
            load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 1.0 and peak < 100 * 2**20
    message = str(info.value)
    assert message.startswith(str(path)) and len(message) < 600, message[:1000]
    return info.value


@pytest.fixture
def tiny(tmp_path) -> Path:
    return tiny_llama(tmp_path / "tiny.gguf")


def base_of(array: np.ndarray):
    """What an array's chain of views ends at (stacked rows are views through NumPy's DummyArray)."""
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def test_the_tiny_model_loads_memory_mapped_and_runs(tiny):
    model = Llama.from_gguf(tiny)
    qlinears = [m for m in model.modules() if isinstance(m, QLinear)]
    assert {m.qtype for m in qlinears} == {"q4_0", "q4_1", "q8_0", "q4_k", "q6_k"}
    for m in qlinears:  # the blocks are views of the mapped file: nothing copied at load
        weight = m.weight.numpy()
        assert not weight.flags.owndata and isinstance(base_of(weight), mmap.mmap)
    logits = model(np.array([[1, 2, 3]])).numpy()
    assert logits.shape == (1, 3, VOCAB) and np.isfinite(logits).all()


# tensors: where they lie, their types and shapes -----------------------------------------------------
def test_swapped_offsets_are_refused(tiny):
    """ffn_gate and ffn_up have the same size: their offsets swapped, both lie in the file without
    overlapping, and the old reader loaded them swapped."""
    data = bytearray(tiny.read_bytes())
    (_, _, gate), (_, _, up) = (
        tensor_info(data, "blk.0.ffn_gate.weight"),
        tensor_info(data, "blk.0.ffn_up.weight"),
    )
    a, b = data[gate + 4 : gate + 12], data[up + 4 : up + 12]
    data[gate + 4 : gate + 12], data[up + 4 : up + 12] = b, a
    tiny.write_bytes(bytes(data))
    refused(tiny, r"tensor blk\.0\.ffn_gate\.weight starts at data offset \d+, but tensor blk\.0\.ffn_norm")


def test_a_shifted_offset_is_refused(tiny):
    """output.weight (748 bytes padded to 768) moved 4 bytes into its padding: inside the file, no
    overlap; the old reader loaded weights 4 bytes off."""
    patch(tiny, "output.weight", offset_delta=4)
    refused(
        tiny, r"tensor output\.weight starts at data offset \d+, but tensor output_norm\.weight before it"
    )


@pytest.mark.parametrize(
    "name, qtype",
    [
        ("blk.0.attn_output.weight", Q.Q4_1 + 0 and Q.Q4_0),  # 2560 bytes read as 2304
        ("blk.0.attn_norm.weight", Q.F16),  # f32 read as f16: 256 bytes as 128
        ("blk.0.ffn_down.weight", Q.Q6_K),  # q4_k's 144-byte blocks read as 210-byte ones
        ("output.weight", Q.Q4_0),  # the last tensor, smaller: bytes left after it
    ],
)
def test_a_relabelled_type_is_refused(tiny, name, qtype):
    patch(tiny, name, qtype=int(qtype))
    refused(tiny, r"(starts at data offset|bytes after its last tensor output\.weight|needs \d+ bytes)")


@pytest.mark.parametrize("dims", [[2**62, 2**62], [2**32, 2**32], [DIM, 2**62]])
def test_huge_dims_are_refused_without_overflow(tiny, dims):
    patch(tiny, "blk.0.attn_q.weight", dims=dims)
    refused(
        tiny,
        r"tensor blk\.0\.attn_q\.weight (has shape .* elements, more than 2\^63|\(q4_0.*needs)",
        read_gguf,
    )


def test_a_zero_dim_is_refused(tiny):
    patch(tiny, "blk.0.attn_q.weight", dims=[DIM, 0])
    refused(
        tiny,
        r"tensor blk\.0\.attn_q\.weight has shape \(0, 64\): every dimension must be at least 1",
        read_gguf,
    )


def test_more_than_four_dims_are_refused(tmp_path):
    path = tiny_llama(tmp_path / "5d.gguf", {}, {"a": (np.zeros((1, 1, 1, 2, 32), np.float32), Q.F32)})
    refused(path, r"tensor a: 5 dimensions, at most 4", read_gguf)


def test_an_unknown_type_and_a_long_name_are_refused(tmp_path, tiny):
    patch(tiny, "output.weight", qtype=1234)
    refused(tiny, r"tensor output\.weight has unknown GGML type 1234", read_gguf)
    path = tiny_llama(tmp_path / "long.gguf", {}, {"n" * 64: (np.zeros(32, np.float32), Q.F32)})
    refused(path, r"the name is 64 bytes long, llama\.cpp allows 63", read_gguf)


def test_missing_unused_and_misshapen_tensors_are_named(tmp_path):
    tensors = tiny_tensors()
    del tensors["blk.1.ffn_up.weight"]
    tensors["blk.7.extra.weight"] = (np.zeros(32, np.float32), Q.F32)
    tensors["blk.0.attn_k.weight"] = tensors["blk.0.attn_q.weight"]
    path = tiny_llama(tmp_path / "t.gguf", tensors=tensors)
    refused(
        path, r"missing tensor blk\.1\.ffn_up\.weight; unexpected tensor blk\.7\.extra\.weight; tensor blk\.0"
    )


# hyperparameters --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key, value, match",
    [
        ("llama.block_count", 100000, r"llama\.block_count is 100000; it must be in 1\.\.2$"),
        ("llama.block_count", 0, r"llama\.block_count is 0"),
        ("llama.attention.head_count", 0, r"llama\.attention\.head_count is 0"),
        ("llama.attention.head_count", 5, r"head_count \(5\) must divide llama\.embedding_length \(64\)"),
        ("llama.attention.head_count_kv", 3, r"head_count_kv \(3\) must divide llama\.attention\.head_count"),
        ("llama.attention.head_count_kv", 0, r"llama\.attention\.head_count_kv is 0"),
        (
            "llama.embedding_length",
            63,
            r"llama\.embedding_length is 63, but token_embd\.weight has rows of 64",
        ),
        ("llama.vocab_size", 12, r"llama\.vocab_size is 12, but token_embd\.weight has 11 rows"),
        ("llama.rope.freq_base", 0.0, r"llama\.rope\.freq_base is 0\.0; it must be above 0 and finite"),
        ("llama.rope.freq_base", -1.0, r"llama\.rope\.freq_base is -1\.0"),
        ("llama.rope.freq_base", math.nan, r"llama\.rope\.freq_base is nan"),
        ("llama.rope.freq_base", math.inf, r"llama\.rope\.freq_base is inf"),
        (
            "llama.attention.layer_norm_rms_epsilon",
            0.0,
            r"layer_norm_rms_epsilon is 0\.0; it must be above 0",
        ),
        ("llama.attention.layer_norm_rms_epsilon", math.nan, r"layer_norm_rms_epsilon is nan"),
        ("llama.context_length", 0, r"llama\.context_length is 0"),
        ("llama.context_length", 2**31, r"llama\.context_length is 2147483648; it must be in 1\.\.16777216"),
        ("llama.rope.dimension_count", 15, r"llama\.rope\.dimension_count is 15; RoPE needs it even"),
        ("llama.block_count", "2", r"llama\.block_count must be an integer, found 2"),
        ("llama.block_count", 2.0, r"llama\.block_count must be an integer, found 2\.0"),
        (
            "llama.attention.layer_norm_rms_epsilon",
            "LONG",
            r"must be a number, found xxx.*\(1000000 characters\)$",
        ),
        ("llama.feed_forward_length", None, r"the GGUF metadata has no key 'llama\.feed_forward_length'"),
    ],
)
def test_hyperparameters_out_of_range_are_refused_before_allocating(tmp_path, key, value, match):
    value = "x" * 10**6 if value == "LONG" else value  # made here: a parameter's id would show it all
    path = tiny_llama(tmp_path / "h.gguf", metadata(**{key: value}))
    refused(path, match)


def test_a_flipped_bit_in_context_length_allocates_only_what_runs(tmp_path):
    """2^24 positions (within range) of RoPE tables would take 2 GB of f64 temporaries: the tables cover
    the positions run."""
    path = tiny_llama(tmp_path / "c.gguf", metadata(llama__context_length=MAX_CONTEXT))
    tracemalloc.start()
    try:
        model = Llama.from_gguf(path)
        logits = model(np.array([[1, 2, 3]])).numpy()
        cache = model.new_cache(capacity=100)
        model(np.array([[1, 2, 3]]), cache)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20 and np.isfinite(logits).all()
    assert model.context_length == MAX_CONTEXT and model.rope[0].shape[0] == 128  # 100 positions, doubled


def test_rope_tables_grow_with_the_positions_and_give_the_same_logits(tiny):
    model = Llama.from_gguf(tiny)
    ids = np.array([[1, 2, 3, 4, 5, 6]])
    short = model.new_cache(capacity=8)
    first = np.concatenate([model(ids[:, :3], short).numpy(), model(ids[:, 3:4], short).numpy()], axis=1)
    assert model.rope[0].shape[0] == 64
    long = model.new_cache(capacity=64)  # the same positions after the tables grew: the same values
    model.rope_rows(300)
    assert model.rope[0].shape[0] == 512
    again = np.concatenate([model(ids[:, :3], long).numpy(), model(ids[:, 3:4], long).numpy()], axis=1)
    np.testing.assert_array_equal(first, again)


def test_rope_tables_grown_from_two_threads_cover_both(tiny, monkeypatch):
    """A short table that takes longer to make than a long one (made slow here) must not replace it."""
    model = Llama.from_gguf(tiny)
    make = llama.rope_tables

    def slow_when_short(positions: int, *sizes: float):
        if positions <= 64:
            time.sleep(0.2)
        return make(positions, *sizes)

    monkeypatch.setattr(llama, "rope_tables", slow_when_short)
    got = {}
    threads = [
        threading.Thread(target=lambda n=n: got.update({n: model.rope_rows(n)[0].shape[0]}))
        for n in (10, 1000)
    ]
    threads[0].start()
    time.sleep(0.05)  # the short table is being made
    threads[1].start()
    for t in threads:
        t.join()
    assert got[10] >= 10 and got[1000] >= 1000 and model.rope[0].shape[0] == 1024


def test_a_long_value_is_shown_short(tmp_path):
    path = tiny_llama(tmp_path / "a.gguf", arch="x" * 10**6)
    error = refused(path, r"architecture xxx.*\(1000000 characters\) is not supported", load_gguf)
    assert len(str(error)) < 300


# the header's structure ------------------------------------------------------------------------------
def header(*kvs: bytes, n_tensors: int = 0, n_kv: int | None = None) -> bytes:
    """A GGUF v3 header with these key/value records (and no tensors unless a count is forced)."""
    count = len(kvs) if n_kv is None else n_kv
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, count) + b"".join(kvs)


def text(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def test_deeply_nested_arrays_are_refused(tmp_path):
    """An array of arrays 5000 deep: the old reader recursed until a RecursionError."""
    value = struct.pack("<IIQ", 9, 9, 1) + struct.pack("<IQ", 9, 1) * 5000 + struct.pack("<IQI", 4, 1, 7)
    path = tmp_path / "deep.gguf"
    path.write_bytes(header(text(b"x") + value))
    refused(path, r"metadata x: an array of arrays \(llama\.cpp reads none\)", read_gguf)


@pytest.mark.parametrize(
    "record, match",
    [
        (text(b"x") + struct.pack("<IIQ", 9, 8, 2**62), r"metadata x: \d+ strings need at least"),
        (text(b"x") + struct.pack("<IIQ", 9, 4, 2**62), r"metadata x needs bytes \d+\.\.\d+, the file has"),
        (text(b"x") + struct.pack("<IQ", 8, 2**62), r"metadata x needs bytes"),
        (struct.pack("<Q", 2**62) + b"x", r"metadata key 0 needs bytes"),
        (text(b"x") + struct.pack("<I", 13), r"metadata x: unknown value type 13"),
        (text(b"\xff\xfe") + struct.pack("<II", 4, 1), r"metadata key 0: not UTF-8 text"),
        (text(b"x") + struct.pack("<I", 8) + text(b"\xff"), r"metadata x: a string is not UTF-8 text"),
    ],
    ids=["strings", "numbers", "string", "key", "type", "utf8-key", "utf8-value"],
)
def test_lengths_past_the_file_and_bad_values_are_refused(tmp_path, record, match):
    path = tmp_path / "h.gguf"
    path.write_bytes(header(record) + bytes(64))
    refused(path, match, read_gguf)


def test_a_huge_bad_key_is_shown_short(tmp_path):
    """30 MB of bytes that are not UTF-8 as a key: the message shows a few (a repr of all is 120 MB)."""
    path = tmp_path / "k.gguf"
    path.write_bytes(header(text(b"\xff" * 3 * 10**7) + struct.pack("<II", 4, 1)))
    refused(path, r"metadata key 0: not UTF-8 text: b'\\xff\\xff.*'\.\.\. \(30000000 bytes\)$", read_gguf)


def test_huge_counts_are_refused(tmp_path):
    path = tmp_path / "c.gguf"
    path.write_bytes(header(n_kv=2**62) + bytes(64))
    refused(path, r"the file ends inside the header \(the header: \d+ metadata keys need at least", read_gguf)
    path.write_bytes(header(n_tensors=2**62) + bytes(64))
    refused(path, r"\d+ tensors need at least", read_gguf)


def test_repeated_keys_and_tensors_are_refused(tmp_path):
    record = text(b"x") + struct.pack("<II", 4, 1)
    path = tmp_path / "r.gguf"
    path.write_bytes(header(record, record))
    refused(path, r"metadata x: the key appears twice", read_gguf)
    path = tiny_llama(tmp_path / "t.gguf", {}, {"a": (np.zeros(32, np.float32), Q.F32)})
    data = path.read_bytes()
    info = data.index(text(b"a"))
    end = info + 8 + 1 + 4 + 8 + 4 + 8
    twice = data[:8] + struct.pack("<Q", 2) + data[16:end] + data[info:end] + data[end:]  # a second `a`
    path.write_bytes(twice)
    refused(path, r"tensor a appears twice", read_gguf)


@pytest.mark.parametrize("alignment", [0, 48, (64, V.UINT64)])
def test_a_bad_alignment_is_refused(tmp_path, alignment):
    path = tiny_llama(
        tmp_path / "a.gguf", {"general.alignment": alignment}, {"a": (np.zeros(32, np.float32), Q.F32)}
    )
    refused(path, r"alignment", read_gguf)


def test_not_gguf_truncated_and_big_endian(tmp_path, tiny):
    data = tiny.read_bytes()
    for cut in (3, 10, 30, 300, len(data) // 2, len(data) - 21):  # the last 20 bytes are padding
        path = tmp_path / f"cut{cut}.gguf"
        path.write_bytes(data[:cut])
        refused(path, r"(not a GGUF file|ends inside the header|truncated)", read_gguf)
    path = tmp_path / "be.gguf"
    path.write_bytes(b"GGUF" + struct.pack(">I", 3) + data[8:])
    refused(
        path,
        r"GGUF version 50331648 is not supported \(verigrad reads little-endian versions 2 and 3\)",
        read_gguf,
    )


def test_metadata_and_tensors_equal_the_gguf_packages(tmp_path):
    """The test-written model's whole metadata and its tensors are what the gguf package's reader reads."""
    path = tiny_llama(tmp_path / "m.gguf")
    ours, reader = read_gguf(path), gguf.GGUFReader(path)
    assert ours.metadata == {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert [(t.name, t.shape, t.qtype) for t in ours.tensors.values()] == [
        (t.name, tuple(reversed(t.shape.tolist())), t.tensor_type.name.lower()) for t in reader.tensors
    ]
    for t, theirs in zip(ours.tensors.values(), reader.tensors):  # the same bytes of the file
        np.testing.assert_array_equal(
            t.raw.reshape(-1).view(np.uint8), theirs.data.reshape(-1).view(np.uint8)
        )
    assert {k: list(v) for k, v in _CheckedReader(path).types.items()} == {
        k: [int(t) for t in f.types] for k, f in reader.fields.items() if not k.startswith("GGUF.")
    }


def test_loading_a_gguf_model_imports_neither_the_gguf_package_nor_jinja2(tmp_path):
    """A load reads the header itself (the gguf package and its imports took a third of SmolLM2's load)
    and leaves the chat template's jinja2 to the first chat; the model gives the same logits as one loaded
    where they are imported (the bytes are the gguf package's: the test above)."""
    path = tiny_llama(tmp_path / "m.gguf")
    code = (
        "import sys, numpy as np, verigrad as vg\n"
        "import verigrad.models.catalog  # what a load imports, the tokenizer's module among them\n"
        "from verigrad.models.llama import Llama\n"
        f"model = Llama.from_gguf({str(path)!r})\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'gguf', 'jinja2', 'yaml'}))\n"
        "with vg.no_grad():\n"
        "    np.save(sys.stdout.buffer, model(np.asarray([[1, 2, 3]])).numpy())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    first, _, rest = done.stdout.partition(b"\n")
    assert first == b"[]"
    with vg.no_grad():  # in this process, where the gguf package is imported
        want = llama.Llama.from_gguf(path)(np.asarray([[1, 2, 3]])).numpy()
    got = np.load(io.BytesIO(rest))
    np.testing.assert_array_equal(got, want)
