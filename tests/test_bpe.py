"""The plain-text encoder of a GGUF file's byte-level BPE (`verigrad.io.bpe`) against the `tokenizers`
library's tokenizer of the same file: the same ids on any plain text (printable ASCII, tabs, line breaks,
the added tokens), the library made only for a text the encoder leaves to it, and the same refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lm_fakes import vocabulary, write_tokenizer_gguf

from verigrad.errors import WeightFileError
from verigrad.io import bpe, byte_level
from verigrad.io.tokenizer import CONTROL, NORMAL, USER_DEFINED, Tokenizer

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "The history of computing is a story of ideas that took decades to become practical.",
    "Charles Babbage designed a mechanical engine; Ada Lovelace wrote its first program in 1843!",
    "def main(argv):\n\treturn 0  # it's done, isn't it? we'll see... they've said 'maybe'\r\n",
    "Numbers: 12345, 3.14159, 2026-12-07 and 1e10 -- all of them   spaced    out.",
    "user: What is the capital of France?\nassistant: Paris is the capital of France.",
]
PIECES = [
    *"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    *" !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    *("\t", "\n", "\r", "  ", "\n\n", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "<think>", "<|", "|>"),
    *SPECIALS,
    *(word for line in CORPUS for word in line.split()),
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A GGUF file of a byte-level BPE trained by the library on CORPUS (merges of many ranks), its
    specials control tokens and `<think>` a user-defined one."""
    from tokenizers import Tokenizer as Library
    from tokenizers import models, pre_tokenizers, trainers

    library = Library(models.BPE())
    library.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=SPECIALS
    )
    library.train_from_iterator(CORPUS * 20, trainer)
    spec = json.loads(library.to_str())["model"]
    vocab = spec["vocab"]
    tokens = [*sorted(vocab, key=vocab.get), "<think>"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["merges"]]
    types = [CONTROL if t in SPECIALS else NORMAL for t in tokens[:-1]] + [USER_DEFINED]
    return write_tokenizer_gguf(
        tmp_path_factory.mktemp("bpe") / "trained.gguf", tokens=tokens, types=types, merges=merges
    )


