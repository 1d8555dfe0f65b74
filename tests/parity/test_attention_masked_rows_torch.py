"""A query whose keys are all masked (an empty sequence in a padded batch): nn.MultiheadAttention without
the weights runs PyTorch's scaled_dot_product_attention, whose safe softmax gives that query zero weights
(its output the projection's bias, its gradients finite); with the weights, or in PyTorch's inference
fast path, it is NaN. The layers built on it (TransformerEncoderLayer, TransformerDecoderLayer's attention
over the memory) and F.multi_head_attention_forward follow; verigrad gives the same, NaN where PyTorch
gives NaN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import verigrad

X = np.random.default_rng(3).standard_normal((3, 6, 8)).astype(np.float32)
PADDED = np.zeros((3, 6), bool)
PADDED[1, :] = True  # every key of the second sequence
PADDED[2, 3:] = True


def _state(module: Any) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def _run(lib: Any, make: Any, call: Any, training: bool, grad: bool, saved: dict | None) -> list[np.ndarray]:
    lib.manual_seed(0)
    module = make(lib)
    if saved is not None:
        module.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in saved.items()})
    module.train(training)
    x = lib.from_numpy(X.copy())
    if not grad:
        with lib.no_grad():
            return [call(lib, module, x).numpy()]
    out = call(lib, module, x)
    (out.nan_to_num(0.0) * lib.from_numpy(X[:, : out.shape[1], :1].copy())).sum().backward()
    return [out.detach().numpy()] + [p.grad.numpy() for p in module.parameters() if p.grad is not None]


def _mha(lib: Any, **kwargs: Any) -> Any:
    return lib.nn.MultiheadAttention(8, 2, dropout=0.0, **kwargs)


def _self(need_weights: bool, float_mask: bool = False) -> Any:
    def call(lib: Any, module: Any, x: Any) -> Any:
        mask = lib.from_numpy(np.where(PADDED, -np.inf, 0.0).astype(np.float32) if float_mask else PADDED)
        return module(x, x, x, key_padding_mask=mask, need_weights=need_weights)[0]

    return call


def _cross(lib: Any, module: Any, x: Any) -> Any:
    return module(x, x * 0.5, x * 0.25, key_padding_mask=lib.from_numpy(PADDED), need_weights=False)[0]


def _seq_first(lib: Any, module: Any, x: Any) -> Any:
    y = x.transpose(0, 1)
    return module(y, y, y, key_padding_mask=lib.from_numpy(PADDED), need_weights=False)[0].transpose(0, 1)


def _encoder_layer(lib: Any) -> Any:
    return lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)


def _decoder_layer(lib: Any) -> Any:
    return lib.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)


CASES = {
    "self, no weights": (lambda lib: _mha(lib, batch_first=True), _self(False)),
    "self, weights": (lambda lib: _mha(lib, batch_first=True), _self(True)),
    "self, float mask": (lambda lib: _mha(lib, batch_first=True), _self(False, float_mask=True)),
    "cross attention": (lambda lib: _mha(lib, batch_first=True), _cross),
    "sequence first": (_mha, _seq_first),
    "three heads": (lambda lib: lib.nn.MultiheadAttention(9, 3, batch_first=True), _self(False)),
    "encoder layer": (
        _encoder_layer,
        lambda lib, m, x: m(x, src_key_padding_mask=lib.from_numpy(PADDED)),
    ),
    "decoder layer, memory": (
        _decoder_layer,
        lambda lib, m, x: m(x[:, :4], x, memory_key_padding_mask=lib.from_numpy(PADDED)),
    ),
}


@pytest.mark.parametrize("training,grad", [(True, True), (False, True), (False, False), (True, False)])
@pytest.mark.parametrize("name", CASES)
def test_fully_masked_queries_are_pytorchs(name: str, training: bool, grad: bool) -> None:
    make, call = CASES[name]
    if name == "three heads":
        call = _padded_to(9, call)
    theirs = _run(torch, make, call, training, grad, None)
    ours = _run(verigrad, make, call, training, grad, _state(_made(make)))
    assert len(ours) == len(theirs)
    for got, want in zip(ours, theirs):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _made(make: Any) -> Any:
    torch.manual_seed(0)
    return make(torch)


def _padded_to(width: int, call: Any) -> Any:
    def wider(lib: Any, module: Any, x: Any) -> Any:
        return call(lib, module, lib.nn.functional.pad(x, (0, width - x.shape[-1])))

    return wider


def test_the_cases_see_both_answers() -> None:
    """Not vacuous: PyTorch gives finite values in training and NaN in its inference fast path."""
    make, call = CASES["self, no weights"]
    assert not np.isnan(_run(torch, make, call, True, True, None)[0]).any()
    assert np.isnan(_run(torch, make, call, False, False, None)[0][1]).all()


@pytest.mark.parametrize("need_weights", [False, True])
def test_functional_multi_head_attention_forward(need_weights: bool) -> None:
    torch.manual_seed(0)
    module = _mha(torch)
    args = [p.detach().numpy() for p in (module.in_proj_weight, module.in_proj_bias)]
    out_w, out_b = (p.detach().numpy() for p in module.out_proj.parameters())
    results = []
    for lib in (torch, verigrad):
        t = [lib.from_numpy(a.copy()) for a in (X.transpose(1, 0, 2), *args, out_w, out_b)]
        results.append(
            lib.nn.functional.multi_head_attention_forward(
                t[0], t[0], t[0], 8, 2, t[1], t[2], None, None, False, 0.0, t[3], t[4],
                training=False, key_padding_mask=lib.from_numpy(PADDED), need_weights=need_weights,
            )[0].numpy()
        )  # fmt: skip
    np.testing.assert_array_equal(np.isnan(results[1]), np.isnan(results[0]))
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-6)
