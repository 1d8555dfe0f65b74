"""PyTorch's factory keywords (device=, dtype=) on every layer, in PyTorch's positions, against torch:
the same parameters, the same forward values from copied weights, the CPU only; and PyTorch's
deprecated nn.init names (without the `_`), which fill a tensor in place and warn as PyTorch's."""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad
from verigrad.devices import NoDeviceError
from verigrad.nn.module import LayerDTypeError

rng = np.random.default_rng(0)
_FLOATS = rng.standard_normal(64)
_DTYPES = {torch.float64: "f64", torch.int64: "i64"}
_TOKENS = np.array([[1, 2, 4], [4, 3, 9]])


def _x(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


# name, constructor arguments (both libraries), forward inputs (numpy)
LAYERS: list[tuple[str, tuple, dict, Callable[[], tuple]]] = [
    ("Linear", (4, 3), {}, lambda: (_x(2, 4),)),
    ("Bilinear", (4, 5, 3), {}, lambda: (_x(2, 4), _x(2, 5))),
    ("Embedding", (10, 4), {"padding_idx": 1}, lambda: (_TOKENS,)),
    ("EmbeddingBag", (10, 4), {"mode": "sum", "padding_idx": 2}, lambda: (_TOKENS,)),
    ("LayerNorm", ((3, 4),), {}, lambda: (_x(2, 3, 4),)),
    ("RMSNorm", (4,), {"eps": 1e-6}, lambda: (_x(2, 4),)),
    ("GroupNorm", (2, 4), {}, lambda: (_x(2, 4, 3),)),
    ("BatchNorm1d", (4,), {}, lambda: (_x(3, 4, 5),)),
    ("BatchNorm2d", (4,), {}, lambda: (_x(2, 4, 3, 3),)),
    ("BatchNorm3d", (4,), {}, lambda: (_x(2, 4, 2, 2, 2),)),
    ("InstanceNorm1d", (4,), {"affine": True, "track_running_stats": True}, lambda: (_x(2, 4, 5),)),
    ("InstanceNorm2d", (4,), {"affine": True}, lambda: (_x(2, 4, 3, 3),)),
    ("InstanceNorm3d", (4,), {"affine": True}, lambda: (_x(2, 4, 2, 2, 2),)),
    ("RNN", (4, 3, 2), {"nonlinearity": "relu"}, lambda: (_x(5, 2, 4),)),
    ("LSTM", (4, 3), {"proj_size": 2, "bidirectional": True}, lambda: (_x(5, 2, 4),)),
    ("GRU", (4, 3), {"batch_first": True}, lambda: (_x(2, 5, 4),)),
]
_IDS = [name for name, *_ in LAYERS]


def _flat(out: Any) -> list:
    return [t for o in out for t in _flat(o)] if isinstance(out, tuple | list) else [out]


@pytest.mark.parametrize(("name", "args", "options", "inputs"), LAYERS, ids=_IDS)
def test_factory_keywords_as_pytorchs(name: str, args: tuple, options: dict, inputs: Callable) -> None:
    theirs = getattr(torch.nn, name)(*args, **options, device="cpu", dtype=torch.float64)
    ours = getattr(verigrad.nn, name)(*args, **options, device="cpu", dtype=verigrad.float64)
    their_state, our_state = theirs.state_dict(), ours.state_dict()
    assert list(our_state) == list(their_state)
    for key, value in their_state.items():
        assert tuple(our_state[key].shape) == tuple(value.shape), key
        assert our_state[key].dtype.name == _DTYPES[value.dtype], key
    for key, value in ours.named_parameters():
        assert value.requires_grad, key
    ours.load_state_dict({k: verigrad.tensor(v.numpy()) for k, v in their_state.items()})
    arrays = inputs()
    expected = _flat(theirs(*(torch.from_numpy(a) for a in arrays)))
    got = _flat(ours(*(verigrad.tensor(a) for a in arrays)))
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype.name == "f64"
        np.testing.assert_allclose(g.numpy(), e.detach().numpy(), rtol=1e-12, atol=1e-12)
    for key, value in theirs.state_dict().items():  # the running statistics updated alike
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), value.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("name", "args", "options", "inputs"), LAYERS, ids=_IDS)
def test_defaults_f32_and_refusals(name: str, args: tuple, options: dict, inputs: Callable) -> None:
    layer = getattr(verigrad.nn, name)
    assert {p.dtype.name for p in layer(*args, **options).parameters()} == {"f32"}
    assert {p.dtype.name for p in layer(*args, **options, device=None, dtype=None).parameters()} == {"f32"}
    with pytest.raises(NoDeviceError, match=f"{name}: .*'cuda'"):
        layer(*args, **options, device="cuda")
    with pytest.raises(LayerDTypeError, match=f"{name}: dtype must be a float dtype.*i64"):
        layer(*args, **options, dtype=verigrad.int64)


