"""The layers of convolution, pooling, dropout, padding, resampling, pixel shuffle, activations,
attention, transformer and containers against PyTorch's: their constructors' signatures (names, order,
kinds, defaults), `device=` / `dtype=`, the refusal of an input in another dtype than the weights,
their reprs, and `state_dict`'s detached tensors."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import numpy as np
import pytest
import torch

import verigrad
from verigrad import nn
from verigrad.devices import NoDeviceError

FILES = [
    "convolution",
    "pooling",
    "dropout",
    "transformer",
    "attention",
    "activations",
    "padding",
    "resampling",
    "pixel_shuffle",
    "containers",
]
# verigrad's own keywords, after PyTorch's: an NHWC layout, and ModuleList's modules given one by one
EXTRAS = {("layout", inspect.Parameter.KEYWORD_ONLY), ("more", inspect.Parameter.VAR_POSITIONAL)}


def _layers() -> list[tuple[str, type, type]]:
    found = []
    for file in FILES:
        module = importlib.import_module(f"verigrad.nn.{file}")
        for name, cls in vars(module).items():
            layer = isinstance(cls, type) and issubclass(cls, nn.Module) and cls.__module__ == module.__name__
            if layer and hasattr(torch.nn, name):
                found.append((name, cls, getattr(torch.nn, name)))
    return found


def _default(value: Any) -> Any:
    """A default to compare: a function by its name (F.relu is each library's own)."""
    return value.__name__ if callable(value) else value


def _parameters(cls: type) -> list[tuple[str, Any, Any]]:
    signature = inspect.signature(cls.__init__)
    return [(p.name, p.kind, _default(p.default)) for p in list(signature.parameters.values())[1:]]


LAYERS = _layers()


@pytest.mark.parametrize("name, ours, theirs", LAYERS, ids=[n for n, _, _ in LAYERS])
def test_constructor_signatures_are_torch_s(name: str, ours: type, theirs: type) -> None:
    expected = _parameters(theirs)
    if [kind for _, kind, _ in expected] == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]:
        expected = []  # Module's own (*args, **kwargs): the layer takes no settings
    got = _parameters(ours)
    assert got[: len(expected)] == expected
    assert {(n, kind) for n, kind, _ in got[len(expected) :]} <= EXTRAS


def test_every_layer_with_parameters_is_checked() -> None:
    names = {n for n, _, _ in LAYERS}
    assert {"Conv2d", "ConvTranspose3d", "PReLU", "MultiheadAttention", "Transformer", "Dropout"} <= names
    assert len(names) > 80


# (constructor text, an input shape) for each layer with parameters
FACTORIES = [
    ("Conv1d(2, 4, 3)", (1, 2, 5)),
    ("Conv2d(2, 4, 3, padding=1)", (1, 2, 5, 5)),
    ("Conv3d(2, 4, 2)", (1, 2, 3, 3, 3)),
    ("ConvTranspose1d(2, 4, 3)", (1, 2, 5)),
    ("ConvTranspose2d(2, 4, 3, stride=2)", (1, 2, 3, 3)),
    ("ConvTranspose3d(2, 4, 2)", (1, 2, 2, 2, 2)),
    ("PReLU(3)", (2, 3)),
]
MODELS = [
    "MultiheadAttention(4, 2)",
    "TransformerEncoderLayer(4, 2, dim_feedforward=8)",
    "TransformerDecoderLayer(4, 2, dim_feedforward=8)",
    "Transformer(4, 2, 1, 1, dim_feedforward=8)",
]


def _build(library: Any, text: str, **kwargs: Any) -> Any:
    head, _, args = text.partition("(")
    extra = "".join(f", {k}={k}" for k in kwargs)
    return eval(f"nn.{head}({args[:-1]}{extra})", {"nn": library.nn, **kwargs})


