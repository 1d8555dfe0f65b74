"""Llama-family decoders (SmolLM2, Llama 2/3, ...) with a KV cache, from GGUF files or state dicts.

Pre-norm blocks: x + attention(rms_norm(x)), then x + down(silu(gate(x)) * up(x)) of rms_norm(x);
grouped-query attention with rotary position embeddings. Parameter names are Hugging Face's without
the `model.` prefix (`layers.0.self_attn.q_proj.weight`, ...); a GGUF model holds q/k/v and gate/up
as one matrix each (`qkv_proj`, `gate_up_proj`: fewer, larger products). Two RoPE layouts: half-split
(Hugging Face weights) and interleaved (GGUF weights, whose q/k rows llama.cpp permuted for it); the
two give the same model. The output matrix is the token embedding unless the weights have their own.
With a KV cache, a forward is one compiled step (models/_decoder.py).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import WeightFileError
from ..io.gguf import GGUFFile, GGUFTensor, read_gguf, shown, stacked_rows
from ..modes import abstract
from ..nn import Embedding, Linear, Module, ModuleList, RMSNorm
from ..nn import functional as F
from ..nn.quant import QEmbedding, QLinear, QLinearGroup
from ..ops import attention, concat, from_numpy, take, zeros
from ..ops.quant import BLOCK_QTYPES, FORMATS
from ..shapes import DimLike
from ..tensor import Tensor
from ._decoder import CachedDecoder, check_room, layer_window, logit_rows, token_ids, window_attention
from ._weights import MAX_CONTEXT, checked_integer, checked_real, install

MIN_ROPE_ROWS = 64  # the RoPE tables' first length (they double as longer prompts or caches come)
_ROPE_LOCK = threading.Lock()


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes (symbolic ones allowed, for `verigrad.check`), the RoPE layout, and the weights' layout."""

    vocab_size: DimLike
    dim: DimLike
    n_layers: int
    n_heads: DimLike
    n_kv_heads: DimLike
    head_dim: DimLike
    ffn_dim: DimLike
    norm_eps: float = 1e-5
    rope_base: float = 10000.0
    rope_factor: float = 1.0  # linear RoPE scaling: positions divided by it
    context_length: DimLike = 2048
    rope_interleaved: bool = False
    tie_embeddings: bool = True
    fused: bool = False  # q/k/v and gate/up projections as one matrix each (`qkv_proj`, `gate_up_proj`)
    qkv_bias: bool = False  # biases on the q/k/v projections (Qwen2)
    qk_norm: bool = False  # an RMSNorm of each query and key head before RoPE (Qwen3)


