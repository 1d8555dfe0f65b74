"""Files: checkpoints (PyTorch's own format and safetensors) and GGUF weight files."""

from typing import Any

from .checkpoint import load, save

_GGUF = ("GGUFFile", "GGUFTensor", "read_gguf")


def __getattr__(name: str) -> Any:
    """The GGUF reader, imported on first use: the `gguf` package takes ~0.1 s to import."""
    if name in _GGUF:
        from . import gguf

        return getattr(gguf, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GGUFFile", "GGUFTensor", "load", "read_gguf", "save"]
