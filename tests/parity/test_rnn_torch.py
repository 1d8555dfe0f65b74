"""nn.RNN, nn.LSTM (with proj_size), nn.GRU and the cells RNNCell, LSTMCell, GRUCell against PyTorch's:
a PyTorch state dict loads by name; outputs, final states and the gradients of the input, the initial
states and every parameter agree in f64."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import verigrad
from verigrad import nn

RNG = np.random.default_rng(5)
TIGHT = {"rtol": 1e-12, "atol": 1e-12}


def _twins(name: str, *args, **settings):
    """PyTorch's module in f64 and ours given its state dict."""
    theirs = getattr(torch.nn, name)(*args, **settings).double()
    ours = getattr(nn, name)(*args, **settings, dtype="f64")
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours, theirs


def _compare(ours, theirs, arrays: dict[str, np.ndarray], call) -> None:
    """call(module, tensors) -> list of outputs; values, then every gradient of a weighted sum."""
    mine = {k: verigrad.tensor(a).requires_grad_() for k, a in arrays.items()}
    their = {k: torch.tensor(a, requires_grad=True) for k, a in arrays.items()}
    outs, outs_t = call(ours, mine), call(theirs, their)
    assert len(outs) == len(outs_t)
    total, total_t = 0, 0
    for i, (a, b) in enumerate(zip(outs, outs_t)):
        assert a.shape == tuple(b.shape) and a.dtype.name == "f64"
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **TIGHT)
        w = RNG.standard_normal(a.shape)
        total, total_t = (
            total + (a * verigrad.tensor(w)).sum() * (i + 1),
            total_t + (b * torch.tensor(w)).sum() * (i + 1),
        )
    total.backward()
    total_t.backward()
    for k in arrays:
        np.testing.assert_allclose(mine[k].grad.numpy(), their[k].grad.numpy(), **TIGHT, err_msg=k)
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads[name].grad.numpy(), **TIGHT, err_msg=name)


RNN_SETTINGS = [
    {},
    {"nonlinearity": "relu"},
    {"num_layers": 2, "bidirectional": True, "batch_first": True},
    {"num_layers": 3, "nonlinearity": "relu", "bias": False},
    {"num_layers": 2, "dropout": 0.5},  # in eval: no dropout, as PyTorch's
]


GRU_SETTINGS = [{k: v for k, v in s.items() if k != "nonlinearity"} for s in RNN_SETTINGS[1:]]


@pytest.mark.parametrize(
    ("name", "settings"), [("RNN", s) for s in RNN_SETTINGS] + [("GRU", s) for s in GRU_SETTINGS]
)
@pytest.mark.parametrize("given", ["h0", "no h0", "unbatched"])
def test_rnn_and_gru(name, settings, given) -> None:
    ours, theirs = _twins(name, 3, 4, **settings)
    ours.eval(), theirs.eval()
    layers = settings.get("num_layers", 1) * (2 if settings.get("bidirectional") else 1)
    shape = (5, 3) if given == "unbatched" else (2, 5, 3) if settings.get("batch_first") else (5, 2, 3)
    arrays = {"x": RNG.standard_normal(shape)}
    if given != "no h0":
        arrays["h0"] = RNG.standard_normal((layers, 4) if given == "unbatched" else (layers, 2, 4))
    _compare(ours, theirs, arrays, lambda m, t: list(m(t["x"], t.get("h0"))))


@pytest.mark.parametrize(
    "settings",
    [
        {"proj_size": 2},
        {"proj_size": 3, "num_layers": 2, "bidirectional": True},
        {"proj_size": 1, "batch_first": True, "bias": False},
        {"num_layers": 2, "bidirectional": True},
    ],
)
@pytest.mark.parametrize("given", ["states", "no states", "unbatched"])
def test_lstm_with_projection(settings, given) -> None:
    ours, theirs = _twins("LSTM", 3, 4, **settings)
    layers = settings.get("num_layers", 1) * (2 if settings.get("bidirectional") else 1)
    out = settings.get("proj_size") or 4
    batch = () if given == "unbatched" else (2,)
    shape = (5, 3) if given == "unbatched" else (2, 5, 3) if settings.get("batch_first") else (5, 2, 3)
    arrays = {"x": RNG.standard_normal(shape)}
    if given != "no states":
        arrays |= {
            "h0": RNG.standard_normal((layers, *batch, out)),
            "c0": RNG.standard_normal((layers, *batch, 4)),
        }

    def call(m, t):
        states = (t["h0"], t["c0"]) if "h0" in t else None
        y, (h, c) = m(t["x"], states)
        return [y, h, c]

    _compare(ours, theirs, arrays, call)


