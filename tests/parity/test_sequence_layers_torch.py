"""The sequence layers (LSTM, GRU, multi-head attention, transformer encoder and decoder) against
PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients as _check

import verigrad
from verigrad import nn

RNG = np.random.default_rng(11)


@pytest.mark.parametrize(
    "how", ["plain", "bool mask", "float mask", "padding", "batch_first", "unbatched", "causal", "per head"]
)
def test_multihead_attention(how) -> None:
    """PyTorch's parameters loaded by name; outputs, attention weights and every gradient compared."""
    embed, heads = 8, 2
    theirs = torch.nn.MultiheadAttention(embed, heads, batch_first=how == "batch_first", dtype=torch.float64)
    ours = nn.MultiheadAttention(embed, heads, batch_first=how == "batch_first", dtype="f64")
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    q_shape, kv_shape = {
        "batch_first": ((3, 4, embed), (3, 5, embed)),
        "unbatched": ((4, embed), (5, embed)),
    }.get(how, ((4, 3, embed), (5, 3, embed)))
    if how == "causal":
        kv_shape = q_shape
    mask = RNG.random((4, 5)) > 0.6
    mask[:, 0] = False  # every query keeps a key
    padding = np.array([[False] * 4 + [True]] * 3)

    def extra(convert):
        return {
            "bool mask": {"attn_mask": convert(mask)},
            "float mask": {"attn_mask": convert(np.where(mask, -1.5, 0.25))},
            "padding": {"key_padding_mask": convert(padding)},
            "causal": {"attn_mask": convert(np.triu(np.ones((4, 4), bool), 1)), "is_causal": True},
            "per head": {"average_attn_weights": False},
        }.get(how, {})

    def run(module, convert, q, k, v):
        out, weights = module(q, k, v, **extra(convert))
        return out * 2 + weights.sum() if how != "per head" else out.sum() + weights * 3

    arrays = {
        "q": RNG.standard_normal(q_shape),
        "k": RNG.standard_normal(kv_shape),
        "v": RNG.standard_normal(kv_shape),
    }
    _check(
        arrays, lambda **a: run(ours, verigrad.tensor, **a), lambda **a: run(theirs, torch.from_numpy, **a)
    )
    _, weights = ours(*(verigrad.tensor(arrays[n]) for n in "qkv"), need_weights=False)
    assert weights is None


@pytest.mark.parametrize(
    "settings",
    [{}, {"num_layers": 2, "bidirectional": True, "batch_first": True}, {"bias": False, "num_layers": 2}],
)
def test_lstm(settings) -> None:
    """Outputs, final states and every gradient of a PyTorch LSTM given the same state dict (its
    parameter names), from zero and from given states, batched and unbatched."""
    ours = nn.LSTM(3, 4, **settings).double()
    theirs = torch.nn.LSTM(3, 4, **settings).double()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    layers = settings.get("num_layers", 1) * (2 if settings.get("bidirectional") else 1)
    x = RNG.standard_normal((2, 5, 3) if settings.get("batch_first") else (5, 2, 3))
    h0, c0 = RNG.standard_normal((layers, 2, 4)), RNG.standard_normal((layers, 2, 4))
    xs, hs, cs = (verigrad.tensor(a).requires_grad_() for a in (x, h0, c0))
    xt, ht, ct = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    out, (h, c) = ours(xs, (hs, cs))
    out_t, (h_t, c_t) = theirs(xt, (ht, ct))
    for a, b in [(out, out_t), (h, h_t), (c, c_t)]:
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)
    ((out * out).sum() + h.sum() + (c * c).sum()).backward()
    ((out_t * out_t).sum() + h_t.sum() + (c_t * c_t).sum()).backward()
    for a, b in [(xs, xt), (hs, ht), (cs, ct)]:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(
            p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name
        )
    single, (h1, _) = ours(verigrad.tensor(x[0] if settings.get("batch_first") else x[:, 0]))
    single_t, (h1_t, _) = theirs(torch.tensor(x[0] if settings.get("batch_first") else x[:, 0]))
    np.testing.assert_allclose(single.numpy(), single_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h1.numpy(), h1_t.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("settings", [{}, {"num_layers": 2, "bidirectional": True, "batch_first": True}])
def test_gru(settings) -> None:
    """As test_lstm: outputs, final state and every gradient, from a given state, batched and not."""
    ours = nn.GRU(3, 4, **settings).double()
    theirs = torch.nn.GRU(3, 4, **settings).double()
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    layers = settings.get("num_layers", 1) * (2 if settings.get("bidirectional") else 1)
    x = RNG.standard_normal((2, 5, 3) if settings.get("batch_first") else (5, 2, 3))
    h0 = RNG.standard_normal((layers, 2, 4))
    xs, hs = verigrad.tensor(x).requires_grad_(), verigrad.tensor(h0).requires_grad_()
    xt, ht = torch.tensor(x, requires_grad=True), torch.tensor(h0, requires_grad=True)
    (out, h), (out_t, h_t) = ours(xs, hs), theirs(xt, ht)
    np.testing.assert_allclose(out.numpy(), out_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.numpy(), h_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    ((out * out).sum() + h.sum()).backward()
    ((out_t * out_t).sum() + h_t.sum()).backward()
    for a, b in [(xs, xt), (hs, ht)]:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(
            p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name
        )
    single = x[0] if settings.get("batch_first") else x[:, 0]
    np.testing.assert_allclose(
        ours(verigrad.tensor(single))[0].numpy(), theirs(torch.tensor(single))[0].detach().numpy(), rtol=1e-12
    )


ENCODER_CASES = ["post-norm", "norm_first", "gelu", "batch_first", "no bias", "masks", "stack"]


ENCODER_CASES.append("eval dropout")


@pytest.mark.parametrize("how", ENCODER_CASES)
def test_transformer_encoder(how) -> None:
    """nn.TransformerEncoderLayer and nn.TransformerEncoder with PyTorch's parameters loaded by name: the
    output and the gradients of the input and of every parameter, in f64."""
    d, heads, ff = 8, 2, 16
    settings = {
        "norm_first": {"norm_first": True},
        "gelu": {"activation": "gelu"},
        "batch_first": {"batch_first": True},
        "no bias": {"bias": False},
    }.get(how, {})
    dropout = 0.3 if how == "eval dropout" else 0.0
    torch_layer = torch.nn.TransformerEncoderLayer(d, heads, ff, dropout, dtype=torch.float64, **settings)
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout, dtype="f64", **settings)
    theirs, ours = torch_layer, layer
    if how == "stack":
        theirs = torch.nn.TransformerEncoder(
            torch_layer, 2, norm=torch.nn.LayerNorm(d, dtype=torch.float64), enable_nested_tensor=False
        )
        ours = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(d, dtype="f64"))
        with torch.no_grad():  # the copies differ, so that a mix-up of layers shows
            theirs.layers[1].linear1.weight.mul_(0.5)
    state = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    assert sorted(state) == sorted(dict(ours.named_parameters()))
    ours.load_state_dict(state)
    if how == "eval dropout":
        ours.eval(), theirs.eval()
    x = RNG.standard_normal((3, 5, d))
    masks = {}
    if how in ("masks", "stack"):
        attn = RNG.random((5, 5)) > 0.7
        attn[:, 0] = False
        padding = np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])  # [N, S]: batch 5
        x = RNG.standard_normal((5, 3, d))  # [S, N, E]
        masks = {"mask": attn, "src_key_padding_mask": padding}

    def call(module, convert, x):
        kwargs = {k: convert(v) for k, v in masks.items()}
        if how == "masks":
            kwargs["src_mask"] = kwargs.pop("mask")
        return module(x, **kwargs)

    _check({"x": x}, lambda x: call(ours, verigrad.tensor, x), lambda x: call(theirs, torch.from_numpy, x))
    for name, p in theirs.named_parameters():
        mine = dict(ours.named_parameters())[name]
        np.testing.assert_allclose(mine.grad.numpy(), p.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)


