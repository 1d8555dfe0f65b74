"""Module traversal: generators as PyTorch's, a shared (tied) tensor or module listed once, `state_dict`
keeping every alias, and the functions that take `model.parameters()` accepting a generator."""

from __future__ import annotations

import types

import numpy as np
import pytest

import verigrad
from verigrad import nn
from verigrad.optim import SGD


class Tied(nn.Module):
    """An embedding whose weight is also the head's, as a GPT ties them."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(3, 2)
        self.head = nn.Linear(2, 3, bias=False)
        self.head.weight = self.embedding.weight


def names(pairs) -> list[str]:
    return [name for name, _ in pairs]


def test_a_tied_weight_is_one_parameter_under_its_first_name() -> None:
    model = Tied()
    assert names(model.named_parameters()) == ["embedding.weight"]
    assert names(model.named_parameters(remove_duplicate=False)) == ["embedding.weight", "head.weight"]
    assert sum(p.numel() for p in model.parameters()) == 6


def test_an_optimizer_updates_a_tied_weight_once_a_step() -> None:
    """w is used twice in the loss: its gradient sums both uses (3 + 4 = 7), and one SGD step at lr 0.1
    takes 0.7 off it (updating it once per name would take 1.4)."""
    model = Tied()
    with verigrad.no_grad():
        model.embedding.weight.fill_(2.0)
    loss = (model.embedding.weight * 3.0).sum() + (model.head.weight * 4.0).sum()
    opt = SGD(model.parameters(), lr=0.1)
    loss.backward()
    opt.step()
    np.testing.assert_allclose(model.head.weight.numpy(), np.full((3, 2), 1.3, np.float32), rtol=1e-6)
    assert model.head.weight is model.embedding.weight


def test_traversals_are_fresh_generators() -> None:
    model = Tied()
    for method in ("parameters", "named_parameters", "buffers", "named_buffers"):
        assert isinstance(getattr(model, method)(), types.GeneratorType), method
    for method in ("children", "named_children", "modules", "named_modules"):
        assert isinstance(getattr(model, method)(), types.GeneratorType), method
    assert next(model.parameters()) is model.embedding.weight
    assert next(model.parameters()) is model.embedding.weight  # each call starts again
    assert next(model.children()) is model.embedding


def test_a_shared_module_is_visited_once() -> None:
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    assert names(model.named_modules()) == ["", "0", "1"]
    assert names(model.named_modules(remove_duplicate=False)) == ["", "0", "1", "2"]
    assert names(model.named_children()) == ["0", "1"]
    assert names(model.named_parameters()) == ["0.weight", "0.bias"]
    assert names(model.named_parameters(prefix="net")) == ["net.0.weight", "net.0.bias"]
    assert list(model.parameters(recurse=False)) == []
    assert list(model[0].parameters(recurse=False)) == [shared.weight, shared.bias]


def test_buffers_under_two_names() -> None:
    model = nn.Sequential(nn.ReLU())
    running = verigrad.zeros(2)
    model.register_buffer("running", running)
    model[0].register_buffer("running", running)
    assert names(model.named_buffers()) == ["running"]
    assert names(model.named_buffers(remove_duplicate=False)) == ["running", "0.running"]
    assert names(model.named_buffers(recurse=False)) == ["running"]


def test_state_dict_keeps_every_alias_and_module_order() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    model.register_buffer("scale", verigrad.ones(1))
    model.tied = model[0].weight
    state = model.state_dict()
    assert list(state) == [
        "tied",
        "scale",
        "0.weight",
        "0.bias",
        "1.weight",
        "1.bias",
        "1.running_mean",
        "1.running_var",
        "1.num_batches_tracked",
    ]
    assert state["tied"].payload is state["0.weight"].payload  # detached views of one storage


def test_load_state_dict_keeps_tied_weights_tied() -> None:
    model = Tied()
    weight = np.arange(6, dtype=np.float32).reshape(3, 2)
    model.load_state_dict({"embedding.weight": weight, "head.weight": weight})
    assert model.head.weight is model.embedding.weight
    np.testing.assert_array_equal(model.head.weight.numpy(), weight)
    with pytest.raises(ValueError, match=r"missing: head\.weight"):
        model.load_state_dict({"embedding.weight": weight})  # as PyTorch: every alias is a key
    model.load_state_dict({"head.weight": weight + 1}, strict=False)
    np.testing.assert_array_equal(model.embedding.weight.numpy(), weight + 1)


def test_to_converts_a_tied_weight_once_and_keeps_it_tied() -> None:
    model = Tied().double()
    assert model.head.weight is model.embedding.weight and model.head.weight.dtype.name == "f64"


def test_functions_taking_parameters_accept_a_generator() -> None:
    model = nn.Linear(2, 1)
    (model(verigrad.ones(1, 2)) * 10.0).sum().backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    np.testing.assert_allclose(float(norm), 10.0 * np.sqrt(3.0), rtol=1e-6)  # gradients 10, 10, 10
    flat = nn.utils.parameters_to_vector(model.parameters())
    assert flat.shape == (3,)
    nn.utils.vector_to_parameters(verigrad.arange(3).float(), model.parameters())
    np.testing.assert_array_equal(model.weight.numpy(), [[0.0, 1.0]])
    np.testing.assert_array_equal(model.bias.numpy(), [2.0])
    assert len(SGD(model.parameters(), lr=0.1).params) == 2


def test_a_buffer_registered_as_none_is_not_state() -> None:
    model = nn.Linear(2, 2)
    model.register_buffer("mask", None)
    assert model.mask is None
    assert list(model.buffers()) == [] and set(model.state_dict()) == {"weight", "bias"}