@pytest.mark.parametrize("text", [t for t, _ in FACTORIES] + MODELS)
def test_device_and_dtype_make_the_parameters_as_torch(text: str) -> None:
    ours = _build(verigrad, text, device="cpu", dtype=verigrad.float64)
    theirs = _build(torch, text, device="cpu", dtype=torch.float64)
    assert [(k, tuple(v.shape), v.dtype.name) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape), "f64") for k, v in theirs.state_dict().items()
    ]
    assert all(v.dtype is torch.float64 for v in theirs.state_dict().values())
    made = _build(verigrad, text, device=verigrad.device("cpu"))
    assert {p.dtype.name for p in made.parameters()} == {"f32"}  # dtype=None: f32, PyTorch's default
    with pytest.raises(NoDeviceError, match="no 'cuda' device"):
        _build(verigrad, text, device="cuda")
    with pytest.raises(RuntimeError):  # PyTorch's without CUDA too (an AssertionError, a RuntimeError)
        _build(verigrad, text, device="cuda:0")
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        _build(torch, text, dtype=torch.int64)
    with pytest.raises(RuntimeError, match="dtype must be a float dtype"):
        _build(verigrad, text, dtype=verigrad.int64)


@pytest.mark.parametrize("text, shape", FACTORIES)
def test_an_f64_layer_computes_as_torch_s(text: str, shape: tuple[int, ...]) -> None:
    theirs = _build(torch, text, dtype=torch.float64)
    ours = _build(verigrad, text, dtype=verigrad.float64)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(3).standard_normal(shape)
    tx = torch.tensor(x, requires_grad=True)
    vx = verigrad.tensor(x, requires_grad=True)
    t_out, v_out = theirs(tx), ours(vx)
    assert v_out.dtype.name == "f64" and tuple(v_out.shape) == tuple(t_out.shape)
    np.testing.assert_allclose(v_out.numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-12)
    t_out.sum().backward()
    v_out.sum().backward()
    np.testing.assert_allclose(vx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    for (name, p), q in zip(theirs.named_parameters(), ours.parameters()):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("weights, given", [("float32", "float64"), ("float64", "float32")])
@pytest.mark.parametrize("text, shape", FACTORIES)
def test_an_input_of_another_dtype_than_the_weights_raises_as_in_torch(
    text: str, shape: tuple[int, ...], weights: str, given: str
) -> None:
    x = np.ones(shape)
    with pytest.raises(RuntimeError):
        _build(torch, text, dtype=getattr(torch, weights))(torch.tensor(x, dtype=getattr(torch, given)))
    layer = _build(verigrad, text, dtype=getattr(verigrad, weights))
    name = text.partition("(")[0]
    with pytest.raises(RuntimeError, match=f"{name}: input dtype .* does not match the weights'"):
        layer(verigrad.tensor(x, dtype=getattr(verigrad, given)))


@pytest.mark.parametrize("norm_first", [False, True])
def test_attention_and_transformer_refuse_another_dtype_as_torch(norm_first: bool) -> None:
    x = np.ones((3, 1, 4))
    for text, args, name, what in [
        ("MultiheadAttention(4, 2)", 3, "MultiheadAttention", "query"),
        (f"TransformerEncoderLayer(4, 2, 8, norm_first={norm_first})", 1, "TransformerEncoderLayer", "src"),
        (f"TransformerDecoderLayer(4, 2, 8, norm_first={norm_first})", 2, "TransformerDecoderLayer", "tgt"),
    ]:
        with pytest.raises(RuntimeError):
            _build(torch, text)(*(torch.tensor(x),) * args)
        with pytest.raises(RuntimeError, match=f"{name}: {what} dtype f64 does not match the weights' f32"):
            _build(verigrad, text)(*(verigrad.tensor(x),) * args)


REPRS = [
    "Conv1d(2, 4, 3)",
    "Conv2d(3, 8, 3)",
    "Conv2d(3, 8, (3, 5), stride=2, padding=(1, 2), dilation=2, groups=1, bias=False)",
    "Conv2d(4, 8, 3, padding='same', groups=2, padding_mode='reflect')",
    "Conv2d(4, 8, 3, padding='valid')",
    "Conv3d(2, 4, 3, stride=(1, 2, 1))",
    "ConvTranspose1d(2, 4, 3, stride=2, output_padding=1)",
    "ConvTranspose2d(3, 8, 3, dilation=2, bias=False)",
    "ConvTranspose3d(2, 4, 2, groups=2)",
    "Unfold(2)",
    "Fold(4, 2, stride=2)",
    "MaxPool1d(2, 1)",
    "MaxPool2d(3)",
    "MaxPool2d(3, 2, 1, ceil_mode=True)",
    "MaxPool3d((2, 2, 2))",
    "AvgPool1d(3)",
    "AvgPool1d(3, 2, 1)",
    "AvgPool2d(3, 2, 1)",
    "AvgPool2d(2)",
    "AvgPool3d(2)",
    "LPPool1d(2, 3)",
    "LPPool2d(2, 3, stride=2)",
    "MaxUnpool1d(2)",
    "MaxUnpool2d(2)",
    "MaxUnpool3d(2, 1)",
    "AdaptiveAvgPool1d(3)",
    "AdaptiveAvgPool2d((2, 3))",
    "AdaptiveMaxPool2d(2)",
    "AdaptiveMaxPool3d(2)",
    "Dropout()",
    "Dropout(0.1, True)",
    "Dropout2d(0.2)",
    "ZeroPad1d(1)",
    "ZeroPad2d(1)",
    "ZeroPad2d((1, 2, 3, 4))",
    "ConstantPad1d((1, 2), 3.5)",
    "ConstantPad2d(1, 0.0)",
    "ReflectionPad1d(2)",
    "ReflectionPad2d(2)",
    "ReplicationPad3d(1)",
    "CircularPad2d(1)",
    "Upsample(scale_factor=2)",
    "Upsample(scale_factor=(2, 3), mode='bilinear')",
    "Upsample(size=(4, 5), mode='bilinear', align_corners=True)",
    "Upsample(size=4)",
    "UpsamplingNearest2d(scale_factor=2)",
    "UpsamplingBilinear2d(size=(3, 3))",
    "PixelShuffle(2)",
    "PixelUnshuffle(3)",
    "ReLU()",
    "ReLU(inplace=True)",
    "ReLU6(True)",
    "LeakyReLU()",
    "LeakyReLU(0.2, True)",
    "GELU()",
    "GELU('tanh')",
    "ELU()",
    "CELU(0.5)",
    "SELU(True)",
    "SiLU()",
    "Mish(True)",
    "Hardswish(True)",
    "Hardsigmoid()",
    "Hardtanh()",
    "Hardtanh(-2.0, 2.0, True)",
    "Threshold(0.1, 2)",
    "Softplus()",
    "Softplus(2, 10)",
    "RReLU()",
    "Hardshrink()",
    "Softshrink(0.3)",
    "GLU()",
    "PReLU()",
    "PReLU(3, 0.1)",
    "Softmax(dim=1)",
    "Softmax()",
    "LogSoftmax(-1)",
    "Softmin(0)",
    "Softmax2d()",
    "Tanh()",
    "Sigmoid()",
    "LogSigmoid()",
    "Softsign()",
    "Tanhshrink()",
    "MultiheadAttention(4, 2)",
    "MultiheadAttention(4, 2, bias=False, batch_first=True)",
    "TransformerEncoderLayer(4, 2, dim_feedforward=8)",
    "TransformerDecoderLayer(4, 2, dim_feedforward=8, activation=nn.GELU())",
    "TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8), 2, enable_nested_tensor=False)",
    "TransformerDecoder(nn.TransformerDecoderLayer(4, 2, 8), 2, nn.LayerNorm(4))",
    "Transformer(4, 2, 1, 1, dim_feedforward=8)",
    "Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.2))",
    "Sequential()",
    "ModuleList([nn.ReLU(), nn.ReLU(), nn.Tanh()])",
    "ModuleList()",
    "ModuleDict({'act': nn.ReLU(), 'pool': nn.MaxPool2d(2)})",
    "Sequential(nn.Sequential(nn.ZeroPad2d(1), nn.Upsample(scale_factor=2)), nn.PixelShuffle(2))",
]


@pytest.mark.parametrize("text", REPRS)
def test_reprs_are_torch_s(text: str) -> None:
    ours = eval(f"nn.{text}", {"nn": verigrad.nn})
    theirs = repr(eval(f"nn.{text}", {"nn": torch.nn}))
    # LayerNorm is normalization.py's (its own repr is held to PyTorch's there): here each library's
    # LayerNorm(4) line stands for itself, so that these compare the transformers' structure and order
    theirs = theirs.replace(repr(torch.nn.LayerNorm(4)), repr(nn.LayerNorm(4)))
    assert repr(ours) == theirs


def test_layers_keep_the_settings_as_torch_does() -> None:
    for text, names in [
        ("Conv2d(3, 8, 3, stride=2, padding=1)", ["kernel_size", "stride", "padding", "dilation"]),
        ("ConvTranspose1d(3, 8, 3, output_padding=1, stride=2)", ["kernel_size", "output_padding"]),
        ("Conv1d(3, 8, 3, padding='same')", ["padding"]),
        ("MaxPool2d(3)", ["kernel_size", "stride", "padding"]),
        ("AvgPool1d(3)", ["kernel_size", "stride", "padding"]),
        ("AvgPool2d(3)", ["stride"]),
        ("MaxUnpool2d(2)", ["kernel_size", "stride", "padding"]),
        ("Upsample(scale_factor=2)", ["scale_factor", "size"]),
        ("Dropout(0.25, True)", ["p", "inplace"]),
        ("ZeroPad2d(1)", ["padding", "value"]),
    ]:
        ours = eval(f"nn.{text}", {"nn": verigrad.nn})
        theirs = eval(f"nn.{text}", {"nn": torch.nn})
        for name in names:
            assert getattr(ours, name) == getattr(theirs, name), (text, name)


def test_dropout_p_1_and_inplace_as_torch() -> None:
    x = np.arange(1.0, 7.0).reshape(2, 3)
    ours, theirs = verigrad.tensor(x), torch.tensor(x)
    assert nn.Dropout(1.0)(ours).tolist() == torch.nn.Dropout(1.0)(theirs).tolist() == [[0.0] * 3] * 2
    out_ours, out_theirs = nn.Dropout(1.0, inplace=True)(ours), torch.nn.Dropout(1.0, inplace=True)(theirs)
    assert out_ours is ours and out_theirs is theirs  # written into the input
    assert ours.tolist() == theirs.tolist() == [[0.0] * 3] * 2
    kept = verigrad.tensor(x)
    layer = nn.Dropout(0.5, inplace=True).eval()
    assert layer(kept) is kept and kept.tolist() == x.tolist()
    with pytest.raises(ValueError, match="dropout probability"):
        torch.nn.Dropout(1.5)
    with pytest.raises(ValueError, match="Dropout2d: dropout probability"):
        nn.Dropout2d(1.5)


def _pair() -> tuple[Any, Any]:
    """The same model in both, with a buffer (a conv's `shift`) after the parameters."""
    models = []
    for library in (torch, verigrad):
        model = library.nn.Sequential(library.nn.Linear(3, 2), library.nn.Conv1d(2, 2, 1))
        model[1].register_buffer("shift", library.zeros(2))
        models.append(model)
    theirs, ours = models
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def test_state_dict_gives_detached_tensors_sharing_the_storage_as_torch() -> None:
    ours, theirs = _pair()
    for state in (ours.state_dict(), theirs.state_dict()):
        assert [k for k, v in state.items() if v.requires_grad] == []
        state["0.weight"].add_(1.0)  # PyTorch's: a write into the state changes the model
        state["1.shift"].add_(2.0)
    np.testing.assert_array_equal(ours[0].weight.numpy(), theirs[0].weight.detach().numpy())
    np.testing.assert_array_equal(ours[1].shift.numpy(), theirs[1].shift.numpy())
    assert ours[0].weight.requires_grad and theirs[0].weight.requires_grad
    assert ours.state_dict()["0.weight"] is not ours[0].weight
    assert theirs.state_dict()["0.weight"] is not theirs[0].weight


def test_state_dict_keep_vars_gives_the_tensors_themselves_as_torch() -> None:
    ours, theirs = _pair()
    for model in (ours, theirs):
        state = model.state_dict(keep_vars=True)
        assert state["0.weight"] is model[0].weight and state["0.weight"].requires_grad
        assert state["1.shift"] is model[1].shift
    kept = {k: v.requires_grad for k, v in ours.state_dict(keep_vars=True).items()}
    assert kept == {k: v.requires_grad for k, v in theirs.state_dict(keep_vars=True).items()}


def test_state_dict_destination_and_prefix_as_torch() -> None:
    ours, theirs = _pair()
    mine: dict[str, Any] = {"before": 1}
    got = ours.state_dict(destination=mine, prefix="model.")
    assert got is mine
    assert list(got) == ["before", *("model." + k for k in theirs.state_dict())]


def test_a_state_dict_of_detached_tensors_loads_into_a_model() -> None:
    ours, theirs = _pair()
    other = nn.Sequential(nn.Linear(3, 2), nn.Conv1d(2, 2, 1))
    other[1].register_buffer("shift", verigrad.ones(2))
    other.load_state_dict(ours.state_dict())
    np.testing.assert_array_equal(other[0].weight.numpy(), theirs[0].weight.detach().numpy())
    assert other[0].weight.requires_grad and other[0].weight is not ours[0].weight


def _custom(library: Any, extra: str, children: bool) -> Any:
    class Block(library.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if children:
                self.act = library.nn.ReLU()
                self.pool = library.nn.Sequential(library.nn.MaxPool2d(2))

        def extra_repr(self) -> str:
            return extra

    return Block()


@pytest.mark.parametrize("extra", ["", "size=3", "size=3\nscale=2"])
@pytest.mark.parametrize("children", [False, True])
def test_a_module_s_settings_and_children_print_as_torch_s(extra: str, children: bool) -> None:
    assert repr(_custom(verigrad, extra, children)) == repr(_custom(torch, extra, children))


@pytest.mark.parametrize("count", [0, 1, 2])
def test_parameter_lists_and_dicts_print_as_torch_s_but_for_the_dtype_s_name(count: int) -> None:
    ours = nn.ParameterList([nn.Parameter(verigrad.ones(3)) for _ in range(count)])
    theirs = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(3)) for _ in range(count)])
    assert repr(ours) == repr(theirs).replace("torch.float32", "f32")
    ours = nn.ParameterDict({f"p{i}": nn.Parameter(verigrad.ones(3)) for i in range(count)})
    theirs = torch.nn.ParameterDict({f"p{i}": torch.nn.Parameter(torch.ones(3)) for i in range(count)})
    assert repr(ours) == repr(theirs).replace("torch.FloatTensor", "f32")


