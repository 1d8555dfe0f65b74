"""`verigrad quantize`: a GGUF file rewritten with its weights in another type, by llama.cpp's rules.

`plan(source, type)` decides each tensor's type as `llama-quantize` does without an importance matrix
(`llama_tensor_get_type` in llama.cpp's src/llama-quant.cpp), `quantize_gguf` writes the file: metadata
and tokenizer copied, `general.file_type` and `general.quantization_version` set, tensors in llama.cpp's
order (by layer, then name), each quantized by io/quantizers.py (llama.cpp's reference quantizers), the
file written to a temporary beside the target and renamed over it.

The types (`TYPES`): llama.cpp's file types `q8_0`, `q4_0`, `q4_1`, `q5_0`, `q5_1`, `q2_k`, `q6_k`, `f16`,
`f32` and the mixtures `q3_k_m`, `q4_k_s`, `q4_k_m`, `q5_k_s`, `q5_k_m`, with llama.cpp's rules:
- the output matrix (or the token embedding where the model ties them) gets q6_k (q8_0 where its rows are
  not whole blocks of the type, or the type is q8_0);
- attn_v: q2_k -> q3_k (q4_k if 4+ query heads share a key head); q3_k_m -> q5_k for the first two
  layers, else q4_k; q4_k_m/q5_k_m -> q6_k where `use_more_bits` (the first and last eighth of the
  layers and every third between); q4_k_s -> q5_k for the first four;
- ffn_down: q2_k -> q3_k; q3_k_m -> q5_k for the first 16th, else q4_k; q4_k_m/q5_k_m -> q6_k where
  `use_more_bits`; q4_k_s -> q5_k for the first eighth;
- attn_output: q2_k -> q3_k; q3_k_m -> q4_k;
- a matrix whose rows are not whole blocks of its type falls back as llama.cpp's does (q2_k/q3_k ->
  q4_0, q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, then f16).
`q3_k`, `q4_k` and `q5_k` are single types: every matrix in that type (llama.cpp reads those names as the
_m mixtures); `pure=True` makes any type single, as `llama-quantize --pure`.
Not reproduced (they concern models verigrad does not load): the rules for mixture-of-experts models
(8 experts), Falcon, 70B-sized models and the IQ types. Vectors (norms, biases) stay f32.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter, LlamaFileType

from ..errors import WeightFileError
from ..ops.quant import FORMATS
from .gguf import GGUFFile, GGUFTensor, _CheckedReader, read_gguf, shown
from .gguf_writer import write_gguf
from .quantizers import quantize

QUANTIZATION_VERSION = 2  # GGML_QNT_VERSION


@dataclass(frozen=True)
class FileType:
    """A `--type`: the default tensor type, llama.cpp's file type number, and whether the mixture rules
    apply."""

    default: str
    ftype: LlamaFileType
    mixture: bool = True


TYPES: dict[str, FileType] = {
    "f32": FileType("f32", LlamaFileType.ALL_F32),
    "f16": FileType("f16", LlamaFileType.MOSTLY_F16),
    "q8_0": FileType("q8_0", LlamaFileType.MOSTLY_Q8_0),
    "q4_0": FileType("q4_0", LlamaFileType.MOSTLY_Q4_0),
    "q4_1": FileType("q4_1", LlamaFileType.MOSTLY_Q4_1),
    "q5_0": FileType("q5_0", LlamaFileType.MOSTLY_Q5_0),
    "q5_1": FileType("q5_1", LlamaFileType.MOSTLY_Q5_1),
    "q2_k": FileType("q2_k", LlamaFileType.MOSTLY_Q2_K),
    "q3_k": FileType("q3_k", LlamaFileType.MOSTLY_Q3_K_M, mixture=False),
    "q4_k": FileType("q4_k", LlamaFileType.MOSTLY_Q4_K_M, mixture=False),
    "q5_k": FileType("q5_k", LlamaFileType.MOSTLY_Q5_K_M, mixture=False),
    "q6_k": FileType("q6_k", LlamaFileType.MOSTLY_Q6_K),
    "q3_k_m": FileType("q3_k", LlamaFileType.MOSTLY_Q3_K_M),
    "q4_k_s": FileType("q4_k", LlamaFileType.MOSTLY_Q4_K_S),
    "q4_k_m": FileType("q4_k", LlamaFileType.MOSTLY_Q4_K_M),
    "q5_k_s": FileType("q5_k", LlamaFileType.MOSTLY_Q5_K_S),
    "q5_k_m": FileType("q5_k", LlamaFileType.MOSTLY_Q5_K_M),
}
_FALLBACK = {"q2_k": "q4_0", "q3_k": "q4_0", "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}
# metadata the writer sets itself, or that no longer holds in the new file
_DROPPED = {"general.architecture", "general.file_type", "general.quantization_version", "general.alignment"}
_DROPPED |= {"split.no", "split.count", "split.tensors.count"}


@dataclass(frozen=True)
class Step:
    """One tensor of the new file: its source, the type it gets, and whether that takes decoding a
    quantized source (llama.cpp's requantizing)."""

    tensor: GGUFTensor
    qtype: str

    @property
    def requantized(self) -> bool:
        return self.tensor.qtype not in ("f32", "f16", "bf16") and self.qtype != self.tensor.qtype


def _layer(name: str) -> int:
    match = re.match(r"blk\.(\d+)\.", name)
    return int(match.group(1)) if match else -1


def _quantizable(name: str, shape: tuple[int, ...]) -> bool:
    """llama.cpp's tensor_allows_quantization for the tensors of the models verigrad reads: matrices named
    *weight, not norms, not an expert router, not position or token-type embeddings."""
    excluded = ("_norm.weight", "ffn_gate_inp.weight", "position_embd.weight", "token_types.weight")
    return len(shape) >= 2 and name.endswith("weight") and not any(e in name for e in excluded)


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


class _Rules:
    """llama_tensor_get_type's mixture rules, with its counters (kept in the order tensors are visited)."""

    def __init__(self, name: str, source: GGUFFile) -> None:
        self.name = name
        arch = source.arch
        heads = _count(source, f"{arch}.attention.head_count", 1) or 1
        kv_heads = _count(source, f"{arch}.attention.head_count_kv", heads) or heads
        self.gqa = heads // kv_heads
        self.n_layer = _count(source, f"{arch}.block_count", 0)
        names = source.tensors
        self.tied = "output.weight" not in names
        self.n_attn_v = sum(1 for n in names if re.search(r"attn_(v|qkv|kv_b)\.weight", n))
        self.i_attn_v = self.i_ffn_down = 0

    def choose(self, tensor: GGUFTensor, qtype: str) -> str:
        name, t = tensor.name, self.name
        if name == "output.weight" or (self.tied and name == "token_embd.weight"):
            if tensor.shape[-1] % FORMATS[qtype].block or qtype == "q8_0":
                return "q8_0"
            return "q6_k"
        if re.search(r"attn_(v|qkv|kv_b)\.weight", name):
            i, n = self.i_attn_v, self.n_attn_v
            self.i_attn_v += 1
            if t == "q2_k":
                return "q4_k" if self.gqa >= 4 else "q3_k"
            if t == "q3_k_m":
                return "q5_k" if i < 2 else "q4_k"
            if t in ("q4_k_m", "q5_k_m") and _use_more_bits(i, n):
                return "q6_k"
            if t == "q4_k_s" and i < 4:
                return "q5_k"
            return qtype
        if "ffn_down" in name:
            i, n = self.i_ffn_down, self.n_layer
            self.i_ffn_down += 1
            if t == "q2_k":
                return "q3_k"
            if t == "q3_k_m":
                return "q5_k" if i < n // 16 else "q4_k"
            if t in ("q4_k_m", "q5_k_m") and _use_more_bits(i, n):
                return "q6_k"
            if t == "q4_k_s" and i < n // 8:
                return "q5_k"
            return qtype
        if "attn_output.weight" in name:
            return {"q2_k": "q3_k", "q3_k_m": "q4_k"}.get(t, qtype)
        return qtype


def _count(source: GGUFFile, key: str, default: int) -> int:
    """A hyperparameter the mixture rules read: a non-negative integer, else a WeightFileError."""
    value = source.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise WeightFileError(f"{source.path}: {key} is {shown(value)}; the mixture rules need a count")
    return value


def _fallback(qtype: str, k: int) -> str:
    """llama.cpp's tensor_type_fallback: a type whose blocks divide rows of k values."""
    if k % FORMATS[qtype].block == 0:
        return qtype
    other = _FALLBACK.get(qtype, "f16")
    return other if k % FORMATS[other].block == 0 else "f16"


def plan(source: GGUFFile, type_name: str, pure: bool = False) -> list[Step]:
    """Each tensor of `source` with the type it gets under `type_name` (a key of TYPES), in llama.cpp's
    order: by layer number (tensors outside the layers first), then name."""
    if type_name not in TYPES:
        raise ValueError(f"quantize: unknown type {type_name!r}; one of {', '.join(TYPES)}")
    file_type = TYPES[type_name]
    rules = _Rules(type_name, source) if file_type.mixture and not pure else None
    steps = []
    for name in sorted(source.tensors, key=lambda n: (_layer(n), n)):
        tensor = source.tensors[name]
        if not _quantizable(name, tensor.shape):
            # vectors (norms, biases) in f32; a matrix llama.cpp does not quantize is copied as it is
            qtype = "f32" if len(tensor.shape) < 2 else tensor.qtype
        else:
            qtype = file_type.default
            if rules is not None and qtype not in ("f16", "f32"):
                qtype = rules.choose(tensor, qtype)
            if FORMATS[qtype].block > 1:
                qtype = _fallback(qtype, tensor.shape[-1])
        steps.append(Step(tensor, qtype))
    return steps


def _metadata_types(path: Path) -> dict[str, tuple[Any, list]]:
    """Every metadata key of the file (but the reader's own GGUF.*) -> (value, value types)."""
    reader = _CheckedReader(path)
    return {k: (reader.contents(k), [GGUFValueType(t) for t in types]) for k, types in reader.types.items()}


def _converted(step: Step) -> np.ndarray:
    """The bytes (or values) of the step's tensor in its new type, shaped for GGUFWriter."""
    t, shape = step.tensor, step.tensor.shape
    if step.qtype == t.qtype:  # copied: blocks stay as they are (rows of a 3-D tensor put back in its shape)
        return t.raw if FORMATS[t.qtype].block == 1 else t.raw.reshape(*shape[:-1], t.raw.shape[-1])
    values = t.dequantize()
    if step.qtype == "f32":
        return values.astype(np.float32)
    if step.qtype == "f16":
        return values.astype(np.float16)
    try:
        raw = quantize(values, step.qtype)
    except ValueError as e:
        raise WeightFileError(f"{t.file}: tensor {t.name}: {e}") from None
    return raw.reshape(*shape[:-1], raw.shape[-1])


def quantize_gguf(
    source: str | os.PathLike,
    target: str | os.PathLike,
    type_name: str,
    pure: bool = False,
    on_tensor: Callable[[Step], None] | None = None,
) -> list[Step]:
    """Write `source` (a GGUF file) to `target` with its weights in `type_name` (see the module's text),
    atomically; `on_tensor(step)` is called after each tensor. Returns the plan it followed."""
    source, target = Path(source), Path(target)
    if type_name not in TYPES:
        raise ValueError(f"quantize: unknown type {type_name!r}; one of {', '.join(TYPES)}")
    if target.exists() and source.exists() and os.path.samefile(source, target):
        raise ValueError(f"quantize: the output {target} is the input file; name another")
    gguf_file = read_gguf(source)
    steps = plan(gguf_file, type_name, pure)
    unreadable = [s.tensor for s in steps if s.qtype != s.tensor.qtype and s.tensor.qtype not in FORMATS]
    if unreadable:
        t = unreadable[0]
        raise WeightFileError(
            f"{source}: tensor {t.name} is stored as {t.qtype}, which verigrad cannot decode to quantize it "
            f"again ({len(unreadable)} such tensors; it reads {', '.join(FORMATS)})"
        )
    metadata = _metadata_types(source)

    writer = GGUFWriter(None, gguf_file.arch, use_temp_file=True)
    for key, (value, types) in metadata.items():
        if key not in _DROPPED:
            writer.add_key_value(key, value, types[0], sub_type=types[1] if len(types) > 1 else None)
    if "general.alignment" in metadata:
        writer.add_custom_alignment(int(metadata["general.alignment"][0]))
    writer.add_uint32("general.quantization_version", QUANTIZATION_VERSION)
    writer.add_uint32("general.file_type", int(TYPES[type_name].ftype))
    for step in steps:
        data = _converted(step)
        raw_dtype = None if step.qtype in ("f32", "f16") else GGMLQuantizationType[step.qtype.upper()]
        writer.add_tensor(step.tensor.name, data, raw_dtype=raw_dtype)
        if on_tensor is not None:
            on_tensor(step)
    write_gguf(writer, target)
    return steps
