"""Fuzzed JSONL fine-tuning data (`verigrad finetune --data`): each file gives examples whose ids are in the
vocabulary, or a ValueError naming the file and the line; never a crash, a hang or another exception
(UnicodeDecodeError, RecursionError, or a data fault blamed on the model file). Each case runs in a
subprocess (tests/fuzz_worker.py). VERIGRAD_FUZZ_CASES sets the random cases (default 30)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from finetune_fakes import write_chats
from fuzz_worker import FuzzWorker
from lm_fakes import write_tokenizer_gguf

from verigrad.cli.finetune_data import prepare_examples
from verigrad.io.tokenizer import Tokenizer

CASES = int(os.environ.get("VERIGRAD_FUZZ_CASES", "30"))
SNIPPETS = [
    b"\xff",
    b"\xc3",
    b"\xef\xbb\xbf",
    b"[" * 3000,
    b"\\ud800",
    b"\\udfff\\ud800",
    b"NaN",
    b"1" + b"0" * 5000,
    b"null",
    b'"role": 5',
    b'{"messages": []}',
    b"\x00",
    b"\n",
    b'"',
    b"}",
    b"\\u0000",
]
HOSTILE_LINES = {
    "not UTF-8": b'{"prompt": "a\xff", "completion": "b"}\n',
    "nested too deeply": b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
    "lone surrogate": b'{"prompt": "\\ud800", "completion": "hello"}\n',
    "not JSON": b'{"prompt": 1' + b"0" * 5000 + b', "completion": "b"}\n',
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, bytes]:
    folder = tmp_path_factory.mktemp("data")
    return write_tokenizer_gguf(folder / "tok.gguf"), write_chats(folder / "chats.jsonl", 6).read_bytes()


def mutated(blob: bytes, rng: random.Random) -> bytes:
    out = bytearray(blob)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(out) + 1)
        kind = rng.randrange(4)
        if kind == 0:
            out[at:at] = rng.choice(SNIPPETS)
        elif kind == 1 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 2:
            del out[at : at + rng.randint(1, 40)]
        else:
            del out[at:]
    return bytes(out)


def test_fuzzed_data_gives_examples_or_an_error_naming_the_line(files, tmp_path):
    tokenizer, blob = files
    failures = []
    with FuzzWorker(time_limit=20) as worker:
        for i in range(CASES):
            path = tmp_path / f"case-{i}.jsonl"
            path.write_bytes(mutated(blob, random.Random(i)))
            outcome = worker.run("finetune_data", path, tokenizer=str(tokenizer))
            named = f"--data {path}" in outcome.detail
            if not (outcome.kind == "loaded" or (outcome.kind == "refused" and named)):
                failures.append(f"case {i}: {outcome.kind} {outcome.detail[:300]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("fault", list(HOSTILE_LINES))
def test_a_hostile_line_is_named(files, tmp_path, fault):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'{"prompt": "hello", "completion": "world"}\n' + HOSTILE_LINES[fault])
    with pytest.raises(ValueError, match=rf"^--data {path}, line 2: .*{fault}"):
        prepare_examples(path, Tokenizer.from_gguf(files[0]), 64)


def test_a_byte_order_mark_is_read_past(files, tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"prompt": "hello", "completion": "world"}\n')
    examples, _ = prepare_examples(path, Tokenizer.from_gguf(files[0]), 64)
    assert len(examples) == 1
