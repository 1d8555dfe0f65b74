"""The byte-level BPE tokenizer from GGUF metadata and GPT-2 folders: ids checked by hand, special tokens
kept whole, BOS as the file asks, decoding and streaming, the chat template, and bad files."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lm_fakes import CHATML, MERGES, token_id, tokenizer, vocabulary, write_tokenizer_gguf

from verigrad.errors import WeightFileError
from verigrad.io.tokenizer import Tokenizer, _split_merges, byte_alphabet

TEXTS = [
    "hello world",
    "  hello\n\n\tworld  ",
    "héllo wörld — ünïcödé",
    "日本語のテキスト",
    "emoji 😀👍🏽 and flags 🇫🇷",
    "code: def f(x):\n    return x ** 2  # square",
    "numbers 12345 3.14159 -7e10",
    "<|im_start|>user\nhi<|im_end|>\n",
    "",
    " ",
    "\r\n\r\n",
]


@pytest.fixture
def tok(tmp_path):
    return tokenizer(tmp_path)


def test_byte_alphabet_is_gpt2s():
    a = byte_alphabet()
    assert len(set(a.values())) == 256
    assert a[ord(" ")] == "Ġ" and a[ord("\n")] == "Ċ" and a[ord("A")] == "A" and a[0] == "Ā"


def test_merges_give_the_hand_computed_ids(tok):
    hello, world = token_id("hello"), token_id("Ġworld")
    assert tok.encode("hello world") == [hello, world]
    # "hellx": h e l l x -> he ll -> hell, then x alone (no merge "hell x")
    assert tok.encode("hellx") == [token_id("hell"), token_id("x")]
    # two spaces before a word: the GPT-2 split gives " " then " world"
    assert tok.encode("hello  world") == [hello, token_id("Ġ"), world]
    # a character of two bytes is two byte tokens
    assert tok.encode("é") == [token_id(byte_alphabet()[0xC3]), token_id(byte_alphabet()[0xA9])]


def test_the_split_follows_the_pre_tokenizer_name(tmp_path):
    pieces = lambda t: [p for p, _ in t.backend.pre_tokenizer.pre_tokenize_str("abc 12345!!")]
    assert pieces(tokenizer(tmp_path)) == ["abc", "Ġ12345", "!!"]  # "smollm": GPT-2's split
    (tmp_path / "l").mkdir()
    assert pieces(tokenizer(tmp_path / "l", pre="llama-bpe")) == ["abc", "Ġ", "123", "45", "!!"]


def test_special_tokens_are_never_split(tok):
    ids = tok.encode("<|im_start|>user\nhello<|im_end|>")
    assert ids == [1, *tok.encode("user\n"), token_id("hello"), 2]
    assert tok.special_tokens == {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}
    # the user-defined token is matched whole too, but is not special
    assert tok.encode("a<think>b") == [token_id("a"), token_id("<think>"), token_id("b")]
    assert token_id("<think>") not in tok.special_ids


def test_bos_added_only_when_the_file_asks(tmp_path):
    plain = tokenizer(tmp_path)
    assert plain.encode("hello") == [token_id("hello")]
    (tmp_path / "b").mkdir()
    with_bos = tokenizer(tmp_path / "b", add_bos=True)
    assert with_bos.add_bos and with_bos.bos_id == 1
    assert with_bos.encode("hello") == [1, token_id("hello")]
    assert with_bos.encode("hello", add_special=False) == [token_id("hello")]


def test_end_ids_are_eos_and_the_turn_end(tok):
    assert tok.eos_id == 2 and tok.end_ids == {0, 2}


@pytest.mark.parametrize("text", TEXTS)
def test_decode_inverts_encode(tok, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.decode(ids) == tok.backend.decode(ids, skip_special_tokens=False)


def test_decode_can_skip_special_tokens(tok):
    ids = tok.encode("<|im_start|>hello<|im_end|>")
    assert tok.decode(ids, skip_special=True) == "hello"


def test_invalid_utf8_decodes_as_the_tokenizers_library_does(tok):
    spell = byte_alphabet()
    # a lone lead byte, a truncated 3-byte sequence, then plain text
    ids = [token_id(spell[0xE2]), token_id("a"), token_id(spell[0xE2]), token_id(spell[0x82]), token_id("b")]
    assert tok.decode(ids) == "\ufffda\ufffdb"
    assert tok.decode(ids) == tok.backend.decode(ids)


def test_stream_yields_characters_when_their_bytes_are_complete(tok):
    text = "hé😀 hello<|im_end|>"
    ids = tok.encode(text)
    stream = tok.stream()
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) + stream.flush() == text
    # "😀" is 4 byte tokens: nothing until the 4th
    emoji = next(i for i, t in enumerate(ids) if tok.token_bytes(t) and tok.token_bytes(t)[0] >= 0xF0)
    assert pieces[emoji : emoji + 4] == ["", "", "", "😀"]
    cut = tok.stream()
    assert cut.push(token_id(byte_alphabet()[0xC3])) == "" and cut.flush() == "\ufffd"


def test_token_id_outside_the_vocabulary_is_refused(tok):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])


def test_chat_template_renders_chatml(tok):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    text = tok.apply_chat_template(messages)
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>assistant\n"
    )
    no_prompt = tok.apply_chat_template([{"role": "system", "content": "S"}], add_generation_prompt=False)
    assert no_prompt == "<|im_start|>system\nS<|im_end|>\n"


def test_chat_template_errors_are_one_clear_value_error(tmp_path):
    failing = tokenizer(tmp_path, chat_template="{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ValueError, match="roles must alternate"):
        failing.apply_chat_template([{"role": "user", "content": "x"}])
    (tmp_path / "n").mkdir()
    none = tokenizer(tmp_path / "n", chat_template=None)
    with pytest.raises(ValueError, match="no chat template"):
        none.apply_chat_template([{"role": "user", "content": "x"}])
    tok = tokenizer(tmp_path / "n")
    with pytest.raises(ValueError, match="'role' and 'content'"):
        tok.apply_chat_template([{"content": "x"}])


def test_chat_template_is_sandboxed(tmp_path):
    tok = tokenizer(tmp_path, chat_template="{{ messages.__class__.__mro__ }}")
    with pytest.raises(Exception, match=r"unsafe|not safely|access"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])


def test_template_tojson_keeps_unicode(tmp_path):
    tok = tokenizer(tmp_path, chat_template="{{ messages[0] | tojson }}")
    assert tok.apply_chat_template([{"role": "user", "content": "é<"}]) == '{"role": "user", "content": "é<"}'


def test_unknown_tokenizer_model_is_refused(tmp_path):
    path = write_tokenizer_gguf(tmp_path / "sp.gguf", model="t5")
    with pytest.raises(
        WeightFileError, match=r"tokenizer\.ggml\.model is 't5'.*\('gpt2'\) and .*\('llama'\)"
    ) as e:
        Tokenizer.from_gguf(path)
    assert "sp.gguf" in str(e.value)


def test_missing_merges_name_the_file_and_key(tmp_path):
    path = write_tokenizer_gguf(tmp_path / "m.gguf", merges=None)
    with pytest.raises(WeightFileError, match=r"m\.gguf.*tokenizer\.ggml\.merges"):
        Tokenizer.from_gguf(path)


def test_token_types_of_the_wrong_length_are_refused(tmp_path):
    path = write_tokenizer_gguf(tmp_path / "t.gguf", types=[1, 1, 1])
    with pytest.raises(WeightFileError, match="token_type has 3 entries, expected"):
        Tokenizer.from_gguf(path)


def test_bad_merge_is_refused(tmp_path):
    path = write_tokenizer_gguf(tmp_path / "b.gguf", merges=["h e l"])
    with pytest.raises(WeightFileError, match="'h e l' is not two tokens"):
        Tokenizer.from_gguf(path)


def _gpt2_files(folder):
    tokens, _ = vocabulary()
    vocab = {t: i for i, t in enumerate(tokens) if t not in ("<|im_start|>", "<|im_end|>")}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(MERGES) + "\n")


def test_gpt2_folder_from_vocab_and_merges(tmp_path, tok):
    _gpt2_files(tmp_path)
    gpt2 = Tokenizer.from_gpt2_folder(tmp_path)
    assert gpt2.bos_id == gpt2.eos_id == 0 and gpt2.end_ids == {0}
    for text in TEXTS[:7]:
        assert gpt2.encode(text) == tok.encode(text)
        assert gpt2.decode(gpt2.encode(text)) == text
    assert gpt2.encode("a<|endoftext|>") == [token_id("a"), 0]
    with pytest.raises(ValueError, match="no chat template"):
        gpt2.apply_chat_template([{"role": "user", "content": "x"}])


def test_gpt2_folder_prefers_tokenizer_json(tmp_path, tok):
    _gpt2_files(tmp_path)
    reference = Tokenizer.from_gpt2_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_text(reference.backend.to_str())
    (tmp_path / "merges.txt").write_text("#version: 0.2\n")  # would give other ids if it were read
    (tmp_path / "config.json").write_text(json.dumps({"bos_token_id": 0, "eos_token_id": 0}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML}))
    again = Tokenizer.from_gpt2_folder(tmp_path)
    assert (
        again.encode("hello world")
        == reference.encode("hello world")
        == [token_id("hello"), token_id("Ġworld")]
    )
    assert again.apply_chat_template([{"role": "system", "content": "s"}]).startswith("<|im_start|>system\ns")


def test_gpt2_folder_with_a_bos_id_that_is_not_an_integer(tmp_path):
    """config.json's bos_token_id "0" raised a TypeError comparing it with the vocabulary's size."""
    _gpt2_files(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"bos_token_id": "0", "eos_token_id": 0}))
    with pytest.raises(WeightFileError, match="the BOS token id is '0', not an integer"):
        Tokenizer.from_gpt2_folder(tmp_path)


def test_gpt2_folder_without_tokenizer_files(tmp_path):
    with pytest.raises(WeightFileError, match=r"no tokenizer\.json, nor vocab\.json and merges\.txt"):
        Tokenizer.from_gpt2_folder(tmp_path)


def test_a_vocabulary_that_is_not_byte_level_is_refused(tmp_path):
    from tokenizers import Tokenizer as Backend
    from tokenizers import models

    (tmp_path / "tokenizer.json").write_text(Backend(models.BPE({"a": 0, "▁b": 1}, [])).to_str())
    with pytest.raises(WeightFileError, match=r"token 1 \('▁b'\) is not in GPT-2's byte alphabet"):
        Tokenizer.from_gpt2_folder(tmp_path)


def from_metadata(**changes):
    """The tokenizer of in-memory GGUF metadata: the fakes' vocabulary with `changes` (dots as "__")."""
    from pathlib import Path

    from verigrad.io.gguf import GGUFFile

    tokens, types = vocabulary()
    metadata = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": MERGES,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }
    metadata.update({k.replace("__", "."): v for k, v in changes.items()})
    return Tokenizer.from_gguf(GGUFFile(path=Path("bad.gguf"), version=3, metadata=metadata, tensors={}))


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"tokenizer__ggml__tokens": "abc"}, "tokenizer.ggml.tokens is a str, expected an array of strs"),
        (
            {"tokenizer__ggml__tokens": [*vocabulary()[0][:-1], 7]},
            "tokenizer.ggml.tokens is an array whose entry 269 is 7",
        ),
        (
            {"tokenizer__ggml__merges": ["h e", None]},
            "tokenizer.ggml.merges is an array whose entry 1 is None",
        ),
        (
            {"tokenizer__ggml__merges": ["q z"]},
            "cannot build a BPE tokenizer of its tokens and merges: Error while initializing BPE: "
            "Token `qz` out of vocabulary",
        ),
        (
            {"tokenizer__ggml__token_type": 1.0},
            "tokenizer.ggml.token_type is a float, expected an array of ints",
        ),
        ({"tokenizer__ggml__token_type": [True] * 270}, "entry 0 is True (a bool), expected ints"),
        (
            {"tokenizer__ggml__bos_token_id": "1"},
            "tokenizer.ggml.bos_token_id is '1' (a str), expected an int",
        ),
        (
            {"tokenizer__ggml__eos_token_id": True},
            "tokenizer.ggml.eos_token_id is True (a bool), expected an int",
        ),
        ({"tokenizer__ggml__bos_token_id": 270}, "BOS token id 270 is outside the vocabulary (0 ... 269)"),
        ({"tokenizer__ggml__add_bos_token": "false"}, "tokenizer.ggml.add_bos_token is 'false' (a str)"),
        ({"tokenizer__ggml__pre": ["llama3"]}, "tokenizer.ggml.pre is ['llama3'] (a list), expected a str"),
        ({"tokenizer__chat_template": 3}, "tokenizer.chat_template is 3 (an int), expected a str"),
        ({"tokenizer__ggml__model": ["gpt2"]}, "tokenizer.ggml.model is ['gpt2']"),
    ],
)
def test_metadata_of_the_wrong_type_is_refused_naming_the_field(changes, says):
    """Each was silently misread (a str of tokens read as one token a character, "false" as True) or
    raised a TypeError/AttributeError/the tokenizers library's bare Exception."""
    with pytest.raises(WeightFileError, match=r"^bad\.gguf: ") as info:
        from_metadata(**changes)
    assert says in str(info.value)


