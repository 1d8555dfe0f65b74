"""GGUF files: metadata, tensor shapes and dequantized values, and the errors bad files give.

The files are written here with the `gguf` package's GGUFWriter; quantized blocks are packed by hand
(values checked by hand), and the k-quant formats are also held to the `gguf` package's own dequantizer.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verigrad.errors import WeightFileError
from verigrad.io import GGUFFile, read_gguf
from verigrad.io.gguf import drop_header_pages, stacked_rows
from verigrad.ops.quant import FORMATS, dequantize

Q = gguf.GGMLQuantizationType


def pack_q4_0(d: float, q: np.ndarray) -> bytes:
    """One Q4_0 block: scale d, nibbles q (32 values in 0..15, meaning q - 8)."""
    q = np.asarray(q, np.uint8)
    return np.float16(d).tobytes() + (q[:16] | (q[16:] << 4)).astype(np.uint8).tobytes()


def pack_q4_1(d: float, m: float, q: np.ndarray) -> bytes:
    q = np.asarray(q, np.uint8)
    return np.float16(d).tobytes() + np.float16(m).tobytes() + (q[:16] | (q[16:] << 4)).tobytes()


def pack_q8_0(d: float, q: np.ndarray) -> bytes:
    return np.float16(d).tobytes() + np.asarray(q, np.int8).tobytes()


def write(path, tensors: dict, metadata: dict | None = None, arch: str = "llama") -> None:
    """tensors: name -> array (float types) or (u8 bytes [rows, row bytes], GGML type)."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in (metadata or {}).items():
        if isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_array(key, value)
    for name, value in tensors.items():
        if isinstance(value, tuple):
            w.add_tensor(name, value[0], raw_dtype=value[1])
        else:
            w.add_tensor(name, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rows_q4_0(rng, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Random Q4_0 rows as bytes [n, k/32*18], and their values computed block by block by hand."""
    raw, values = [], []
    for _ in range(n * k // 32):
        d = float(np.float16(rng.uniform(-0.1, 0.1)))
        q = rng.integers(0, 16, 32)
        raw.append(pack_q4_0(d, q))
        values.append(np.float32(d) * (q - 8).astype(np.float32))
    return np.frombuffer(b"".join(raw), np.uint8).reshape(n, -1), np.concatenate(values).reshape(n, k)


@pytest.fixture
def model_file(tmp_path):
    rng = np.random.default_rng(0)
    q4, q4_values = rows_q4_0(rng, 3, 64)
    path = tmp_path / "tiny.gguf"
    tensors = {
        "norm.weight": np.arange(4, dtype=np.float32),
        "emb.weight": rng.standard_normal((5, 4)).astype(np.float16),
        "w.weight": (q4, Q.Q4_0),
    }
    metadata = {
        "llama.block_count": 2,
        "llama.rope.freq_base": 100000.0,
        "tokenizer.ggml.tokens": ["<s>", "a", "é"],
        "tokenizer.ggml.token_type": [3, 1, 1],
        "tokenizer.ggml.add_bos_token": False,
    }
    write(path, tensors, metadata)
    return path, tensors, q4_values


def test_metadata_and_tensors(model_file):
    path, tensors, q4_values = model_file
    f = read_gguf(path)
    assert isinstance(f, GGUFFile) and f.path == path and f.arch == "llama"
    assert f.require("llama.block_count") == 2 and type(f.metadata["llama.block_count"]) is int
    assert f.metadata["llama.rope.freq_base"] == 100000.0
    assert f.metadata["tokenizer.ggml.tokens"] == ["<s>", "a", "é"]
    assert f.metadata["tokenizer.ggml.token_type"] == [3, 1, 1]
    assert f.metadata["tokenizer.ggml.add_bos_token"] is False
    assert set(f.tensors) == set(tensors)
    norm, emb, w = f.tensors["norm.weight"], f.tensors["emb.weight"], f.tensors["w.weight"]
    assert (norm.qtype, norm.shape) == ("f32", (4,)) and np.array_equal(norm.raw, np.arange(4))
    assert (emb.qtype, emb.shape) == ("f16", (5, 4)) and emb.raw.dtype == np.float16
    assert np.array_equal(emb.dequantize(), tensors["emb.weight"].astype(np.float32))
    assert (w.qtype, w.shape, w.raw.shape, w.raw.dtype) == ("q4_0", (3, 64), (3, 36), np.uint8)
    assert np.array_equal(w.raw, tensors["w.weight"][0])
    assert np.array_equal(w.dequantize(), q4_values)


def test_raw_is_a_view_of_the_file(model_file):
    f = read_gguf(model_file[0])
    raw = f.tensors["w.weight"].raw
    assert not raw.flags.writeable and not raw.flags.owndata


def test_stacked_rows_view_adjacent_tensors_and_copy_others(tmp_path):
    """Rows of tensors that follow each other in the file are a view (ffn_gate, ffn_up); others a copy,
    with the same bytes either way."""
    rng = np.random.default_rng(3)
    (a, _), (b, _), (c, _) = (rows_q4_0(rng, n, 64) for n in (8, 16, 8))  # whole 32-byte alignments
    path = tmp_path / "rows.gguf"
    write(path, {"a.weight": (a, Q.Q4_0), "b.weight": (b, Q.Q4_0), "c.weight": (c, Q.Q4_0)})
    f = read_gguf(path)
    ta, tb, tc = (f.tensors[f"{n}.weight"] for n in "abc")
    adjacent = stacked_rows([ta, tb])
    assert adjacent.shape == (24, 36) and not adjacent.flags.owndata and not adjacent.flags.writeable
    assert np.shares_memory(adjacent, ta.raw) and np.array_equal(adjacent, np.concatenate([a, b]))
    apart = stacked_rows([tc, ta])  # not in the file's order: a copy
    assert apart.flags.owndata and np.array_equal(apart, np.concatenate([c, a]))
    assert np.array_equal(ta.raw, a)  # the file's pages dropped from memory read back the same bytes
    assert stacked_rows([tb]) is tb.raw


def test_hand_packed_blocks():
    q = np.arange(32) % 16
    assert np.array_equal(
        dequantize(np.frombuffer(pack_q4_0(0.5, q), np.uint8), "q4_0", (32,)), 0.5 * (q - 8)
    )
    got = dequantize(np.frombuffer(pack_q4_1(0.25, -1.0, q), np.uint8), "q4_1", (1, 32))
    assert np.array_equal(got[0], 0.25 * q - 1.0)
    q8 = np.array([-128, 127, 0, -1] * 8)
    assert np.array_equal(dequantize(np.frombuffer(pack_q8_0(2.0, q8), np.uint8), "q8_0", (32,)), 2.0 * q8)
    bf = np.array([0x3F80, 0xC000, 0x7F80], np.uint16)  # 1, -2, inf
    assert np.array_equal(dequantize(bf.view(np.uint8), "bf16", (3,)), [1.0, -2.0, np.inf])


@pytest.mark.parametrize("qtype", ["q8_0", "q4_0", "q4_1", "q4_k", "q6_k"])
def test_formats_match_the_gguf_package(qtype):
    """Random blocks (finite f16 scales) dequantize to the gguf package's values, bit for bit."""
    fmt = FORMATS[qtype]
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, (4, fmt.nbytes * 2), dtype=np.uint8)
    blocks = raw.reshape(-1, fmt.nbytes)
    halves = {"q6_k": [208], "q4_k": [0, 2], "q4_1": [0, 2]}.get(qtype, [0])
    for at in halves:
        blocks[:, at : at + 2] = np.frombuffer(
            rng.uniform(-1, 1, len(blocks)).astype(np.float16).tobytes(), np.uint8
        ).reshape(-1, 2)
    ours = dequantize(raw, qtype, (4, 2 * fmt.block))
    theirs = gguf.quants.dequantize(raw, Q[qtype.upper()])
    assert ours.dtype == np.float32 and np.array_equal(ours, theirs.astype(np.float32))


def test_k_quants_by_hand():
    """Values of a Q4_K and a Q6_K block, computed from llama.cpp's byte layout."""
    b = np.zeros(144, np.uint8)
    b[0:2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)  # d
    b[2:4] = np.frombuffer(np.float16(0.25).tobytes(), np.uint8)  # dmin
    s = b[4:16]  # sub-blocks 0-3 keep their 6-bit scale/min in bytes 0-3 / 4-7; 4-7 split bytes 8-11
    s[1] = 7 | (2 << 6)  # sub-block 1's scale 7; the top bits are sub-block 5's scale bits 4-5
    s[5] = 3 | (1 << 6)  # sub-block 1's min 3; the top bits are sub-block 5's min bits 4-5
    s[9] = 0x4A  # sub-block 5: scale bits 0-3 = 0xA, min bits 0-3 = 4
    qs = b[16:]  # 4 chunks of 32 bytes: low nibbles are sub-block 2c, high nibbles 2c + 1
    qs[8] = 0x50  # value 32 + 8 (sub-block 1) = 5
    qs[64 + 2] = 0xE1  # value 128 + 2 (sub-block 4) = 1, value 160 + 2 (sub-block 5) = 14
    v = dequantize(b, "q4_k", (256,))
    assert v[40] == 0.5 * 7 * 5 - 0.25 * 3
    assert v[130] == 0.0  # sub-block 4 has scale 0 and min 0
    assert v[162] == 0.5 * (10 | 32) * 14 - 0.25 * (4 | 16)
    c = np.zeros(210, np.uint8)
    c[208:210] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)  # d comes last
    # values 128..255: ql from byte 64, qh from byte 128 + 32, scales from byte 192 + 8
    c[192 + 8 + 6] = np.int8(-3).view(np.uint8)  # scale of quarter 3, values 0..15
    c[64 + 32 + 2] = 0x70  # quarter 3, value 2: low 4 bits 7 (high nibble of ql[32 + 2])
    c[128 + 32 + 2] = 0b10 << 6  # its bits 4-5: 2 (qh[2] bits 6-7)
    w = dequantize(c, "q6_k", (256,))
    assert w[128 + 96 + 2] == 0.5 * -3 * ((7 | (2 << 4)) - 32)
    assert w[0] == 0.0  # scale 0


