"""A GGUF file's byte-level tokenizer built from the file's bytes (`verigrad.io.byte_level`: no Python string
per token, the BPE read from cached vocab.json and merges.txt) against the one built from Python lists (a
`GGUFFile` of plain metadata): the same ids, bytes and special tokens; the cache's files, their key, and a
cache that cannot be written; GGUF string arrays read without decoding."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lm_fakes import MERGES, vocabulary, write_tokenizer_gguf

import verigrad.io.byte_level as byte_level
from verigrad.errors import WeightFileError
from verigrad.io.gguf import GGUFFile, Metadata, StringArray, read_gguf
from verigrad.io.tokenizer import Tokenizer, byte_alphabet

TEXTS = [
    "hello world",
    '  hello\n\n\tworld "quoted" back\\slash  ',
    "héllo wörld — ünïcödé 日本語 😀👍🏽",
    "<|im_start|>user\nhi<|im_end|>\n<think>",
    "",
]


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("VERIGRAD_TOKENIZER_CACHE", raising=False)  # the suite's (tests/conftest.py)
    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def from_bytes(path: Path) -> Tokenizer:
    """The tokenizer of the file's bytes through the `tokenizers` library (not the plain-text encoder, which
    tests/test_bpe.py holds to it)."""
    return Tokenizer.from_gguf(path, plain=False)


def from_lists(path: Path) -> Tokenizer:
    """The tokenizer of the file's metadata as plain Python values (the path through Python lists)."""
    read = read_gguf(path)
    return Tokenizer.from_gguf(GGUFFile(read.path, read.version, dict(read.metadata), read.tensors))


def same(a: Tokenizer, b: Tokenizer, texts=TEXTS) -> None:
    assert a.vocab_size == b.vocab_size
    assert list(a._bytes) == list(b._bytes)
    assert a._unspellable == b._unspellable
    assert (a.special_tokens, a.special_ids, a.end_ids) == (b.special_tokens, b.special_ids, b.end_ids)
    assert a.backend.get_added_tokens_decoder() == b.backend.get_added_tokens_decoder()
    for text in texts:
        assert a.encode(text) == b.encode(text)
        assert a.decode(a.encode(text)) == b.decode(b.encode(text))


def cached_files(cache: Path) -> list[Path]:
    return sorted((cache / "tokenizers").glob("*/*"))


def test_bytes_and_lists_give_the_same_tokenizer(tmp_path, own_cache):
    path = write_tokenizer_gguf(tmp_path / "t.gguf")
    fast = from_bytes(path)
    # the bytes' path ran
    assert [p.name for p in cached_files(own_cache)] == ["merges.txt", "sha256", "vocab.json"]
    same(fast, from_lists(path))
    assert fast.special_tokens == {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}


