"""A few chat examples as JSONL for the fine-tuning tests (their model: llama_gguf's)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

QUESTIONS = ["hello", "world", "hello world", "hell", "low", "old", "word", "lord"]


def write_chats(path: Path, count: int = 12, seed: int = 0) -> Path:
    """`count` JSONL lines, chat messages and prompt/completion pairs alternating."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(count):
        question = QUESTIONS[int(rng.integers(len(QUESTIONS)))]
        answer = " ".join([question] * int(rng.integers(1, 4)))
        if i % 2:
            lines.append({"prompt": question, "completion": answer})
        else:
            lines.append(
                {
                    "messages": [
                        {"role": "user", "content": question},
                        {"role": "assistant", "content": answer},
                    ]
                }
            )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
