"""Models built from verigrad's nn modules: a file per model."""

from .cnn import digits_cnn

__all__ = ["digits_cnn"]
