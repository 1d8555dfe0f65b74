"""Fine-tuning data: JSONL lines of chat messages (`{"messages": [{"role": ..., "content": ...}, ...]}`) or
prompt/completion pairs (`{"prompt": ..., "completion": ...}`, a user turn and the assistant's answer),
formatted with the model's chat template and tokenized, with a mask of the answer tokens (the
assistants' turns, their end-of-turn marker included): the loss is taken on those alone.

A conversation is rendered turn by turn: the text up to each assistant turn (with the template's
generation prompt) and the text that turn adds are tokenized separately, so the mask follows the
template's own boundaries."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

IGNORE = -100  # cross_entropy's ignore_index: a target the loss skips
DEMO = Path(__file__).resolve().parents[1] / "data" / "finetune_demo.jsonl"  # `--data demo`


@dataclass(frozen=True)
class Example:
    """One conversation's token ids and which of them are answer tokens."""

    ids: np.ndarray  # int64 [n]
    answer: np.ndarray  # bool [n]


def read_jsonl(path: str | Path) -> list[list[dict[str, str]]]:
    """The conversations of a JSONL file ("demo": the 30 examples shipped with verigrad), each a list of
    messages; a bad line is a ValueError naming the file and the line."""
    path = DEMO if str(path) == "demo" else Path(path)
    if not path.is_file():
        raise ValueError(f"--data {path}: no such file")
    out = []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            where = f"--data {path}, line {number}"
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            if line.strip():
                out.append(_messages(line, where))
    if not out:
        raise ValueError(f"--data {path}: no examples in it (one JSON object a line)")
    return out


def _messages(line: str, where: str) -> list[dict[str, str]]:
    try:
        item = json.loads(line)
    except ValueError as e:
        raise ValueError(f"{where}: not JSON ({e})") from None
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply") from None
    if isinstance(item, dict) and set(item) >= {"prompt", "completion"}:
        if not all(isinstance(item[k], str) for k in ("prompt", "completion")):
            raise ValueError(f"{where}: prompt and completion must be strings")
        item = {
            "messages": [
                {"role": "user", "content": item["prompt"]},
                {"role": "assistant", "content": item["completion"]},
            ]
        }
    messages = item.get("messages") if isinstance(item, dict) else None
    if not isinstance(messages, list) or not messages:
        raise ValueError(
            f'{where}: expected {{"messages": [{{"role": ..., "content": ...}}, ...]}} or '
            f'{{"prompt": ..., "completion": ...}}, got {line.strip()[:60]!r}'
        )
    for m in messages:
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise ValueError(f"{where}: a message is {{'role': str, 'content': str}}, got {str(m)[:60]!r}")
        if not (_is_unicode(m["role"]) and _is_unicode(m["content"])):
            raise ValueError(f"{where}: a message holds a lone surrogate (\\ud800-\\udfff): not Unicode text")
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError(f"{where}: no assistant message, so nothing to learn from")
    return messages


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def encode_chat(tokenizer: Any, messages: list[dict[str, str]], where: str = "") -> Example:
    """The conversation's tokens (the template's rendering) and its answer-token mask."""
    ids: list[int] = []
    answer: list[bool] = []
    done = ""
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(messages[:i], add_generation_prompt=True) if i else ""
        full = tokenizer.apply_chat_template(messages[: i + 1], add_generation_prompt=False)
        if not (prompt.startswith(done) and full.startswith(prompt)):
            raise ValueError(
                f"{where}: the chat template does not render a conversation as the text of its beginning "
                "followed by the rest, so the answer tokens cannot be told apart"
            )
        for text, is_answer in ((prompt[len(done) :], False), (full[len(prompt) :], True)):
            piece = tokenizer.encode(text, add_special=False) if text else []
            ids += piece
            answer += [is_answer] * len(piece)
        done = full
    return Example(np.array(ids, dtype=np.int64), np.array(answer, dtype=bool))


def prepare_examples(path: str | Path, tokenizer: Any, context: int) -> tuple[list[Example], int]:
    """The file's examples, each cut to context + 1 tokens, and how many were cut. An example with no
    answer token in its first context + 1 tokens is refused."""
    examples, cut = [], 0
    for number, messages in enumerate(read_jsonl(path), 1):
        where = f"--data {path}, example {number}"
        e = encode_chat(tokenizer, messages, where)
        if len(e.ids) > context + 1:
            e, cut = Example(e.ids[: context + 1], e.answer[: context + 1]), cut + 1
        if not e.answer[1:].any():
            raise ValueError(f"{where}: no answer token within the first {context} (--context) tokens")
        examples.append(e)
    return examples, cut


def split(examples: list[Example], seed: int) -> tuple[list[Example], list[Example]]:
    """(training, validation): one in ten examples for validation (none below 10 examples), by a
    permutation fixed by the seed."""
    count = len(examples) // 10
    order = np.random.default_rng([seed, 10]).permutation(len(examples))
    held = set(order[:count].tolist())
    return [e for i, e in enumerate(examples) if i not in held], [examples[i] for i in sorted(held)]


def rows(examples: list[Example], length: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs [n, length] (padded with `pad`) and targets [n, length] (the next token where it is an
    answer token, else IGNORE)."""
    x = np.full((len(examples), length), pad, dtype=np.int64)
    y = np.full((len(examples), length), IGNORE, dtype=np.int64)
    for r, e in enumerate(examples):
        n = len(e.ids) - 1
        x[r, :n] = e.ids[:-1]
        y[r, :n] = np.where(e.answer[1:], e.ids[1:], IGNORE)
    return x, y


class ChatBatches:
    """Micro-batches (inputs, targets) [A, B, T] of step s: the examples in the order of a permutation
    per epoch drawn from (seed, epoch), so any step's batch is the same whether the run got there
    straight or resumed. T is the longest example's length (at most the context)."""

    def __init__(self, examples: list[Example], batch: int, accumulate: int, seed: int, pad: int):
        if not examples:
            raise ValueError("no training examples")
        self.examples, self.batch, self.accumulate, self.seed, self.pad = (
            examples,
            batch,
            accumulate,
            seed,
            pad,
        )
        self.length = max(len(e.ids) for e in examples) - 1

    def indices(self, step: int) -> np.ndarray:
        per_step, n = self.batch * self.accumulate, len(self.examples)
        first, last = step * per_step, (step + 1) * per_step
        epochs = range(first // n, (last - 1) // n + 1)
        order = np.concatenate([np.random.default_rng([self.seed, e]).permutation(n) for e in epochs])
        start = first - epochs[0] * n
        return order[start : start + per_step]

    def __call__(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        x, y = rows([self.examples[i] for i in self.indices(step)], self.length, self.pad)
        shape = (self.accumulate, self.batch, self.length)
        return x.reshape(shape), y.reshape(shape)
