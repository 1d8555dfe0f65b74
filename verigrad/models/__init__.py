"""Models built from verigrad's nn modules: a file per model."""

from .cnn import digits_cnn, digits_cnn_torch

__all__ = ["digits_cnn", "digits_cnn_torch"]
