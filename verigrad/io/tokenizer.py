"""Byte-level BPE tokenizers (GPT-2, SmolLM2, Llama-3, Qwen) from a GGUF file or a Hugging Face folder,
and SentencePiece ones (Llama 2, Mistral: `tokenizer.ggml.model` "llama") from a GGUF file.

The vocabulary and merges run on the `tokenizers` library, built the way transformers' GGUF converter
builds them (`transformers.integrations.gguf`): a BPE model over the GPT-2 byte alphabet, the GPT-2
split regex unless the file's `tokenizer.ggml.pre` names another one, control tokens (token type 3) as
special tokens that are never split, user-defined ones (type 4) as plain added tokens. A SentencePiece
vocabulary is a BPE model with "▁" for spaces (one put before the text), byte fallback to `<0xNN>`
tokens, and merges from the file or, as transformers derives them, from the tokens' scores. Decoding maps
every token to its bytes and decodes UTF-8 once, so `decode` and the streaming `StreamDecoder` give the
same text; the chat template is rendered with jinja2 in a sandbox, as transformers renders it.
"""

from __future__ import annotations

import codecs
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import WeightFileError
from .bpe import ByteLevelBPE
from .byte_level import (
    TokenBytes,
    byte_alphabet,
    byte_unspelling,
    cached_bpe,
    token_bytes,
    unspellable,
)
from .gguf import GGUFFile, StringArray, read_gguf, shown

if TYPE_CHECKING:  # the library is imported where a tokenizer of it is made (its memory: only then)
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as _Backend

# Token types of llama.cpp's vocabulary (`tokenizer.ggml.token_type`).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# architectures whose SentencePiece tokenizer differs from Llama's, Phi-3's and Gemma's
_OWN_SENTENCEPIECE = ("gemma4", "t5")
_GEMMA = ("gemma", "gemma2", "gemma3")
SPACE = "\u2581"  # SentencePiece's space ("▁")
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # a SentencePiece byte-fallback token

# Special tokens that end a turn or a text, as llama.cpp recognizes them ("end of generation").
END_TOKENS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|eom_id|>")

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# `tokenizer.ggml.pre` values whose split is not GPT-2's (as in transformers' GGUF converter). Every other
# value, "smollm" included, gets GPT-2's regex: SmolLM2's vocabulary has no merge touching a digit, so the
# digit-by-digit split llama.cpp adds for "smollm" gives the same tokens.
PRE_TOKENIZER_SPLITS = {
    "llama3": _LLAMA3_SPLIT,
    "llama-v3": _LLAMA3_SPLIT,
    "llama-bpe": _LLAMA3_SPLIT,
    "smaug-bpe": _LLAMA3_SPLIT,
    "dbrx": _LLAMA3_SPLIT,
    "falcon3": _LLAMA3_SPLIT,
    "qwen2": _QWEN2_SPLIT,
    "deepseek-r1-qwen": _QWEN2_SPLIT,
}


def _byte_spelling(token: str, alphabet: set[str]) -> str:
    """The token in the byte alphabet: as it is, or its UTF-8 bytes respelled (as transformers does)."""
    if set(token) <= alphabet:
        return token
    spell = byte_alphabet()
    return "".join(spell[b] for b in token.encode("utf-8"))