def test_text_the_vocabulary_cannot_spell_is_refused_not_dropped():
    """A vocabulary without the byte 0x04's token (SmolLM2's has no token for 21 bytes) dropped it from
    the text silently; a lone surrogate raised the tokenizers library's TypeError."""
    tokens, types = vocabulary()
    cut = [t for t in tokens if t != byte_alphabet()[4]]
    tok = from_metadata(tokenizer__ggml__tokens=cut, tokenizer__ggml__token_type=types[:-1])
    assert tok.decode(tok.encode("hello\x03")) == "hello\x03"
    with pytest.raises(
        WeightFileError, match=r"bad.gguf: the vocabulary has no token for a byte of '\\x04' \(character 1"
    ):
        tok.encode("a\x04b")
    with pytest.raises(ValueError, match=r"'\\ud800' at character 2, a lone surrogate"):
        tok.encode("ab\ud800")


def test_gpt2_folder_with_a_vocabulary_that_is_not_a_dict(tmp_path):
    _gpt2_files(tmp_path)
    (tmp_path / "vocab.json").write_text(json.dumps(["a", "b"]))
    with pytest.raises(WeightFileError, match="cannot build a BPE tokenizer of its tokens and merges"):
        Tokenizer.from_gpt2_folder(tmp_path)


def _reference_bytes(tokenizer: Tokenizer) -> list[bytes]:
    """Each id's bytes found one token at a time, as the table was built before it was vectorised."""
    unspell = {c: b for b, c in byte_alphabet().items()}
    table = [b""] * tokenizer.vocab_size
    for token, i in tokenizer.backend.get_vocab(with_added_tokens=False).items():
        table[i] = bytes(unspell[c] for c in token)
    for i, t in tokenizer.backend.get_added_tokens_decoder().items():
        table[i] = t.content.encode("utf-8")
    return table