CELL_CASES = [
    (n, h) for n in ("RNNCell", "LSTMCell", "GRUCell") for h in ("state", "no state", "unbatched", "no bias")
]


@pytest.mark.parametrize(("name", "how"), [*CELL_CASES, ("RNNCell", "relu")])
def test_cells(name, how) -> None:
    settings = {"bias": False} if how == "no bias" else {"nonlinearity": "relu"} if how == "relu" else {}
    ours, theirs = _twins(name, 3, 4, **settings)
    batch = () if how == "unbatched" else (2,)
    arrays = {"x": RNG.standard_normal((*batch, 3))}
    if how != "no state":
        arrays["h"] = RNG.standard_normal((*batch, 4))
        if name == "LSTMCell":
            arrays["c"] = RNG.standard_normal((*batch, 4))

    def call(m, t):
        if name == "LSTMCell":
            return list(m(t["x"], (t["h"], t["c"]) if "h" in t else None))
        return [m(t["x"], t.get("h"))]

    _compare(ours, theirs, arrays, call)


def test_signatures_reprs_and_errors_as_pytorch() -> None:
    for name in ["RNNCell", "LSTMCell", "GRUCell", "MultiheadAttention", "PReLU"]:
        theirs = list(inspect.signature(getattr(torch.nn, name)).parameters)
        assert list(inspect.signature(getattr(nn, name)).parameters) == theirs
    order = ["input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional"]
    assert list(inspect.signature(nn.LSTM).parameters) == [*order, "proj_size", "device", "dtype"]
    assert list(inspect.signature(nn.GRU).parameters) == [*order, "device", "dtype"]
    assert list(inspect.signature(nn.RNN).parameters) == [
        *order[:3],
        "nonlinearity",
        *order[3:],
        "device",
        "dtype",
    ]
    assert nn.GRUCell(3, 4, device="cpu").weight_ih.dtype.name == "f32"
    with pytest.raises(ValueError, match="runs on the CPU"):
        nn.LSTM(3, 4, device="cuda")
    assert tuple(nn.MultiheadAttention(8, 2, kdim=4).k_proj_weight.shape) == (8, 4)  # as PyTorch's
    for args, settings in [
        ((3, 4), {"num_layers": 2, "nonlinearity": "relu"}),
        ((3, 4, 2, "relu", False), {}),
    ]:
        assert repr(nn.RNN(*args, **settings)) == repr(torch.nn.RNN(*args, **settings))
    assert repr(nn.LSTM(3, 4, proj_size=2, bidirectional=True)) == repr(
        torch.nn.LSTM(3, 4, proj_size=2, bidirectional=True)
    )
    for name, settings in [
        ("RNNCell", {"nonlinearity": "relu", "bias": False}),
        ("LSTMCell", {}),
        ("GRUCell", {}),
    ]:
        assert repr(getattr(nn, name)(3, 4, **settings)) == repr(getattr(torch.nn, name)(3, 4, **settings))
    with pytest.raises(ValueError, match="nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(verigrad.ShapeError, match=r"h0 must be \[1, 2, 4\]"):
        nn.RNN(3, 4)(verigrad.randn(5, 2, 3), verigrad.randn(2, 2, 4))
    with pytest.raises(verigrad.ShapeError, match=r"c must be \[2, 4\]"):
        nn.LSTMCell(3, 4)(verigrad.randn(2, 3), (verigrad.randn(2, 4), verigrad.randn(3, 4)))
    with pytest.raises(verigrad.ShapeError, match="LSTMCell takes"):
        nn.LSTMCell(3, 4)(verigrad.randn(2, 2, 3))
    with pytest.raises(ValueError, match="does not match weight dtype"):  # PyTorch's refusal
        torch.nn.LSTM(3, 4)(torch.zeros(5, 2, 3, dtype=torch.float64))
    with pytest.raises(verigrad.DTypeError, match="input dtype f64 does not match the weights' f32"):
        nn.LSTM(3, 4)(verigrad.zeros(5, 2, 3, dtype="f64"))
    with pytest.raises(RuntimeError):  # PyTorch's, from its projection
        torch.nn.MultiheadAttention(4, 2)(*(torch.zeros(3, 1, 4, dtype=torch.float64),) * 3)
    with pytest.raises(verigrad.DTypeError, match="query dtype f64 does not match"):
        nn.MultiheadAttention(4, 2)(*(verigrad.zeros(3, 1, 4, dtype="f64"),) * 3)
    with pytest.raises(verigrad.DTypeError, match="state dtype f64"):
        nn.GRUCell(3, 4)(verigrad.zeros(2, 3), verigrad.zeros(2, 4, dtype="f64"))
