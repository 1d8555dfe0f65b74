"""Options of the Transformer layers, attention and embeddings that public programs pass, against
PyTorch: is_causal (PyTorch's hint over the mask given, and its refusal without one), the causal mask's
arguments, the nested-tensor zeros with activation modules, EmbeddingBag's include_last_offset, the
padding row counted from the end, scaled_dot_product_attention's mask dtypes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

RNG = np.random.default_rng(7)
E, HEADS, S, N = 8, 2, 6, 3
X = RNG.standard_normal((S, N, E)).astype(np.float32)
NOT_CAUSAL = RNG.random((S, S)) < 0.3  # a mask that is not the causal one: is_causal says it is
PADDING = np.zeros((N, S), bool)
PADDING[0, 4:] = True


def _run(
    build: Callable[[Any], Any], call: Callable[[Any, Any], Any], grad: bool = True
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(outputs, parameter gradients) of torch's and verigrad's module from torch's initial state, in
    evaluation; the gradients of the first output's squares where `grad`, else outputs under no_grad."""
    results, state = [], None
    for lib in (torch, verigrad):
        torch.manual_seed(0)
        module = build(lib).eval()
        if state is None:
            state = {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}
        module.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in state.items()})
        with lib.enable_grad() if grad else lib.no_grad():
            out = call(lib, module)
        outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
        if grad:
            outs[0].pow(2).sum().backward()
        grads = [p.grad.numpy().copy() for p in module.parameters() if p.grad is not None]
        results.append(([o.detach().numpy().copy() for o in outs], grads))
    (want, want_grads), (got, got_grads) = results
    assert len(got) == len(want) and len(got_grads) == len(want_grads)
    for g, w in zip(got + got_grads, want + want_grads):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(w).max())))
    return want, got


def _t(lib: Any, a: np.ndarray) -> Any:
    return lib.from_numpy(a.copy())


def _attention(lib: Any, **options: Any) -> Any:
    return lib.nn.MultiheadAttention(E, HEADS, **options)


@pytest.mark.parametrize("options", [{}, {"add_bias_kv": True}, {"add_zero_attn": True}])
def test_is_causal_without_weights_or_padding_uses_the_causal_mask_as_pytorch(options) -> None:
    """PyTorch trusts the hint: with need_weights=False and no key_padding_mask the mask given is replaced
    by the causal one (over the added keys too); with weights or padding the mask given is used."""
    for extra in ({"need_weights": False}, {"key_padding_mask": PADDING}, {}):
        _run(
            lambda lib: _attention(lib, **options),
            lambda lib, m: m(*[_t(lib, X)] * 3, attn_mask=_t(lib, NOT_CAUSAL), is_causal=True, **{
                k: _t(lib, v) if isinstance(v, np.ndarray) else v for k, v in extra.items()
            }),
        )  # fmt: skip


def test_the_causal_hint_changes_the_output_where_pytorch_trusts_it() -> None:
    """Not vacuous: the mask given and the causal one give different outputs."""
    outputs = []
    for hint in (False, True):
        want, _ = _run(
            _attention,
            lambda lib, m: m(
                *[_t(lib, X)] * 3, attn_mask=_t(lib, NOT_CAUSAL), is_causal=hint, need_weights=False
            ),
        )
        outputs.append(want[0])
    assert not np.allclose(*outputs)


@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layers_pass_the_hint_on_as_pytorch(batch_first: bool) -> None:
    x = X.transpose(1, 0, 2).copy() if batch_first else X
    layer = lambda lib: lib.nn.TransformerEncoderLayer(E, HEADS, 16, 0.0, batch_first=batch_first)
    _run(layer, lambda lib, m: m(_t(lib, x), src_mask=_t(lib, NOT_CAUSAL), is_causal=True))
    _run(
        lambda lib: lib.nn.TransformerEncoder(layer(lib), 2, enable_nested_tensor=False),
        lambda lib, m: m(_t(lib, x), mask=_t(lib, NOT_CAUSAL), is_causal=True),
    )
    if batch_first:  # PyTorch's fast path merges the mask given and ignores the hint
        _run(layer, lambda lib, m: m(_t(lib, x), src_mask=_t(lib, NOT_CAUSAL), is_causal=True), grad=False)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: _attention(lib)(*[_t(lib, X)] * 3, is_causal=True, need_weights=False),
        lambda lib: lib.nn.TransformerEncoderLayer(E, HEADS, 16, 0.0)(_t(lib, X), is_causal=True),
        lambda lib: lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(E, HEADS, 16, 0.0), 1)(
            _t(lib, X), is_causal=True
        ),
    ],
    ids=["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"],
)
def test_is_causal_without_a_mask_is_refused_as_pytorch(call) -> None:
    for lib in (torch, verigrad):
        with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
            call(lib)


