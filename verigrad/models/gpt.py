"""A trainable GPT: pre-norm decoder blocks (LayerNorm or RMSNorm), causal self-attention with `n_head`
heads (`F.scaled_dot_product_attention`, is_causal), learned or rotary positions, a GELU or SwiGLU MLP,
optional dropout, and the output head tied to the token embedding.

`GPT(config)(ids)` gives the logits [B, T, vocab]; `GPT.loss(ids, targets)` the mean cross-entropy
(what `verigrad train lm` minimises). With a cache (`new_cache`) the model runs the cached step of
`models/_decoder.py`, so `models/lm.py`'s `generate` samples from it as from the GGUF models.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import WeightFileError
from ..modes import abstract
from ..nn import Embedding, LayerNorm, Module, ModuleList, RMSNorm
from ..nn import functional as F
from ..nn.init import _normal_param as normal
from ..ops import from_numpy, take
from ..tensor import Tensor
from ._decoder import CachedDecoder, layer_window, logit_rows, window_attention
from ._weights import install

NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rotary")
MLPS = ("gelu", "swiglu")
MAX_CONTEXT = 1 << 16  # positions a config may ask for (a learned table of that many rows is large)
MAX_SIZE = 1 << 20  # width, vocabulary and layers above this are a typo
CHECKPOINT, TOKENIZER = "lm.safetensors", "tokenizer.json"  # the files of a `verigrad train lm` folder


@dataclass(frozen=True)
class GPTConfig:
    """The GPT's sizes and choices; every field is checked when the config is made (a ValueError naming
    the field, its value and what is allowed)."""

    vocab_size: int = 4096
    context: int = 128
    n_layer: int = 4
    n_head: int = 4
    width: int = 128
    norm: str = "layernorm"
    positions: str = "learned"
    mlp: str = "gelu"
    dropout: float = 0.0
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        for name, low, high in (
            ("vocab_size", 2, MAX_SIZE),
            ("context", 1, MAX_CONTEXT),
            ("n_layer", 1, 1024),
            ("n_head", 1, MAX_SIZE),
            ("width", 1, MAX_SIZE),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"GPTConfig: {name} must be an integer in {low}..{high}, got {value!r}")
        if self.width % self.n_head:
            raise ValueError(
                f"GPTConfig: n_head {self.n_head} does not divide width {self.width} (each head gets "
                "width / n_head features)"
            )
        if self.positions == "rotary" and self.head_dim % 2:
            raise ValueError(
                f"GPTConfig: rotary positions need an even head size, got width {self.width} / "
                f"n_head {self.n_head} = {self.head_dim}"
            )
        for name, allowed in (("norm", NORMS), ("positions", POSITIONS), ("mlp", MLPS)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"GPTConfig: {name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        if (
            isinstance(self.dropout, bool)
            or not isinstance(self.dropout, int | float)
            or not 0 <= self.dropout < 1
        ):
            raise ValueError(f"GPTConfig: dropout must be a number in [0, 1), got {self.dropout!r}")
        if not (isinstance(self.rope_base, int | float) and 1 < self.rope_base < math.inf):
            raise ValueError(f"GPTConfig: rope_base must be a finite number above 1, got {self.rope_base!r}")

    @property
    def head_dim(self) -> int:
        return self.width // self.n_head

    @property
    def hidden(self) -> int:
        """The MLP's inner width: 4 x width for GELU; for SwiGLU 8/3 x width (the same parameter count),
        rounded up to a multiple of 8."""
        return 4 * self.width if self.mlp == "gelu" else -(-8 * self.width // 3 // 8) * 8

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> GPTConfig:
        """A config from `to_dict`'s fields; an unknown field is refused by name."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"GPTConfig: unknown field(s) {', '.join(unknown)}; fields are {', '.join(sorted(known))}"
            )
        return cls(**values)


