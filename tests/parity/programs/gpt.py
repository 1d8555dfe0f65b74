"""A small GPT written as a PyTorch user writes one (nanoGPT's layout), trained for a few steps and then
asked for a greedy continuation. `torch` is whichever framework module the caller binds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Config:
    vocab_size: int = 24
    block_size: int = 16
    n_embd: int = 32
    n_head: int = 4
    n_layer: int = 2
    manual_mask: bool = False  # softmax over a masked score matrix instead of scaled_dot_product_attention


def initial_state(cfg: Config, seed: int = 0) -> dict[str, np.ndarray]:
    """The model's state dict in NumPy (f64), the same for both frameworks; the head shares tok's weight."""
    rng = np.random.default_rng(seed)
    e = cfg.n_embd

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return rng.standard_normal(shape) * std

    state = {"tok.weight": normal(cfg.vocab_size, e), "pos.weight": normal(cfg.block_size, e)}
    for i in range(cfg.n_layer):
        p = f"blocks.{i}."
        state[p + "ln1.weight"] = 1.0 + normal(e, std=0.1)
        state[p + "ln1.bias"] = normal(e, std=0.1)
        state[p + "attn.qkv.weight"] = normal(3 * e, e)
        state[p + "attn.qkv.bias"] = normal(3 * e)
        state[p + "attn.proj.weight"] = normal(e, e, std=0.02 / math.sqrt(2 * cfg.n_layer))
        state[p + "attn.proj.bias"] = normal(e)
        if cfg.manual_mask:
            t = cfg.block_size
            state[p + "attn.bias"] = np.tril(np.ones((t, t))).reshape(1, 1, t, t)
        state[p + "ln2.weight"] = 1.0 + normal(e, std=0.1)
        state[p + "ln2.bias"] = normal(e, std=0.1)
        state[p + "mlp.0.weight"] = normal(4 * e, e)
        state[p + "mlp.0.bias"] = normal(4 * e)
        state[p + "mlp.2.weight"] = normal(e, 4 * e, std=0.02 / math.sqrt(2 * cfg.n_layer))
        state[p + "mlp.2.bias"] = normal(e)
    state["ln_f.weight"] = 1.0 + normal(e, std=0.1)
    state["ln_f.bias"] = normal(e, std=0.1)
    state["head.weight"] = state["tok.weight"]
    return state


def build(torch: Any, cfg: Config) -> Any:
    """The GPT module, written with `torch.nn` as nanoGPT is."""
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n_head = cfg.n_head
            self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
            if cfg.manual_mask:
                t = cfg.block_size
                self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if cfg.manual_mask:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                y = att @ v
            else:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg.n_embd)
            self.attn = CausalSelfAttention()
            self.ln2 = nn.LayerNorm(cfg.n_embd)
            self.mlp = nn.Sequential(
                nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd)
            )

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            self.head.weight = self.tok.weight  # weight tying

        def forward(self, idx, targets=None):
            _, T = idx.size()
            pos = torch.arange(0, T, dtype=torch.long)
            x = self.tok(idx) + self.pos(pos)
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            if targets is None:
                return logits, None
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

        @torch.no_grad()
        def generate(self, idx, max_new_tokens):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= cfg.block_size else idx[:, -cfg.block_size :]
                logits, _ = self(idx_cond)
                next_token = torch.argmax(logits[:, -1, :], dim=-1, keepdim=True)
                idx = torch.cat((idx, next_token), dim=1)
            return idx

    return GPT()


def tokens(cfg: Config, n: int, seed: int = 1) -> np.ndarray:
    """A token stream with structure to learn: a repeating pattern with some noise."""
    rng = np.random.default_rng(seed)
    pattern = rng.integers(0, cfg.vocab_size, size=7)
    stream = np.resize(pattern, n)
    noise = rng.random(n) < 0.1
    stream[noise] = rng.integers(0, cfg.vocab_size, size=int(noise.sum()))
    return stream.astype(np.int64)


def main(torch: Any, dtype: Any = None, steps: int = 20, cfg: Config = Config()) -> dict[str, Any]:
    """Train the GPT from `initial_state` for `steps` steps and generate 20 tokens greedily. Returns the
    first step's loss and gradients (before clipping), every step's loss and the generated tokens."""
    model = build(torch, cfg)
    if dtype is not None:
        model = model.to(dtype)
    param_dtype = torch.float32 if dtype is None else dtype
    state = initial_state(cfg)
    model.load_state_dict({k: torch.from_numpy(v.copy()).to(param_dtype) for k, v in state.items()})

    decay = [p for _, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for _, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=3e-3,
        betas=(0.9, 0.95),
    )
    warmup = 5

    def lr_lambda(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

    data = tokens(cfg, 4096)
    rng = np.random.default_rng(2)
    batch_size, T = 4, cfg.block_size
    result: dict[str, Any] = {"losses": [], "lrs": []}
    model.train()
    for step in range(steps):
        starts = rng.integers(0, len(data) - T - 1, size=batch_size)
        x = torch.from_numpy(np.stack([data[s : s + T] for s in starts]))
        y = torch.from_numpy(np.stack([data[s + 1 : s + T + 1] for s in starts]))
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if step == 0:
            result["loss0"] = loss.item()
            result["grads0"] = {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        result["losses"].append(loss.item())
        result["lrs"].append(optimizer.param_groups[0]["lr"])

    model.eval()
    prompt = torch.from_numpy(data[:5].reshape(1, 5).copy())
    result["generated"] = model.generate(prompt, max_new_tokens=20)[0].tolist()
    return result
