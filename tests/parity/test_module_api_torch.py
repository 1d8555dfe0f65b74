"""The Module API against PyTorch's: what an attribute becomes, buffers (persistent or not), traversal,
modes, get_submodule / get_parameter / get_buffer, load_state_dict's result and errors, and the
containers (Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict) as lists and dicts."""

from __future__ import annotations

import inspect
from collections import OrderedDict

import numpy as np
import pytest
import torch

import verigrad


def _build(lib, make):
    """The same model in either library: a module holding a parameter, a plain tensor, buffers and
    children."""

    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = lib.nn.Parameter(make(np.ones(3)))
            self.frozen = lib.nn.Parameter(make(np.zeros(2)), requires_grad=False)
            self.plain = make(np.ones(2))  # a tensor that does not require grad: an attribute
            self.register_buffer("seen", make(np.zeros(1)))
            self.register_buffer("scratch", make(np.zeros(4)), persistent=False)
            self.register_buffer("later", None)
            self.body = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(), lib.nn.Linear(3, 1))
            self.empty = None

    return Net()


def _names(pairs) -> list[str]:
    return [name for name, _ in pairs]


def test_what_attributes_become_and_what_state_holds() -> None:
    ours = _build(verigrad, lambda a: verigrad.tensor(a))
    theirs = _build(torch, lambda a: torch.tensor(a))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert _names(ours.named_parameters()) == _names(theirs.named_parameters())
    assert _names(ours.named_buffers()) == _names(theirs.named_buffers())
    assert _names(ours.named_modules()) == _names(theirs.named_modules())
    assert _names(ours.named_children()) == _names(theirs.named_children())
    assert _names(ours.named_modules(prefix="m")) == _names(theirs.named_modules(prefix="m"))
    assert not ours.frozen.requires_grad and ours.get_parameter("frozen") is ours.frozen
    assert ours.get_submodule("body.2") is ours.body[2]
    assert ours.get_parameter("body.0.bias") is ours.body[0].bias
    assert ours.get_buffer("scratch") is ours.scratch and ours.later is None
    for call in [
        lambda m: m.get_submodule("body.5"),
        lambda m: m.get_parameter("seen"),
        lambda m: m.get_buffer("scale"),
        lambda m: m.get_parameter("body.0.nothing"),
    ]:
        with pytest.raises(AttributeError):
            call(theirs)
        with pytest.raises(AttributeError):
            call(ours)
    ours.seen = verigrad.ones(1)  # a buffer's name keeps a buffer
    theirs.seen = torch.ones(1)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    del ours.seen, theirs.seen
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_modes_apply_and_requires_grad_return_the_module() -> None:
    for lib in (verigrad, torch):
        model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Dropout(0.5))
        assert model.train() is model and model.eval() is model and not model[1].training
        assert model.requires_grad_(False) is model
        assert not any(p.requires_grad for p in model.parameters())
        seen = []
        assert model.apply(lambda m: seen.append(type(m).__name__)) is model
        assert seen == ["Linear", "Dropout", "Sequential"]
        with pytest.raises(ValueError):
            model.train("yes")


def test_load_state_dict_returns_the_incompatible_keys() -> None:
    ours, theirs = verigrad.nn.Linear(2, 3), torch.nn.Linear(2, 3)
    state = {"bias": np.zeros(3, np.float32), "extra": np.zeros(1, np.float32)}
    got = ours.load_state_dict(state, strict=False)
    want = theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=False)
    assert got == want and got.missing_keys == ["weight"] and got.unexpected_keys == ["extra"]
    assert ours.load_state_dict(ours.state_dict()) == theirs.load_state_dict(theirs.state_dict())
    with pytest.raises(
        RuntimeError, match=r"Error\(s\) in loading state_dict for Linear:\n\tmissing: weight"
    ):
        ours.load_state_dict(state)
    with pytest.raises(RuntimeError, match="Error"):
        theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})