class Tokenizer:
    """Text to token ids and back, with the model's special tokens and chat template.

    `encode(text)` never splits a special token written in the text (`"<|im_start|>"` is one id);
    `add_special=True` adds BOS (and EOS) when the model asks for them (`add_bos`, `add_eos`)."""

    def __init__(
        self,
        backend: _Backend | None,
        *,
        bos_id: int | None,
        eos_id: int | None,
        add_bos: bool = False,
        add_eos: bool = False,
        chat_template: str | None = None,
        source: str = "",
        more_end_ids: Sequence[int] = (),
        sentencepiece: bool = False,
        strip_first_space: bool = False,
        vocab: Mapping[str, int] | None = None,
        pieces: TokenBytes | None = None,
        plain: ByteLevelBPE | None = None,
        build: Callable[[], _Backend] | None = None,
    ) -> None:
        """`vocab`: the backend's vocabulary without its added tokens, where the caller has it (else it is
        asked for: ~50 ms for 49k tokens); `pieces`: instead, each of its ids' bytes (a byte-level
        vocabulary). `plain`: an encoder of plain text (`verigrad.io.bpe`) that gives the backend's ids,
        with `build` making the backend (None) at the first text it leaves to it, `pieces` given and its
        added tokens its own."""
        if backend is None and (plain is None or build is None or pieces is None):
            raise ValueError("Tokenizer: without a backend, give plain, build and pieces")
        self._backend, self._build, self._plain = backend, build, plain
        self.sentencepiece = sentencepiece  # "▁" spaces, <0xNN> bytes
        self.strip_first_space = strip_first_space  # decode drops the text's first space
        self.source = source
        if backend is None:  # the file's added tokens are the vocabulary's own: the plain encoder's
            added = {i: (text, i in plain.special) for text, i in plain.added.items()}
        else:
            added = {i: (t.content, t.special) for i, t in backend.get_added_tokens_decoder().items()}
        if pieces is None:
            assert backend is not None
            base = backend.get_vocab(with_added_tokens=False) if vocab is None else vocab
            pieces = self._token_bytes_table(base)
        else:
            self._unspellable = unspellable(pieces, len(pieces))
        self.vocab_size = max(len(pieces), 1 + max(added, default=-1))
        for what, i in (("BOS", bos_id), ("EOS", eos_id), *(("end", i) for i in more_end_ids)):
            if i is not None and not _is(i, int):  # a config.json may hold anything
                raise WeightFileError(f"{source}: the {what} token id is {i!r:.60}, not an integer")
            if i is not None and not 0 <= i < self.vocab_size:
                raise WeightFileError(
                    f"{source}: {what} token id {i} is outside the vocabulary (0 ... {self.vocab_size - 1})"
                )
        self.bos_id, self.eos_id = bos_id, eos_id
        self.add_bos, self.add_eos = add_bos, add_eos
        self.chat_template = chat_template
        self.special_tokens: dict[str, int] = {
            text: i for i, (text, is_special) in sorted(added.items()) if is_special
        }
        self.special_ids = frozenset(self.special_tokens.values())
        # special or not (Gemma's <end_of_turn> is user-defined in its files), as llama.cpp finds them
        added_ids = {text: i for i, (text, _) in added.items()}
        ends = {added_ids[t] for t in END_TOKENS if t in added_ids}
        self.end_ids = frozenset(ends | ({eos_id} if eos_id is not None else set()) | set(more_end_ids))
        self._bytes = pieces.with_extra({i: text.encode("utf-8") for i, (text, _) in added.items()})
        self._template: Any = None

    @property
    def backend(self) -> _Backend:
        """The `tokenizers` library's tokenizer (made at first use where a plain-text encoder stood in)."""
        if self._backend is None:
            assert self._build is not None
            self._backend = self._build()
        return self._backend

    def _token_bytes_table(self, base: Mapping[str, int]) -> TokenBytes:
        """Each id's bytes (added tokens: see `__init__`), and `_unspellable`."""
        table = [b""] * (1 + max(base.values(), default=-1))
        if self.sentencepiece:  # unknown bytes fall back to <0xNN> tokens, or to <unk>, as in SentencePiece
            for token, i in base.items():
                byte = _BYTE_TOKEN.fullmatch(token)
                table[i] = bytes([int(byte[1], 16)]) if byte else token.replace(SPACE, " ").encode("utf-8")
            self._unspellable = b""
        else:
            self._byte_level_table(base, table)
        return TokenBytes.of(table)

    def _byte_level_table(self, base: Mapping[str, int], table: list[bytes]) -> None:
        """Each token's bytes: all tokens joined, mapped to bytes with one str.translate and cut apart."""
        tokens, ids = list(base), list(base.values())
        joined = "".join(tokens)
        alphabet = set(byte_alphabet().values())
        if not set(joined) <= alphabet:
            i, token = next((i, t) for t, i in base.items() if not set(t) <= alphabet)
            raise WeightFileError(
                f"{self.source}: token {i} ({token!r}) is not in GPT-2's byte alphabet: verigrad reads "
                "byte-level BPE vocabularies"
            )
        # one character of the alphabet is one byte: looked up by code point in one NumPy step
        data = byte_unspelling()[0][np.frombuffer(joined.encode("utf-32-le"), np.uint32)].tobytes()
        ends = itertools.accumulate(map(len, tokens))
        start = 0
        for i, end in zip(ids, ends):
            table[i], start = data[start:end], end
        # bytes with no token of their own: BPE would drop them from a text without a word
        self._unspellable = bytes(set(range(256)) - {t[0] for t in table if len(t) == 1})

    # construction ------------------------------------------------------------------------------------

    @classmethod
    def from_gguf(cls, gguf: GGUFFile | str | Path, plain: bool = True) -> Tokenizer:
        """The tokenizer a GGUF file describes (a `GGUFFile` from `verigrad.io.gguf.read_gguf`, or a path).
        A byte-level vocabulary split as GPT-2's encodes plain text without the `tokenizers` library
        (`verigrad.io.bpe`: its memory), which is built at the first other text; `plain=False` builds it now
        and encodes every text with it."""
        if not isinstance(gguf, GGUFFile):
            gguf = read_gguf(gguf)
        source = str(gguf.path)
        field = _Fields(gguf)
        kind = gguf.require("tokenizer.ggml.model")
        if kind not in ("gpt2", "llama"):
            raise WeightFileError(
                f"{source}: tokenizer.ggml.model is {kind!r:.60}; verigrad reads byte-level BPE ('gpt2') and "
                "SentencePiece ('llama') tokenizers"
            )
        if kind == "llama" and gguf.get("general.architecture") in _OWN_SENTENCEPIECE:
            raise WeightFileError(
                f"{source}: {gguf.get('general.architecture')}'s SentencePiece tokenizer (its own spaces and "
                "merges) is not supported"
            )
        arch = gguf.get("general.architecture")
        settings = {
            "bos_id": field.scalar("tokenizer.ggml.bos_token_id", int, None),
            "eos_id": field.scalar("tokenizer.ggml.eos_token_id", int, None),
            # llama.cpp adds BOS to a SentencePiece text unless the file says otherwise
            "add_bos": field.scalar("tokenizer.ggml.add_bos_token", bool, kind == "llama"),
            "add_eos": field.scalar("tokenizer.ggml.add_eos_token", bool, False),
            "chat_template": field.scalar("tokenizer.chat_template", str, None),
            "source": source,
            "sentencepiece": kind == "llama",
            "strip_first_space": kind == "llama" and arch not in _GEMMA,
        }
        raw_tokens, raw_merges = gguf.strings("tokenizer.ggml.tokens"), gguf.strings("tokenizer.ggml.merges")
        if kind == "gpt2" and raw_tokens is not None and raw_merges is not None:
            types = _token_types(field, len(raw_tokens))
            split = PRE_TOKENIZER_SPLITS.get(field.scalar("tokenizer.ggml.pre", str, None))
            found = _plain_byte_level(raw_tokens, raw_merges, types) if plain and split is None else None
            if found is not None:
                # the library's tokenizer, made as with plain=False, at the first text left to it
                file = gguf
                build = lambda: cls.from_gguf(file, plain=False).backend
                return cls(None, **settings, pieces=found[1], plain=found[0], build=build)
            built = _byte_level_from_bytes(raw_tokens, raw_merges, types, split)
            if built is not None:
                return cls(built[0], **settings, pieces=built[1])
        tokens = field.list_of("tokenizer.ggml.tokens", str)
        types = _token_types(field, len(tokens))
        if kind == "gpt2":
            merges = field.list_of("tokenizer.ggml.merges", str)
            alphabet = set(byte_alphabet().values())
            if set("".join(tokens)) <= alphabet:  # every token spelled in the alphabet already
                vocab = dict(zip(tokens, range(len(tokens))))
            else:
                vocab = {_byte_spelling(t, alphabet): i for i, t in enumerate(tokens)}
        else:
            merges = field.list_of("tokenizer.ggml.merges", str, default=[])
            if arch in _GEMMA:  # Gemma's files write a token of spaces with spaces, not "▁"s
                tokens = [SPACE * len(t) if t and not t.strip(" ") else t for t in tokens]
            vocab = {t: i for i, t in enumerate(tokens)}
        if len(vocab) != len(tokens):
            raise WeightFileError(f"{source}: tokenizer.ggml.tokens has repeated tokens")
        if kind == "gpt2":
            pre = field.scalar("tokenizer.ggml.pre", str, None)
            backend = _bpe(vocab, _split_merges(merges, source), source)
            _byte_level(backend, PRE_TOKENIZER_SPLITS.get(pre))
            # Control tokens outside the byte alphabet are llama.cpp mislabels (transformers skips them).
            special = [t for t, k in zip(tokens, types) if k == CONTROL and t and set(t) <= alphabet]
        else:
            if arch in _GEMMA:  # its scores do not follow its merges' order; the tokens' order does
                scores = [-float(i) for i in range(len(tokens))]
            else:
                scores = field.list_of("tokenizer.ggml.scores", float) if not merges else []
            if not merges and len(scores) != len(tokens):
                raise WeightFileError(
                    f"{source}: tokenizer.ggml.scores has {len(scores)} entries, expected {len(tokens)}"
                )
            pairs = _split_merges(merges, source) if merges else _merges_by_score(tokens, scores)
            backend = _sentencepiece(vocab, pairs, source, "gemma" if arch in _GEMMA else arch)
            special = [t for t, k in zip(tokens, types) if k in (CONTROL, UNKNOWN) and t]
        backend.add_special_tokens([_added(t, True) for t in special])
        backend.add_tokens(
            [_added(t, False) for t, k in zip(tokens, types) if k == USER_DEFINED and t and t in vocab]
        )
        return cls(backend, **settings, vocab=vocab)

    @classmethod
    def from_gpt2_folder(cls, folder: str | Path) -> Tokenizer:
        """The tokenizer of a Hugging Face folder: `tokenizer.json` (byte-level BPE: GPT-2, Llama 3, Qwen;
        or SentencePiece-style BPE with byte fallback: Llama 2, Mistral), else `vocab.json` + `merges.txt`,
        with `<|endoftext|>` as BOS and EOS unless `config.json` says otherwise (a list of EOS ids: the
        first is EOS, all end a text). BOS is added as transformers adds it."""
        folder = Path(folder)
        config = _read_json(folder / "config.json", dict) if (folder / "config.json").is_file() else {}
        tok_config = (
            _read_json(folder / "tokenizer_config.json", dict)
            if (folder / "tokenizer_config.json").is_file()
            else {}
        )
        from tokenizers import Tokenizer as _Backend

        if (folder / "tokenizer.json").is_file():
            _checked_ids(_read_json(folder / "tokenizer.json", dict), folder / "tokenizer.json")
            try:
                backend = _Backend.from_file(str(folder / "tokenizer.json"))
            except Exception as e:  # the library's own parse error, as one line
                raise WeightFileError(
                    f"{folder / 'tokenizer.json'}: cannot read the tokenizer: {e}"
                ) from None
        elif (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
            vocab = _read_json(folder / "vocab.json")
            _checked_ids({"model": {"vocab": vocab}}, folder / "vocab.json")
            lines = (folder / "merges.txt").read_text(encoding="utf-8").splitlines()
            merges = [m for m in lines if m and not m.startswith("#version")]
            backend = _bpe(vocab, _split_merges(merges, str(folder / "merges.txt")), str(folder))
            _byte_level(backend, None)
            backend.add_special_tokens([_added("<|endoftext|>", True)] if "<|endoftext|>" in vocab else [])
        else:
            raise WeightFileError(f"{folder}: no tokenizer.json, nor vocab.json and merges.txt")
        end = backend.token_to_id("<|endoftext|>")
        bos, eos, more = config.get("bos_token_id", end), config.get("eos_token_id", end), []
        if isinstance(eos, list) and eos:  # Llama 3's: the first is EOS, each one ends a text
            eos, *more = eos
        spec = json.loads(backend.to_str())
        # BOS as transformers adds it: tokenizer_config.json's flag, else the tokenizer's post-processor
        probe = backend.encode("", add_special_tokens=True).ids
        add_bos = tok_config.get("add_bos_token", bool(probe) and probe[0] == bos)
        if not isinstance(add_bos, bool):
            raise WeightFileError(f"{folder}: add_bos_token is {add_bos!r:.60}, not true or false")
        sentencepiece = spec["model"].get("byte_fallback") is True  # "▁" spaces and <0xNN> bytes
        decoders_ = (spec.get("decoder") or {}).get("decoders") or [spec.get("decoder") or {}]
        strip = any(d.get("type") == "Strip" and d.get("start") == 1 for d in decoders_)
        return cls(
            backend,
            bos_id=bos,
            eos_id=eos,
            add_bos=add_bos,
            chat_template=tok_config.get("chat_template"),
            source=str(folder),
            more_end_ids=more,
            sentencepiece=sentencepiece,
            strip_first_space=strip,
        )

    # text <-> ids ------------------------------------------------------------------------------------

    def encode(self, text: str, add_special: bool = True) -> list[int]:
        """Token ids of `text`; with `add_special`, BOS/EOS around them when the model asks for them.
        Text with a byte the vocabulary has no token for is refused (BPE would drop it silently)."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}")
        name = self.source or "this tokenizer"
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(
                f"{name}: the text has {text[e.start]!r} at character {e.start}, a lone surrogate: not "
                "Unicode text"
            ) from None
        if self._unspellable and len(raw.translate(None, self._unspellable)) != len(raw):
            i, char = next((i, c) for i, c in enumerate(text) if set(c.encode()) & set(self._unspellable))
            raise WeightFileError(  # the file's vocabulary lacks a byte
                f"{name}: the vocabulary has no token for a byte of {char!r} (character {i} of the text), "
                "so the text cannot be encoded"
            )
        found = self._plain.encode(text) if self._plain is not None else None
        ids = found if found is not None else self.backend.encode(text, add_special_tokens=False).ids
        if add_special and self.add_bos and self.bos_id is not None:
            ids.insert(0, self.bos_id)
        if add_special and self.add_eos and self.eos_id is not None:
            ids.append(self.eos_id)
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (a special token: its text)."""
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} is outside the vocabulary (0 ... {self.vocab_size - 1})")
        return self._bytes[token_id]

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """The text of `ids` (bytes that are not valid UTF-8 become U+FFFD, as in `tokenizers`); a Llama-style
        SentencePiece vocabulary's text loses its first space (the one encoding put before the text)."""
        ids = [int(i) for i in ids]
        data = b"".join(self.token_bytes(i) for i in ids if not (skip_special and i in self.special_ids))
        if self.strip_first_space and data.startswith(b" "):
            data = data[1:]
        return data.decode("utf-8", errors="replace")

    def stream(self, skip_special: bool = False) -> StreamDecoder:
        """A decoder fed one token at a time that returns text as soon as its UTF-8 is complete."""
        return StreamDecoder(self, skip_special)

    # chat --------------------------------------------------------------------------------------------

    def apply_chat_template(
        self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True, **extra: Any
    ) -> str:
        """The conversation as the model was trained to read it (the template from the model file),
        ending with the assistant's header when `add_generation_prompt`."""
        if not self.chat_template:
            raise ValueError(
                f"{self.source or 'this tokenizer'} has no chat template: give the prompt as plain text"
            )
        for m in messages:
            if not (isinstance(m, Mapping) and isinstance(m.get("role"), str) and "content" in m):
                raise ValueError(f"a chat message is a dict with 'role' and 'content', got {m!r}")
        if self._template is None:
            from .chat_template import ChatTemplate  # jinja2: imported by the first chat, not by a load

            self._template = ChatTemplate(self.chat_template, self.source)
        names = {"bos_token": self.bos_id, "eos_token": self.eos_id}
        tokens = {k: self._bytes[i].decode("utf-8", "replace") for k, i in names.items() if i is not None}
        return self._template.render(
            messages=[dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            **tokens,
            **extra,
        )


class StreamDecoder:
    """Turns token ids into text as it completes: `push(id)` returns the new complete characters (possibly
    ""), `flush()` what is left at the end. The pieces joined equal `Tokenizer.decode` of all the ids,
    except that a stream continues a text: a SentencePiece token's leading space is kept."""

    def __init__(self, tokenizer: Tokenizer, skip_special: bool = False) -> None:
        self.tokenizer = tokenizer
        self.skip_special = skip_special
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        if self.skip_special and token_id in self.tokenizer.special_ids:
            return ""
        return self._utf8.decode(self.tokenizer.token_bytes(int(token_id)))

    def flush(self) -> str:
        return self._utf8.decode(b"", final=True)


class _Fields:
    """The tokenizer's metadata fields, each checked for its type (a WeightFileError names the field)."""

    def __init__(self, gguf: GGUFFile) -> None:
        self.gguf = gguf

    def _refuse(self, key: str, what: str, expected: str) -> WeightFileError:
        return WeightFileError(f"{self.gguf.path}: {key} is {what}, expected {expected}")

    def scalar(self, key: str, kind: type, default: Any) -> Any:
        value = self.gguf.metadata.get(key, default)
        if value is default or _is(value, kind):
            return value
        raise self._refuse(key, f"{value!r:.60} ({_a(type(value))})", _a(kind))

    def list_of(self, key: str, kind: type, default: list | None = None) -> list:
        value = self.gguf.require(key) if default is None else self.gguf.metadata.get(key, default)
        if not isinstance(value, list | tuple):
            raise self._refuse(key, _a(type(value)), f"an array of {kind.__name__}s")
        if set(map(type, value)) <= {kind}:  # the common case, checked in one pass in C
            return list(value)
        for i, item in enumerate(value):
            if not _is(item, kind):
                raise self._refuse(
                    key,
                    f"an array whose entry {i} is {item!r:.60} ({_a(type(item))})",
                    f"{kind.__name__}s",
                )
        return list(value)


def _a(kind: type) -> str:
    return f"{'an' if kind.__name__[0] in 'aeiou' else 'a'} {kind.__name__}"


def _is(value: Any, kind: type) -> bool:
    """isinstance, except that a bool is not an int here (GGUF stores them apart)."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _added(content: str, special: bool) -> AddedToken:
    from tokenizers import AddedToken

    return AddedToken(content, normalized=False, special=special)


def _token_types(field: _Fields, count: int) -> list[int]:
    """`tokenizer.ggml.token_type`, one per token (NORMAL for each where the file has none)."""
    types = field.list_of("tokenizer.ggml.token_type", int, default=[NORMAL] * count)
    if len(types) != count:
        raise WeightFileError(
            f"{field.gguf.path}: tokenizer.ggml.token_type has {len(types)} entries, expected {count} "
            "(one per token)"
        )
    return types


def _bpe(vocab: dict[str, int], merges: list[tuple[str, str]], source: str) -> _Backend:
    from tokenizers import Tokenizer as _Backend
    from tokenizers import models

    try:
        return _Backend(models.BPE(vocab=vocab, merges=merges))
    except Exception as e:  # the library's own message (a merge of tokens the vocabulary lacks)
        raise WeightFileError(
            f"{source}: cannot build a BPE tokenizer of its tokens and merges: {e}"
        ) from None


def _byte_level(backend: _Backend, split: str | None) -> None:
    """GPT-2's byte-level pre-tokenizer (after the `split` regex, if given) and decoder on `backend`."""
    from tokenizers import Regex, decoders, pre_tokenizers

    if split is None:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    backend.decoder = decoders.ByteLevel()


def _byte_level_from_bytes(
    tokens: StringArray, merges: StringArray, types: list[int], split: str | None
) -> tuple[_Backend, TokenBytes] | None:
    """A GGUF file's byte-level BPE and each token's bytes, read from the file's bytes (no Python string
    per token: `byte_level`), with its control tokens special and its user-defined ones added; None where
    they are not plainly that (a token outside GPT-2's alphabet, a repeated token, a merge the library
    refuses): the Python lists' path then builds it or says what is wrong."""
    from tokenizers import Tokenizer as _Backend

    pieces = token_bytes(tokens)
    if pieces is None:
        return None
    try:
        model = cached_bpe(tokens, merges)
    except Exception:  # the library's refusal, said again by the other path
        return None
    if model is None:
        return None
    backend = _Backend(model)
    if backend.get_vocab_size(with_added_tokens=False) != len(tokens):  # repeated tokens
        return None
    _byte_level(backend, split)
    kinds, lengths, starts = np.asarray(types), tokens.lengths.tolist(), tokens.starts().tolist()

    def named(kind: int) -> list[str]:
        found = np.flatnonzero(kinds == kind).tolist()
        data = tokens.data
        return [data[starts[i] : starts[i] + lengths[i]].tobytes().decode() for i in found if lengths[i]]

    backend.add_special_tokens([_added(t, True) for t in named(CONTROL)])
    backend.add_tokens([_added(t, False) for t in named(USER_DEFINED)])
    return backend, pieces


def _plain_byte_level(
    tokens: StringArray, merges: StringArray, types: list[int]
) -> tuple[ByteLevelBPE, TokenBytes] | None:
    """The plain-text encoder of a GGUF file's byte-level BPE (GPT-2's split) and each token's bytes, with
    its control tokens special and its user-defined ones added, as `_byte_level_from_bytes` makes them; None
    where the library would have to say more (see `ByteLevelBPE.of`, `cached_bpe`)."""
    pieces = token_bytes(tokens)
    if pieces is None:
        return None
    kinds, lengths, starts = np.asarray(types), tokens.lengths.tolist(), tokens.starts().tolist()
    data, added, special = tokens.data, {}, set()
    for kind in (CONTROL, USER_DEFINED):
        for i in np.flatnonzero(kinds == kind).tolist():
            if lengths[i]:
                added[data[starts[i] : starts[i] + lengths[i]].tobytes().decode()] = i
                special.update([i] if kind == CONTROL else [])
    encoder = ByteLevelBPE.of(tokens, merges, pieces, added, frozenset(special))
    return None if encoder is None else (encoder, pieces)


def _sentencepiece(vocab: dict[str, int], merges: list[tuple[str, str]], source: str, arch: Any) -> _Backend:
    """SentencePiece's BPE as transformers builds it from a GGUF file: "▁" for spaces and one before the
    text, byte fallback to <0xNN> tokens, the text's first space dropped in decoding. Phi-3's puts its
    "▁"s in with a normalizer (as its own tokenizer.json does), which differs on a text that starts with
    spaces: "  hi" is "▁▁▁hi", not "▁▁hi". Gemma's puts none before the text and drops none."""
    from tokenizers import Tokenizer as _Backend
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    unknown = "<unk>" if arch == "gemma" and "<unk>" in vocab else None
    try:
        backend = _Backend(
            models.BPE(vocab=vocab, merges=merges, unk_token=unknown, fuse_unk=True, byte_fallback=True)
        )
    except Exception as e:  # the library's own message
        raise WeightFileError(
            f"{source}: cannot build a SentencePiece tokenizer of its tokens: {e}"
        ) from None
    strip = [decoders.Strip(" ", 1, 0)]
    if arch == "gemma":
        backend.normalizer = normalizers.Replace(" ", SPACE)
        strip = []
    elif arch == "phi3":
        spaces = [normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)]
        backend.normalizer = normalizers.Sequence(spaces)
    else:
        spaces = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
        backend.pre_tokenizer = spaces
    backend.decoder = decoders.Sequence(
        [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(), *strip]
    )
    return backend