def rope_tables(
    positions: int, head_dim: int, base: float, factor: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [positions, head_dim/2] of angle p / factor * base^(-2i/head_dim), computed in f64."""
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim) / factor
    angles = np.outer(np.arange(positions, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotate(x: Tensor, rope: tuple[Tensor, Tensor], interleaved: bool) -> Tensor:
    """RoPE of heads x [B, heads, T, hd] by the tokens' table rows: shared [T, hd/2], or each sequence's
    own [B, T, hd/2] (a batch at different positions). With one token per sequence, the batch axis becomes
    the position axis (permuted views), so the rope kernel runs rather than the broadcast reference."""
    cos, sin = rope
    if cos.ndim == 2:
        return F.rope(x, cos, sin, interleaved=interleaved)
    b, t, half = cos.shape
    if t == 1:
        rows = (cos.reshape(b, half), sin.reshape(b, half))
        return F.rope(x.permute(2, 1, 0, 3), *rows, interleaved=interleaved).permute(2, 1, 0, 3)
    return F.rope(x, cos.reshape(b, 1, t, half), sin.reshape(b, 1, t, half), interleaved=interleaved)


def _normed(norm: RMSNorm, linear: Any, x: Tensor) -> Tensor:
    """linear(norm(x)); a quantized layer on 8-bit activations makes it one op (QLinear.normed)."""
    return linear.normed(x, norm) if isinstance(linear, QLinear | QLinearGroup) else linear(norm(x))


class LlamaAttention(Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        c = config
        self.n_heads, self.n_kv_heads, self.head_dim = c.n_heads, c.n_kv_heads, c.head_dim
        self.interleaved, self.fused, self.biased = c.rope_interleaved, c.fused, c.qkv_bias
        if c.fused:  # q, k and v rows in one matrix: one product instead of three
            self.qkv_proj = Linear(c.dim, (c.n_heads + 2 * c.n_kv_heads) * c.head_dim, bias=False)
            if c.qkv_bias:  # apart from the matrix, which may be quantized (QLinear has no bias)
                self.qkv_bias = zeros((c.n_heads + 2 * c.n_kv_heads) * c.head_dim, requires_grad=True)
        else:
            self.q_proj = Linear(c.dim, c.n_heads * c.head_dim, bias=c.qkv_bias)
            self.k_proj = Linear(c.dim, c.n_kv_heads * c.head_dim, bias=c.qkv_bias)
            self.v_proj = Linear(c.dim, c.n_kv_heads * c.head_dim, bias=c.qkv_bias)
        self.o_proj = Linear(c.n_heads * c.head_dim, c.dim, bias=False)
        self.q_norm = RMSNorm(c.head_dim, eps=c.norm_eps) if c.qk_norm else None
        self.k_norm = RMSNorm(c.head_dim, eps=c.norm_eps) if c.qk_norm else None

    def _qkv(self, x: Tensor, norm: RMSNorm) -> Tensor:
        """The fused projection of norm(x), with its bias."""
        qkv = _normed(norm, self.qkv_proj, x)
        return qkv + self.qkv_bias if self.biased else qkv

    def _normed_heads(self, qk: Tensor, axis: int) -> Tensor:
        """The query and key heads (on `axis`) each RMS-normed over its features, where the model has
        q/k norms (Qwen3); else qk itself."""
        if self.q_norm is None:
            return qk
        at = (slice(None),) * axis
        q, k = qk[(*at, slice(None, self.n_heads))], qk[(*at, slice(self.n_heads, None))]
        return concat(self.q_norm(q), self.k_norm(k), axis=axis)

    def _project(self, x: Tensor, norm: RMSNorm) -> tuple[Tensor, Tensor]:
        """The query and key heads [B, T, H+KV, hd] (rotated together) and the value heads [B, T, KV, hd]
        of norm(x)."""
        b, t, _ = x.shape
        h, kv, d = self.n_heads, self.n_kv_heads, self.head_dim
        if self.fused:
            qkv = self._qkv(x, norm).reshape(b, t, h + 2 * kv, d)
            return self._normed_heads(qkv[:, :, : h + kv], 2), qkv[:, :, h + kv :]
        x = norm(x)
        q, k = self.q_proj(x).reshape(b, t, h, d), self.k_proj(x).reshape(b, t, kv, d)
        return self._normed_heads(concat(q, k, axis=2), 2), self.v_proj(x).reshape(b, t, kv, d)

    def forward(
        self, x: Tensor, rope: Any, past: tuple | None, norm: RMSNorm
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Attention of norm(x) (the norm goes with the projection: one op where the weights are
        quantized), and the new keys and values [B, KV, T, hd]. rope is the tokens' table rows (cos,
        sin); past, with a cache, the window (keys transposed, values, bias)."""
        b, t, _ = x.shape
        if past is not None and t == 1 and self.fused:
            return self._decode(x, rope, past, norm)
        qk, v = self._project(x, norm)
        qk = rotate(qk.permute(0, 2, 1, 3), rope, self.interleaved)
        q, k, v = qk[:, : self.n_heads], qk[:, self.n_heads :], v.permute(0, 2, 1, 3)
        y = self._attend(q, k, v, past)  # [B, H, T, hd]
        return self.o_proj(y.permute(0, 2, 1, 3).reshape(b, t, self.n_heads * self.head_dim)), k, v

    def _decode(self, x: Tensor, rope: Any, past: tuple, norm: RMSNorm) -> tuple[Tensor, Tensor, Tensor]:
        """`forward` for one new token with the fused projection: the same products on fewer views (the
        step runs ~25 ops a layer, each a call): with T = 1, [B, heads, 1, hd] and [B, 1, heads, hd]
        hold their values in the same order, so reshapes replace the permutes."""
        b = x.shape[0]
        h, kv, d = self.n_heads, self.n_kv_heads, self.head_dim
        qkv, at = self._qkv(x, norm), (h + kv) * d
        qk = self._normed_heads(qkv[..., :at].reshape(b, h + kv, 1, d), 1)
        qk = rotate(qk, rope, self.interleaved)
        q, k, v = qk[:, :h], qk[:, h:], qkv[..., at:].reshape(b, kv, 1, d)
        y = self._attend(q, k, v, past)
        return self.o_proj(y.reshape(b, 1, h * d)), k, v

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, past: tuple | None) -> Tensor:
        """Attention of the query heads over the keys and values (and the cache window `past`)."""
        return attention(q, k, v) if past is None else window_attention(q, k, v, *past)