_SIGNED = [name for name in _IDS if name not in ("BatchNorm2d", "RNN", "LSTM", "GRU")]


@pytest.mark.parametrize("name", _SIGNED)
def test_signature_as_pytorchs(name: str) -> None:
    """The same parameters in the same places (positional calls reach the same arguments)."""
    theirs = inspect.signature(getattr(torch.nn, name).__init__).parameters
    ours = inspect.signature(getattr(verigrad.nn, name).__init__).parameters
    assert [(p.name, p.kind) for p in ours.values()] == [(p.name, p.kind) for p in theirs.values()]
    assert ours["device"].default is None and ours["dtype"].default is None


def test_rnnbase_and_batchnorm2d_take_the_factory_keywords() -> None:
    names = list(inspect.signature(verigrad.nn.RNNBase.__init__).parameters)
    assert names[-3:] == ["proj_size", "device", "dtype"]
    layer = verigrad.nn.BatchNorm2d(3, 1e-5, 0.1, True, True, "cpu", verigrad.float64)
    assert layer.weight.dtype.name == "f64" and layer.running_var.dtype.name == "f64"


def test_rnnbase_made_directly_is_refused_clearly() -> None:
    assert isinstance(torch.nn.RNNBase("LSTM", 4, 3), torch.nn.RNNBase)
    with pytest.raises(TypeError, match=r"RNNBase: made directly \(with 'LSTM' first\).*nn.LSTM"):
        verigrad.nn.RNNBase("LSTM", 4, 3)


def test_positional_factory_arguments() -> None:
    ours = verigrad.nn.Linear(2, 3, False, "cpu", verigrad.float64)
    theirs = torch.nn.Linear(2, 3, False, "cpu", torch.float64)
    assert ours.bias is None and theirs.bias is None and ours.weight.dtype.name == "f64"
    ours = verigrad.nn.GroupNorm(2, 4, 1e-5, True, None, verigrad.float64, bias=False)
    assert ours.bias is None and ours.weight.dtype.name == "f64"


def test_embedding_given_weight_as_pytorchs() -> None:
    table = _x(5, 3)
    for freeze in (False, True):
        theirs = torch.nn.Embedding(5, 3, padding_idx=0, _weight=torch.from_numpy(table), _freeze=freeze)
        ours = verigrad.nn.Embedding(5, 3, padding_idx=0, _weight=verigrad.tensor(table), _freeze=freeze)
        np.testing.assert_array_equal(ours.weight.numpy(), theirs.weight.detach().numpy())
        assert ours.weight.requires_grad == theirs.weight.requires_grad == (not freeze)
    bag = verigrad.nn.EmbeddingBag(5, 3, _weight=verigrad.tensor(table))
    np.testing.assert_array_equal(bag.weight.numpy(), table)
    assert bag.weight.requires_grad
    with pytest.raises(verigrad.errors.ShapeError, match=r"Embedding: _weight must be .*\[4, 3\]"):
        verigrad.nn.Embedding(4, 3, _weight=verigrad.tensor(table))


# nn.init's deprecated names -------------------------------------------------------------------------
_DEPRECATED = sorted(
    name
    for name in dir(torch.nn.init)
    if hasattr(torch.nn.init, f"{name}_") and getattr(getattr(torch.nn.init, name), "__name__", "") == name
)


