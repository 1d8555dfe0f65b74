"""Neural-network modules, as in PyTorch's `torch.nn`."""

from . import init
from .layers import (
    GELU,
    AvgPool2d,
    BatchNorm2d,
    Conv2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    MaxPool2d,
    ModuleList,
    MSELoss,
    ReLU,
    RMSNorm,
    Sequential,
    Sigmoid,
    SiLU,
    Tanh,
)
from .module import Module
from .quant import QEmbedding, QLinear
