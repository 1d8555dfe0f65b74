"""A padded-sequence Transformer classifier written the plain way: nn.TransformerEncoder with its defaults
(post-norm, batch_first, nested tensors enabled) told the padding, a mean over every position (padding
included) beside attention pooling by nn.MultiheadAttention from a learned query over keys and values of
other widths (kdim, vdim; per-head weights kept), a non-persistent buffer, a forward pre-hook taking
keyword arguments, cross-entropy with class weights and an ignored label. Training starts with the
embedding frozen and adds it to AdamW (amsgrad) as a new parameter group after the first epoch, under a
ChainedScheduler of a warm-up and an exponential decay; the optimizer and the schedule are saved and
loaded into new ones midway (state_dict round trips). Evaluation runs under inference_mode, where
PyTorch's fast path returns zeros at the padded positions."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

VOCAB, CLASSES, WIDTH, IGNORED = 20, 3, 16, -1


def sentences(count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Sentences of 2-9 tokens (ids 1..VOCAB-1, padding at the end); the class is the first token's third
    of the vocabulary, and every seventh label is IGNORED."""
    rng = np.random.default_rng(seed)
    xs = [rng.integers(1, VOCAB, size=int(rng.integers(2, 10))).astype(np.int64) for _ in range(count)]
    ys = np.array([int(x[0]) * CLASSES // VOCAB for x in xs], dtype=np.int64)
    ys[::7] = IGNORED
    return xs, ys


def build(torch: Any) -> Any:
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, WIDTH, padding_idx=0)
            layer = nn.TransformerEncoderLayer(WIDTH, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.keys = nn.Linear(WIDTH, 12)
            self.values = nn.Linear(WIDTH, 10)
            self.pool = nn.MultiheadAttention(WIDTH, 2, kdim=12, vdim=10, batch_first=True)
            self.query = nn.Parameter(torch.randn(1, 1, WIDTH) * 0.1)
            self.register_buffer("scale", torch.tensor(0.5), persistent=False)
            self.head = nn.Linear(2 * WIDTH, CLASSES)

        def forward(self, ids, pad, pool_weights=None):
            h = self.encoder(self.embed(ids), src_key_padding_mask=pad)
            query = self.query.expand(ids.size(0), -1, -1)
            pooled, weights = self.pool(
                query, self.keys(h), self.values(h), key_padding_mask=pad, average_attn_weights=False
            )
            if pool_weights is not None:
                pool_weights.append(weights.detach())
            mean = h.mean(1) * self.scale  # every position, the padded ones too
            return self.head(torch.cat([mean, pooled.squeeze(1)], dim=-1))

    return Classifier()


def _optimizer(torch: Any, model: Any, with_embedding: bool) -> tuple[Any, Any]:
    rest = [p for n, p in model.named_parameters() if not n.startswith("embed.")]
    opt = torch.optim.AdamW(rest, lr=5e-3, weight_decay=0.02, amsgrad=True)
    if with_embedding:
        opt.add_param_group({"params": [model.embed.weight], "lr": 2e-3, "weight_decay": 0.0})
    schedules = torch.optim.lr_scheduler
    warm = schedules.LinearLR(opt, start_factor=0.25, total_iters=3)
    chain = schedules.ChainedScheduler([warm, schedules.ExponentialLR(opt, gamma=0.9)])
    return opt, chain


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 3, dtype: Any = None
) -> dict[str, Any]:
    """Train for `epochs` passes (in f32, or `dtype`); returns what the parity suite compares."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = build(torch).to(dtype or torch.float32)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "lrs": [], "eval": [], "val": []}
    calls: list[Any] = []

    def pre_hook(module, args, kwargs):
        calls.append(sorted(kwargs))
        return args, {**kwargs, "pool_weights": kwargs.get("pool_weights")}

    model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    xs, ys = sentences(48, seed=5)

    def batch(rows: range) -> tuple[Any, Any, Any]:
        ids = nn.utils.rnn.pad_sequence([torch.from_numpy(xs[i]) for i in rows], batch_first=True)
        return ids, ids == 0, torch.from_numpy(ys[list(rows)])

    weight = torch.tensor([1.0, 2.0, 0.5], dtype=dtype or torch.float32)
    model.embed.weight.requires_grad_(False)
    opt, schedule = _optimizer(torch, model, with_embedding=False)
    for epoch in range(epochs):
        if epoch == 1:  # unfreeze the embedding: a new parameter group, scheduled from its own rate
            model.embed.weight.requires_grad_(True)
            opt.add_param_group({"params": [model.embed.weight], "lr": 2e-3, "weight_decay": 0.0})
        if epoch == 2:  # a checkpoint's round trip into new objects
            state, schedule_state = opt.state_dict(), schedule.state_dict()
            opt, schedule = _optimizer(torch, model, with_embedding=True)
            opt.load_state_dict(state)
            schedule.load_state_dict(schedule_state)
        model.train()
        for start in range(0, 32, 8):
            ids, pad, labels = batch(range(start, start + 8))
            opt.zero_grad()
            loss = F.cross_entropy(model(ids, pad), labels, weight=weight, ignore_index=IGNORED)
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            opt.step()
            schedule.step()
            out["losses"].append(loss.item())
            out["lrs"].append(sum(g["lr"] for g in opt.param_groups))
        model.eval()
        with torch.inference_mode():
            ids, pad, labels = batch(range(32, 48))
            weights: list[Any] = []
            logits = model(ids, pad, pool_weights=weights)
            out["eval"] += [logits.numpy().copy(), weights[0].numpy().copy()]
            out["val"].append(F.cross_entropy(logits, labels, ignore_index=IGNORED).item())
    out["log"] = [len(calls), calls[-1], len(opt.param_groups), sorted(opt.state_dict()["state"])]
    return out
