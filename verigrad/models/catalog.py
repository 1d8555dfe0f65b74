"""The catalog of language models, by name or path: `load_language_model("smollm2" | "model.gguf" |
FOLDER)` gives the model and its tokenizer.

A name in `LANGUAGE_MODELS` runs its loader (SmolLM2-135M-Instruct: fetched into the cache on first
use); a `.gguf` file is read as a Llama, Qwen2, Qwen3, Phi-3, Gemma 2 or Gemma 3 model with its own
tokenizer; a folder with `config.json` and `model.safetensors` (or its shards) is a Hugging Face
checkpoint (GPT-2, Llama, Mistral, Qwen2, Qwen3, Phi-3, by its model_type), and one with
`lm.safetensors` and `tokenizer.json` a GPT trained by `verigrad train lm`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import WeightFileError
from ..io.gguf import GGUFFile, drop_header_pages, read_gguf, shown
from ..io.hf import INDEX, read_config
from ..io.tokenizer import Tokenizer
from .lm import LanguageModel

if TYPE_CHECKING:
    from .llama import Llama

ACTIVATIONS = ("f32", "q8")

Loader = Callable[[str], tuple[LanguageModel, Tokenizer]]


def load_gguf(path: str | os.PathLike, activations: str = "f32") -> tuple[LanguageModel, Tokenizer]:
    """A Llama, Qwen2, Qwen3, Phi-3, Gemma 2 or Gemma 3 GGUF file: the model (quantized matmuls on
    `activations`) and its tokenizer."""
    gguf = read_gguf(path)
    family, tokenizer, checked = check_gguf_model(gguf)
    model = family.from_gguf(gguf, activations=activations, checked=checked)
    drop_header_pages(gguf)  # what the tokenizer and the model read of it, they hold
    return model, tokenizer  # type: ignore[return-value]


def check_gguf_model(
    gguf: GGUFFile, tokenizer: bool = True
) -> tuple[type[Llama], Tokenizer | None, tuple[Any, Any]]:
    """Everything `load_gguf` checks before it reads a weight: the architecture, the tokenizer (with
    `tokenizer=False`, only where the file names its model), the hyperparameters, every tensor's name,
    shape and type, the tokenizer's ids within the embedding. Returns the model's class, the tokenizer
    (None where it was not required and the file has none) and the checked (config, tensors), which
    `from_gguf(checked=)` builds the model from; a WeightFileError names the file and the fault."""
    from .gemma import GEMMA_VARIANTS, Gemma
    from .llama import GGUF_VARIANTS, Llama

    if gguf.arch not in GGUF_VARIANTS and gguf.arch not in GEMMA_VARIANTS:
        raise WeightFileError(
            f"{gguf.path}: architecture {shown(gguf.arch)} is not supported "
            f"(verigrad runs {', '.join([*GGUF_VARIANTS, *GEMMA_VARIANTS])})"
        )
    has_tokenizer = tokenizer or "tokenizer.ggml.model" in gguf.metadata
    words = Tokenizer.from_gguf(gguf) if has_tokenizer else None  # first: it fails before the weights load
    family = Gemma if gguf.arch in GEMMA_VARIANTS else Llama
    checked = family.checked_gguf(gguf)
    if words is not None:
        _check_vocab(words.vocab_size, checked[0].vocab_size, str(gguf.path))
    return family, words, checked


def _check_vocab(tokens: int, embedded: int, source: str) -> None:
    """Refuse a tokenizer that makes ids the model has no embedding for."""
    if tokens > embedded:
        raise WeightFileError(
            f"{source}: the tokenizer has {tokens} tokens but the model embeds "
            f"{embedded}: ids {embedded} and above would have no embedding"
        )


def _matched(model: LanguageModel, tokenizer: Tokenizer, source: str) -> tuple[LanguageModel, Tokenizer]:
    """(model, tokenizer), refused if the tokenizer makes ids the model has no embedding for."""
    _check_vocab(tokenizer.vocab_size, model.vocab_size, source)
    return model, tokenizer


def load_gpt2_folder(folder: str | os.PathLike) -> tuple[LanguageModel, Tokenizer]:
    """GPT-2 from a Hugging Face folder (config.json, model.safetensors, and its tokenizer files)."""
    from .gpt2 import GPT2

    tokenizer = Tokenizer.from_gpt2_folder(folder)
    return GPT2.from_safetensors(folder), tokenizer


def load_llama_family_folder(folder: str | os.PathLike) -> tuple[LanguageModel, Tokenizer]:
    """Llama, Mistral, Qwen2 or Qwen3 from a Hugging Face folder (config.json, model.safetensors or its
    shards, tokenizer.json)."""
    from .llama_folder import load_llama_folder

    tokenizer = Tokenizer.from_gpt2_folder(folder)  # first: a bad tokenizer fails before the weights load
    return _matched(load_llama_folder(folder), tokenizer, str(folder))


def _fetched(name: str) -> Path:
    """The registered model's file, fetched into the cache the first time (models.fetch: imported here, as a
    load from a path has no use for its downloads)."""
    from .fetch import fetch

    return fetch(name)


LANGUAGE_MODELS: dict[str, Loader] = {
    "smollm2": lambda activations: load_gguf(_fetched("smollm2"), activations),
}


def load_language_model(
    name_or_path: str | os.PathLike, activations: str = "f32"
) -> tuple[LanguageModel, Tokenizer]:
    """(model, tokenizer) for a registered name, a `.gguf` file, a Hugging Face folder or a `verigrad train
    lm` folder. `activations` chooses the quantized matmul of GGUF models: "f32" multiplies them as they are
    (the default), "q8" quantizes activations to 8 bits per block of 32, or of 256 for the
    k-quants (as llama.cpp does)."""
    if activations not in ACTIVATIONS:
        raise ValueError(f"activations must be one of {', '.join(ACTIVATIONS)}, got {activations!r}")
    name = str(name_or_path)
    if name in LANGUAGE_MODELS:
        return LANGUAGE_MODELS[name](activations)
    path = Path(name_or_path)
    if path.is_file():
        return load_gguf(path, activations)
    from .gpt import is_run_folder, load_run  # a folder's loaders: not a file's

    if path.is_dir() and is_run_folder(path):  # a folder written by `verigrad train lm`
        return load_run(path)
    if path.is_dir():
        weights = "model.safetensors" if not (path / INDEX).is_file() else INDEX
        missing = [f for f in ("config.json", weights) if not (path / f).is_file()]
        if missing:
            raise WeightFileError(f"{path}: a Hugging Face model folder needs {' and '.join(missing)}")
        if read_config(path, ()).get("model_type", "gpt2") == "gpt2":
            return load_gpt2_folder(path)
        return load_llama_family_folder(path)
    raise WeightFileError(
        f"no model {name!r}: give a name ({', '.join(sorted(LANGUAGE_MODELS))}), a .gguf file, a folder "
        "with config.json and model.safetensors, or one written by `verigrad train lm`"
    )


def matmul_description(model: LanguageModel) -> str:
    """Which matmuls the model's linear layers run, e.g. "qmatmul_q8 (q4_1 weights, activations to 8
    bits) in 210 layers"."""
    from ..nn import Linear
    from ..nn.quant import QLinear
    from ..ops.quant import Q8_QTYPES

    kinds: dict[str, int] = {}
    for module in model.modules():
        if isinstance(module, QLinear):
            if module.activations == "q8" and module.qtype in Q8_QTYPES:
                kind = f"qmatmul_q8 ({module.qtype} weights, activations to 8 bits)"
            else:
                kind = f"qmatmul ({module.qtype} weights, f32 activations)"
        elif isinstance(module, Linear):
            kind = "matmul (f32 weights)"
        else:
            continue
        kinds[kind] = kinds.get(kind, 0) + 1
    if not kinds:
        return "matmul (f32 weights)"
    return ", ".join(f"{kind} in {n} layer{'s' * (n > 1)}" for kind, n in kinds.items())
