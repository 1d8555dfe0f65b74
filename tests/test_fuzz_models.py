"""Fuzzed GGUF models loaded as `verigrad generate` loads them (`load_language_model`: tokenizer, weights,
the model's shapes checked against its metadata), then run: a prompt's logits and greedy steps with the KV
cache. Each case runs in a subprocess (tests/fuzz_worker.py) under a time and memory limit and must load
and run, or be refused with a WeightFileError naming the file; never crash, hang or raise anything else.
The same mutants go through `quantize_gguf`, which must refuse them leaving no output file, or write one
that loads.

Seeds: llama_gguf's tiny Llama (Q8_0, Q4_1 and Q5_0 matrices) and Qwen2/Qwen3 models with its tokenizer.
Mutations (seeded): a header number (count, length, value type, dim, tensor type, offset, hyperparameter)
set to an edge value, a metadata value replaced by one of another type, bytes flipped, the file cut.
VERIGRAD_FUZZ_CASES sets the cases per seed (default 8).
"""

from __future__ import annotations

import dataclasses
import os
import random
import struct
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
from fuzz_worker import FuzzWorker
from gguf_header import header_fields
from llama_gguf import write_llama_gguf
from lm_fakes import add_tokenizer
from test_architectures import FLAGS, SMALL, _gguf_name, _state

CASES = int(os.environ.get("VERIGRAD_FUZZ_CASES", "8"))
EDGES = [0, 1, 2, 3, 31, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**63, 2**64 - 1]
T = gguf.GGUFValueType
HOSTILE_VALUES: list[tuple[Any, T, T | None]] = [
    ("twelve", T.STRING, None),
    (-1, T.INT32, None),
    (0, T.UINT32, None),
    (2**31, T.UINT32, None),
    (2**63, T.UINT64, None),
    (-(2**63), T.INT64, None),
    (1.5, T.FLOAT32, None),
    (float("nan"), T.FLOAT32, None),
    (float("inf"), T.FLOAT64, None),
    (True, T.BOOL, None),
    ([1, 2, 3], T.ARRAY, T.UINT32),
    (["a", "b"], T.ARRAY, T.STRING),
    ("", T.STRING, None),
]


def write_qwen(path: Path, arch: str) -> Path:
    """A Qwen2 or Qwen3 GGUF (test_architectures' small config) with lm_fakes' tokenizer."""
    from lm_fakes import vocabulary

    config = dataclasses.replace(SMALL, vocab_size=len(vocabulary()[0]), **FLAGS[arch])
    w = gguf.GGUFWriter(str(path), arch)
    keys = {"context_length": config.context_length, "embedding_length": config.dim}
    keys |= {"block_count": config.n_layers, "feed_forward_length": config.ffn_dim}
    keys |= {"attention.head_count": config.n_heads, "attention.head_count_kv": config.n_kv_heads}
    for key, value in (keys | {"attention.key_length": config.head_dim}).items():
        w.add_uint32(f"{arch}.{key}", value)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", config.norm_eps)
    add_tokenizer(w)
    q8 = gguf.GGMLQuantizationType.Q8_0
    for key, array in _state(config).items():
        raw = (array, None) if array.ndim == 1 else (gguf.quants.quantize(array, q8), q8)
        w.add_tensor(_gguf_name(key), raw[0], raw_dtype=raw[1])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def rewritten(seed: Path, path: Path, key: str, value: tuple[Any, T, T | None] | None) -> Path:
    """`seed` written again with metadata `key` set to `value` (value, type, item type), or dropped."""
    reader = gguf.GGUFReader(seed)
    w = gguf.GGUFWriter(str(path), str(reader.fields["general.architecture"].contents()))
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == key:
            if value is not None:
                w.add_key_value(name, value[0], value[1], sub_type=value[2])
            continue
        sub = field.types[1] if len(field.types) > 1 else None
        w.add_key_value(name, field.contents(), field.types[0], sub_type=sub)
    for t in reader.tensors:
        raw = None if t.tensor_type in (0, 1) else t.tensor_type
        data = t.data if raw is None else np.asarray(t.data)
        w.add_tensor(t.name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("seeds")
    llama = write_llama_gguf(folder / "llama.gguf", qtypes={"ffn_down": "Q4_1", "ffn_up": "Q5_0"}, tied=False)
    return {"llama": llama, **{arch: write_qwen(folder / f"{arch}.gguf", arch) for arch in FLAGS}}


def mutant(seed: Path, path: Path, rng: random.Random) -> Path:
    fields, keys = header_fields(seed)
    kind = rng.random()
    if kind < 0.3:
        value = rng.choice([None, *HOSTILE_VALUES]) if rng.random() < 0.9 else None
        return rewritten(seed, path, rng.choice(keys), value)
    blob = bytearray(seed.read_bytes())
    if kind < 0.65:
        for _ in range(rng.randint(1, 2)):
            at, width = rng.choice(fields)
            number = rng.choice(EDGES) if rng.random() < 0.7 else rng.randrange(2 ** (8 * width))
            struct.pack_into("<I" if width == 4 else "<Q", blob, at, number % 2 ** (8 * width))
    elif kind < 0.9:
        header = fields[-1][0] + 8
        for _ in range(rng.randint(1, 4)):
            where = rng.randrange(header if rng.random() < 0.7 else len(blob))
            blob[where] ^= 1 << rng.randrange(8)
    else:
        del blob[rng.randrange(len(blob)) :]
    path.write_bytes(bytes(blob))
    return path


def outcome_failures(outcome: Any, path: Path, case: str) -> list[str]:
    if outcome.kind == "loaded":
        return []
    if (
        outcome.kind == "refused"
        and outcome.detail.startswith(("WeightFileError", "Refused"))
        and str(path) in outcome.detail
    ):
        return [] if len(outcome.detail) < 1500 else [f"{case}: an error of {len(outcome.detail)} characters"]
    return [f"{case}: {outcome.kind} {outcome.detail[:500]}"]


@pytest.mark.parametrize("arch", ["llama", *FLAGS])
def test_fuzzed_models_load_and_run_or_are_refused_naming_the_file(seeds, arch, tmp_path):
    failures, kinds = [], []
    with FuzzWorker(time_limit=20) as worker:
        for i in range(CASES):
            path = mutant(seeds[arch], tmp_path / f"{arch}-{i}.gguf", random.Random(f"{arch}-{i}"))
            outcome = worker.run("model", path)
            kinds.append(outcome.kind)
            failures += outcome_failures(outcome, path, f"{arch} case {i}")
            path.unlink()
    assert not failures, "\n".join(failures)
    assert "refused" in kinds


def test_fuzzed_models_quantize_whole_or_leave_no_file(seeds, tmp_path):
    failures = []
    with FuzzWorker(time_limit=30) as worker:
        for i in range(CASES):
            arch = ["llama", *FLAGS][i % 3]
            path = mutant(seeds[arch], tmp_path / f"{arch}-{i}.gguf", random.Random(f"q-{arch}-{i}"))
            out = tmp_path / "out.gguf"
            outcome = worker.run(
                "quantize", path, out=str(out), type_name=random.Random(i).choice(["q4_k_m", "q8_0"])
            )
            failures += outcome_failures(outcome, path, f"quantize {arch} case {i}")
    assert not failures, "\n".join(failures)


def test_the_seeds_load_and_run(seeds):
    with FuzzWorker(time_limit=30) as worker:
        for arch, path in seeds.items():
            outcome = worker.run("model", path)
            assert outcome.kind == "loaded", f"{arch}: {outcome.detail}"