def rope_tables(positions: int, head_dim: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, head_dim/2] (f64) of angle p * base^(-2i/head_dim)."""
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(positions, dtype=np.float64), inv_freq)
    return np.cos(angles), np.sin(angles)


class Attention(Module):
    """Causal self-attention: one [3 width, width] projection to queries, keys and values, `n_head`
    heads, rotary positions on queries and keys where the config says, then the output projection."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head, self.head_dim, self.dropout = config.n_head, config.head_dim, config.dropout
        self.qkv = normal((3 * config.width, config.width), 0.02)
        self.proj = normal((config.width, config.width), 0.02 / math.sqrt(2 * config.n_layer))

    def forward(
        self, x: Tensor, rope: tuple | None, past: tuple | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The output [B, T, width] and the keys and values [B, H, T, hd]; `past` (a cache window's keys,
        values and bias) for the cached step."""
        b, t, d = x.shape
        qkv = F.linear(x, self.qkv).reshape(b, t, 3, self.n_head, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # [B, H, T, hd]
        if rope is not None:
            q, k = (F.rope(z, *rope, interleaved=False) for z in (q, k))
        if past is None:
            p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:
            y = window_attention(q, k, v, *past)
        y = F.linear(y.permute(0, 2, 1, 3).reshape(b, t, d), self.proj)
        return F.dropout(y, self.dropout, self.training), k, v


class MLP(Module):
    """GELU: proj(gelu(fc x)); SwiGLU: proj(silu(gate x) * up x)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.kind, self.dropout = config.mlp, config.dropout
        inner, width = config.hidden, config.width
        self.fc = normal((inner * (2 if self.kind == "swiglu" else 1), width), 0.02)
        self.proj = normal((width, inner), 0.02 / math.sqrt(2 * config.n_layer))

    def forward(self, x: Tensor) -> Tensor:
        h = F.linear(x, self.fc)
        if self.kind == "gelu":
            h = F.gelu(h)
        else:
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        return F.dropout(F.linear(h, self.proj), self.dropout, self.training)


def _norm(config: GPTConfig) -> Module:
    return LayerNorm(config.width) if config.norm == "layernorm" else RMSNorm(config.width, eps=1e-5)


class Block(Module):
    """x + attn(norm1 x), then + mlp(norm2 x)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.norm1, self.attn = _norm(config), Attention(config)
        self.norm2, self.mlp = _norm(config), MLP(config)

    def forward(
        self, x: Tensor, rope: tuple | None, past: tuple | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        y, k, v = self.attn(self.norm1(x), rope, past)
        x = x + y
        return x + self.mlp(self.norm2(x)), k, v


class GPT(CachedDecoder):
    """`GPT(config)`: randomly initialised (normal 0.02; the residual projections scaled by
    1/sqrt(2 n_layer), as GPT-2); parameter names `tok_emb.weight`, `pos_emb.weight` (learned positions),
    `blocks.<i>.{norm1,attn.qkv,attn.proj,norm2,mlp.fc,mlp.proj}`, `norm_f`."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.context_length, self.vocab_size = config.context, config.vocab_size
        self.tok_emb = Embedding(config.vocab_size, config.width)
        self.tok_emb.weight = normal((config.vocab_size, config.width), 0.02).requires_grad_(True)
        if config.positions == "learned":
            self.pos_emb = Embedding(config.context, config.width)
            self.pos_emb.weight = normal((config.context, config.width), 0.02).requires_grad_(True)
        self.blocks = ModuleList(*(Block(config) for _ in range(config.n_layer)))
        self.norm_f = _norm(config)
        self._tables: dict[Any, tuple[Tensor, Tensor]] = {}  # rotary cos/sin by dtype (not parameters)
        self.cached(config.n_layer, config.n_head, config.head_dim)

    def num_parameters(self) -> int:
        """The number of trainable values (the tied head counted once)."""
        return sum(p.numel() for p in self.parameters())

    def _rope(self) -> tuple[Tensor, Tensor] | None:
        if self.config.positions != "rotary":
            return None
        dtype = self.tok_emb.weight.dtype
        if dtype.name not in self._tables:
            cos, sin = rope_tables(self.config.context, self.config.head_dim, self.config.rope_base)
            self._tables[dtype.name] = (from_numpy(cos).cast(dtype), from_numpy(sin).cast(dtype))
        return self._tables[dtype.name]

    def hidden(self, ids: Tensor) -> Tensor:
        t = ids.shape[1]
        x = F.embedding(ids, self.tok_emb.weight)
        rope = self._rope()
        if rope is None:
            x = x + self.pos_emb.weight[:t]
        else:
            rope = (rope[0][:t], rope[1][:t])
        x = F.dropout(x, self.config.dropout, self.training)
        for block in self.blocks:
            x, _, _ = block(x, rope)
        return x

    def step(
        self, ids: Tensor, positions: Tensor, bias: Tensor, *windows: Tensor, last_only: bool = False
    ) -> tuple[Tensor, ...]:
        """The cached forward (see models/_decoder.py): logits, then each layer's new keys and values."""
        x = F.embedding(ids, self.tok_emb.weight)
        rope = self._rope()
        if rope is None:
            x = x + take(self.pos_emb.weight, positions)
        else:
            rope = (take(rope[0], positions), take(rope[1], positions))
        new = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, rope, (*layer_window(windows, i), bias))
            new += [k, v]
        return (self._logits(logit_rows(x, bias, last_only)), *new)

    def _logits(self, x: Tensor) -> Tensor:
        return F.linear(self.norm_f(x), self.tok_emb.weight)

    def loss(self, ids: Any, targets: Any) -> Tensor:
        """The mean cross-entropy (nats per token) of predicting `targets` [B, T] from `ids` [B, T]."""
        logits = self(ids)
        return F.cross_entropy(logits.reshape(-1, self.vocab_size), targets.reshape(-1))


def decay_groups(model: Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW's parameter groups: weight decay on the matrices (2-D: projections and embeddings), none on
    the norms' gains and biases (1-D), as nanoGPT and most GPT recipes do."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]


def is_run_folder(path: str | os.PathLike) -> bool:
    """Whether `path` is a folder written by `verigrad train lm` (its checkpoint is there)."""
    return (Path(path) / CHECKPOINT).is_file()


def load_run(folder: str | os.PathLike) -> tuple[GPT, Any]:
    """The GPT (in eval mode) and the tokenizer that `verigrad train lm` saved in `folder`; a checkpoint
    that is not one, or whose tensors do not fit its config, is a WeightFileError naming the file."""
    from ..io import load
    from ..io.safetensors_format import read_metadata
    from ..io.tokenizer import Tokenizer

    folder = Path(folder)
    path = folder / CHECKPOINT
    meta = read_metadata(path)
    if meta.get("model") != "gpt":
        raise WeightFileError(f"{path}: not a checkpoint of `verigrad train lm` (no gpt metadata)")
    if not (folder / TOKENIZER).is_file():
        raise WeightFileError(f"{folder}: no {TOKENIZER} beside {CHECKPOINT}")
    try:
        config = GPTConfig.from_dict(json.loads(meta.get("gpt", "")))
    except (TypeError, ValueError, RecursionError) as e:
        raise WeightFileError(f"{path}: its metadata field 'gpt' is not a valid GPT config ({e})") from None
    with abstract():
        model = GPT(config)
    tensors = {k: v for k, v in load(path).items() if not k.startswith("optimizer.")}
    install(model, tensors, str(path))
    return model.eval(), Tokenizer.from_gpt2_folder(folder)
