"""Neural-network modules, as in PyTorch's `torch.nn`: a module per family of layers, and `functional`."""

from . import functional, init, utils
from .activations import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softplus,
    Softsign,
    Tanh,
)
from .attention import MultiheadAttention
from .containers import ModuleDict, ModuleList, Parameter, ParameterList, Sequential
from .convolution import Conv1d, Conv2d, ConvTranspose2d, Fold, Unfold
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import Dropout, Dropout2d
from .embedding import Embedding, EmbeddingBag
from .flatten import Flatten, Unflatten
from .linear import Bilinear, Identity, Linear
from .losses import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiMarginLoss,
    NLLLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from .module import Module
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
    LocalResponseNorm,
    RMSNorm,
)
from .padding import ReflectionPad2d, ReplicationPad2d, ZeroPad2d
from .pixel_shuffle import PixelShuffle, PixelUnshuffle
from .pooling import (
    AdaptiveAvgPool2d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
    MaxUnpool2d,
)
from .quant import QEmbedding, QLinear
from .recurrent import GRU, LSTM
from .resampling import Upsample
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