def test_missing_key_names_file_and_key(model_file):
    f = read_gguf(model_file[0])
    with pytest.raises(WeightFileError, match=r"tiny\.gguf.*'llama\.context_length'"):
        f.require("llama.context_length")
    with pytest.raises(WeightFileError, match=r"tiny\.gguf.*'nope'"):
        f.tensor("nope")


def test_truncated_file(model_file, tmp_path):
    path = model_file[0]
    data = path.read_bytes()
    short = tmp_path / "short.gguf"
    short.write_bytes(data[:-40])  # w.weight, the last tensor, is 108 bytes padded to 128
    with pytest.raises(WeightFileError, match=r"short\.gguf: tensor w\.weight .*needs 108 bytes.*only 88"):
        read_gguf(short)
    short.write_bytes(data[:40])
    with pytest.raises(WeightFileError, match=r"short\.gguf: the file ends inside the header"):
        read_gguf(short)


def _patch_type(path, name: str, new_type: int) -> None:
    """Overwrite the GGML type id of tensor `name` in the header."""
    data = bytearray(path.read_bytes())
    at = data.index(name.encode()) + len(name)
    ndim = struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, at + 4 + 8 * ndim, new_type)
    path.write_bytes(bytes(data))


def test_unknown_and_wrong_types(model_file):
    path = model_file[0]
    _patch_type(path, "w.weight", 99)
    with pytest.raises(WeightFileError, match=r"tiny\.gguf: tensor w\.weight has unknown GGML type 99"):
        read_gguf(path)
    _patch_type(path, "w.weight", int(Q.Q8_0))  # 3x64 q8_0 needs 204 bytes: runs into the next tensor
    with pytest.raises(WeightFileError, match=r"tensor w\.weight .*(truncated|do not match)"):
        read_gguf(path)


