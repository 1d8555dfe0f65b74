"""Fuzzed checkpoints given to `verigrad train lm --resume` and `verigrad finetune --resume`: each case, run
in a subprocess (tests/fuzz_worker.py), either resumes and trains a step or is refused with an error naming
the checkpoint; never a crash, a hang, another exception or a step on tensors of the wrong shape.

The runs are the test's own (a 1-layer GPT on a written corpus, LoRA on llama_gguf's tiny model); the
mutations are seeded: metadata values replaced by hostile JSON, tensors reshaped, retyped, dropped, added
or renamed, and the file's bytes flipped or cut. VERIGRAD_FUZZ_CASES sets the cases per test (default 12).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from finetune_fakes import write_chats
from fuzz_worker import FuzzWorker
from llama_gguf import write_llama_gguf
from test_lm_train import tiny, write_corpus

from verigrad.cli import finetune_trainer as ft
from verigrad.cli import lm_trainer
from verigrad.io import load
from verigrad.io.safetensors_format import read_metadata, safetensors_bytes

CASES = int(os.environ.get("VERIGRAD_FUZZ_CASES", "12"))
HOSTILE_JSON = [
    "null",
    "[]",
    "{}",
    '"x"',
    "-1",
    "1e400",
    "NaN",
    "3.5",
    "true",
    "99999999999999999999999",
    '[{"lr": "fast"}]',
    '[{"lr": 0.1}, {"lr": 0.1}]',
    '{"loss": "x"}',
    '{"initial": "x", "pcg64": 5}',
    "[" * 5000 + "]" * 5000,
    "not json",
]
DTYPES = [np.float16, np.float64, np.int64, np.int32, np.bool_, np.uint8]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, dict, str]]:
    """command -> (the run's checkpoint, the config to resume it with, the corpus cache)."""
    root = tmp_path_factory.mktemp("runs")
    cache = str(root / "cache")
    lm = tiny(write_corpus(root / "corpus", files=4, functions=12), root / "lm", steps=1, compiled=False)
    lm_trainer.train(lm_trainer.prepare(lm, cache=cache))
    model, chats = write_llama_gguf(root / "tiny.gguf"), write_chats(root / "chats.jsonl", 6)
    fields = dict(model=str(model), data=str(chats), out=str(root / "ft"), steps=1, batch=2, context=64)
    fields |= dict(eval_every=1, save_every=1, threads=1, rank=2, alpha=4.0, compiled=False, sample_tokens=1)
    finetune = ft.FinetuneConfig(**fields)
    ft.train(ft.prepare(finetune))
    configs = {"lm": lm.__dict__, "finetune": finetune.__dict__}
    checkpoints = {"lm": root / "lm" / lm_trainer.CHECKPOINT, "finetune": root / "ft" / ft.CHECKPOINT}
    return {k: (checkpoints[k], dict(configs[k], steps=100), cache) for k in configs}


def mutated(checkpoint: Path, rng: random.Random) -> bytes:
    """The checkpoint with 1 to 3 changes to its metadata or tensors, or its bytes flipped or cut."""
    meta = read_metadata(checkpoint)
    tensors = {k: v.numpy() for k, v in load(checkpoint).items()}
    if rng.random() < 0.2:
        blob = bytearray(checkpoint.read_bytes())
        if rng.random() < 0.5:
            return bytes(blob[: rng.randrange(len(blob))])
        for _ in range(rng.randint(1, 8)):
            blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        return bytes(blob)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        name = rng.choice(sorted(tensors))
        if kind == 0:
            key = rng.choice(sorted(meta))
            meta[key] = rng.choice(HOSTILE_JSON)
        elif kind == 1:
            meta.pop(rng.choice(sorted(meta)))
        elif kind == 2:
            shape = list(tensors[name].shape) or [1]
            shape[rng.randrange(len(shape))] += rng.choice([-1, 1, 7])
            if rng.random() < 0.3:
                shape.append(2)
            tensors[name] = np.ones([max(d, 0) for d in shape], tensors[name].dtype)
        elif kind == 3:
            tensors[name] = tensors[name].astype(rng.choice(DTYPES))
        elif kind == 4:
            tensors.pop(name)
        elif kind == 5:
            new = rng.choice(["optimizer.x.exp_avg", "optimizer.0", "optimizer.99.exp_avg", "blocks.9.w"])
            tensors[new] = tensors.pop(name) if rng.random() < 0.5 else np.zeros(3, np.float32)
        else:
            values = tensors[name].copy()
            if values.dtype.kind == "f" and values.size:
                values.flat[rng.randrange(values.size)] = rng.choice([np.nan, np.inf, -np.inf, 1e38])
            tensors[name] = values
    return safetensors_bytes(tensors, meta)


@pytest.mark.parametrize("command", ["lm", "finetune"])
def test_fuzzed_checkpoints_resume_or_are_refused_naming_the_file(runs, command, tmp_path):
    checkpoint, config, cache = runs[command]
    out = tmp_path / "run"
    shutil.copytree(checkpoint.parent, out)
    target = out / checkpoint.name
    failures = []
    with FuzzWorker(time_limit=30) as worker:
        for i in range(CASES):
            target.write_bytes(mutated(checkpoint, random.Random(f"{command}-{i}")))
            outcome = worker.run(
                "resume", target, command=command, config=dict(config, out=str(out)), cache=cache
            )
            named = str(target) in outcome.detail
            # finite values no check can call wrong (a norm weight of 3e38) overflow in the first step: the
            # trainer stops there, writing nothing
            named = named or "training diverged, no checkpoint written" in outcome.detail
            if outcome.kind == "loaded" or (
                outcome.kind == "refused" and named and len(outcome.detail) < 1500
            ):
                continue
            failures.append(f"case {i}: {outcome.kind} {outcome.detail[:400]}")
    assert not failures, "\n".join(failures)


def test_the_valid_checkpoints_resume(runs, tmp_path):
    with FuzzWorker(time_limit=60) as worker:
        for command, (checkpoint, config, cache) in runs.items():
            out = tmp_path / command
            shutil.copytree(checkpoint.parent, out)
            outcome = worker.run(
                "resume",
                out / checkpoint.name,
                command=command,
                config=dict(config, out=str(out)),
                cache=cache,
            )
            assert outcome.kind == "loaded", outcome.detail
    assert json.loads(read_metadata(out / checkpoint.name)["step"]) == 2
