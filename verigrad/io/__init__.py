"""Files: checkpoints (safetensors)."""

from .checkpoint import load, save

__all__ = ["load", "save"]
