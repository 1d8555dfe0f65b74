"""The trainable GPT (models/gpt.py): its config's checks, its variants, the cached forward against the
uncached one, the symbolic check of its loss, and the decay / no-decay groups."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.models.gpt import GPT, GPTConfig, decay_groups, rope_tables

VARIANTS = [
    {},
    {"norm": "rmsnorm", "positions": "rotary", "mlp": "swiglu"},
    {"positions": "rotary"},
    {"mlp": "swiglu", "norm": "rmsnorm"},
]


def tiny(**kw) -> GPTConfig:
    return GPTConfig(**{"vocab_size": 40, "context": 16, "n_layer": 2, "n_head": 2, "width": 16, **kw})


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"n_head": 3}, "n_head 3 does not divide width 16"),
        ({"width": -4}, "width must be an integer in 1..1048576, got -4"),
        ({"n_layer": 0}, "n_layer must be an integer"),
        ({"context": 2.5}, "context must be an integer"),
        ({"vocab_size": True}, "vocab_size must be an integer"),
        ({"norm": "batchnorm"}, "norm must be one of layernorm, rmsnorm, got 'batchnorm'"),
        ({"positions": "alibi"}, "positions must be one of learned, rotary"),
        ({"mlp": "relu"}, "mlp must be one of gelu, swiglu"),
        ({"dropout": 1.0}, "dropout must be a number in [0, 1)"),
        ({"positions": "rotary", "width": 6, "n_head": 2}, "rotary positions need an even head size"),
    ],
)
def test_config_refuses_bad_fields(kw, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        tiny(**kw)


def test_config_round_trips_and_refuses_unknown_fields():
    config = tiny(mlp="swiglu")
    assert GPTConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown field"):
        GPTConfig.from_dict({**config.to_dict(), "n_embd": 3})


@pytest.mark.parametrize("kw", VARIANTS)
def test_num_parameters_counts_the_tied_head_once(kw):
    config = tiny(**kw)
    model = GPT(config)
    v, d, n, h = config.vocab_size, config.width, config.n_layer, config.hidden
    norm = 2 * d if config.norm == "layernorm" else d
    mlp = (2 if config.mlp == "swiglu" else 1) * h * d + h * d
    per_layer = 2 * norm + 4 * d * d + mlp
    positions = config.context * d if config.positions == "learned" else 0
    assert model.num_parameters() == v * d + positions + n * per_layer + norm
    assert "head" not in " ".join(model.state_dict())  # the head is the token embedding


@pytest.mark.parametrize("kw", VARIANTS)
def test_cached_forward_matches_the_full_forward(kw):
    vg.manual_seed(1)
    model = GPT(tiny(**kw)).eval()
    ids = np.random.default_rng(0).integers(0, 40, (1, 11))
    full = model(ids).numpy()
    cache = model.new_cache(1, 16)
    parts = [model(ids[:, a:b], cache).numpy() for a, b in ((0, 6), (6, 7), (7, 11))]
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, rtol=1e-5, atol=1e-6)


def test_the_future_does_not_change_the_past():
    model = GPT(tiny())
    ids = np.random.default_rng(0).integers(0, 40, (2, 10))
    changed = ids.copy()
    changed[:, 6:] = (changed[:, 6:] + 1) % 40
    a, b = model(ids).numpy(), model(changed).numpy()
    np.testing.assert_array_equal(a[:, :6], b[:, :6])
    assert not np.array_equal(a[:, 6:], b[:, 6:])


def test_rotary_tables_rotate_by_position():
    cos, sin = rope_tables(8, 4, 10000.0)
    np.testing.assert_allclose(cos[3, 0], np.cos(3.0))
    np.testing.assert_allclose(sin[5, 1], np.sin(5 / 100.0))


def test_loss_at_initialisation_is_near_uniform():
    model = GPT(tiny(vocab_size=200))
    ids, targets = (vg.from_numpy(a) for a in np.random.default_rng(0).integers(0, 200, (2, 4, 16)))
    assert abs(float(model.loss(ids, targets)) - np.log(200)) < 0.1


@pytest.mark.parametrize("kw", VARIANTS[:2])
def test_loss_and_its_gradients_check_symbolically(kw):
    model = GPT(tiny(**kw))
    b, t = vg.dims("b t")
    ids = vg.spec([b, t], "i64")
    assert str(vg.check(model.loss, ids, ids)) == "f32[]"
    logits = vg.check(model, ids)
    assert logits.shape == (b, t, 40)


def test_a_symbolic_check_finds_a_wrong_target_shape():
    model = GPT(tiny())
    b, t = vg.dims("b t")
    with pytest.raises(vg.ShapeError):
        vg.check(model.loss, vg.spec([b, t], "i64"), vg.spec([b, t + 1], "i64"))


def test_sequence_longer_than_the_context_is_refused():
    model = GPT(tiny())
    with pytest.raises((ValueError, vg.ShapeError)):
        model(np.zeros((1, 17), np.int64))


def test_decay_groups_split_matrices_from_gains():
    model = GPT(tiny())
    decay, no_decay = decay_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_dropout_changes_training_forward_only():
    model = GPT(tiny(dropout=0.5))
    ids = np.random.default_rng(0).integers(0, 40, (1, 8))
    model.eval()
    a, b = model(ids).numpy(), model(ids).numpy()
    np.testing.assert_array_equal(a, b)
    model.train()
    assert not np.array_equal(model(ids).numpy(), a)