def test_attention_dropout_in_training() -> None:
    """MultiheadAttention's dropout zeroes attention weights in training, the kept ones scaled by
    1 / (1 - p), and the weights it returns are those; in eval it is off."""
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, dtype="f64")
    x = verigrad.tensor(RNG.standard_normal((6, 1, 8)))
    verigrad.manual_seed(3)
    _, weights = mha(x, x, x, average_attn_weights=False)
    w = weights.numpy()
    assert 0.3 < (w == 0).mean() < 0.7
    mha.eval()
    _, plain = mha(x, x, x, average_attn_weights=False)
    p = plain.numpy()
    np.testing.assert_allclose(w[w != 0], 2 * p[w != 0], rtol=1e-12)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)
    with pytest.raises(ValueError, match="dropout"):
        nn.MultiheadAttention(8, 2, dropout=1.5)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's own fast-path notice
@pytest.mark.parametrize("how", ["post-norm", "norm_first", "gelu", "batch_first", "masks"])
def test_transformer_decoder_and_the_whole_model(how) -> None:
    """nn.TransformerDecoderLayer and nn.Transformer with PyTorch's parameters: output and the gradients
    of source, target and every parameter, in f64."""
    d, heads, ff = 8, 2, 16
    settings = {"norm_first": {"norm_first": True}, "gelu": {"activation": "gelu"}}.get(how, {})
    settings |= {"batch_first": True} if how == "batch_first" else {}
    theirs = torch.nn.Transformer(d, heads, 2, 2, ff, 0.0, dtype=torch.float64, **settings)
    ours = nn.Transformer(d, heads, 2, 2, ff, 0.0, dtype="f64", **settings)
    state = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    assert sorted(state) == sorted(dict(ours.named_parameters()))
    ours.load_state_dict(state)
    src_shape, tgt_shape = ((3, 6, d), (3, 4, d)) if how == "batch_first" else ((6, 3, d), (4, 3, d))
    masks = {}
    if how == "masks":
        masks = {
            "tgt_mask": nn.Transformer.generate_square_subsequent_mask(4, dtype="f64").numpy(),
            "src_key_padding_mask": np.array([[False] * 6, [False] * 4 + [True] * 2, [False] * 5 + [True]]),
            "memory_key_padding_mask": np.array(
                [[False] * 6, [False] * 4 + [True] * 2, [False] * 5 + [True]]
            ),
        }

    def run(module, convert, src, tgt):
        return module(src, tgt, **{k: convert(v) for k, v in masks.items()})

    arrays = {"src": RNG.standard_normal(src_shape), "tgt": RNG.standard_normal(tgt_shape)}
    _check(
        arrays, lambda **a: run(ours, verigrad.tensor, **a), lambda **a: run(theirs, torch.from_numpy, **a)
    )
    for name, p in theirs.named_parameters():
        mine = dict(ours.named_parameters())[name]
        np.testing.assert_allclose(mine.grad.numpy(), p.grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)
    layer = nn.TransformerDecoderLayer(d, heads, ff, 0.0, dtype="f64", **settings)
    torch_layer = torch.nn.TransformerDecoderLayer(d, heads, ff, 0.0, dtype=torch.float64, **settings)
    layer.load_state_dict({k: v.detach().numpy() for k, v in torch_layer.state_dict().items()})
    _check(arrays, lambda src, tgt: layer(tgt, src), lambda src, tgt: torch_layer(tgt, src))