def _merges_by_score(tokens: list[str], scores: list[float]) -> list[tuple[str, str]]:
    """The merges a SentencePiece vocabulary implies (a file without `tokenizer.ggml.merges`): every split
    of a token into two tokens, the merged token's score first (ties: the longer left, then right part),
    as transformers derives them, so that BPE applies them in SentencePiece's order."""
    vocab = {t: i for i, t in enumerate(tokens)}
    found: list[tuple[str, str, float]] = []
    for token, score in zip(tokens, scores):
        splits = [(token[:k], token[k:], score) for k in range(1, len(token))]
        found += sorted(
            (m for m in splits if m[0] in vocab and m[1] in vocab), key=lambda m: (vocab[m[0]], vocab[m[1]])
        )
    found.sort(
        key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True
    )  # stable: equal keys keep their order
    return [(left, right) for left, right, _ in found]


def _split_merges(merges: list[str], source: str) -> list[tuple[str, str]]:
    # all merges split at once; they are each two tokens around one space iff the parts' lengths add up
    parts = " ".join(merges).split(" ")
    if len(parts) == 2 * len(merges):
        sizes = np.fromiter(map(len, parts), np.int64, len(parts))
        lengths = np.fromiter(map(len, merges), np.int64, len(merges))
        if np.array_equal(sizes[0::2] + sizes[1::2] + 1, lengths):
            return list(zip(parts[0::2], parts[1::2]))
    pairs = [tuple(m.split(" ")) for m in merges]
    for m, p in zip(merges, pairs):
        if len(p) != 2:
            raise WeightFileError(f"{source}: the merge {m!r} is not two tokens separated by one space")
    return pairs  # type: ignore[return-value]