def test_containers_behave_as_lists_and_dicts() -> None:
    for lib in (verigrad, torch):
        nn_ = lib.nn
        a, b, c, d = nn_.ReLU(), nn_.Tanh(), nn_.Sigmoid(), nn_.Identity()
        layers = nn_.ModuleList([a, b])
        layers.append(c).extend([d])
        layers.insert(1, nn_.ELU())
        assert [type(m).__name__ for m in layers] == ["ReLU", "ELU", "Tanh", "Sigmoid", "Identity"]
        assert len(layers) == 5 and layers[-1] is d and b in layers and nn_.ReLU() not in layers
        assert isinstance(layers[1:3], nn_.ModuleList) and list(layers[1:3])[1] is b
        del layers[0]
        assert _names(layers.named_children()) == ["0", "1", "2", "3"] and layers[0] is not a
        assert layers.pop(1) is b and len(layers) == 3
        layers += nn_.ModuleList([a])
        assert layers[3] is a and not isinstance(layers, nn_.Sequential)

        seq = nn_.Sequential(
            OrderedDict([("first", nn_.Linear(2, 3)), ("act", a), ("last", nn_.Linear(3, 1))])
        )
        assert _names(seq.named_children()) == ["first", "act", "last"] and seq[1] is a
        assert _names(seq[1:].named_children()) == ["act", "last"]
        seq.append(b)
        assert len(seq) == 4 and seq[-1] is b
        del seq[1]
        assert _names(seq.named_children()) == ["0", "1", "2"]

        named = nn_.ModuleDict({"a": a})
        named["b"] = b
        named.update([("c", c)])
        assert list(named) == ["a", "b", "c"] and "b" in named and len(named) == 3
        assert named.pop("a") is a and list(named.keys()) == ["b", "c"]
        del named["b"]
        assert list(named) == ["c"]
        named.clear()
        assert len(named) == 0

        make = verigrad.ones if lib is verigrad else torch.ones
        params = nn_.ParameterList([make(2), make(3)])
        params.append(make(4))
        assert len(params) == 3 and all(p.requires_grad for p in params)
        assert _names(params.named_parameters()) == ["0", "1", "2"]
        assert [p.shape[0] for p in params[1:]] == [3, 4]
        table = nn_.ParameterDict({"w": make(2)})
        table["v"] = make(3)
        assert list(table) == ["w", "v"] and "v" in table and table["v"].requires_grad
        assert _names(table.named_parameters()) == ["w", "v"]
        assert table.pop("w").shape[0] == 2 and list(table.keys()) == ["v"]
        with pytest.raises(IndexError):
            params[3]


def test_reprs_as_pytorch() -> None:
    def build(lib):
        nn_ = lib.nn
        return nn_.Sequential(
            nn_.Linear(3, 4),
            nn_.ModuleList([nn_.Linear(4, 4) for _ in range(3)] + [nn_.ReLU()]),
            nn_.ModuleDict({"act": nn_.Tanh()}),
            nn_.LSTM(4, 2),
        )

    assert repr(build(verigrad)) == repr(build(torch))


@pytest.mark.parametrize(
    ("ours", "theirs"), [(verigrad, torch), (verigrad.nn.functional, torch.nn.functional)]
)
def test_public_functions_have_names_and_docs(ours, theirs) -> None:
    """Every name PyTorch has as a function is one here with __name__, __qualname__, __module__ and a
    docstring; an op (an Op record) names itself, as a function does."""
    missing = []
    for name in dir(ours):
        theirs_fn = getattr(theirs, name, None)
        if name.startswith("_") or theirs_fn is None or inspect.isclass(theirs_fn) or not callable(theirs_fn):
            continue
        fn = getattr(ours, name)
        if inspect.isclass(fn) or inspect.ismodule(fn):
            continue
        if not all(getattr(fn, attr, None) for attr in ("__name__", "__qualname__", "__module__", "__doc__")):
            missing.append(name)
    assert missing == []
    assert verigrad.exp.__name__ == verigrad.exp.__qualname__ == "exp" and verigrad.exp.__module__


