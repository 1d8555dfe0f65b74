"""Neural-network modules, as in PyTorch's `torch.nn`."""

from . import init, utils
from .layers import (
    GELU,
    AvgPool2d,
    BatchNorm2d,
    BCELoss,
    BCEWithLogitsLoss,
    Conv2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    HuberLoss,
    Identity,
    L1Loss,
    LayerNorm,
    Linear,
    LogSoftmax,
    MaxPool2d,
    ModuleList,
    MSELoss,
    NLLLoss,
    ReLU,
    RMSNorm,
    Sequential,
    Sigmoid,
    SiLU,
    SmoothL1Loss,
    Softmax,
    Tanh,
)
from .module import Module
from .quant import QEmbedding, QLinear
