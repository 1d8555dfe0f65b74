"""Every activation PyTorch has, as a layer and as a function, against PyTorch's: signatures, reprs,
values and gradients in f64, inplace=True, the in-place forms, and softmax's implicit dim."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F
from verigrad import nn

RNG = np.random.default_rng(17)
# the input straddles every kink: 0, +-0.5 (the shrinks), +-1 (hardtanh), +-3 (hardsigmoid), 20 (softplus)
X = np.concatenate([RNG.uniform(-4, 4, 40), [-3.5, -0.7, -0.2, 0.3, 0.9, 2.5, 25.0, -25.0]]).reshape(2, 4, 6)

LAYERS = [
    ("Hardtanh", ()),
    ("Hardtanh", (-2.0, 1.5)),
    ("ReLU6", ()),
    ("Mish", ()),
    ("Hardswish", ()),
    ("Hardsigmoid", ()),
    ("Softsign", ()),
    ("Tanhshrink", ()),
    ("Threshold", (0.1, 20.0)),
    ("GLU", ()),
    ("GLU", (1,)),
    ("LogSigmoid", ()),
    ("Softmax2d", ()),
    ("PReLU", ()),
    ("PReLU", (4, 0.1)),
    ("RReLU", ()),
    ("RReLU", (0.1, 0.4)),
    ("CELU", (0.7,)),
    ("SELU", ()),
    ("SiLU", ()),
    ("GELU", ()),
    ("GELU", ("tanh",)),
    ("Softplus", ()),
    ("Softplus", (2.0, 5.0)),
    ("Hardshrink", ()),
    ("Hardshrink", (1.2,)),
    ("Softshrink", (0.3,)),
    ("LeakyReLU", (0.2,)),
    ("ELU", (0.5,)),
    ("ReLU", ()),
    ("Sigmoid", ()),
    ("Tanh", ()),
    ("Softmax", (1,)),
    ("LogSoftmax", (2,)),
    ("Softmin", (1,)),
]


# PyTorch's backward of these uses float32 constants even in f64 (hardsigmoid 1.0f / 6, celu 1 / alpha
# with alpha as a float): its gradients are off the derivative by ~1e-8 (test_float32_constants_...)
F32_CONSTANTS = {"Hardsigmoid", "CELU", "hardsigmoid", "celu"}


def _values_only(x: np.ndarray, ours, theirs) -> None:
    np.testing.assert_allclose(
        ours(verigrad.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize(("name", "args"), LAYERS, ids=[f"{n}{a}" for n, a in LAYERS])
def test_layers_match_pytorch(name, args) -> None:
    theirs = getattr(torch.nn, name)(*args).double().eval()
    ours = getattr(nn, name)(*args).eval()
    assert repr(ours) == repr(theirs)
    if name == "PReLU":
        ours = ours.double()
    if name in F32_CONSTANTS:
        _values_only(X, ours, theirs)
        return
    _check({"x": X}, lambda x: ours(x), lambda x: theirs(x))
    for p_name, p in theirs.named_parameters():
        np.testing.assert_allclose(
            dict(ours.named_parameters())[p_name].grad.numpy(), p.grad.numpy(), rtol=1e-12
        )


FUNCTIONS = [
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
    ("relu6", {}),
    ("mish", {}),
    ("hardswish", {}),
    ("hardsigmoid", {}),
    ("softsign", {}),
    ("tanhshrink", {}),
    ("threshold", {"threshold": 0.5, "value": -1.0}),
    ("glu", {"dim": 1}),
    ("logsigmoid", {}),
    ("rrelu", {"lower": 0.2, "upper": 0.3}),
    ("celu", {"alpha": 2.0}),
    ("selu", {}),
    ("silu", {}),
    ("gelu", {"approximate": "tanh"}),
    ("softplus", {"beta": 0.5, "threshold": 3.0}),
    ("hardshrink", {"lambd": 0.7}),
    ("softshrink", {"lambd": 0.7}),
    ("leaky_relu", {"negative_slope": 0.3}),
    ("elu", {"alpha": 0.3}),
    ("relu", {}),
    ("sigmoid", {}),
    ("tanh", {}),
    ("softmax", {"dim": 0}),
    ("log_softmax", {"dim": -1}),
    ("softmin", {"dim": 2}),
]


@pytest.mark.parametrize(("name", "settings"), FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_functions_match_pytorch(name, settings) -> None:
    ours, theirs = getattr(F, name), getattr(TF, name)
    if name in F32_CONSTANTS:
        _values_only(X, lambda x: ours(input=x, **settings), lambda x: theirs(input=x, **settings))
    else:
        _check({"x": X}, lambda x: ours(input=x, **settings), lambda x: theirs(input=x, **settings))
    assert ours.__name__ == name and ours.__doc__
    try:
        expected = inspect.signature(theirs)
    except ValueError:  # a builtin without one: its documented parameters are what ours are named
        return
    assert [(p.name, p.default) for p in inspect.signature(ours).parameters.values()] == [
        (p.name, p.default) for p in expected.parameters.values()
    ]


def test_prelu_per_channel_and_softmax_with_dtype() -> None:
    w = RNG.uniform(0, 0.5, 4)
    _check({"x": X, "w": w}, lambda x, w: F.prelu(x, w), lambda x, w: TF.prelu(x, w))
    ours = F.softmax(verigrad.tensor(X.astype(np.float32)), 1, dtype=verigrad.f64)
    theirs = TF.softmax(torch.tensor(X.astype(np.float32)), 1, dtype=torch.float64)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_an_implicit_softmax_dim_is_pytorchs_with_its_warning(ndim, name) -> None:
    x = X.reshape([(48,), (6, 8), (2, 4, 6), (2, 2, 2, 6)][ndim - 1])
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = getattr(F, name)(verigrad.tensor(x))
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = getattr(TF, name)(torch.tensor(x))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-15)
    assert [str(w.message) for w in ours_warned] == [str(w.message) for w in theirs_warned]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("relu", ()),
        ("elu", (0.5,)),
        ("leaky_relu", (0.2,)),
        ("hardtanh", (-0.5, 0.5)),
        ("threshold", (0.1, 9.0)),
        ("celu", (0.5,)),
        ("selu", ()),
        ("rrelu", (0.1, 0.2)),
    ],
)
def test_in_place_forms_write_into_the_input(name, args) -> None:
    ours, theirs = verigrad.tensor(X.copy()), torch.tensor(X.copy())
    assert getattr(F, name + "_")(ours, *args) is ours
    getattr(TF, name + "_")(theirs, *args)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    kept = verigrad.tensor(X.copy())
    assert getattr(F, name)(kept, *args, inplace=True) is kept
    np.testing.assert_allclose(kept.numpy(), theirs.numpy(), rtol=1e-12)
    message = "a leaf Variable that requires grad is being used in an in-place operation."
    for lib, functional in ((torch, TF), (verigrad, F)):
        with pytest.raises(RuntimeError, match=message):
            getattr(functional, name + "_")(lib.tensor(X, requires_grad=True), *args)
    grads = []  # a non-leaf: the write recorded, as PyTorch's
    for lib, functional in ((torch, TF), (verigrad, F)):
        x = lib.tensor(X, requires_grad=True)
        h = x * 1.5
        assert getattr(functional, name)(h, *args, inplace=True) is h
        (h * h).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_inplace_layers_and_rrelu_in_training() -> None:
    x = verigrad.tensor(X.copy())
    assert nn.ReLU(inplace=True)(x) is x and float(x.numpy().min()) == 0.0
    verigrad.manual_seed(0)
    layer = nn.RReLU(0.1, 0.3)
    y = layer(verigrad.tensor(X)).numpy()
    negative = X < 0
    ratio = y[negative] / X[negative]
    assert ((ratio >= 0.1) & (ratio <= 0.3)).all() and len(np.unique(ratio)) > 1
    np.testing.assert_array_equal(y[~negative], X[~negative])
    with pytest.raises(ValueError, match="lambd"):
        F.softshrink(verigrad.tensor(X), -1.0)
    with pytest.warns(FutureWarning, match="min_value"):
        assert nn.Hardtanh(min_value=-2.0).min_val == -2.0


def test_float32_constants_in_pytorchs_backward() -> None:
    """Ours are the derivatives (to 1e-12 in f64); PyTorch's differ from them exactly as its float32
    constants say: hardsigmoid's gradient is float32(1/6) inside (-3, 3), and celu's alpha s exp(x s)
    below 0 with s = 1 / float32(alpha)."""
    x = verigrad.tensor(X, requires_grad=True)
    F.hardsigmoid(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(np.abs(X) < 3, 1 / 6, 0.0))
    t = torch.tensor(X, requires_grad=True)
    TF.hardsigmoid(t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.where(np.abs(X) < 3, float(np.float32(1 / 6)), 0.0))
    alpha = 0.7
    x = verigrad.tensor(X, requires_grad=True)
    F.celu(x, alpha).sum().backward()
    derivative = np.where(X > 0, 1.0, np.exp(X / alpha))
    np.testing.assert_allclose(x.grad.numpy(), derivative, rtol=1e-12, atol=1e-15)
    t = torch.tensor(X, requires_grad=True)
    TF.celu(t, alpha).sum().backward()
    s = 1 / float(np.float32(alpha))
    np.testing.assert_allclose(t.grad.numpy(), np.where(X > 0, 1.0, alpha * s * np.exp(X * s)), rtol=1e-12)
