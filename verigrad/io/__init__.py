"""Files: checkpoints (PyTorch's own format and safetensors) and GGUF weight files."""

from .checkpoint import load, save
from .gguf import GGUFFile, GGUFTensor, read_gguf

__all__ = ["GGUFFile", "GGUFTensor", "load", "read_gguf", "save"]
