"""Models built from verigrad's nn modules: a file per model, each imported on first use (_lazy.py):
loading a Llama GGUF reads neither the CNN nor GPT-2."""

from .. import _lazy

__getattr__, __dir__ = _lazy.attach(
    __name__,
    _lazy.table(
        {
            "cnn": "digits_cnn digits_cnn_torch",
            "gpt2": "GPT2 GPT2Config",
            "llama": "Llama LlamaConfig",
            "lm": "KVCache LanguageModel",
        }
    ),
)
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
