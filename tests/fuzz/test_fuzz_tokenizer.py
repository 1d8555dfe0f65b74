"""The tokenizer built from fuzzed GGUF metadata (the fields a file can hold, of any type, cut short, grown,
with entries replaced, ids out of range): a WeightFileError naming the file and the field, or a tokenizer
that gives every text back (or refuses one its vocabulary cannot spell, naming the file)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lm_fakes import MERGES, vocabulary

from verigrad.errors import WeightFileError
from verigrad.io.gguf import GGUFFile
from verigrad.io.tokenizer import Tokenizer

TOKENS, TYPES = vocabulary()
TEXTS = ["hello world", "héllo\n😀 <think>", "<|im_start|>x<|im_end|>", "", "\x00\x7f"]

SCALARS = st.one_of(
    st.integers(-(2**63), 2**64), st.text(max_size=5), st.booleans(), st.floats(allow_nan=True), st.none()
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4), st.lists(st.text(max_size=3), max_size=4))


def mutated(base: list, entry: st.SearchStrategy) -> st.SearchStrategy:
    """`base` as it is, with one entry replaced, cut short, grown, or another value altogether."""
    return st.one_of(
        st.just(base),
        st.builds(lambda i, v: [*base[:i], v, *base[i + 1 :]], st.integers(0, len(base) - 1), entry),
        st.builds(lambda n: base[:n], st.integers(0, len(base))),
        st.builds(lambda extra: base + extra, st.lists(entry, max_size=3)),
        VALUES,
    )


FIELDS = {
    "tokenizer.ggml.model": st.one_of(st.just("gpt2"), VALUES),
    "tokenizer.ggml.pre": st.one_of(st.sampled_from(["smollm", "llama-bpe", "qwen2", "other"]), VALUES),
    "tokenizer.ggml.tokens": mutated(TOKENS, st.one_of(st.text(max_size=4), SCALARS)),
    "tokenizer.ggml.token_type": mutated(TYPES, st.one_of(st.integers(-1, 8), SCALARS)),
    "tokenizer.ggml.merges": mutated(
        MERGES, st.one_of(st.sampled_from(["h e", "a b", "Ġ Ġ", "x", "hell o", " ", "he llo"]), SCALARS)
    ),
    "tokenizer.ggml.bos_token_id": st.one_of(st.integers(-3, len(TOKENS) + 3), VALUES),
    "tokenizer.ggml.eos_token_id": st.one_of(st.integers(-3, len(TOKENS) + 3), VALUES),
    "tokenizer.ggml.add_bos_token": st.one_of(st.booleans(), VALUES),
    "tokenizer.ggml.add_eos_token": st.one_of(st.booleans(), VALUES),
    "tokenizer.chat_template": st.one_of(st.just("{{ messages[0].content }}"), VALUES),
}
KEYS = sorted(FIELDS)


@settings(
    max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(st.fixed_dictionaries({}, optional=FIELDS))
def test_fuzzed_metadata_gives_a_clean_error_or_a_working_tokenizer(changes):
    metadata = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": TOKENS,
        "tokenizer.ggml.merges": MERGES,
    }
    metadata.update(changes)
    gguf = GGUFFile(path=Path("fuzz.gguf"), version=3, metadata=metadata, tensors={})
    try:
        tok = Tokenizer.from_gguf(gguf)
    except WeightFileError as e:
        message = str(e)
        assert message.startswith("fuzz.gguf: "), message
        assert any(key in message for key in KEYS) or "token" in message, message
        return
    assert tok.vocab_size == len(metadata["tokenizer.ggml.tokens"])
    for i in range(tok.vocab_size):
        assert isinstance(tok.token_bytes(i), bytes)
    for text in TEXTS:
        try:
            ids = tok.encode(text, add_special=False)
        except WeightFileError as e:  # a byte the (cut) vocabulary has no token for
            assert str(e).startswith("fuzz.gguf: the vocabulary has no token for a byte"), str(e)
            continue
        assert all(0 <= i < tok.vocab_size for i in ids)
        assert tok.decode(ids) == text
        stream = tok.stream()
        assert "".join(stream.push(i) for i in ids) + stream.flush() == text
        bos = [tok.bos_id] if tok.add_bos and tok.bos_id is not None else []
        eos = [tok.eos_id] if tok.add_eos and tok.eos_id is not None else []
        assert tok.encode(text) == bos + ids + eos
