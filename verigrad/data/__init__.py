"""Data: the shipped digits, MNIST IDX files, and a batch iterator."""

from .datasets import load_digits, load_mnist, read_idx, split
from .loader import DataLoader

__all__ = ["DataLoader", "load_digits", "load_mnist", "read_idx", "split"]
