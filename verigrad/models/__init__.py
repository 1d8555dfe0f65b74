"""Models built from verigrad's nn modules: a file per model."""

from .cnn import digits_cnn, digits_cnn_torch
from .gpt2 import GPT2, GPT2Config
from .llama import Llama, LlamaConfig
from .lm import KVCache, LanguageModel

__all__ = [
    "GPT2",
    "GPT2Config",
    "KVCache",
    "LanguageModel",
    "Llama",
    "LlamaConfig",
    "digits_cnn",
    "digits_cnn_torch",
]
