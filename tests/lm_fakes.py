"""Small stand-ins for the language-model tests: a byte-level BPE tokenizer written as a GGUF file, and a
language model whose logits come from a table indexed by the previous token, so generation is exact."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from verigrad.io.tokenizer import Tokenizer, byte_alphabet
from verigrad.models.lm import KVCache, LanguageModel
from verigrad.ops import from_numpy

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "Ġ Ġ"]
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def vocabulary() -> tuple[list[str], list[int]]:
    """Tokens and token types: 3 control tokens, the 256 bytes, one token per merge, `<think>`."""
    tokens = [*SPECIALS, *byte_alphabet().values(), *(m.replace(" ", "") for m in MERGES), "<think>"]
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS) - 1) + [4]
    return tokens, types


def token_id(text: str) -> int:
    """The id of a token given in the byte alphabet (e.g. "Ġworld")."""
    return vocabulary()[0].index(text)


def write_tokenizer_gguf(path: Path, *, add_bos: bool = False, model: str = "gpt2", **overrides) -> Path:
    """A GGUF file holding only a tokenizer (no tensors). `overrides` replace metadata: pre, tokens,
    types, merges, chat_template (None leaves it out)."""
    w = gguf.GGUFWriter(str(path), "llama")
    add_tokenizer(w, add_bos=add_bos, model=model, **overrides)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def add_tokenizer(w: gguf.GGUFWriter, *, add_bos: bool = False, model: str = "gpt2", **overrides) -> None:
    """The byte-level tokenizer and ChatML template above as `w`'s metadata (bos 1, eos 2), with
    `write_tokenizer_gguf`'s `overrides`."""
    tokens, types = vocabulary()
    tokens, types = overrides.get("tokens", tokens), overrides.get("types", types)
    w.add_tokenizer_model(model)
    w.add_tokenizer_pre(overrides.get("pre", "smollm"))
    w.add_token_list(tokens)
    w.add_token_types(types)
    if overrides.get("merges", MERGES) is not None:
        w.add_token_merges(overrides.get("merges", MERGES))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(add_bos)
    template = overrides.get("chat_template", CHATML)
    if template is not None:
        w.add_chat_template(template)


def tokenizer(tmp_path: Path, **kwargs) -> Tokenizer:
    return Tokenizer.from_gguf(write_tokenizer_gguf(tmp_path / "tok.gguf", **kwargs))


class TableLM(LanguageModel):
    """Logits of the next token = `table[previous token]`; records the length of every forward call.
    `interrupt_at`: the forward call (counting from 0) that raises KeyboardInterrupt."""

    def __init__(self, table: np.ndarray, context_length: int = 64, interrupt_at: int | None = None):
        super().__init__()
        self.table = np.asarray(table, dtype=np.float32)
        self.vocab_size = self.table.shape[1]
        self.context_length = context_length
        self.calls: list[int] = []
        self.interrupt_at = interrupt_at

    def new_cache(self, batch=1, capacity=None, allocate=None, dtype="f32") -> KVCache:
        return KVCache(keys=[], values=[], capacity=capacity or self.context_length)

    def forward(self, ids, cache: KVCache | None = None):
        ids = np.asarray(ids)
        assert ids.ndim == 2 and ids.dtype == np.int64, (ids.shape, ids.dtype)
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        self.calls.append(ids.shape[1])
        if cache is not None:
            assert cache.length + ids.shape[1] <= cache.capacity, "past the cache's capacity"
            cache.length += ids.shape[1]
        return from_numpy(self.table[ids])


def chain_table(vocab: int, chain: dict[int, int], seed: int = 0) -> np.ndarray:
    """Random logits in [-1, 1], except that after token a, token chain[a] has logit 10."""
    table = np.random.default_rng(seed).uniform(-1, 1, (vocab, vocab))
    for a, b in chain.items():
        table[a, b] = 10.0
    return table
