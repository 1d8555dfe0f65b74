"""GPT-2 (Radford et al. 2019) with a KV cache, loadable from a Hugging Face folder.

Parameter names are Hugging Face's (`h.0.attn.c_attn.weight`, ...), and so is the layout of the
projections: GPT-2's Conv1D stores its weight [in, out] and computes x @ weight + bias. The output
matrix is the token embedding (tied), unless the file has its own `lm_head.weight`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import WeightFileError
from ..io.hf import read_config, read_tensors
from ..modes import abstract
from ..nn import Embedding, LayerNorm, Module, ModuleList
from ..nn import functional as F
from ..nn.init import _normal_param
from ..ops import attention, from_numpy, take, zeros
from ..shapes import DimLike, exact_div
from ..tensor import Tensor
from ._decoder import CachedDecoder, layer_window, logit_rows, window_attention
from ._weights import MAX_CONTEXT, checked_integer, checked_real, install


@dataclass(frozen=True)
class GPT2Config:
    """Sizes (symbolic ones allowed, for `verigrad.check`) as Hugging Face's GPT2Config names them."""

    vocab_size: DimLike = 50257
    n_positions: DimLike = 1024
    n_embd: DimLike = 768
    n_layer: int = 12
    n_head: DimLike = 12
    layer_norm_epsilon: float = 1e-5

    def __post_init__(self) -> None:
        if exact_div(self.n_embd, self.n_head) is None:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")

    @property
    def head_dim(self) -> DimLike:
        return exact_div(self.n_embd, self.n_head)

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> GPT2Config:
        keys = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "layer_norm_epsilon")
        return cls(**{k: config[k] for k in keys if k in config})


class Conv1D(Module):
    """GPT-2's projection: x @ weight + bias with weight [in, out]."""

    def __init__(self, in_features: DimLike, out_features: DimLike):
        super().__init__()
        self.weight = _normal_param((in_features, out_features), 0.02)
        self.bias = zeros(out_features, requires_grad=True)

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.weight + self.bias


class GPT2Attention(Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.n_head, self.head_dim = config.n_head, config.head_dim
        self.c_attn = Conv1D(config.n_embd, config.n_embd * 3)
        self.c_proj = Conv1D(config.n_embd, config.n_embd)

    def forward(self, x: Tensor, past: tuple | None) -> tuple[Tensor, ...]:
        """Attention output and the new keys and values [B, H, T, hd]; past is None (the tokens are the
        whole sequence) or (keys, values, bias) of a cache window."""
        b, t, d = x.shape
        qkv = self.c_attn(x).reshape(b, t, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        y = attention(q, k, v) if past is None else window_attention(q, k, v, *past)  # [B, H, T, hd]
        return self.c_proj(y.permute(0, 2, 1, 3).reshape(b, t, d)), k, v


class GPT2MLP(Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.c_fc = Conv1D(config.n_embd, config.n_embd * 4)
        self.c_proj = Conv1D(config.n_embd * 4, config.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(config)

    def forward(self, x: Tensor, past: tuple | None) -> tuple[Tensor, ...]:
        y, k, v = self.attn(self.ln_1(x), past)
        x = x + y
        return x + self.mlp(self.ln_2(x)), k, v


class GPT2(CachedDecoder):
    """GPT-2: `GPT2(config)` is randomly initialised; `GPT2.from_safetensors(folder)` loads weights."""

    def __init__(self, config: GPT2Config, tied: bool = True):
        super().__init__()
        self.config = config
        self.context_length, self.vocab_size = config.n_positions, config.vocab_size
        self.wte = Embedding(config.vocab_size, config.n_embd)
        self.wpe = Embedding(config.n_positions, config.n_embd)
        self.h = ModuleList(*(GPT2Block(config) for _ in range(config.n_layer)))
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.lm_head = None if tied else _normal_param((config.vocab_size, config.n_embd), 0.02)
        self.cached(config.n_layer, config.n_head, config.head_dim)

    def hidden(self, ids: Tensor) -> Tensor:
        x = F.embedding(self.wte.weight, ids) + self.wpe.weight[: ids.shape[1]]
        for block in self.h:
            x, _, _ = block(x, None)
        return x

    def step(
        self, ids: Tensor, positions: Tensor, bias: Tensor, *windows: Tensor, last_only: bool = False
    ) -> tuple[Tensor, ...]:
        """The cached forward (see models/_decoder.py): logits (of the last token alone with `last_only`),
        then each layer's new keys and values. positions [T] and bias [T, W+T], or each row's own,
        [B, T] and [B, T, W+T]."""
        x = F.embedding(self.wte.weight, ids) + take(self.wpe.weight, positions)
        new = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, (*layer_window(windows, i), bias))
            new += [k, v]
        return (self._logits(logit_rows(x, bias, last_only)), *new)

    def _logits(self, x: Tensor) -> Tensor:
        out = self.wte.weight if self.lm_head is None else self.lm_head
        return self.ln_f(x) @ out.T

    @classmethod
    def from_safetensors(cls, folder: str | os.PathLike) -> GPT2:
        """GPT-2 from a Hugging Face folder (`config.json`, `model.safetensors`), every tensor checked."""
        folder = Path(folder)
        raw = read_config(folder, required=("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"))
        config = GPT2Config.from_dict(_checked(raw, folder / "config.json"))
        with abstract():
            model = cls(config, tied=True)
        expected = {k: tuple(t.shape) for k, t in model.state_dict().items()}
        expected["lm_head.weight"] = (config.vocab_size, config.n_embd)
        arrays = read_tensors(
            folder / "model.safetensors",
            expected,
            optional={"lm_head.weight"},
            ignore=lambda name: name.endswith((".attn.bias", ".attn.masked_bias")),
            rename=lambda name: name.removeprefix("transformer."),
        )
        head = arrays.pop("lm_head.weight", None)
        install(model, arrays, str(folder / "model.safetensors"))
        if head is not None and not np.array_equal(head, arrays["wte.weight"]):
            model.lm_head = from_numpy(head).requires_grad_(True)
        return model


MAX_LAYERS = 1024  # above any published GPT-2; checked before the model is built
MAX_WIDTH = 1 << 20


def _checked(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """config.json's hyperparameters, each of the right type and in range (a WeightFileError otherwise),
    before a model of that size is built."""
    width = checked_integer(path, "n_embd", raw["n_embd"], 1, MAX_WIDTH)
    heads = checked_integer(path, "n_head", raw["n_head"], 1, width)
    if width % heads:
        raise WeightFileError(f"{path}: n_embd {width} is not a multiple of n_head {heads}")
    config = {
        "vocab_size": checked_integer(path, "vocab_size", raw["vocab_size"], 1, (1 << 31) - 1),
        "n_positions": checked_integer(path, "n_positions", raw["n_positions"], 1, MAX_CONTEXT),
        "n_embd": width,
        "n_layer": checked_integer(path, "n_layer", raw["n_layer"], 1, MAX_LAYERS),
        "n_head": heads,
    }
    if "layer_norm_epsilon" in raw:
        eps = raw["layer_norm_epsilon"]
        config["layer_norm_epsilon"] = checked_real(path, "layer_norm_epsilon", eps, 1.0)
    return config