def test_unsupported_type_reads_but_does_not_dequantize(tmp_path):
    path = tmp_path / "iq2.gguf"
    write(path, {"w": (np.zeros((2, 66), np.uint8), Q.IQ2_XXS)})
    w = read_gguf(path).tensors["w"]
    assert (w.qtype, w.shape, w.raw.shape) == ("iq2_xxs", (2, 256), (2, 66))
    with pytest.raises(WeightFileError, match=r"iq2\.gguf: tensor w is stored as iq2_xxs"):
        w.dequantize()


def test_block_size_mismatch(tmp_path):
    path = tmp_path / "odd.gguf"
    write(path, {"w": (np.zeros((2, 36), np.uint8), Q.Q4_0)})
    data = bytearray(path.read_bytes())
    at = data.index(b"w", data.index(b"llama") + 5) + 1  # the tensor's dims follow its name
    struct.pack_into("<Q", data, at + 4, 48)  # ne0 = 48 is not a multiple of 32
    path.write_bytes(bytes(data))
    with pytest.raises(WeightFileError, match=r"tensor w has shape \(2, 48\).*multiple of 32"):
        read_gguf(path)


def test_not_a_gguf_file(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"PK\x03\x04 not gguf")
    with pytest.raises(WeightFileError, match="not a GGUF file"):
        read_gguf(path)
    path.write_bytes(b"")
    with pytest.raises(WeightFileError, match="not a GGUF file"):
        read_gguf(path)
    with pytest.raises(WeightFileError, match="no such GGUF file"):
        read_gguf(tmp_path / "missing.gguf")


