"""nn.TransformerEncoder in inference with a src_key_padding_mask: where PyTorch takes its nested-tensor
fast path, the padded positions of its output are 0 (or the final norm of 0), and a program pooling over
every position (a classifier's mean) sees them; verigrad gives the same, and the layers' own values
wherever PyTorch does (training, gradients, norm_first, an odd head count, padding not at the end...)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import verigrad

X = np.random.default_rng(3).standard_normal((3, 6, 8)).astype(np.float32)
TRAILING = np.zeros((3, 6), bool)
TRAILING[1, 4:] = True
TRAILING[2, 1:] = True
INSIDE = TRAILING.copy()
INSIDE[0, 2] = True  # a padded position followed by a token: not what the fast path takes

CASES: dict[str, dict[str, Any]] = {
    "no_grad": {},
    "inference_mode": {"context": "inference_mode"},
    "final norm": {"norm": True},
    "float mask": {"float_mask": True},
    "gelu": {"layer": {"activation": "gelu"}},
    "frozen, grad enabled": {"context": "frozen"},
    "padding inside": {"padding": INSIDE},
    "mask_check off": {"encoder": {"mask_check": False}},
    "nested tensors off": {"encoder": {"enable_nested_tensor": False}},
    "norm_first": {"layer": {"norm_first": True}},
    "three heads": {"layer": {"nhead": 3}, "width": 9},
    "training": {"context": "training"},
    "gradients": {"context": "grad"},
    "with a mask": {"causal": True},
    "custom activation": {"layer": {"activation": "tanh"}},
}


def _encode(lib: Any, case: dict[str, Any]) -> np.ndarray:
    width = case.get("width", 8)
    layer_args = {"nhead": 2, "dim_feedforward": 16, "dropout": 0.0, "batch_first": True}
    layer_args |= case.get("layer", {})
    if layer_args.get("activation") == "tanh":
        layer_args["activation"] = lib.tanh
    lib.manual_seed(0)
    layer = lib.nn.TransformerEncoderLayer(width, **layer_args)
    norm = lib.nn.LayerNorm(width) if case.get("norm") else None
    encoder = lib.nn.TransformerEncoder(layer, 2, norm=norm, **case.get("encoder", {}))
    if lib is verigrad:  # PyTorch's weights
        encoder.load_state_dict({k: verigrad.from_numpy(v.numpy().copy()) for k, v in case["state"].items()})
    else:
        case["state"] = encoder.state_dict()
    if norm is not None:
        with lib.no_grad():
            norm.bias.copy_(lib.arange(width, dtype=lib.float32) / 10)
    context = case.get("context")
    encoder.train(context == "training")
    if context == "frozen":
        encoder.requires_grad_(False)
    padding = case.get("padding", TRAILING)
    mask = lib.from_numpy(
        np.where(padding, -np.inf, 0.0).astype(np.float32) if case.get("float_mask") else padding
    )
    src = lib.from_numpy(np.resize(X, (3, 6, width)).copy())
    causal = lib.nn.Transformer.generate_square_subsequent_mask(6) if case.get("causal") else None
    if context in ("grad", "training", "frozen"):
        out = encoder(src, mask=causal, src_key_padding_mask=mask)
    else:
        with lib.inference_mode() if context == "inference_mode" else lib.no_grad():
            out = encoder(src, mask=causal, src_key_padding_mask=mask)
    return out.detach().numpy()


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", CASES)
def test_padded_positions_are_pytorchs(name: str) -> None:
    case = dict(CASES[name])
    theirs = _encode(torch, case)
    ours = _encode(verigrad, case)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore")
def test_the_fast_path_does_zero_and_the_slow_path_does_not() -> None:
    """The cases above are not vacuous: PyTorch's zeros where it takes the fast path, values elsewhere."""
    fast = _encode(torch, dict(CASES["no_grad"]))
    slow = _encode(torch, dict(CASES["nested tensors off"]))
    assert (fast[TRAILING] == 0).all() and (np.abs(slow[TRAILING]) > 0).all()
    np.testing.assert_allclose(fast[~TRAILING], slow[~TRAILING], rtol=1e-5, atol=1e-5)


def test_the_encoder_keeps_pytorchs_attributes() -> None:
    layer = verigrad.nn.TransformerEncoderLayer(8, 2, batch_first=True)
    encoder = verigrad.nn.TransformerEncoder(layer, 1, mask_check=False)
    assert encoder.enable_nested_tensor and encoder.use_nested_tensor and not encoder.mask_check
    assert not verigrad.nn.TransformerEncoder(verigrad.nn.TransformerEncoderLayer(8, 2), 1).use_nested_tensor


def _transformer(lib: Any, state: dict | None) -> tuple[np.ndarray, dict]:
    lib.manual_seed(0)
    model = lib.nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, batch_first=True).eval()
    if state is not None:
        model.load_state_dict({k: verigrad.from_numpy(v.copy()) for k, v in state.items()})
    with lib.no_grad():  # the padding given to the encoder only: the decoder reads the padded memory
        out = model(
            lib.from_numpy(X),
            lib.from_numpy(X[:, :4] * 0.5),
            src_key_padding_mask=lib.from_numpy(TRAILING),
            tgt_mask=model.generate_square_subsequent_mask(4),
        )
    return out.numpy(), {k: v.numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.filterwarnings("ignore")
def test_a_transformer_decoding_the_padded_memory_reads_pytorchs_zeros() -> None:
    theirs, state = _transformer(torch, None)
    ours, _ = _transformer(verigrad, state)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
