"""Files: checkpoints (PyTorch's own format and safetensors) and GGUF weight files."""

from typing import Any

_GGUF = ("GGUFFile", "GGUFTensor", "read_gguf")
_CHECKPOINTS = ("load", "save")


def __getattr__(name: str) -> Any:
    """The GGUF reader and the checkpoints' load and save, imported on first use (a chat reads neither
    safetensors nor PyTorch's pickles: their modules' memory)."""
    if name in _GGUF:
        from . import gguf

        return getattr(gguf, name)
    if name in _CHECKPOINTS:
        from . import checkpoint

        return getattr(checkpoint, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GGUFFile", "GGUFTensor", "load", "read_gguf", "save"]