@settings(database=None, derandomize=True, max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_plain_text_gives_the_librarys_ids_without_the_library(trained, text):
    plain, library = _pair(trained)
    assert plain.encode(text) == library.encode(text)
    assert plain._plain is not None and plain._backend is None  # the library was never made


def test_the_corpus_and_its_chat_give_the_librarys_ids(trained):
    plain, library = _pair(trained)
    chat = plain.apply_chat_template([{"role": "user", "content": CORPUS[4]}])
    for text in [*CORPUS, chat, "\n".join(CORPUS), "<|im_start|><|im_end|><think>x<|endoftext|>", ""]:
        assert plain.encode(text, add_special=False) == library.encode(text, add_special=False)
    assert plain._backend is None


def test_other_text_is_left_to_the_library_made_then(trained):
    plain, library = _pair(trained)
    for text in ["héllo wörld", "tab\tand\x0bvertical", "emoji 😀 <|im_end|>", "\x00nul"]:
        assert plain._plain.encode(text) is None
        assert plain.encode(text) == library.encode(text)
    assert plain._backend is not None
    assert plain.encode(CORPUS[0]) == library.encode(CORPUS[0])  # plain text: the encoder's still


def test_both_say_the_same_of_the_vocabulary(trained):
    plain, library = _pair(trained)
    assert plain.vocab_size == library.vocab_size
    assert (plain.special_tokens, plain.special_ids, plain.end_ids) == (
        library.special_tokens,
        library.special_ids,
        library.end_ids,
    )
    assert list(plain._bytes) == list(library._bytes) and plain._unspellable == library._unspellable
    assert plain.backend.get_added_tokens_decoder() == library.backend.get_added_tokens_decoder()


def test_a_merge_into_a_missing_token_is_refused_as_before(tmp_path):
    path = write_tokenizer_gguf(tmp_path / "t.gguf", merges=["h e", "l l", "he ll", "q z"])
    with pytest.raises(WeightFileError, match="cannot build a BPE tokenizer"):
        Tokenizer.from_gguf(path)


def test_a_repeated_merge_keeps_its_last_rank_as_the_library(tmp_path):
    merges = ["l l", "h e", "he ll", "hell o", "l l"]
    path = write_tokenizer_gguf(tmp_path / "t.gguf", merges=merges)
    plain, library = Tokenizer.from_gguf(path), Tokenizer.from_gguf(path, plain=False)
    for text in ["hello", "hell", "llll hello hellohello"]:
        assert plain.encode(text) == library.encode(text)
    assert plain._plain is not None and plain._backend is None


_PAIRS: dict[Path, tuple[Tokenizer, Tokenizer]] = {}


def _pair(path: Path) -> tuple[Tokenizer, Tokenizer]:
    """(the plain encoder's tokenizer, the library's) of the file, made once per file."""
    if path not in _PAIRS:
        _PAIRS[path] = (Tokenizer.from_gguf(path), Tokenizer.from_gguf(path, plain=False))
    return _PAIRS[path]


def test_plain_text_never_imports_the_library(trained):
    """A chat on such a file leaves the `tokenizers` library unread (its module's memory, too)."""
    code = (
        "import sys\n"
        "from verigrad.io.tokenizer import Tokenizer\n"
        f"tok = Tokenizer.from_gguf({str(trained)!r})\n"
        "text = tok.apply_chat_template([{'role': 'user', 'content': 'What is the capital of France?'}])\n"
        "tok.encode(text, add_special=False)\n"
        "print('tokenizers' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_second_load_reads_the_cached_arrays_and_a_damaged_file_is_built_again(
    tmp_path, monkeypatch, trained
):
    monkeypatch.setenv("VERIGRAD_TOKENIZER_CACHE", str(tmp_path / "cache"))
    first = Tokenizer.from_gguf(trained)
    (file,) = (tmp_path / "cache").glob("*/plain.npy")
    text = CORPUS[1] + "<|im_end|>"

    def refused(*args):
        raise AssertionError("built again")

    with monkeypatch.context() as m:
        m.setattr(bpe, "_packed", refused)
        assert Tokenizer.from_gguf(trained).encode(text) == first.encode(text)
    for damage in (b"", b"not an array", np.arange(260, dtype=np.int64)[::-1].tobytes()):
        file.write_bytes(damage)
        again = Tokenizer.from_gguf(trained)
        assert again._plain is not None and again.encode(text) == first.encode(text)
    np.save(file, np.full(256 + 3, 10**9, np.int64))  # an array, but not of this vocabulary
    assert Tokenizer.from_gguf(trained).encode(text) == first.encode(text)


def test_the_suite_writes_no_tokenizer_files_into_the_users_cache(tmp_path):
    """tests/conftest.py points VERIGRAD_TOKENIZER_CACHE at a temporary folder, for the commands the tests
    start too: a model loaded without a cache of its own writes its tokenizer files there."""
    users = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "verigrad" / "tokenizers"
    suite = Path(os.environ["VERIGRAD_TOKENIZER_CACHE"])
    assert not suite.resolve().is_relative_to(Path.home().resolve())
    tokens, types = vocabulary()
    own = f"suite{os.getpid()}{tmp_path.name}"  # a vocabulary of its own: files of their own
    path = write_tokenizer_gguf(tmp_path / "t.gguf", tokens=[*tokens, own], types=[*types, NORMAL])
    before = set(users.glob("*")) if users.is_dir() else set()
    code = f"from verigrad.io.tokenizer import Tokenizer\nTokenizer.from_gguf({str(path)!r}, plain=False)\n"
    env = {key: value for key, value in os.environ.items() if key != "VERIGRAD_CACHE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    Tokenizer.from_gguf(path)
    assert len(list(suite.glob("*/*"))) >= 3  # the library's two files and the plain encoder's arrays
    assert (set(users.glob("*")) if users.is_dir() else set()) == before


def test_the_tokenizer_cache_is_its_variable_else_in_verigrads_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path / "all"))
    monkeypatch.setenv("VERIGRAD_TOKENIZER_CACHE", str(tmp_path / "own"))
    assert byte_level.tokenizer_cache() == tmp_path / "own"
    monkeypatch.delenv("VERIGRAD_TOKENIZER_CACHE")
    assert byte_level.tokenizer_cache() == tmp_path / "all" / "tokenizers"
