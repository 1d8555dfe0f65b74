"""Module traversal against PyTorch's: shared (tied) parameters and modules listed once, every traversal
a generator, `state_dict` keeping every alias, and a GPT-like model whose head is its embedding trained
20 AdamW steps to the same losses."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest
import torch

import verigrad
from verigrad import nn

VOCAB, DIM, CONTEXT, BATCH = 11, 8, 6, 4
STEPS = 20
LOSS_TOLERANCE = {"f64": 1e-12, "f32": 1e-5}
TORCH_DTYPES = {"f64": torch.float64, "f32": torch.float32}


def tiny_gpt(library: Any) -> Any:
    """A GPT-like model made with `library` (verigrad.nn or torch.nn); its head weight is the embedding."""

    class TinyGPT(library.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = library.Embedding(VOCAB, DIM)
            self.position = library.Embedding(CONTEXT, DIM)
            self.norm = library.LayerNorm(DIM)
            self.mlp = library.Sequential(
                library.Linear(DIM, 2 * DIM), library.Tanh(), library.Linear(2 * DIM, DIM)
            )
            self.head = library.Linear(DIM, VOCAB, bias=False)
            self.head.weight = self.embedding.weight

        def forward(self, ids: Any) -> Any:
            x = self.embedding(ids) + self.position.weight[: ids.shape[1]]
            return self.head(x + self.mlp(self.norm(x)))

    return TinyGPT()


def twin_gpts(dtype: str) -> tuple[Any, Any]:
    """A verigrad TinyGPT and a torch TinyGPT holding the same weights."""
    verigrad.manual_seed(0)
    ours = tiny_gpt(nn).to(dtype)
    theirs = tiny_gpt(torch.nn).to(TORCH_DTYPES[dtype])
    theirs.load_state_dict(
        {name: torch.from_numpy(t.numpy().copy()) for name, t in ours.state_dict().items()}
    )
    return ours, theirs


def token_batches() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, VOCAB, size=(BATCH, CONTEXT + 1)) for _ in range(STEPS)]


def names(pairs: Any) -> list[str]:
    return [name for name, _ in pairs]


def test_tied_weight_is_one_parameter_as_in_torch() -> None:
    ours, theirs = twin_gpts("f32")
    assert names(ours.named_parameters()) == names(theirs.named_parameters())
    assert "head.weight" not in names(ours.named_parameters())
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    assert names(ours.named_parameters(remove_duplicate=False)) == names(
        theirs.named_parameters(remove_duplicate=False)
    )


def test_state_dict_keeps_every_alias_in_torch_order() -> None:
    ours, theirs = twin_gpts("f32")
    state = ours.state_dict()
    assert list(state) == list(theirs.state_dict())
    assert state["head.weight"].payload is state["embedding.weight"].payload  # one storage, as torch's
    assert torch.equal(theirs.state_dict()["head.weight"], theirs.state_dict()["embedding.weight"])


def test_loading_a_torch_state_dict_keeps_the_weights_tied() -> None:
    ours, theirs = twin_gpts("f64")
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(1.0)
    ours.load_state_dict({name: t.detach().numpy() for name, t in theirs.state_dict().items()})
    assert ours.head.weight is ours.embedding.weight
    np.testing.assert_array_equal(ours.head.weight.numpy(), theirs.head.weight.detach().numpy())


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_tied_gpt_trains_twenty_adamw_steps_as_torch(dtype: str) -> None:
    ours, theirs = twin_gpts(dtype)
    opt = verigrad.optim.AdamW(ours.parameters(), lr=1e-2, weight_decay=1e-2)
    torch_opt = torch.optim.AdamW(theirs.parameters(), lr=1e-2, weight_decay=1e-2, foreach=False)
    for step, tokens in enumerate(token_batches()):
        inputs, targets = tokens[:, :-1], tokens[:, 1:].reshape(-1)
        loss = nn.functional.cross_entropy(
            ours(verigrad.tensor(inputs)).reshape(-1, VOCAB), verigrad.tensor(targets)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch_loss = torch.nn.functional.cross_entropy(
            theirs(torch.from_numpy(inputs)).reshape(-1, VOCAB), torch.from_numpy(targets)
        )
        torch_opt.zero_grad()
        torch_loss.backward()
        torch_opt.step()
        assert loss.dtype.name == dtype
        np.testing.assert_allclose(
            float(loss), torch_loss.item(), rtol=LOSS_TOLERANCE[dtype], atol=0, err_msg=f"step {step}"
        )
    np.testing.assert_allclose(
        ours.head.weight.numpy(),
        theirs.head.weight.detach().numpy(),
        rtol=0,
        atol=100 * LOSS_TOLERANCE[dtype],
    )


class _Shared:
    """A model in each library in which one Linear sits in two places and a buffer under two names."""

    @staticmethod
    def build(library: Any, buffer: Any) -> Any:
        shared = library.Linear(3, 3)
        model = library.Sequential(shared, library.ReLU(), shared, library.Sequential(shared))
        model.register_buffer("scale", buffer)
        model[1].register_buffer("scale_again", buffer)
        return model


@pytest.fixture
def shared_pair() -> tuple[Any, Any]:
    return _Shared.build(nn, verigrad.ones(3)), _Shared.build(torch.nn, torch.ones(3))


@pytest.mark.parametrize("remove_duplicate", [True, False])
@pytest.mark.parametrize("prefix", ["", "model"])
def test_named_traversals_match_torch(
    shared_pair: tuple[Any, Any], remove_duplicate: bool, prefix: str
) -> None:
    ours, theirs = shared_pair
    for method in ("named_parameters", "named_buffers"):
        for recurse in (True, False):
            kwargs = {"prefix": prefix, "recurse": recurse, "remove_duplicate": remove_duplicate}
            assert names(getattr(ours, method)(**kwargs)) == names(getattr(theirs, method)(**kwargs)), method
    kwargs = {"prefix": prefix, "remove_duplicate": remove_duplicate}
    assert names(ours.named_modules(**kwargs)) == names(theirs.named_modules(**kwargs))


def test_plain_traversals_match_torch(shared_pair: tuple[Any, Any]) -> None:
    ours, theirs = shared_pair
    assert names(ours.named_children()) == names(theirs.named_children())
    assert len(list(ours.children())) == len(list(theirs.children())) == 3
    assert len(list(ours.modules())) == len(list(theirs.modules())) == 4
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 2
    assert len(list(ours.parameters(recurse=False))) == len(list(theirs.parameters(recurse=False))) == 0
    assert len(list(ours.buffers())) == len(list(theirs.buffers())) == 1


def test_state_dict_names_every_alias_in_torch_order(shared_pair: tuple[Any, Any]) -> None:
    """A module's parameters, then its buffers, then its children's; a shared tensor under each name."""
    ours, theirs = shared_pair
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.state_dict()["3.0.weight"].payload is ours[0].weight.payload
    assert ours.state_dict(keep_vars=True)["3.0.weight"] is ours[0].weight
    assert theirs.state_dict(keep_vars=True)["3.0.weight"] is theirs[0].weight


@pytest.mark.parametrize(
    "method",
    [
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "children",
        "named_children",
        "modules",
        "named_modules",
    ],
)
def test_traversals_are_generators_as_in_torch(shared_pair: tuple[Any, Any], method: str) -> None:
    ours, theirs = shared_pair
    assert isinstance(getattr(theirs, method)(), types.GeneratorType)
    assert isinstance(getattr(ours, method)(), types.GeneratorType)
    first, expected = next(getattr(ours, method)()), next(getattr(theirs, method)())
    assert isinstance(first, tuple) == isinstance(expected, tuple)
    if isinstance(expected, tuple):
        assert first[0] == expected[0]


def test_a_buffer_registered_as_none_is_left_out_as_in_torch() -> None:
    ours, theirs = nn.Linear(2, 2), torch.nn.Linear(2, 2)
    ours.register_buffer("mask", None)
    theirs.register_buffer("mask", None)
    assert ours.mask is None and theirs.mask is None
    assert names(ours.named_buffers()) == names(theirs.named_buffers()) == []
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_an_optimizer_given_a_parameter_twice_warns_as_torch() -> None:
    ours, theirs = twin_gpts("f32")
    with pytest.warns(UserWarning, match="duplicate parameters"):
        torch.optim.AdamW([*theirs.parameters(), theirs.head.weight])
    with pytest.warns(UserWarning, match="more than once"):
        verigrad.optim.AdamW([*ours.parameters(), ours.head.weight])