def test_every_value_type_reads_back(tmp_path):
    """Scalars and arrays of each GGUF value type (arrays of numbers are read in one step, of strings
    without a view per length) come back as the Python values written."""
    V = gguf.GGUFValueType
    numbers = {
        V.UINT8: [0, 255],
        V.INT8: [-128, 127],
        V.UINT16: [0, 65535],
        V.INT16: [-32768, 32767],
        V.UINT32: [0, 2**32 - 1],
        V.INT32: [-(2**31), 2**31 - 1],
        V.UINT64: [0, 2**64 - 1],
        V.INT64: [-(2**63), 2**63 - 1],
        V.FLOAT32: [0.5, -2.25],
        V.FLOAT64: [1e300, -0.1],
        V.BOOL: [True, False],
    }
    w = gguf.GGUFWriter(str(tmp_path / "v.gguf"), "llama")
    for vtype, values in numbers.items():
        w.add_key_value(f"scalar.{vtype.name}", values[1], vtype)
        w.add_key_value(f"array.{vtype.name}", values, V.ARRAY, vtype)
    w.add_key_value("array.STRING", ["", "é", "a b" * 100], V.ARRAY, V.STRING)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    f = read_gguf(tmp_path / "v.gguf")
    for vtype, values in numbers.items():
        scalar, array = f.metadata[f"scalar.{vtype.name}"], f.metadata[f"array.{vtype.name}"]
        assert scalar == values[1] and type(scalar) is type(values[1]), vtype
        assert array == values and [type(v) for v in array] == [type(v) for v in values], vtype
    assert f.metadata["array.STRING"] == ["", "é", "a b" * 100]
    assert f.tensors == {} and f.version == 3