def test_every_deprecated_name_of_pytorch_is_there() -> None:
    assert {"uniform", "normal", "constant", "eye", "dirac", "sparse"} <= set(_DEPRECATED)
    for name in _DEPRECATED:
        assert getattr(verigrad.nn.init, name).__name__ == name


def _call(module: Any, name: str, *args: Any, **kwargs: Any) -> tuple[Any, str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = getattr(module.nn.init, name)(*args, **kwargs)
    assert [w.category for w in caught] == [FutureWarning]
    return result, str(caught[0].message)


@pytest.mark.parametrize(
    ("name", "shape", "args"),
    [("constant", (3, 4), (0.25,)), ("eye", (3, 5), ()), ("dirac", (4, 2, 3, 3), (2,))],
)
def test_deterministic_deprecated_inits_as_pytorchs(name: str, shape: tuple, args: tuple) -> None:
    theirs = torch.empty(shape, dtype=torch.float64)
    ours = verigrad.empty(*shape, dtype="f64")
    their_result, their_message = _call(torch, name, theirs, *args)
    our_result, our_message = _call(verigrad, name, ours, *args)
    assert their_result is theirs and our_result is ours
    assert our_message == their_message
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def _bounded(t: Any, low: float, high: float) -> None:
    values = t.numpy()
    assert values.min() >= low and values.max() <= high and values.max() - values.min() > 0.9 * (high - low)


def _within(t: Any, bound: float) -> None:
    _bounded(t, -bound, bound)


def _std(t: Any, mean: float, std: float) -> None:
    values = t.numpy()
    assert abs(values.mean() - mean) < 0.05 * std + 0.01 and abs(values.std() / std - 1) < 0.05


def _orthogonal(t: Any, gain: float) -> None:
    values = t.numpy().reshape(t.shape[0], -1)
    np.testing.assert_allclose(values @ values.T, gain**2 * np.eye(values.shape[0]), atol=1e-10)


def _sparse(t: Any, sparsity: float) -> None:
    zeros = (t.numpy() == 0).sum(axis=0)
    np.testing.assert_array_equal(zeros, math.ceil(sparsity * t.shape[0]))


fan_in, fan_out = 60, 40
_RANDOM = [
    ("uniform", (-2.0, 3.0), {}, lambda t: _bounded(t, -2.0, 3.0)),
    ("normal", (1.5, 0.5), {}, lambda t: _std(t, 1.5, 0.5)),
    (
        "xavier_uniform",
        (),
        {"gain": 2.0},
        lambda t: _within(t, 2 * math.sqrt(6 / 100)),
    ),
    ("xavier_normal", (), {}, lambda t: _std(t, 0.0, math.sqrt(2 / 100))),
    (
        "kaiming_uniform",
        (),
        {"a": 0.5},
        lambda t: _within(t, math.sqrt(6 / 1.25 / 60)),
    ),
    (
        "kaiming_normal",
        (),
        {"mode": "fan_out", "nonlinearity": "relu"},
        lambda t: _std(t, 0.0, math.sqrt(2 / 40)),
    ),
    ("orthogonal", (), {"gain": 1.5}, lambda t: _orthogonal(t, 1.5)),
    ("sparse", (0.3,), {"std": 0.1}, lambda t: _sparse(t, 0.3)),
]


@pytest.mark.parametrize(("name", "args", "kwargs", "check"), _RANDOM, ids=[r[0] for r in _RANDOM])
def test_random_deprecated_inits_as_pytorchs(name: str, args: tuple, kwargs: dict, check: Callable) -> None:
    """In place, the same warning, the same law (checked on both libraries' draws)."""
    messages = []
    for module in (torch, verigrad):
        t = module.zeros(fan_out, fan_in, dtype=module.float64)
        result, message = _call(module, name, t, *args, **kwargs)
        assert result is t
        check(t)
        messages.append(message)
    assert messages[0] == messages[1] == f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`."


def test_the_layers_own_initialisers_are_no_longer_public_names() -> None:
    """nn.init.uniform(shape, bound) was verigrad's helper: PyTorch's old code would have been misread."""
    with pytest.raises((TypeError, AttributeError, ValueError)), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verigrad.nn.init.uniform((3, 4), 0.1)