def test_token_bytes_table_matches_one_token_at_a_time(tok):
    """The table built by one lookup over all tokens joined (and from the vocabulary from_gguf passes)
    gives every id the bytes the per-token spelling gives, as does one built from the backend alone."""
    again = Tokenizer(tok.backend, bos_id=tok.bos_id, eos_id=tok.eos_id)
    assert tok.vocab_size == again.vocab_size
    assert list(tok._bytes) == list(again._bytes) == _reference_bytes(tok)
    assert tok._unspellable == again._unspellable


@settings(database=None, derandomize=True, max_examples=200)
@given(st.lists(st.text(alphabet="ab ", max_size=5), max_size=6))
def test_merges_split_at_once_as_one_at_a_time(merges):
    """Merges split all at once give each merge's two tokens; any merge that is not two tokens around
    one space (none, two, or an empty side's neighbour making up for it) is refused as before."""
    pairs = [tuple(m.split(" ")) for m in merges]
    if all(len(p) == 2 for p in pairs):
        assert _split_merges(merges, "f") == pairs
    else:
        with pytest.raises(WeightFileError, match="is not two tokens separated by one space"):
            _split_merges(merges, "f")


def test_merges_whose_spaces_add_up_are_still_refused():
    with pytest.raises(WeightFileError, match="'ab' is not two tokens"):
        _split_merges(["ab", "c d e"], "f")