def _strings_file(path, arrays: dict[str, list[str]]) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    for key, values in arrays.items():
        w.add_key_value(key, values, gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@settings(database=None, derandomize=True, max_examples=40, deadline=None)
@given(st.lists(st.lists(st.text(max_size=12), min_size=1, max_size=8), min_size=1, max_size=3))
def test_string_arrays_read_as_the_gguf_package_reads_them(arrays):
    """String arrays are decoded in one call with each length's high byte as separator: one string,
    empty strings, strings holding NUL (read one at a time) and any Unicode give the gguf package's
    values."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.gguf"
        _strings_file(path, {f"a.{i}": values for i, values in enumerate(arrays)})
        expected = {k: f.contents() for k, f in gguf.GGUFReader(path).fields.items() if k.startswith("a.")}
        got = {k: v for k, v in read_gguf(path).metadata.items() if k.startswith("a.")}
    assert got == expected == {f"a.{i}": values for i, values in enumerate(arrays)}


def test_string_array_with_nul_and_not_utf8(tmp_path):
    """A NUL inside a string is kept (not taken for a separator); a string of an array that is not UTF-8
    is refused naming the key."""
    _strings_file(tmp_path / "n.gguf", {"a.nul": ["x\x00y", "\x00", "z"], "a.bad": ["ok", "é"]})
    assert read_gguf(tmp_path / "n.gguf").metadata["a.nul"] == ["x\x00y", "\x00", "z"]
    data = (tmp_path / "n.gguf").read_bytes()
    (tmp_path / "bad.gguf").write_bytes(data.replace("é".encode(), b"\xc3\x28"))
    with pytest.raises(WeightFileError, match=r"bad\.gguf: metadata a\.bad: a string is not UTF-8 text"):
        read_gguf(tmp_path / "bad.gguf")


def _present_pages(array: np.ndarray) -> int:
    """How many pages of `array`'s bytes are in this process's memory (Linux's /proc/self/pagemap)."""
    page = 4096
    first, last = array.ctypes.data // page, (array.ctypes.data + array.nbytes - 1) // page
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * 8)
        entries = np.frombuffer(f.read((last - first + 1) * 8), np.uint64)
    return int((entries >> np.uint64(63)).sum())


@pytest.mark.skipif(not Path("/proc/self/pagemap").exists(), reason="reads Linux's /proc")
def test_the_headers_pages_are_dropped_once_read_and_read_back_the_same(tmp_path):
    """A GGUF header's pages (SmolLM2's tokens and merges: 1.7 MiB) stayed resident for the process's life
    once parsed; drop_header_pages drops them, and the metadata still reads the same from the file."""
    tokens = [f"token number {i:06d} of the vocabulary" for i in range(30000)]  # ~1.2 MiB of header
    path = tmp_path / "header.gguf"
    write(path, {"w.weight": np.ones((4, 8), np.float32)}, {"tokenizer.ggml.tokens": tokens})
    f = read_gguf(path)
    raw = f.tensors["w.weight"].raw
    header = raw.base
    while isinstance(header.base, np.ndarray):
        header = header.base
    header = header[: raw.ctypes.data - header.ctypes.data]
    assert f.get("tokenizer.ggml.tokens")[-1] == tokens[-1]  # read: resident
    assert _present_pages(header) >= header.nbytes // 4096 - 1
    drop_header_pages(f)
    assert _present_pages(header) <= 1  # the page the first tensor starts in may stay
    assert f.get("tokenizer.ggml.tokens") == tokens and np.array_equal(raw, np.ones((4, 8), np.float32))


def test_loading_a_model_drops_its_headers_pages_after_the_tokenizer_and_the_model_are_made(
    tmp_path, monkeypatch
):
    from llama_gguf import write_llama_gguf

    from verigrad.models import catalog

    dropped = []
    drop = catalog.drop_header_pages
    monkeypatch.setattr(catalog, "drop_header_pages", lambda f: (dropped.append(f.path), drop(f)))
    _, tokenizer = catalog.load_language_model(write_llama_gguf(tmp_path / "tiny.gguf"))
    assert dropped == [tmp_path / "tiny.gguf"]
    assert tokenizer.decode(tokenizer.encode("hello world")) == "hello world"