@pytest.mark.parametrize(
    "text, shape",
    [
        ("AvgPool1d(3)", (1, 2, 9)),
        ("AvgPool1d(3, 2, 1)", (1, 2, 9)),
        ("MaxPool1d(3)", (1, 2, 9)),
        ("LPPool1d(2, 3)", (1, 2, 9)),
        ("MaxPool2d(2)", (1, 2, 4, 4)),
        ("AvgPool2d(2, 1, 1, count_include_pad=False)", (1, 2, 4, 4)),
        ("AvgPool3d(2)", (1, 2, 4, 4, 4)),
        ("MaxPool3d(2, 1)", (1, 2, 3, 3, 3)),
        ("ZeroPad2d((1, 0, 2, 1))", (1, 2, 3, 3)),
        ("ConstantPad1d(2, 1.5)", (1, 2, 3)),
        ("Upsample(scale_factor=2)", (1, 2, 3, 3)),
        ("Upsample(scale_factor=(2, 3), mode='bilinear')", (1, 2, 3, 3)),
        ("PixelShuffle(2)", (1, 8, 2, 2)),
        ("Fold(4, 2, stride=2)", (1, 8, 4)),
        ("Unfold(2)", (1, 2, 3, 3)),
        ("Dropout(0.5)", (2, 3)),  # eval: the identity
    ],
)
def test_layers_built_from_the_kept_settings_compute_as_torch_s(text: str, shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(0).standard_normal(shape)
    ours = eval(f"nn.{text}", {"nn": verigrad.nn}).eval()
    theirs = eval(f"nn.{text}", {"nn": torch.nn}).eval()
    got, expected = ours(verigrad.tensor(x)), theirs(torch.tensor(x))
    assert got.dtype.name == "f64" and tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)


def test_max_unpool_undoes_max_pool_as_torch_s() -> None:
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 4))
    y, i = nn.MaxPool2d(2, return_indices=True)(verigrad.tensor(x))
    ty, ti = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(nn.MaxUnpool2d(2)(y, i).numpy(), torch.nn.MaxUnpool2d(2)(ty, ti).numpy())


def test_state_dict_s_signature_and_positional_arguments_are_torch_s() -> None:
    ours, theirs = _pair()
    signature = inspect.signature(nn.Module.state_dict)
    assert [(p.name, p.kind, p.default) for p in signature.parameters.values()] == [
        (p.name, p.kind, p.default) for p in inspect.signature(torch.nn.Module.state_dict).parameters.values()
    ]
    for model in (ours, theirs):
        mine: dict[str, Any] = {}
        with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
            assert model.state_dict(mine, "m.", True) is mine
        assert list(mine) == ["m.0.weight", "m.0.bias", "m.1.weight", "m.1.bias", "m.1.shift"]
        assert mine["m.0.weight"] is model[0].weight