@settings(database=None, derandomize=True, max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_bytes_and_lists_encode_any_text_alike(text):
    tokenizers = _pair()
    try:
        expected = tokenizers[1].encode(text)
    except (WeightFileError, ValueError) as e:
        with pytest.raises(type(e)):
            tokenizers[0].encode(text)
        return
    assert tokenizers[0].encode(text) == expected


_PAIR: list[Tokenizer] = []


def _pair() -> list[Tokenizer]:
    """(from bytes, from lists) of the fakes' tokenizer, built once for the hypothesis test."""
    if not _PAIR:
        import tempfile

        folder = Path(tempfile.mkdtemp())
        path = write_tokenizer_gguf(folder / "t.gguf")
        _PAIR.extend([from_bytes(path), from_lists(path)])
    return _PAIR


def test_a_second_load_reads_the_cached_files(tmp_path, own_cache, monkeypatch):
    path = write_tokenizer_gguf(tmp_path / "t.gguf")
    first = from_bytes(path)
    stamps = [p.stat().st_mtime_ns for p in cached_files(own_cache)]

    def unwritten(*_):
        raise AssertionError("the files were written again")

    monkeypatch.setattr(byte_level, "_vocab_json", unwritten)
    monkeypatch.setattr(byte_level, "_merges_txt", unwritten)
    same(from_bytes(path), first)
    assert [p.stat().st_mtime_ns for p in cached_files(own_cache)] == stamps


def test_damaged_cache_files_are_written_again(tmp_path, own_cache):
    path = write_tokenizer_gguf(tmp_path / "t.gguf")
    expected = from_bytes(path)
    vocab = next(p for p in cached_files(own_cache) if p.name == "vocab.json")
    vocab.write_text('{"a": ')  # cut short: not the bytes of its SHA-256 in the folder's sha256
    same(from_bytes(path), expected)  # written again before the library reads it
    assert json.loads(vocab.read_text())["Ġ"] == expected.backend.token_to_id("Ġ")


def test_a_changed_file_gets_files_of_its_own(tmp_path, own_cache):
    """The same path rewritten with other merges: the cache's key is the tokens' and merges' bytes, so
    the new merges are read (a cache keyed by the path would give the old ids)."""
    path = write_tokenizer_gguf(tmp_path / "t.gguf")
    before = from_bytes(path).encode("hello world")
    write_tokenizer_gguf(path, merges=MERGES[:2])
    after = from_bytes(path)
    assert after.encode("hello world") != before
    same(after, from_lists(path))
    assert len({p.parent for p in cached_files(own_cache)}) == 2


def test_a_cache_that_cannot_be_written_builds_in_a_temporary_folder(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path / "file"))
    path = write_tokenizer_gguf(tmp_path / "t.gguf")
    same(from_bytes(path), from_lists(path))


@pytest.mark.parametrize(
    ("merges", "says"),
    [
        (["h e l"], "'h e l' is not two tokens"),
        (["q z"], "Token `qz` out of vocabulary"),
        (["h e", "#version x"], "Token `#version` out of vocabulary"),  # not skipped as a header line
    ],
)
def test_bad_merges_are_refused_as_by_the_lists(tmp_path, merges, says):
    path = write_tokenizer_gguf(tmp_path / "b.gguf", merges=merges)
    with pytest.raises(WeightFileError, match=r"b\.gguf: ") as e:
        from_bytes(path)
    assert says in str(e.value)


def test_repeated_tokens_are_refused_from_the_bytes_too(tmp_path):
    tokens, types = vocabulary()
    path = write_tokenizer_gguf(tmp_path / "r.gguf", tokens=[*tokens, "a"], types=[*types, 1])
    with pytest.raises(WeightFileError, match=r"r\.gguf: tokenizer\.ggml\.tokens has repeated tokens"):
        from_bytes(path)


def test_tokens_outside_the_alphabet_take_the_lists_path(tmp_path, own_cache):
    """A token written in UTF-8, not GPT-2's alphabet (some converters do): respelled, as before."""
    tokens, types = vocabulary()
    path = write_tokenizer_gguf(tmp_path / "u.gguf", tokens=[*tokens, "日!"], types=[*types, 1])
    tok = from_bytes(path)
    assert cached_files(own_cache) == []
    same(tok, from_lists(path))
    assert tok.token_bytes(len(tokens)) == "日!".encode()


def _strings(items: list[str]) -> StringArray:
    data = b"".join(len(s.encode()).to_bytes(8, "little") + s.encode() for s in items)
    lengths = np.array([len(s.encode()) for s in items], np.int64)
    return StringArray(np.frombuffer(data, np.uint8), lengths)


@settings(database=None, derandomize=True, max_examples=200)
@given(st.lists(st.text(max_size=6), max_size=8))
def test_string_arrays_join_and_decode_as_one_at_a_time(items):
    strings = _strings(items)
    encoded = [s.encode() for s in items]
    assert strings.joined().tobytes() == b"".join(encoded)
    assert strings.joined(separator=True).tobytes() == b"\x00".join(encoded)
    assert strings.decode() == items
    assert [strings.item(i) for i in range(len(items))] == items


