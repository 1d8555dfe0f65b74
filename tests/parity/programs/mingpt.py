"""A character-level GPT in the style of minGPT / nanoGPT: causal self-attention with a registered tril
mask and masked_fill, GELU MLP, weight init through model.apply and named_parameters, AdamW with
parameter groups chosen by module type (no decay for biases, LayerNorm and Embedding), gradient
clipping, cross_entropy with ignore_index=-1, then sampling with top-k and torch.multinomial (the
greedy token compared, as the draws are each framework's)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import record


def build(torch: Any, vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int) -> Any:
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            assert n_embd % n_head == 0
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.attn_dropout = nn.Dropout(0.0)
            self.resid_dropout = nn.Dropout(0.0)
            self.register_buffer(
                "bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
            )
            self.n_head = n_head
            self.n_embd = n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = nn.ModuleDict(
                dict(
                    c_fc=nn.Linear(n_embd, 4 * n_embd),
                    c_proj=nn.Linear(4 * n_embd, n_embd),
                    act=nn.GELU(),
                    dropout=nn.Dropout(0.0),
                )
            )
            m = self.mlp
            self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlpf(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.block_size = block_size
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(vocab_size, n_embd),
                    wpe=nn.Embedding(block_size, n_embd),
                    drop=nn.Dropout(0.0),
                    h=nn.ModuleList([Block() for _ in range(n_layer)]),
                    ln_f=nn.LayerNorm(n_embd),
                )
            )
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))
            self.n_params = sum(p.numel() for p in self.transformer.parameters())

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                torch.nn.init.zeros_(module.bias)
                torch.nn.init.ones_(module.weight)

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            decay = set()
            no_decay = set()
            whitelist_weight_modules = (torch.nn.Linear,)
            blacklist_weight_modules = (torch.nn.LayerNorm, torch.nn.Embedding)
            for mn, m in self.named_modules():
                for pn, _p in m.named_parameters():
                    fpn = "%s.%s" % (mn, pn) if mn else pn  # noqa: UP031 (as minGPT)
                    if pn.endswith("bias"):
                        no_decay.add(fpn)
                    elif pn.endswith("weight") and isinstance(m, whitelist_weight_modules):
                        decay.add(fpn)
                    elif pn.endswith("weight") and isinstance(m, blacklist_weight_modules):
                        no_decay.add(fpn)
            param_dict = {pn: p for pn, p in self.named_parameters()}
            inter_params = decay & no_decay
            union_params = decay | no_decay
            assert len(inter_params) == 0
            assert len(param_dict.keys() - union_params) == 0
            optim_groups = [
                {"params": [param_dict[pn] for pn in sorted(list(decay))], "weight_decay": weight_decay},
                {"params": [param_dict[pn] for pn in sorted(list(no_decay))], "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

        def forward(self, idx, targets=None):
            _b, t = idx.size()
            assert t <= self.block_size
            pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size :]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, top_k)
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                if do_sample:
                    idx_next = torch.multinomial(probs, num_samples=1)
                else:
                    _, idx_next = torch.topk(probs, k=1, dim=-1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPT()


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None) -> dict[str, Any]:
    text = "first citizen: before we proceed any further, hear me speak. all: speak, speak. " * 3
    chars = sorted(list(set(text)))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    block_size, batch_size = 16, 4
    torch.manual_seed(1337)
    model = build(torch, len(chars), block_size, n_layer=2, n_head=2, n_embd=24)
    if dtype is not None:
        model = model.to(dtype)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": []}
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=3e-3, betas=(0.9, 0.95))
    starts = np.random.default_rng(0).integers(0, len(data) - block_size - 1, (10, batch_size))
    model.train()
    for it in range(10):
        ix = torch.from_numpy(starts[it])
        x = torch.stack([data[i : i + block_size] for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
        y[:, :2] = -1  # ignored positions (ignore_index=-1)
        _logits, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        if "loss0" not in out:
            out["loss0"], out["grads0"] = loss.item(), record.grads(model)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        out["losses"].append(loss.item())
    model.eval()
    context = torch.tensor([[stoi["f"]]], dtype=torch.long)
    tokens = model.generate(context, 12, do_sample=False)[0].tolist()
    out["decoded"] = ["".join(itos[int(i)] for i in tokens)]
    sampled = model.generate(context, 5, do_sample=True, top_k=3)
    assert tuple(sampled.shape) == (1, 6) and all(0 <= int(i) < len(chars) for i in sampled[0].tolist())
    with torch.no_grad():
        out["eval"] = [model(x)[0].numpy().copy()]
    return out