def test_to_takes_pytorchs_forms_and_the_deprecated_backward_hook_is_refused() -> None:
    for lib, f64 in ((verigrad, verigrad.f64), (torch, torch.float64)):
        model = lib.nn.Linear(2, 3)
        assert model.to("cpu", f64) is model and model.weight.dtype == f64
        assert model.to(device="cpu", dtype=lib.float32).weight.dtype == lib.float32
        assert model.to(lib.zeros(1, dtype=f64)).bias.dtype == f64
    with pytest.raises(ValueError, match="runs on the CPU"):
        verigrad.nn.Linear(2, 3).to("cuda:0")
    with pytest.raises(NotImplementedError, match="register_backward_hook is not supported"):
        verigrad.nn.Linear(2, 3).register_backward_hook(lambda module, grad_in, grad_out: None)


def test_a_name_taken_by_an_attribute_is_refused_as_pytorch() -> None:
    for lib in (verigrad, torch):
        with pytest.raises(KeyError, match="already exists"):
            lib.nn.ModuleDict({"update": lib.nn.ReLU()})
        layer = lib.nn.Linear(2, 2)
        with pytest.raises(KeyError, match="already exists"):
            layer.register_buffer("weight", lib.zeros(2))
        with pytest.raises(KeyError, match="already exists"):
            layer.register_buffer("forward", lib.zeros(2))


def _hooked_run(lib, name: str, arrays: dict[str, np.ndarray]):
    """A module of each library with the same weights, a backward pre-hook scaling grad_output and a
    backward hook recording (grad_input, grad_output) and doubling grad_input[0]: the gradients and
    what the hooks saw."""
    f64 = torch.float64 if lib is torch else "f64"
    if name == "Bilinear":
        module = lib.nn.Bilinear(3, 2, 2, dtype=f64)
    elif name == "LSTM":
        module = lib.nn.LSTM(3, 2, dtype=f64)
    else:
        module = lib.nn.Linear(3, 2, dtype=f64)
    state = {
        k: np.random.default_rng(1).standard_normal(tuple(v.shape)) for k, v in module.state_dict().items()
    }
    module.load_state_dict({k: torch.tensor(v) if lib is torch else v for k, v in state.items()})
    seen = []

    def scale_output(m, grad_output):
        assert m is module
        return tuple(None if g is None else g * 3 for g in grad_output)

    def record(m, grad_input, grad_output):
        seen.append((grad_input, grad_output))
        return (None if grad_input[0] is None else grad_input[0] * 2, *grad_input[1:])

    module.register_full_backward_pre_hook(scale_output)
    handle = module.register_full_backward_hook(record)
    make = torch.tensor if lib is torch else verigrad.tensor
    inputs = {k: make(v).requires_grad_(k != "frozen") for k, v in arrays.items()}
    out = module(*inputs.values())
    total = out[0].sum() + (out[1][0] * out[1][0]).sum() if name == "LSTM" else (out * out).sum()
    total.backward()
    handle.remove()
    grads = [None if t.grad is None else t.grad.numpy() for t in inputs.values()]
    params = {k: p.grad.numpy() for k, p in module.named_parameters()}

    def numpy_of(group):
        return [None if g is None else g.detach().numpy() for g in group]

    return grads, params, [(numpy_of(gi), numpy_of(go)) for gi, go in seen]


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")  # both libraries' notice, no input grad
@pytest.mark.parametrize(
    ("name", "arrays"),
    [
        ("Linear", {"x": np.arange(6.0).reshape(2, 3) / 4}),
        ("Linear", {"frozen": np.arange(6.0).reshape(2, 3) / 4}),  # no input takes a gradient
        ("Bilinear", {"a": np.arange(6.0).reshape(2, 3) / 5, "b": np.ones((2, 2)) / 3}),
        ("LSTM", {"x": np.arange(12.0).reshape(2, 2, 3) / 7}),  # outputs (y, (h, c)): y's gradient only
    ],
)
def test_full_backward_hooks_as_pytorchs(name, arrays) -> None:
    ours, theirs = _hooked_run(verigrad, name, arrays), _hooked_run(torch, name, arrays)
    for a, b in zip(ours[0], theirs[0]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12)
    for k in theirs[1]:
        np.testing.assert_allclose(ours[1][k], theirs[1][k], rtol=1e-12, err_msg=k)
    assert len(ours[2]) == len(theirs[2]) == 1
    for mine, their in zip(ours[2][0], theirs[2][0]):
        assert [g is None for g in mine] == [g is None for g in their]
        for a, b in zip(mine, their):
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-12)
