"""Neural-network modules, as in PyTorch's `torch.nn`: a module per family of layers, and `functional`.
Each family is imported on first use (`nn.Linear` reads linear.py alone): a program pays for the layers it
uses."""

import sys as _sys
import types as _types

from .. import _lazy

_FAMILIES = {
    "activations": "CELU ELU GELU GLU SELU Hardshrink Hardsigmoid Hardswish Hardtanh LeakyReLU "
    "LogSigmoid LogSoftmax Mish PReLU ReLU ReLU6 RReLU Sigmoid SiLU Softmax Softmax2d "
    "Softmin Softplus Softshrink Softsign Tanh Tanhshrink Threshold",
    "adaptive": "AdaptiveLogSoftmaxWithLoss",
    "attention": "MultiheadAttention",
    "channel_shuffle": "ChannelShuffle",
    "containers": "Buffer ModuleDict ModuleList Parameter ParameterDict ParameterList Sequential",
    "convolution": "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d Fold Unfold",
    "distance": "CosineSimilarity PairwiseDistance",
    "dropout": "AlphaDropout Dropout Dropout1d Dropout2d Dropout3d FeatureAlphaDropout",
    "embedding": "Embedding EmbeddingBag",
    "flatten": "Flatten Unflatten",
    "lazy": "LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d LazyConv1d LazyConv2d LazyConv3d "
    "LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d LazyInstanceNorm1d "
    "LazyInstanceNorm2d LazyInstanceNorm3d LazyLinear",
    "linear": "Bilinear Identity Linear",
    "linear_cross_entropy": "LinearCrossEntropyLoss",
    "losses": "BCELoss BCEWithLogitsLoss CosineEmbeddingLoss CrossEntropyLoss CTCLoss "
    "GaussianNLLLoss HingeEmbeddingLoss HuberLoss KLDivLoss L1Loss MarginRankingLoss "
    "MSELoss MultiLabelMarginLoss MultiLabelSoftMarginLoss MultiMarginLoss NLLLoss "
    "PoissonNLLLoss SmoothL1Loss SoftMarginLoss TripletMarginLoss "
    "TripletMarginWithDistanceLoss",
    "module": "Module",
    "normalization": "BatchNorm1d BatchNorm2d BatchNorm3d GroupNorm InstanceNorm1d InstanceNorm2d "
    "InstanceNorm3d LayerNorm LocalResponseNorm RMSNorm SyncBatchNorm",
    "padding": "CircularPad1d CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d "
    "ConstantPad3d ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d "
    "ReplicationPad2d ReplicationPad3d ZeroPad1d ZeroPad2d ZeroPad3d",
    "parallel": "DataParallel",
    "pixel_shuffle": "PixelShuffle PixelUnshuffle",
    "pooling": "AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d "
    "AdaptiveMaxPool2d AdaptiveMaxPool3d AvgPool1d AvgPool2d AvgPool3d "
    "FractionalMaxPool2d FractionalMaxPool3d LPPool1d LPPool2d LPPool3d MaxPool1d "
    "MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d",
    "quant": "QEmbedding QLinear QLinearGroup",
    "recurrent": "GRU LSTM RNN GRUCell LSTMCell RNNBase RNNCell RNNCellBase",
    "resampling": "Upsample UpsamplingBilinear2d UpsamplingNearest2d",
    "transformer": "Transformer TransformerDecoder TransformerDecoderLayer TransformerEncoder "
    "TransformerEncoderLayer",
    "uninitialized": "UninitializedBuffer UninitializedParameter",
}
_SUBMODULES = (
    "activations", "adaptive", "attention", "attention_functional", "backward_hooks", "channel_shuffle",
    "compiled", "containers", "convolution", "distance", "dropout", "embedding", "flatten", "functional",
    "init", "lazy", "linear", "linear_cross_entropy", "losses", "module", "normalization", "padding",
    "parallel", "pixel_shuffle", "pooling", "quant", "recurrent", "resampling", "transformer",
    "uninitialized", "utils",
)  # fmt: skip
__getattr__, __dir__ = _lazy.attach(__name__, _lazy.table(_FAMILIES, _SUBMODULES))


def _tuples(n: int, name: str) -> _types.FunctionType:
    def make(x: object) -> tuple:
        return tuple(x) if isinstance(x, list | tuple) else (x,) * n

    make.__name__ = name
    return make


def _torch_layout() -> None:
    """PyTorch's module paths for nn's classes, as programs import them: torch.nn.parameter (Parameter,
    Buffer), torch.nn.modules and its submodules (torch.nn.modules.loss._Loss, .utils._pair, .conv, ...),
    each verigrad's module that holds them, imported on first use as nn's own names."""
    parameter = _lazy.namespace(
        f"{__name__}.parameter", "PyTorch's torch.nn.parameter: Parameter, Buffer.",
        _lazy.table({"..containers": "Parameter Buffer",
                     "..uninitialized": "UninitializedParameter UninitializedBuffer is_lazy"}),
        __name__ + ".parameter",
    )  # fmt: skip
    utils_names = _types.ModuleType(f"{__name__}.modules.utils", "PyTorch's torch.nn.modules.utils: _pair...")
    utils_names._single, utils_names._pair = _tuples(1, "_single"), _tuples(2, "_pair")
    utils_names._triple, utils_names._quadruple = _tuples(3, "_triple"), _tuples(4, "_quadruple")
    utils_names._ntuple = lambda n, name="parse": _tuples(n, name)
    submodules = {
        "module": "module", "loss": "losses", "conv": "convolution", "batchnorm": "normalization",
        "instancenorm": "normalization", "normalization": "normalization", "linear": "linear",
        "activation": "activations", "container": "containers", "dropout": "dropout", "pooling": "pooling",
        "rnn": "recurrent", "sparse": "embedding", "transformer": "transformer", "padding": "padding",
        "pixelshuffle": "pixel_shuffle", "upsampling": "resampling", "flatten": "flatten",
        "distance": "distance", "adaptive": "adaptive", "lazy": "lazy", "fold": "convolution",
        "channelshuffle": "channel_shuffle",
    }  # fmt: skip
    classes = {name: (f"..{module}", cls) for name, (module, cls) in _lazy.table(_FAMILIES).items()}
    modules = _lazy.namespace(
        f"{__name__}.modules",
        "PyTorch's torch.nn.modules: nn's layers by file.",
        {**classes, **{name: (f"..{module}", None) for name, module in submodules.items()}},
        __name__ + ".modules",
    )
    modules.utils = utils_names
    _sys.modules[utils_names.__name__] = utils_names
    _lazy.alias({f"{modules.__name__}.{name}": f"{__name__}.{module}" for name, module in submodules.items()})
    globals().update(parameter=parameter, modules=modules)


_torch_layout()
__all__ = [name for name in __dir__() if not name.startswith("_")]  # `from verigrad.nn import *`: all of them