def _read_json(path: Path, kind: type = object) -> Any:
    """The JSON file at `path`, a `kind` (dict: an object), else a WeightFileError naming it."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise WeightFileError(f"{path}: cannot read it as JSON: nested too deeply") from None
    except (OSError, ValueError) as e:
        raise WeightFileError(f"{path}: cannot read it as JSON: {e}") from None
    if not isinstance(value, kind):
        expected = "object" if kind is dict else kind.__name__
        raise WeightFileError(f"{path}: expected a JSON {expected}, found {type(value).__name__}")
    return value


def _checked_ids(spec: Any, path: Path) -> None:
    """A tokenizer.json's ids checked before the tokenizers library reads it (it allocates a table up to
    the largest id: 2**31 in a fuzzed file took gigabytes and aborted the process): integers, each below
    twice the count of tokens the file lists (real files number them 0..n-1)."""
    model = spec.get("model") if isinstance(spec, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    added = spec.get("added_tokens") if isinstance(spec, dict) else None
    added = added if isinstance(added, list) else []
    ids = [entry.get("id") if isinstance(entry, dict) else None for entry in added]
    ids += list(vocab.values()) if isinstance(vocab, dict) else []
    bound = 2 * len(ids) + 1024
    for i in ids:
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < bound:
            raise WeightFileError(
                f"{path}: token id {shown(i)} is not an integer in 0..{bound - 1} "
                f"(the file lists {len(ids)} tokens)"
            )
