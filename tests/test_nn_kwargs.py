"""Layers' PyTorch keywords (device=, dtype=), the refusal of an input in another dtype than the
weights, PyTorch's reprs and settings, and `state_dict`'s detached tensors, against hand-computed
values."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import DTypeError, nn
from verigrad.devices import NoDeviceError


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: nn.Conv1d(2, 3, 2, **kw),
        lambda **kw: nn.Conv2d(2, 3, 2, **kw),
        lambda **kw: nn.Conv3d(2, 3, 2, **kw),
        lambda **kw: nn.ConvTranspose1d(2, 3, 2, **kw),
        lambda **kw: nn.ConvTranspose2d(2, 3, 2, **kw),
        lambda **kw: nn.ConvTranspose3d(2, 3, 2, **kw),
        lambda **kw: nn.PReLU(2, **kw),
        lambda **kw: nn.MultiheadAttention(4, 2, **kw),
        lambda **kw: nn.TransformerEncoderLayer(4, 2, 8, **kw),
        lambda **kw: nn.TransformerDecoderLayer(4, 2, 8, **kw),
        lambda **kw: nn.Transformer(4, 2, 1, 1, 8, **kw),
    ],
)
def test_dtype_makes_every_parameter_in_it_and_the_cpu_is_the_only_device(make) -> None:
    assert {p.dtype.name for p in make().parameters()} == {"f32"}
    assert {p.dtype.name for p in make(device="cpu", dtype=verigrad.float64).parameters()} == {"f64"}
    assert {p.dtype.name for p in make(device=verigrad.device("cpu"), dtype="f64").parameters()} == {"f64"}
    assert all(p.requires_grad for p in make(dtype=verigrad.float64).parameters())
    with pytest.raises(NoDeviceError, match="no 'cuda' device"):
        make(device="cuda")
    with pytest.raises(RuntimeError, match="no 'mps' device"):
        make(device="mps")
    for dtype in (verigrad.int64, "bool"):
        with pytest.raises(RuntimeError, match=r"dtype must be a float dtype .*, got (i64|bool)"):
            make(dtype=dtype)


def test_a_conv_in_f64_computes_in_f64() -> None:
    conv = nn.Conv1d(1, 1, 2, dtype=verigrad.float64)
    conv.load_state_dict({"weight": np.array([[[1.0, 2.0]]]), "bias": np.array([0.5])})
    out = conv(verigrad.tensor([[[1.0, 2.0, 3.0]]], dtype=verigrad.float64))
    assert out.dtype.name == "f64" and out.tolist() == [[[5.5, 8.5]]]  # 1 + 4 + .5, 2 + 6 + .5


@pytest.mark.parametrize(
    "layer, shape",
    [
        (nn.Conv1d(1, 1, 2), (1, 1, 3)),
        (nn.Conv2d(1, 1, 2, padding=1, padding_mode="reflect"), (1, 1, 3, 3)),
        (nn.ConvTranspose2d(1, 1, 2), (1, 1, 3, 3)),
        (nn.PReLU(), (2, 3)),
    ],
)
def test_an_input_of_another_dtype_than_the_weights_is_a_runtime_error(layer, shape) -> None:
    name = type(layer).__name__
    for dtype in (verigrad.float64, verigrad.int64):
        x = verigrad.ones(*shape, dtype=dtype)
        with pytest.raises(
            RuntimeError, match=f"{name}: input dtype {dtype.name} does not match the weights' f32"
        ):
            layer(x)
        with pytest.raises(DTypeError):  # verigrad's dtype error too
            layer(x)


def test_a_mixed_dtype_error_names_the_layer_in_the_model() -> None:
    model = nn.Sequential(nn.Conv1d(1, 2, 1), nn.ReLU(), nn.Conv1d(2, 1, 1, dtype=verigrad.float64))
    with pytest.raises(RuntimeError, match=r"Conv1d: input dtype f32 does not match the weights' f64") as e:
        model(verigrad.ones(1, 1, 3))
    assert e.value.layer.startswith("in layer 2 (Conv1d(2, 1")


def test_attention_refuses_each_of_query_key_and_value_in_another_dtype() -> None:
    attention = nn.MultiheadAttention(4, 2)
    x, y = verigrad.ones(3, 1, 4), verigrad.ones(3, 1, 4, dtype=verigrad.float64)
    for args, what in [((y, x, x), "query"), ((x, y, x), "key"), ((x, x, y), "value")]:
        with pytest.raises(RuntimeError, match=f"MultiheadAttention: {what} dtype f64 does not match"):
            attention(*args)


@pytest.mark.parametrize(
    "layer, text",
    [
        (nn.Conv2d(3, 8, 3), "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1))"),
        (
            nn.Conv1d(4, 8, 3, 2, 1, 2, 2, False, "circular"),
            "Conv1d(4, 8, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(2,), groups=2, bias=False, "
            "padding_mode=circular)",
        ),
        (nn.Conv2d(2, 2, 3, padding="same"), "Conv2d(2, 2, kernel_size=(3, 3), stride=(1, 1), padding=same)"),
        (
            nn.ConvTranspose1d(2, 2, 3, output_padding=1, stride=2),
            "ConvTranspose1d(2, 2, kernel_size=(3,), stride=(2,), output_padding=(1,))",
        ),
        (nn.MaxPool2d(2), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"),
        (nn.AvgPool1d(3), "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"),
        (nn.AvgPool2d(3, 1), "AvgPool2d(kernel_size=3, stride=1, padding=0)"),
        (nn.LPPool1d(2, 3), "LPPool1d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"),
        (nn.MaxUnpool2d(2), "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"),
        (nn.Dropout(), "Dropout(p=0.5, inplace=False)"),
        (nn.Dropout2d(0.1, True), "Dropout2d(p=0.1, inplace=True)"),
        (nn.ZeroPad2d(1), "ZeroPad2d((1, 1, 1, 1))"),
        (nn.ConstantPad1d((1, 2), 3.5), "ConstantPad1d(padding=(1, 2), value=3.5)"),
        (nn.ReflectionPad1d(2), "ReflectionPad1d((2, 2))"),
        (nn.Upsample(scale_factor=2), "Upsample(scale_factor=2.0, mode='nearest')"),
        (nn.Upsample(size=(4, 5), mode="bilinear"), "Upsample(size=(4, 5), mode='bilinear')"),
        (nn.PixelShuffle(2), "PixelShuffle(upscale_factor=2)"),
        (nn.PixelUnshuffle(2), "PixelUnshuffle(downscale_factor=2)"),
        (nn.Unfold(2), "Unfold(kernel_size=2, dilation=1, padding=0, stride=1)"),
        (nn.Fold(4, 2), "Fold(output_size=4, kernel_size=2, dilation=1, padding=0, stride=1)"),
        (nn.LeakyReLU(), "LeakyReLU(negative_slope=0.01)"),
        (nn.ReLU(True), "ReLU(inplace=True)"),
        (nn.GELU(), "GELU(approximate='none')"),
        (nn.Softmax(dim=1), "Softmax(dim=1)"),
        (
            nn.MultiheadAttention(4, 2),
            "MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=4, "
            "out_features=4, bias=True)\n)",
        ),
        (nn.ModuleList(), "ModuleList()"),
        (
            nn.Sequential(nn.ReLU(), nn.Dropout(0.2)),
            "Sequential(\n  (0): ReLU()\n  (1): Dropout(p=0.2, inplace=False)\n)",
        ),
    ],
)
def test_reprs_are_pytorch_s(layer, text: str) -> None:
    assert repr(layer) == text


def test_settings_are_kept_as_pytorch_keeps_them() -> None:
    conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
    assert (conv.kernel_size, conv.stride, conv.padding, conv.dilation) == ((3, 3), (2, 2), (1, 1), (1, 1))
    assert nn.Conv1d(1, 1, 3, padding="valid").padding == "valid"
    assert nn.MaxPool1d(3).stride == 3 and nn.AvgPool2d((2, 3)).stride == (2, 3)
    assert nn.Upsample(scale_factor=(2, 3)).scale_factor == (2.0, 3.0)
    assert nn.Upsample(size=3, scale_factor=0).scale_factor is None


def test_a_transformer_layer_holds_its_norms_then_its_dropouts() -> None:
    names = [name for name, _ in nn.TransformerDecoderLayer(4, 2, 8).named_children()]
    assert names == [
        "self_attn",
        "multihead_attn",
        "linear1",
        "dropout",
        "linear2",
        "norm1",
        "norm2",
        "norm3",
        "dropout1",
        "dropout2",
        "dropout3",
    ]


def test_module_list_takes_an_iterable_or_the_modules() -> None:
    a, b = nn.ReLU(), nn.Tanh()
    assert list(nn.ModuleList(modules=[a, b])) == [a, b]
    assert list(nn.ModuleList([a, b])) == list(nn.ModuleList(a, b)) == [a, b]
    with pytest.raises(TypeError, match="ModuleList takes an iterable of modules"):
        nn.ModuleList([a], b)


def test_dropout_inplace_writes_into_the_input() -> None:
    x = verigrad.tensor([1.0, 2.0, 3.0])
    assert nn.Dropout(1.0, inplace=True)(x) is x and x.tolist() == [0.0, 0.0, 0.0]
    y = verigrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        nn.Dropout(1.0, inplace=True)(y)  # as PyTorch's
    h = y * 2.0
    assert nn.Dropout(1.0, inplace=True)(h) is h and h.tolist() == [0.0, 0.0, 0.0]  # recorded
    h.sum().backward()
    assert y.grad.tolist() == [0.0, 0.0, 0.0]
    z = verigrad.tensor([1.0, 2.0])
    assert nn.Dropout(0.5, inplace=True).eval()(z) is z and z.tolist() == [1.0, 2.0]


def _model() -> nn.Module:
    model = nn.Sequential(nn.Conv1d(1, 2, 1, dtype=verigrad.float64))
    model.load_state_dict({"0.weight": np.array([[[1.0]], [[2.0]]]), "0.bias": np.array([0.0, 0.5])})
    model.register_buffer("shift", verigrad.tensor([3.0]))
    return model


def test_state_dict_tensors_are_detached_and_share_the_storage() -> None:
    model = _model()
    state = model.state_dict()
    assert list(state) == ["shift", "0.weight", "0.bias"]
    assert not any(t.requires_grad for t in state.values())
    assert state["0.weight"] is not model[0].weight and model[0].weight.requires_grad
    state["0.weight"].add_(1.0)
    state["shift"].mul_(2.0)
    assert model[0].weight.tolist() == [[[2.0]], [[3.0]]] and model.shift.tolist() == [6.0]


def test_state_dict_keep_vars_gives_the_tensors_themselves() -> None:
    model = _model()
    state = model.state_dict(keep_vars=True)
    assert state["0.weight"] is model[0].weight and state["shift"] is model.shift
    assert state["0.bias"].requires_grad


def test_state_dict_fills_a_destination_under_a_prefix() -> None:
    model, mine = _model(), {}
    assert model.state_dict(destination=mine, prefix="net.") is mine
    assert list(mine) == ["net.shift", "net.0.weight", "net.0.bias"]
    assert mine["net.0.bias"].tolist() == [0.0, 0.5]


def test_a_tied_weight_is_one_storage_under_each_name() -> None:
    model = nn.Sequential(nn.Conv1d(1, 1, 1), nn.Conv1d(1, 1, 1))
    model[1].weight = model[0].weight
    state = model.state_dict()
    state["1.weight"].zero_()
    assert state["0.weight"].tolist() == [[[0.0]]] and model[0].weight.tolist() == [[[0.0]]]


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_layers_refuse_another_dtype_before_their_first_norm(norm_first: bool) -> None:
    x, y = verigrad.ones(3, 1, 4), verigrad.ones(3, 1, 4, dtype=verigrad.float64)
    encoder = nn.TransformerEncoderLayer(4, 2, 8, norm_first=norm_first)
    with pytest.raises(
        RuntimeError, match="TransformerEncoderLayer: src dtype f64 does not match the weights' f32"
    ):
        encoder(y)
    decoder = nn.TransformerDecoderLayer(4, 2, 8, norm_first=norm_first)
    for args, what in [((y, x), "tgt"), ((x, y), "memory")]:
        with pytest.raises(RuntimeError, match=f"TransformerDecoderLayer: {what} dtype f64 does not match"):
            decoder(*args)
    assert encoder(x).dtype.name == "f32" and decoder(x, x).dtype.name == "f32"
