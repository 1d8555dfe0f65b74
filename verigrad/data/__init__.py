"""Data: the shipped digits, MNIST IDX files, a batch iterator and PyTorch's TensorDataset."""

from .datasets import load_digits, load_mnist, read_idx, split
from .loader import DataLoader, Dataset, TensorDataset

__all__ = ["DataLoader", "Dataset", "TensorDataset", "load_digits", "load_mnist", "read_idx", "split"]
