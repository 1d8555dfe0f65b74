"""The GPT of `verigrad train lm` against the same model written here in PyTorch, from one state dict:
the loss and every gradient of one step (f32 within 1e-6, f64 within 1e-12, relative: the norm of the
difference over the norm of PyTorch's), and the losses of 50 steps of the whole loop (AdamW with decay /
no-decay groups, warmup then cosine, clipping, gradient accumulation), verigrad's step compiled on the
cpu backend, within 1e-5."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch import nn

import verigrad as vg
from verigrad.cli.lm_trainer import LMTrainConfig, lm_step, lr_at, make_optimizer
from verigrad.models.gpt import GPT, GPTConfig, rope_tables

VARIANTS = {
    "gpt2-like": {},
    "llama-like": {"norm": "rmsnorm", "positions": "rotary", "mlp": "swiglu"},
}


class TorchBlock(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.c = c
        self.norm1, self.norm2 = self._norm(), self._norm()
        self.attn = nn.Module()
        self.attn.qkv = nn.Parameter(torch.empty(3 * c.width, c.width))
        self.attn.proj = nn.Parameter(torch.empty(c.width, c.width))
        self.mlp = nn.Module()
        self.mlp.fc = nn.Parameter(torch.empty(c.hidden * (2 if c.mlp == "swiglu" else 1), c.width))
        self.mlp.proj = nn.Parameter(torch.empty(c.width, c.hidden))

    def _norm(self) -> nn.Module:
        c = self.c
        return nn.LayerNorm(c.width) if c.norm == "layernorm" else nn.RMSNorm(c.width, eps=1e-5)

    def forward(self, x, rope):
        c = self.c
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (h @ self.attn.qkv.T).reshape(b, t, 3, c.n_head, c.head_dim).permute(2, 0, 3, 1, 4)
        if rope is not None:
            q, k = (_rotate(z, *rope) for z in (q, k))
        y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + y.transpose(1, 2).reshape(b, t, d) @ self.attn.proj.T
        h = self.norm2(x) @ self.mlp.fc.T
        if c.mlp == "gelu":
            h = TF.gelu(h)
        else:
            gate, up = h.chunk(2, dim=-1)
            h = TF.silu(gate) * up
        return x + h @ self.mlp.proj.T


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class TorchGPT(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.c = c
        self.tok_emb = nn.Embedding(c.vocab_size, c.width)
        if c.positions == "learned":
            self.pos_emb = nn.Embedding(c.context, c.width)
        self.blocks = nn.ModuleList(TorchBlock(c) for _ in range(c.n_layer))
        self.norm_f = TorchBlock._norm(self)
        cos, sin = rope_tables(c.context, c.head_dim, c.rope_base)
        self.rope = (torch.from_numpy(cos), torch.from_numpy(sin))

    def loss(self, ids, targets):
        t = ids.shape[1]
        x = self.tok_emb(ids)
        rope = None
        if self.c.positions == "learned":
            x = x + self.pos_emb.weight[:t]
        else:
            dtype = self.tok_emb.weight.dtype
            rope = (self.rope[0][:t].to(dtype), self.rope[1][:t].to(dtype))
        for block in self.blocks:
            x = block(x, rope)
        logits = self.norm_f(x) @ self.tok_emb.weight.T
        return TF.cross_entropy(logits.reshape(-1, self.c.vocab_size), targets.reshape(-1))


def _pair(variant: str, dtype: str, **sizes):
    vg.manual_seed(3)
    config = GPTConfig(**{"vocab_size": 61, "context": 16, "n_layer": 2, "n_head": 2, "width": 32, **sizes,
                          **VARIANTS[variant]})  # fmt: skip
    model = GPT(config)
    if dtype == "f64":
        model = model.double()
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    theirs = TorchGPT(config).to(torch.float64 if dtype == "f64" else torch.float32)
    missing, unexpected = theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    assert not missing and not unexpected
    return model, theirs


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b), 1e-300))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype, tol", [("f32", 1e-6), ("f64", 1e-12)])
def test_loss_and_every_gradient_at_step_zero(variant, dtype, tol):
    model, theirs = _pair(variant, dtype)
    ids = np.random.default_rng(0).integers(0, 61, (2, 4, 16))
    loss = model.loss(vg.from_numpy(ids[0]), vg.from_numpy(ids[1]))
    loss.backward()
    their_loss = theirs.loss(torch.from_numpy(ids[0]), torch.from_numpy(ids[1]))
    their_loss.backward()
    assert _relative(np.asarray(float(loss)), np.asarray(their_loss.item())) <= tol
    grads = dict(theirs.named_parameters())
    for name, p in model.named_parameters():
        assert _relative(p.grad.numpy(), grads[name].grad.double().numpy()) <= tol, name


@pytest.mark.parametrize("variant", VARIANTS)
def test_fifty_steps_of_the_whole_loop(variant):
    config = LMTrainConfig(steps=50, warmup=10, lr=3e-3, min_lr=3e-4, clip=0.5, accumulate=2, batch=2,
                           context=16, layers=2, heads=2, width=32, weight_decay=0.1, threads=1)  # fmt: skip
    model, theirs = _pair(variant, "f32")
    optimizer = make_optimizer(model, config)
    names = {id(p): n for n, p in model.named_parameters()}
    theirs_by_name = dict(theirs.named_parameters())
    their_opt = torch.optim.AdamW(
        [{"params": [theirs_by_name[names[id(p)]] for p in g["params"]], "weight_decay": g["weight_decay"]}
         for g in optimizer.param_groups],
        lr=config.lr, betas=(0.9, 0.95), eps=1e-8,
    )  # fmt: skip
    pool = np.random.default_rng(1).integers(0, 61, (4, config.accumulate, config.batch, config.context + 1))
    ours, their_losses = [], []
    with vg.backend("cpu"):
        step = vg.compile(lm_step(model, optimizer, config.clip))
        for s in range(config.steps):
            lr = lr_at(s, config)
            for g in optimizer.param_groups:
                g["lr"] = lr
            for g in their_opt.param_groups:
                g["lr"] = lr
            x, y = pool[s % 4, ..., :-1], pool[s % 4, ..., 1:]
            ours.append(float(step(vg.from_numpy(x), vg.from_numpy(y))))
            their_opt.zero_grad()
            total = 0.0
            for i in range(config.accumulate):
                loss = theirs.loss(torch.from_numpy(x[i]), torch.from_numpy(y[i])) / config.accumulate
                loss.backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(theirs.parameters(), config.clip)
            their_opt.step()
            their_losses.append(total)
    np.testing.assert_allclose(ours, their_losses, rtol=1e-5)
    assert ours[-1] < ours[0] - 0.3  # it learns: the 4 batches it cycles through
    assert math.isclose(lr_at(config.steps - 1, config), config.min_lr)
