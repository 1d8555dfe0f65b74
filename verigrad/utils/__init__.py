"""PyTorch's `torch.utils`: `data`, its datasets, samplers and `DataLoader`."""

from . import data

__all__ = ["data"]