class LlamaMLP(Module):
    act = staticmethod(F.silu)  # of the gate

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.ffn_dim, self.fused = config.ffn_dim, config.fused
        if config.fused:  # gate and up rows in one matrix
            self.gate_up_proj = Linear(config.dim, 2 * config.ffn_dim, bias=False)
        else:
            self.gate_proj = Linear(config.dim, config.ffn_dim, bias=False)
            self.up_proj = Linear(config.dim, config.ffn_dim, bias=False)
        self.down_proj = Linear(config.ffn_dim, config.dim, bias=False)

    def forward(self, x: Tensor, norm: RMSNorm) -> Tensor:
        """The MLP of norm(x) (one op for the norm and the first product where the weights are quantized)."""
        if self.fused:
            both = _normed(norm, self.gate_up_proj, x)
            gate, up = both[..., : self.ffn_dim], both[..., self.ffn_dim :]
        else:
            x = norm(x)
            gate, up = self.gate_proj(x), self.up_proj(x)
        return self.down_proj(self.act(gate) * up)


class LlamaBlock(Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.dim, eps=config.norm_eps)
        self.self_attn = LlamaAttention(config)
        self.post_attention_layernorm = RMSNorm(config.dim, eps=config.norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, x: Tensor, rope: Any, past: tuple | None) -> tuple[Tensor, Tensor, Tensor]:
        y, k, v = self.self_attn(x, rope, past, self.input_layernorm)
        x = x + y
        return x + self.mlp(x, self.post_attention_layernorm), k, v


