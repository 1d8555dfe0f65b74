"""Neural-network modules, as in PyTorch's `torch.nn`: a module per family of layers, and `functional`."""

from . import functional, init, parallel, utils
from .activations import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
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
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .attention import MultiheadAttention
from .attention_functional import multi_head_attention_forward as _mha_forward
from .channel_shuffle import ChannelShuffle
from .containers import Buffer, ModuleDict, ModuleList, Parameter, ParameterDict, ParameterList, Sequential
from .convolution import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    Fold,
    Unfold,
)
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout
from .embedding import Embedding, EmbeddingBag
from .flatten import Flatten, Unflatten
from .lazy import (
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
    LazyLinear,
)
from .linear import Bilinear, Identity, Linear
from .linear_cross_entropy import LinearCrossEntropyLoss
from .losses import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
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
    SyncBatchNorm,
)
from .padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .parallel import DataParallel
from .pixel_shuffle import PixelShuffle, PixelUnshuffle
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    FractionalMaxPool2d,
    FractionalMaxPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from .quant import QEmbedding, QLinear, QLinearGroup
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .resampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from .transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .uninitialized import UninitializedBuffer, UninitializedParameter

functional.multi_head_attention_forward = _mha_forward  # F's, written with the layer (F cannot import it)


def _torch_layout() -> None:
    """PyTorch's module paths for nn's classes, as programs import them: torch.nn.parameter (Parameter,
    Buffer), torch.nn.modules and its submodules (torch.nn.modules.loss._Loss, .utils._pair, .conv, ...),
    each verigrad's module that holds them."""
    import sys
    import types

    from . import (
        activations,
        adaptive,
        channel_shuffle,
        containers,
        convolution,
        distance,
        dropout,
        embedding,
        flatten,
        lazy,
        linear,
        losses,
        module,
        normalization,
        padding,
        pixel_shuffle,
        pooling,
        recurrent,
        resampling,
        transformer,
        uninitialized,
    )

    def tuples(n: int, name: str) -> types.FunctionType:
        def make(x: object) -> tuple:
            return tuple(x) if isinstance(x, list | tuple) else (x,) * n

        make.__name__ = name
        return make

    parameter = types.ModuleType(f"{__name__}.parameter", "PyTorch's torch.nn.parameter: Parameter, Buffer.")
    parameter.Parameter, parameter.Buffer = Parameter, Buffer
    parameter.UninitializedParameter = UninitializedParameter
    parameter.UninitializedBuffer, parameter.is_lazy = UninitializedBuffer, uninitialized.is_lazy
    utils_names = types.ModuleType(f"{__name__}.modules.utils", "PyTorch's torch.nn.modules.utils: _pair...")
    utils_names._single, utils_names._pair = tuples(1, "_single"), tuples(2, "_pair")
    utils_names._triple, utils_names._quadruple = tuples(3, "_triple"), tuples(4, "_quadruple")
    utils_names._ntuple = lambda n, name="parse": tuples(n, name)
    modules = types.ModuleType(f"{__name__}.modules", "PyTorch's torch.nn.modules: nn's layers by file.")
    modules.__dict__.update({k: v for k, v in globals().items() if isinstance(v, type) and k[0].isupper()})
    submodules = {
        "module": module, "loss": losses, "conv": convolution, "batchnorm": normalization,
        "instancenorm": normalization, "normalization": normalization, "linear": linear,
        "activation": activations, "container": containers, "dropout": dropout, "pooling": pooling,
        "rnn": recurrent, "sparse": embedding, "transformer": transformer, "padding": padding,
        "pixelshuffle": pixel_shuffle, "upsampling": resampling, "flatten": flatten, "distance": distance,
        "adaptive": adaptive, "lazy": lazy, "fold": convolution, "channelshuffle": channel_shuffle,
        "utils": utils_names,
    }  # fmt: skip
    for name, value in submodules.items():
        setattr(modules, name, value)
        sys.modules[f"{modules.__name__}.{name}"] = value
    for value in (parameter, modules):
        sys.modules[value.__name__] = value
        globals()[value.__name__.rsplit(".", 1)[1]] = value


_torch_layout()
