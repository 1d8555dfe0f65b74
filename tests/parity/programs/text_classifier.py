"""A text classifier as tutorials write one: sentences of different lengths padded by a DataLoader's
collate_fn (`pad_sequence`, batch_first), an Embedding with a padding index, a pre-norm
TransformerEncoder (batch_first, norm_first, GELU) told which positions are padding
(`src_key_padding_mask`), masked mean pooling beside an EmbeddingBag's bag of words, an einsum
attention pooling, cross-entropy with label smoothing, AdamW with a no-decay group, OneCycleLR,
clip_grad_value_, ReduceLROnPlateau on the validation loss, and a forward hook that records the pooled
features."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

VOCAB, CLASSES, WIDTH = 24, 3, 16


def sentences(count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Token id sentences of 3-11 tokens (ids 1..VOCAB-1); the class is which third of the vocabulary
    the sentence's most frequent token falls in."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(count):
        ids = rng.integers(1, VOCAB, size=int(rng.integers(3, 12)))
        xs.append(ids.astype(np.int64))
        ys.append(int(np.bincount(ids, minlength=VOCAB).argmax()) * CLASSES // VOCAB)
    return xs, np.array(ys, dtype=np.int64)


def build(torch: Any) -> Any:
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, WIDTH, padding_idx=0)
            layer = nn.TransformerEncoderLayer(
                WIDTH,
                2,
                dim_feedforward=32,
                dropout=0.0,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.bag = nn.EmbeddingBag(VOCAB, 8, mode="mean", padding_idx=0)
            self.score = nn.Parameter(torch.randn(WIDTH) * 0.1)
            self.norm = nn.LayerNorm(2 * WIDTH + 8)
            self.head = nn.Linear(2 * WIDTH + 8, CLASSES)

        def forward(self, ids, pad):
            h = self.encoder(self.embed(ids), src_key_padding_mask=pad)
            keep = (~pad).unsqueeze(-1).to(h.dtype)
            mean = (h * keep).sum(1) / keep.sum(1)
            weights = torch.einsum("btd,d->bt", h, self.score).masked_fill(pad, float("-inf")).softmax(-1)
            attended = torch.einsum("bt,btd->bd", weights, h)
            return self.head(self.norm(torch.cat([mean, attended, self.bag(ids)], dim=-1)))

    return Classifier()


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 3, dtype: Any = None
) -> dict[str, Any]:
    nn, F, data = torch.nn, torch.nn.functional, torch.utils.data
    torch.manual_seed(0)
    model = build(torch).to(dtype or torch.float32)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "val": [], "lrs": [], "eval": []}

    xs, ys = sentences(56, seed=11)
    pairs = [(torch.from_numpy(x), int(y)) for x, y in zip(xs, ys)]

    def collate(batch):
        ids = nn.utils.rnn.pad_sequence([b[0] for b in batch], batch_first=True, padding_value=0)
        return ids, ids == 0, torch.tensor([b[1] for b in batch])

    train = data.DataLoader(pairs[:40], batch_size=8, shuffle=False, collate_fn=collate)
    val = data.DataLoader(pairs[40:], batch_size=16, collate_fn=collate)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}], lr=3e-3
    )
    cycle = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=epochs * len(train))
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
    pooled: list[Any] = []
    hook = model.norm.register_forward_hook(lambda mod, inp, output: pooled.append(output.detach()))

    for _epoch in range(epochs):
        model.train()
        for ids, pad, labels in train:
            opt.zero_grad()
            loss = F.cross_entropy(model(ids, pad), labels, label_smoothing=0.1)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            nn.utils.clip_grad_value_(model.parameters(), 0.5)
            opt.step()
            cycle.step()
            out["losses"].append(loss.item())
            out["lrs"].append(opt.param_groups[0]["lr"])
        model.eval()
        with torch.no_grad():
            total, count = 0.0, 0
            for ids, pad, labels in val:
                logits = model(ids, pad)
                total += F.cross_entropy(logits, labels, reduction="sum").item()
                count += len(labels)
                out["eval"].append(logits.numpy().copy())
        out["val"].append(total / count)
        plateau.step(total / count)
    hook.remove()
    out["log"] = [len(pooled), *(round(g["lr"], 12) for g in opt.param_groups)]
    return out