class Llama(CachedDecoder):
    """`Llama(config)` is randomly initialised; `Llama.from_gguf(path)` and `Llama.from_state(config,
    state)` load weights."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        c = self.config = config
        self.context_length, self.vocab_size = c.context_length, c.vocab_size
        self.embed_tokens = Embedding(c.vocab_size, c.dim)
        self.layers = ModuleList(*(self._block(c, i) for i in range(c.n_layers)))
        self.norm = RMSNorm(c.dim, eps=c.norm_eps)
        self.lm_head = None if c.tie_embeddings else Linear(c.dim, c.vocab_size, bias=False)
        self.rope: tuple[Tensor, Tensor] | None = None  # cos and sin rows of the positions run so far
        self.cached(c.n_layers, c.n_kv_heads, c.head_dim)

    # what a variant of the decoder (models/gemma.py) changes
    GGUF_BLOCK: dict[str, str] = {}  # llama.cpp's tensor names in a block -> ours (set below: _BLOCK)

    def _block(self, config: LlamaConfig, index: int) -> Module:
        return LlamaBlock(config)

    def _embed(self, ids: Tensor) -> Tensor:
        return self.embed_tokens(ids)

    def _rope_tables(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        return rope_tables(rows, self.config.head_dim, self.config.rope_base, self.config.rope_factor)

    @staticmethod
    def config_from_gguf(gguf: GGUFFile) -> LlamaConfig:
        return gguf_config(gguf)

    def rope_rows(self, positions: DimLike) -> tuple[Tensor, Tensor]:
        """The RoPE tables (cos, sin) of at least `positions` positions. They are made for the positions the
        model runs, not for `context_length` (a file's claim), on first use and again, twice as long, when
        a longer prompt or cache comes; the compiled step is then built anew (it captured the old ones)."""
        c = self.config
        if not (isinstance(positions, int) and isinstance(c.head_dim, int)):  # symbolic sizes: shapes only
            table = zeros(positions, c.head_dim / 2)
            return table, table
        rope = self.rope
        if rope is None or rope[0].shape[0] < positions:
            with _ROPE_LOCK:  # the tables only grow, even when threads ask for different lengths at once
                rope = self.rope
                if rope is None or rope[0].shape[0] < positions:
                    rows = max(MIN_ROPE_ROWS, 1 << (positions - 1).bit_length())
                    cos, sin = self._rope_tables(rows)
                    rope = self.rope = (from_numpy(cos), from_numpy(sin))
                    self.cached(c.n_layers, c.n_kv_heads, c.head_dim)
        return rope

    def forward(self, ids: Any, cache: Any = None, last_only: bool = False) -> Tensor:
        """CachedDecoder's forward, once the RoPE tables cover the prompt, or the positions the cache is
        allocated for (not its capacity: a chat's cache of 8192 positions allocated for 256 made tables of
        8192 rows, 2 MiB, and 6 MiB of f64 temporaries at the peak; they grow as the cache grows)."""
        ids = token_ids(ids)
        check_room(cache, ids, self.context_length)  # before the tables grow
        t = ids.shape[1]
        self.rope_rows(max(cache.allocated, cache.length + t) if cache is not None else t)
        return super().forward(ids, cache, last_only)

    def prepare(self, positions: int) -> None:
        self.rope_rows(positions)  # the RoPE tables (the compiled steps are built anew if they grow)

    def hidden(self, ids: Tensor) -> Tensor:
        t = ids.shape[1]
        x = self._embed(ids)
        cos, sin = self.rope_rows(t)
        rope = (cos[:t], sin[:t])
        for block in self.layers:
            x, _, _ = block(x, rope, None)
        return x

    def step(
        self, ids: Tensor, positions: Tensor, bias: Tensor, *windows: Tensor, last_only: bool = False
    ) -> tuple[Tensor, ...]:
        """The cached forward (see models/_decoder.py): logits (of the last token alone with `last_only`),
        then each layer's new keys and values. positions [T] and bias [T, W+T], or each row's own,
        [B, T] and [B, T, W+T]."""
        x = self._embed(ids)
        cos, sin = self.rope if self.rope is not None else self.rope_rows(self.context_length)
        rope = (take(cos, positions), take(sin, positions))  # [T, hd/2], or each row's [B, T, hd/2]
        new = []
        for i, block in enumerate(self.layers):
            x, k, v = block(x, rope, (*layer_window(windows, i), bias))
            # a prompt's (eager) keys and values view their layer's projections: copied, those are freed
            # layer by layer instead of living until the cache is written (T x 207 KB for SmolLM2)
            new += [k, v] if ids.shape[1] == 1 else [k.clone(), v.clone()]
        return (self._logits(logit_rows(x, bias, last_only)), *new)

    def _logits(self, x: Tensor) -> Tensor:
        if self.lm_head is not None:
            return _normed(self.norm, self.lm_head, x)
        return self.norm(x) @ self.embed_tokens.weight.T

    @classmethod
    def from_state(cls, config: LlamaConfig, state: dict[str, Any], source: str = "state dict") -> Llama:
        """A model holding the arrays (or tensors) of `state`, by parameter name; a leading `model.`
        (Hugging Face's LlamaForCausalLM) is dropped. Nothing is copied or randomly initialised."""
        with abstract():
            model = cls(config)
        install(model, {k.removeprefix("model."): v for k, v in state.items()}, source)
        return model

    @classmethod
    def checked_gguf(cls, gguf: GGUFFile) -> tuple[LlamaConfig, dict[str, list[GGUFTensor]]]:
        """The file's config and, by our parameter name, its tensors, every one checked against the config
        (names, shapes, types), before any weight is read: a WeightFileError names the file and fault."""
        config = cls.config_from_gguf(gguf)
        return config, _gguf_groups(gguf, config, cls.GGUF_BLOCK)

    @classmethod
    def from_gguf(
        cls,
        source: str | os.PathLike | GGUFFile,
        activations: str = "f32",
        checked: tuple[LlamaConfig, dict[str, list[GGUFTensor]]] | None = None,
    ) -> Llama:
        """A Llama, Qwen2, Qwen3 or Phi-3 GGUF file (or an opened GGUFFile): hyperparameters by their GGUF
        keys, tensors by llama.cpp's names, fused q/k/v and gate/up matrices. Quantized
        matrices stay quantized (QLinear, QEmbedding: no dequantized copy; a fused one whose parts mix
        formats, QLinearGroup); `activations` "q8"
        quantizes their inputs to 8 bits per block of 32 (256 for the k-quants:
        llama.cpp's q8_K; llama.cpp's integer dot products). `checked`: what `checked_gguf` gave for this
        file, where the caller checked it already."""
        if activations not in ("f32", "q8"):
            raise ValueError(f"activations must be 'f32' or 'q8', got {activations!r}")
        gguf = source if isinstance(source, GGUFFile) else read_gguf(source)
        config, groups = checked if checked is not None else cls.checked_gguf(gguf)
        with abstract():
            model = cls(config)
        state: dict[str, Any] = {}
        for ours, group in groups.items():
            *path, attr, _ = ours.split(".")
            owner = functools.reduce(getattr, path, model)
            shape = (sum(t.shape[0] for t in group), *group[0].shape[1:])
            qtype = group[0].qtype
            if any(t.qtype not in BLOCK_QTYPES for t in group) or len(shape) != 2:
                state[ours] = np.concatenate([t.dequantize() for t in group])
                continue
            if any(t.qtype != qtype for t in group):  # parts in different formats, each kept in its own
                setattr(owner, attr, _mixed(group, activations))
                prefix = ours.removesuffix(".weight")
                state |= {f"{prefix}.{k}": v for k, v in getattr(owner, attr).state_dict().items()}
                continue
            raw = stacked_rows(group)  # gate and up lie one after the other in the file: a view
            if ours == "embed_tokens.weight":
                model.embed_tokens = QEmbedding(raw, qtype, shape)
                if config.tie_embeddings:  # the output matrix is the same blocks
                    model.lm_head = QLinear(raw, qtype, shape, activations)
                    state["lm_head.weight"] = model.lm_head.weight
            else:
                setattr(owner, attr, QLinear(raw, qtype, shape, activations))
            state[ours] = getattr(owner, attr).weight
        install(model, state, str(gguf.path))
        return model


def _mixed(group: list[GGUFTensor], activations: str) -> QLinearGroup:
    """A fused matrix whose parts are stored in different formats: a QLinear per run of parts in the same
    format (q and k in one where they share it)."""
    parts = []
    for qtype, run in itertools.groupby(group, key=lambda t: t.qtype):
        run = list(run)
        shape = (sum(t.shape[0] for t in run), run[0].shape[1])
        parts.append(QLinear(stacked_rows(run), qtype, shape, activations))
    return QLinearGroup(parts)


# the GGUF architectures this file runs, and how each differs from llama's: llama.cpp permutes llama's
# q/k rows for interleaved RoPE, not Qwen's (half-split: its NEOX RoPE type)
GGUF_VARIANTS: dict[str, dict[str, bool]] = {
    "llama": {"rope_interleaved": True},  # Llama 2/3, SmolLM2, Mistral 7B (llama.cpp writes them as llama)
    "qwen2": {"qkv_bias": True},
    "qwen3": {"qk_norm": True},
    "phi3": {},  # q/k/v and gate/up stored fused (attn_qkv, ffn_up), as our fused matrices
}
_FUSED_IN_FILE = {"attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"}  # phi3's tensors


def gguf_config(gguf: GGUFFile, variants: dict[str, dict[str, bool]] = GGUF_VARIANTS) -> LlamaConfig:
    """The hyperparameters under llama.cpp's keys (`{arch}.embedding_length`, ...), each of the right type
    and in range and consistent with the others and with the token embedding, checked before anything is
    allocated: a WeightFileError names the file, the key and its value."""
    arch = gguf.arch
    if arch not in variants:
        raise WeightFileError(
            f"{gguf.path}: architecture {shown(arch)}, but this loader reads {', '.join(GGUF_VARIANTS)} files"
        )
    embedding = gguf.tensor("token_embd.weight")
    if len(embedding.shape) != 2:
        raise WeightFileError(
            f"{gguf.path}: tensor token_embd.weight has shape {embedding.shape}, expected 2-D"
        )
    vocab, width = embedding.shape
    dim = _integer(gguf, f"{arch}.embedding_length", 1, width)
    if dim != width:
        raise WeightFileError(
            f"{gguf.path}: {arch}.embedding_length is {dim}, but token_embd.weight has rows of {width} values"
        )
    per_block = 6 if arch == "phi3" else len(_BLOCK)  # the fewest tensors a block has (Phi-3's are fused)
    n_layers = _integer(gguf, f"{arch}.block_count", 1, len(gguf.tensors) // per_block)
    heads = _integer(gguf, f"{arch}.attention.head_count", 1, dim)
    sized = f"{arch}.attention.key_length", f"{arch}.rope.dimension_count"
    if dim % heads and not any(k in gguf.metadata for k in sized):
        raise WeightFileError(
            f"{gguf.path}: {arch}.attention.head_count ({heads}) must divide {arch}.embedding_length ({dim}) "
            f"(or {sized[0]} give the head size)"
        )
    kv_heads = _integer(gguf, f"{arch}.attention.head_count_kv", 1, heads, default=heads)
    if heads % kv_heads:
        raise WeightFileError(
            f"{gguf.path}: {arch}.attention.head_count_kv ({kv_heads}) must divide "
            f"{arch}.attention.head_count ({heads})"
        )
    head_dim = _integer(gguf, sized[1], 2, 2**16, default=max(dim // heads, 2))
    head_dim = _integer(gguf, sized[0], 2, 2**16, default=head_dim)
    rotated = _integer(gguf, sized[1], 2, 2**16, default=head_dim)
    if rotated != head_dim:
        raise WeightFileError(
            f"{gguf.path}: {sized[1]} is {rotated} but {sized[0]} is {head_dim}: RoPE on part of a head "
            "is not supported"
        )
    if head_dim % 2:
        named = [f"{k} is {head_dim}" for k in sized if k in gguf.metadata]
        given = named[0] if named else f"the head size is {head_dim}"
        raise WeightFileError(f"{gguf.path}: {given}; RoPE needs it even")
    vocab_size = _integer(gguf, f"{arch}.vocab_size", 1, default=vocab)
    if vocab_size != vocab:
        raise WeightFileError(
            f"{gguf.path}: {arch}.vocab_size is {vocab_size}, but token_embd.weight has {vocab} rows"
        )
    scaling = gguf.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", "linear"):
        raise WeightFileError(
            f"{gguf.path}: {arch}.rope.scaling.type is {shown(scaling)}: only linear scaling is implemented"
        )
    factor = _real(gguf, f"{arch}.rope.scaling.factor", default=1.0) if scaling == "linear" else 1.0
    context = _integer(gguf, f"{arch}.context_length", 1, MAX_CONTEXT)
    window = _integer(gguf, f"{arch}.attention.sliding_window", 0, default=0)
    if window:  # full attention equals a sliding window's over at most `window` positions
        context = min(context, window)
    return LlamaConfig(
        vocab_size=vocab,
        dim=dim,
        n_layers=n_layers,
        n_heads=heads,
        n_kv_heads=kv_heads,
        head_dim=head_dim,
        ffn_dim=_integer(gguf, f"{arch}.feed_forward_length", 1),
        norm_eps=_real(gguf, f"{arch}.attention.layer_norm_rms_epsilon", high=1.0),
        rope_base=_real(gguf, f"{arch}.rope.freq_base", default=10000.0),
        rope_factor=factor,
        context_length=context,
        tie_embeddings="output.weight" not in gguf.tensors,
        fused=True,
        **variants[arch],
    )


def _integer(gguf: GGUFFile, key: str, low: int, high: int | None = None, default: int | None = None) -> int:
    """The integer under `key` (required unless a default is given), refused unless in low..high."""
    value = gguf.require(key) if default is None else gguf.get(key, default)
    return checked_integer(gguf.path, key, value, low, high)


def _real(gguf: GGUFFile, key: str, high: float = math.inf, default: float | None = None) -> float:
    """The number under `key` (required unless a default is given), refused unless finite, > 0, < high."""
    value = gguf.require(key) if default is None else gguf.get(key, default)
    return checked_real(gguf.path, key, value, high)


# llama.cpp's tensor names -> ours (per block: blk.{i}.NAME -> layers.{i}.NAME)
_GLOBAL = {"token_embd": "embed_tokens", "output_norm": "norm", "output": "lm_head"}
_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
Llama.GGUF_BLOCK = _BLOCK
_FUSED = {  # our fused matrices and their parts, in the order their rows are stacked
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
}


def _gguf_groups(gguf: GGUFFile, config: LlamaConfig, names: dict[str, str]) -> dict[str, list[GGUFTensor]]:
    """Our parameter name -> the GGUF tensors that make it (several for the fused matrices). Every tensor
    the config needs must be there with the shape it implies and a type verigrad reads, and no other:
    a WeightFileError names the file and the first few tensors at fault."""
    c = config
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    shapes = {"token_embd.weight": (c.vocab_size, c.dim), "output_norm.weight": (c.dim,)}
    if not c.tie_embeddings:
        shapes["output.weight"] = (c.vocab_size, c.dim)
    block = {"attn_norm": (c.dim,), "attn_q": (q, c.dim), "attn_k": (kv, c.dim), "attn_v": (kv, c.dim)}
    block |= {"attn_output": (c.dim, q), "ffn_norm": (c.dim,), "ffn_gate": (c.ffn_dim, c.dim)}
    block |= {"ffn_up": (c.ffn_dim, c.dim), "ffn_down": (c.dim, c.ffn_dim)}
    block |= {"post_attention_norm": (c.dim,), "post_ffw_norm": (c.dim,)}  # Gemma's
    block = {f"{theirs}.weight": shape for theirs, shape in block.items()}
    names = {f"{theirs}.weight": f"{ours}.weight" for theirs, ours in names.items()}
    if c.qkv_bias:
        block |= {"attn_q.bias": (q,), "attn_k.bias": (kv,), "attn_v.bias": (kv,)}
        names |= {f"attn_{x}.bias": f"self_attn.{x}_proj.bias" for x in "qkv"}
    if c.qk_norm:
        block |= {"attn_q_norm.weight": (c.head_dim,), "attn_k_norm.weight": (c.head_dim,)}
        names |= {f"attn_{x}_norm.weight": f"self_attn.{x}_norm.weight" for x in "qk"}
    if gguf.arch == "phi3":  # q/k/v and gate/up already one matrix each
        for theirs in ("attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"):
            del block[f"{theirs}.weight"], names[f"{theirs}.weight"]
        block |= {"attn_qkv.weight": (q + 2 * kv, c.dim), "ffn_up.weight": (2 * c.ffn_dim, c.dim)}
        names |= {f"{theirs}.weight": f"{ours}.weight" for theirs, ours in _FUSED_IN_FILE.items()}
    wanted = {"token_embd.weight": "embed_tokens.weight", "output_norm.weight": "norm.weight"}
    if not c.tie_embeddings:
        wanted["output.weight"] = "lm_head.weight"
    for i in range(c.n_layers):
        for theirs, ours in names.items():
            wanted[f"blk.{i}.{theirs}"] = f"layers.{i}.{ours}"
            shapes[f"blk.{i}.{theirs}"] = block[theirs]
    for name in ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"):
        if name in gguf.tensors:  # Llama 3.1's and Phi-3's long-context (su/longrope) scaling
            raise WeightFileError(f"{gguf.path}: tensor {name}: scaled RoPE is not supported")
    problems = [f"missing tensor {name}" for name in wanted if name not in gguf.tensors]
    problems += [f"unexpected tensor {shown(name)}" for name in gguf.tensors if name not in wanted]
    for name, shape in shapes.items():
        t = gguf.tensors.get(name)
        if t is not None and t.shape != shape:
            problems.append(f"tensor {name} has shape {list(t.shape)}, expected {list(shape)}")
        elif t is not None and t.qtype not in FORMATS:
            problems.append(f"tensor {name} is stored as {t.qtype}, which verigrad does not read")
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise WeightFileError(f"{gguf.path}: " + "; ".join(problems[:3]) + more)
    groups: dict[str, list[GGUFTensor]] = {}
    for theirs, ours in wanted.items():
        for fused, parts in _FUSED.items():
            for part in parts:
                ours = ours.replace(f".{part}.", f".{fused}.")
        ours = ours.replace("qkv_proj.bias", "qkv_bias")  # the fused bias lies beside its matrix
        groups.setdefault(ours, []).append(gguf.tensors[theirs])
    return groups