def test_generate_square_subsequent_mask_takes_pytorchs_arguments() -> None:
    for lib in (torch, verigrad):
        make = lib.nn.Transformer.generate_square_subsequent_mask
        assert make(3, "cpu").dtype == lib.float32  # device second, as PyTorch's
        assert make(3, None, lib.float64).dtype == lib.float64
        assert make(3, device="cpu", dtype=lib.bool).tolist() == np.triu(np.ones((3, 3), bool), 1).tolist()
        assert make(3).tolist() == [[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]]


@pytest.mark.parametrize("activation", ["ReLU", "GELU"])
def test_an_activation_module_takes_pytorchs_nested_tensor_path(activation: str) -> None:
    """nn.ReLU() or nn.GELU() as the activation is PyTorch's fast path as "relu" is: in inference the
    encoder's output is 0 at the padded positions."""
    x = X.transpose(1, 0, 2).copy()

    def build(lib: Any) -> Any:
        layer = lib.nn.TransformerEncoderLayer(
            E, HEADS, 16, 0.0, getattr(lib.nn, activation)(), batch_first=True
        )
        return lib.nn.TransformerEncoder(layer, 2)

    want, got = _run(build, lambda lib, m: m(_t(lib, x), src_key_padding_mask=_t(lib, PADDING)), grad=False)
    assert (want[0][PADDING] == 0).all() and (got[0][PADDING] == 0).all()
    assert verigrad.nn.TransformerEncoder(
        verigrad.nn.TransformerEncoderLayer(
            E, HEADS, activation=getattr(verigrad.nn, activation)(), batch_first=True
        ),
        1,
    ).use_nested_tensor


def test_embedding_counts_a_negative_padding_idx_from_the_end_as_pytorch() -> None:
    for lib in (torch, verigrad):
        assert lib.nn.Embedding(5, 2, padding_idx=-1).padding_idx == 4
        assert lib.nn.EmbeddingBag(5, 2, padding_idx=-2).padding_idx == 3
        assert lib.nn.Embedding.from_pretrained(lib.zeros(5, 2), padding_idx=-1).padding_idx == 4
    with pytest.raises(ValueError, match="padding_idx must be within num_embeddings"):
        verigrad.nn.Embedding(5, 2, padding_idx=5)
    ids = np.array([[1, 4, 0]])
    _run(lambda lib: lib.nn.Embedding(5, 3, padding_idx=-1), lambda lib, m: m(input=_t(lib, ids)))


def test_embedding_bag_include_last_offset_as_pytorch() -> None:
    """The last offset ends the last bag; one short of the input is refused (PyTorch's sum and mean leave
    the rest out, its max takes it in)."""
    ids = np.array([1, 2, 4, 5, 4, 3, 2, 0])
    for mode in ("sum", "mean", "max"):
        _run(
            lambda lib: lib.nn.EmbeddingBag(6, 3, mode=mode, include_last_offset=True),
            lambda lib, m: m(_t(lib, ids), _t(lib, np.array([0, 2, 2, 8]))),
        )
        with pytest.raises(ValueError, match="offsets must end with the input's size 8"):
            verigrad.nn.EmbeddingBag(6, 3, mode=mode, include_last_offset=True)(
                verigrad.from_numpy(ids), verigrad.tensor([0, 2, 5])
            )


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_sdpa_refuses_a_mask_of_another_dtype_as_pytorch(dtype: str) -> None:
    q = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    mask, added = np.ones((3, 3), dtype), RNG.standard_normal((3, 3)).astype(np.float32)
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype"):
        torch.nn.functional.scaled_dot_product_attention(*[_t(torch, q)] * 3, attn_mask=_t(torch, mask))
    with pytest.raises(TypeError, match="attn_mask must be bool, f32 or the query's dtype"):
        verigrad.nn.functional.scaled_dot_product_attention(
            *[_t(verigrad, q)] * 3, attn_mask=_t(verigrad, mask)
        )
    _run(
        lambda lib: lib.nn.Identity(),
        lambda lib, m: lib.nn.functional.scaled_dot_product_attention(
            *[_t(lib, q.astype(np.float64))] * 3,
            attn_mask=_t(lib, added),  # f32 with f64 queries: PyTorch's too
        ),
        grad=False,
    )


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_refuses_src_and_tgt_that_do_not_fit_as_pytorch(batch_first: bool) -> None:
    """PyTorch's own checks, before the encoder runs (a batch mismatch met later as a reshape's error)."""
    src, tgt = np.zeros((5, 3, E), np.float32), np.zeros((4, 2, E), np.float32)
    if batch_first:
        src, tgt = src.transpose(1, 0, 2).copy(), tgt.transpose(1, 0, 2).copy()
    for lib in (torch, verigrad):
        model = lib.nn.Transformer(E, HEADS, 1, 1, 16, 0.0, batch_first=batch_first)
        with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
            model(_t(lib, src), _t(lib, tgt))
        with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
            model(_t(lib, src[..., :6]), _t(lib, src[..., :6]))