@settings(database=None, derandomize=True, max_examples=200)
@given(st.lists(st.text(alphabet=['"', "\\", "a", "Ġ", "é", "日"], min_size=1, max_size=4), max_size=8))
def test_vocab_json_is_the_tokens_in_order(tokens):
    written = json.loads(byte_level._vocab_json(_strings(tokens)))
    expected: dict[str, int] = {}
    for i, t in enumerate(tokens):
        expected[t] = i
    assert written == expected


@settings(database=None, derandomize=True, max_examples=200)
@given(st.lists(st.lists(st.sampled_from(["a", " ", "\n", "#version"]), max_size=4).map("".join), max_size=6))
def test_merges_files_are_written_only_for_plain_merges(merges):
    strings = _strings(merges)
    plain = all(m.count(" ") == 1 and "\n" not in m and not m.startswith("#version") for m in merges)
    assert byte_level.plain_merges(strings) == plain
    if plain:
        assert byte_level._merges_txt(strings).decode().splitlines() == merges


def test_token_bytes_read_the_alphabet_back():
    tokens = [*byte_alphabet().values(), "Ġhello", "", "Ċ"]
    table = byte_level.token_bytes(_strings(tokens))
    assert list(table) == [*(bytes([b]) for b in byte_alphabet()), b" hello", b"", b"\n"]
    assert byte_level.unspellable(table, len(tokens)) == b""
    assert byte_level.unspellable(table, 10) == bytes(
        sorted(set(range(256)) - set(list(byte_alphabet())[:10]))
    )
    assert byte_level.token_bytes(_strings(["ok", "not\u2581"])) is None


def test_metadata_decodes_string_arrays_when_read(tmp_path):
    path = write_tokenizer_gguf(tmp_path / "t.gguf")
    read = read_gguf(path)
    assert isinstance(read.metadata, Metadata)
    assert read.metadata["tokenizer.ggml.tokens"] == vocabulary()[0]
    assert read.metadata["tokenizer.ggml.tokens"] is not read.metadata["tokenizer.ggml.tokens"]  # not kept
    assert read.strings("tokenizer.ggml.tokens").decode() == vocabulary()[0]
    assert read.strings("tokenizer.ggml.bos_token_id") is None
    assert list(read.metadata) == list(dict(read.metadata))
    plain = GGUFFile(read.path, read.version, dict(read.metadata), read.tensors)
    assert plain.strings("tokenizer.ggml.tokens") is None and plain.metadata == read.metadata


def _lengths_one_at_a_time(data: bytes, count: int) -> tuple[list[int], int] | None:
    at, lengths = 0, []
    for _ in range(count):
        if at + 8 > len(data):
            return None
        length = int.from_bytes(data[at : at + 8], "little")
        if at + 8 + length > len(data):
            return None
        lengths.append(length)
        at += 8 + length
    return lengths, at


@settings(database=None, derandomize=True, max_examples=300)
@given(
    strings=st.lists(st.binary(max_size=300).filter(lambda b: len(b) < 20 or len(b) > 250), max_size=12),
    extra=st.integers(0, 3),
    after=st.binary(max_size=20),
)
def test_short_lengths_read_at_once_or_not_at_all(strings, extra, after):
    """Strings found at once (short ones, a window at a time) are those found one at a time; long strings,
    runs of NULs, empty ones side by side and a file that ends inside them give None (read one at a time)."""
    from verigrad.io.gguf import _short_lengths

    data = b"".join(len(s).to_bytes(8, "little") + s for s in strings) + after
    count = len(strings) + extra  # more than there are: the file ends inside them
    plain = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    found = _short_lengths(plain, 0, count, span=64)  # several windows in a small file
    expected = _lengths_one_at_a_time(data, count)
    if found is not None:
        assert expected is not None and found[0].tolist() == expected[0] and found[1] == expected[1]
    if expected is not None and all(0 < len(s) < 20 and b"\x00" not in s for s in strings) and not extra:
        assert found is not None  # the common case is read at once
