"""A small Vision Transformer as tutorials write one: patches embedded by a strided Conv2d, a cls_token
and position embeddings as nn.Parameters, pre-norm blocks of nn.MultiheadAttention(batch_first=True) and
a GELU MLP, AdamW over parameter groups with a linear warmup then cosine decay (LambdaLR), and an
evaluation's accuracy by argmax."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import record
from .resnet import dataset


def build(torch: Any, img: int = 8, patch: int = 2, dim: int = 16, depth: int = 2, heads: int = 2) -> Any:
    nn = torch.nn

    class PatchEmbed(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)

        def forward(self, x):
            x = self.proj(x)  # (B, dim, H/p, W/p)
            return x.flatten(2).transpose(1, 2)  # (B, N, dim)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(
                nn.Linear(dim, 2 * dim), nn.GELU(), nn.Dropout(0.0), nn.Linear(2 * dim, dim)
            )

        def forward(self, x):
            h = self.norm1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    class ViT(nn.Module):
        def __init__(self, num_classes=4):
            super().__init__()
            self.patch_embed = PatchEmbed()
            num_patches = (img // patch) ** 2
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))
            self.blocks = nn.Sequential(*[Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, num_classes)
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            nn.init.trunc_normal_(self.cls_token, std=0.02)
            self.apply(self._init_weights)

        def _init_weights(self, m):
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

        def forward(self, x):
            x = self.patch_embed(x)
            cls_tokens = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat((cls_tokens, x), dim=1)
            x = x + self.pos_embed
            x = self.blocks(x)
            x = self.norm(x)
            return self.head(x[:, 0])

    return ViT()


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 4) -> dict[str, Any]:
    nn = torch.nn
    torch.manual_seed(0)
    model = build(torch)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "acc": [], "lrs": []}
    x, y = dataset(64, seed=8)
    data = torch.utils.data
    train_loader = data.DataLoader(data.TensorDataset(torch.from_numpy(x[:48]), torch.from_numpy(y[:48])), 16)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name in ("cls_token", "pos_embed") else decay).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}], lr=3e-3
    )
    total = epochs * len(train_loader)
    warmup = 3

    def lr_lambda(step):
        if step < warmup:
            return float(step + 1) / warmup
        return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    for _epoch in range(epochs):
        model.train()
        for images, labels in train_loader:
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            optimizer.step()
            scheduler.step()
            out["losses"].append(loss.item())
            out["lrs"].append(optimizer.param_groups[0]["lr"])
        model.eval()
        with torch.no_grad():
            logits = model(torch.from_numpy(x[48:]))
            out["acc"].append((logits.argmax(dim=-1) == torch.from_numpy(y[48:])).float().mean().item())
    out["eval"] = [logits.numpy().copy()]
    return out
