"""Fuzzed Hugging Face model folders (config.json, model.safetensors, tokenizer.json) loaded as `verigrad
generate` loads them, then run; each case in a subprocess (tests/fuzz_worker.py): the model loads and runs,
or a WeightFileError names the folder or its file; never a crash, a hang or another exception.

Mutations (seeded): a config value replaced by one of another type or an extreme, or dropped; the
tokenizer's vocabulary and merges made inconsistent (ids repeated, negative, past the embedding; merges of
unknown tokens; fields of the wrong type); the safetensors header's dtypes, shapes and offsets changed;
any of the three files cut, flipped or replaced by hostile JSON. VERIGRAD_FUZZ_CASES sets the cases
(default 20).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from fuzz_worker import FuzzWorker
from test_architectures import SMALL, _save_folder, _state

CASES = int(os.environ.get("VERIGRAD_FUZZ_CASES", "20"))
VALUES: list[Any] = [None, -1, 0, 1, 3, 2**31, 2**63, 10**30, 0.5, -0.0, 1e308, "x", "", True, [], {}, [1, 2]]
VALUES += [float("nan"), float("inf"), {"type": "linear", "factor": 0.0}, ["a"] * 3]
HOSTILE_FILES = [b"", b"{", b"[" * 100_000, b"\xff\xfe{}", b"null", b"[]", b'{"a": NaN}', b"1" + b"0" * 5000]


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> Path:
    config = dataclasses.replace(SMALL, vocab_size=256)
    folder = tmp_path_factory.mktemp("hf") / "model"
    _save_folder(folder, "llama", config, _state(config))
    return folder


def changed_json(text: str, rng: random.Random) -> bytes:
    """The JSON document with one value somewhere in it replaced, a key dropped or an entry added."""
    doc = json.loads(text)
    holders = []

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, dict | list) and depth < 4:
            holders.append(node)
            for child in node.values() if isinstance(node, dict) else node[:40]:
                walk(child, depth + 1)

    walk(doc, 0)
    node = rng.choice(holders)
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    if keys and rng.random() < 0.8:
        key = rng.choice(keys)
        if isinstance(node, dict) and rng.random() < 0.25:
            del node[key]
        else:
            node[key] = rng.choice(VALUES) if rng.random() < 0.7 else rng.randrange(-5, 300)
    elif isinstance(node, dict):
        node[rng.choice(["Ġx", "hidden_size", "merges", "ĠĠ", "x y"])] = rng.choice(VALUES)
    else:
        node.append(rng.choice([*VALUES, "Ġ Ġ", "x y", "Ġ", 7]))
    return json.dumps(doc, allow_nan=True).encode()


def changed_safetensors(blob: bytes, rng: random.Random) -> bytes:
    size = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + size])
    name = rng.choice([k for k in header if k != "__metadata__"])
    entry = header[name]
    field = rng.choice(["dtype", "shape", "data_offsets"])
    if field == "dtype":
        entry["dtype"] = rng.choice(["F16", "I64", "BOOL", "F8_E4M3", "X", "U64", 5])
    elif field == "shape":
        entry["shape"] = rng.choice([[], [0], [-1, 64], [2**40, 2**40], [64, 64, 64], "64", [1.5]])
    else:
        start, end = entry["data_offsets"]
        entry["data_offsets"] = rng.choice(
            [[end, start], [0, end - start], [start, 2**62], [-8, end], [start]]
        )
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob[8 + size :]


def mutate(folder: Path, rng: random.Random) -> None:
    target = folder / rng.choice(["config.json", "tokenizer.json", "model.safetensors"])
    blob = target.read_bytes()
    kind = rng.random()
    if kind < 0.6:
        is_json = target.suffix == ".json"
        blob = changed_json(blob.decode(), rng) if is_json else changed_safetensors(blob, rng)
    elif kind < 0.75 and target.suffix == ".json":
        blob = rng.choice(HOSTILE_FILES)
    elif kind < 0.9:
        blob = bytearray(blob)
        for _ in range(rng.randint(1, 4)):
            blob[rng.randrange(min(len(blob), 4096))] ^= 1 << rng.randrange(8)
        blob = bytes(blob)
    else:
        blob = blob[: rng.randrange(len(blob))]
    target.write_bytes(blob)


def test_fuzzed_folders_load_and_run_or_are_refused_naming_them(seed, tmp_path):
    failures, kinds = [], []
    with FuzzWorker(time_limit=20) as worker:
        for i in range(CASES):
            folder = tmp_path / f"case-{i}"
            shutil.copytree(seed, folder)
            mutate(folder, random.Random(i))
            outcome = worker.run("model", folder)
            kinds.append(outcome.kind)
            refused = outcome.kind == "refused" and outcome.detail.startswith("WeightFileError")
            if not (outcome.kind == "loaded" or (refused and str(folder) in outcome.detail)):
                failures.append(f"case {i}: {outcome.kind} {outcome.detail[:400]}")
            shutil.rmtree(folder)
    assert not failures, "\n".join(failures)
    assert "refused" in kinds


def test_the_seed_folder_loads_and_runs(seed):
    with FuzzWorker(time_limit=30) as worker:
        outcome = worker.run("model", seed)
    assert outcome.kind == "loaded", outcome.detail


def _with_vocab_id(folder: Path) -> None:
    spec = json.loads((folder / "tokenizer.json").read_text())
    spec["model"]["vocab"]["ĠĠ"] = 2**31
    (folder / "tokenizer.json").write_text(json.dumps(spec))


HOSTILE_FOLDERS = {  # what is done to the folder, what the error must say
    "a vocabulary id of 2**31": (_with_vocab_id, r"tokenizer\.json: token id 2147483648 is not an integer"),
    "config.json nested too deeply": (
        lambda f: (f / "config.json").write_bytes(b"[" * 100_000),
        r"config\.json: not a readable JSON file \(nested too deeply\)",
    ),
    "tokenizer_config.json a list": (
        lambda f: (f / "tokenizer_config.json").write_text("[1]"),
        r"tokenizer_config\.json: expected a JSON object, found list",
    ),
}


@pytest.mark.parametrize("fault", list(HOSTILE_FOLDERS))
def test_hostile_folders_are_refused_in_bounded_memory(seed, tmp_path, fault):
    change, message = HOSTILE_FOLDERS[fault]
    folder = tmp_path / "model"
    shutil.copytree(seed, folder)
    change(folder)
    with FuzzWorker(time_limit=20, memory_mib=512) as worker:
        outcome = worker.run("model", folder)
    assert outcome.kind == "refused" and re.search(message, outcome.detail), outcome
