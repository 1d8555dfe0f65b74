"""Data: the shipped digits, MNIST IDX files, and verigrad's `DataLoader` over arrays; PyTorch's datasets
and loader are in `verigrad.utils.data` (`Dataset` and `TensorDataset` are the same classes here)."""

from .datasets import load_digits, load_mnist, read_idx, split
from .loader import DataLoader, Dataset, TensorDataset

__all__ = ["DataLoader", "Dataset", "TensorDataset", "load_digits", "load_mnist", "read_idx", "split"]
