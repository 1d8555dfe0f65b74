"""A tabular classifier in the style of the beginner tutorials and Kaggle notebooks: integer features
turned into labels with `//` and `%` of negative numbers and Python-scalar arithmetic on integer tensors,
a Dataset class, a custom Sampler inside a BatchSampler with drop_last and a collate_fn; an MLP with
BatchNorm1d (a cumulative average: momentum=None), GroupNorm and a residual block; two optimizers on
parts of the model (SGD with Nesterov momentum and weight decay, Adagrad with lr_decay) with a LambdaLR
of one function per group and a MultiStepLR, gradient accumulation over two micro-batches,
clip_grad_norm_ with error_if_nonfinite; a checkpoint loaded non-strictly into a model whose head was
replaced (missing and unexpected keys), then evaluation under no_grad with the running statistics."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import record

FEATURES, CLASSES = 6, 4


def table(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-50, 50, size=(count, FEATURES)).astype(np.int64)


def labels(torch: Any, raw: Any) -> Any:
    """The class from the integer features, by floor division and remainder of negative numbers."""
    return ((raw[:, 0] // 7) % CLASSES + (raw[:, 1] % -3) * (raw[:, 2] // -11)).remainder(CLASSES)


def build(torch: Any, head_name: str = "head") -> Any:
    nn = torch.nn

    class Residual(nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            self.norm = nn.GroupNorm(4, width)
            self.linear = nn.Linear(width, width)

        def forward(self, x):
            return x + self.linear(torch.relu(self.norm(x)))

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            linear = nn.Linear(FEATURES, 16, bias=False)  # the norm's shift makes a bias useless
            self.stem = nn.Sequential(linear, nn.BatchNorm1d(16, momentum=None), nn.ReLU())
            self.block = Residual(16)
            setattr(self, head_name, nn.Linear(16, CLASSES))
            self.head_name = head_name

        def forward(self, x):
            return getattr(self, self.head_name)(self.block(self.stem(x)))

    return MLP()


def main(
    torch: Any, saved: dict[str, np.ndarray] | None = None, epochs: int = 3, dtype: Any = None
) -> dict[str, Any]:
    """Train for `epochs` passes (in f32, or `dtype`); returns what the parity suite compares."""
    nn, F, data = torch.nn, torch.nn.functional, torch.utils.data
    dtype = dtype or torch.float32
    torch.manual_seed(0)
    model = build(torch).to(dtype)
    if saved is not None:
        record.load(torch, model, saved)
    out: dict[str, Any] = {"state": record.state(model), "losses": [], "lrs": [], "eval": []}

    raw = torch.from_numpy(table(72, seed=3))
    y = labels(torch, raw)
    x = ((raw * 0.5 + 1) / 25).to(dtype)  # Python scalars on an integer tensor: float32, then the dtype

    class Rows(data.Dataset):
        def __init__(self, lo: int, hi: int) -> None:
            self.lo, self.hi = lo, hi

        def __len__(self) -> int:
            return self.hi - self.lo

        def __getitem__(self, i: int):
            return {"x": x[self.lo + i], "y": y[self.lo + i]}

    class EveryThird(data.Sampler):
        def __init__(self, n: int) -> None:
            self.n = n

        def __iter__(self):
            return iter([i for r in range(3) for i in range(r, self.n, 3)])

        def __len__(self) -> int:
            return self.n

    def collate(batch):
        return torch.stack([b["x"] for b in batch]), torch.stack([b["y"] for b in batch])

    train_set = Rows(0, 56)
    sampler = data.BatchSampler(EveryThird(len(train_set)), batch_size=5, drop_last=True)
    loader = data.DataLoader(train_set, batch_sampler=sampler, collate_fn=collate)
    body = [p for n, p in model.named_parameters() if not n.startswith("head")]
    sgd = torch.optim.SGD(
        [{"params": body[:4]}, {"params": body[4:], "weight_decay": 0.0}],
        lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3,
    )  # fmt: skip
    adagrad = torch.optim.Adagrad(
        model.head.parameters(), lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1
    )
    schedules = [
        torch.optim.lr_scheduler.LambdaLR(sgd, [lambda e: 1.0 / (1 + e), lambda e: 0.9**e]),
        torch.optim.lr_scheduler.MultiStepLR(adagrad, milestones=[3, 5, 5], gamma=0.5),
    ]
    for _epoch in range(epochs):
        model.train()
        for step, (xb, yb) in enumerate(loader):
            loss = F.cross_entropy(model(xb), yb) / 2
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            out["losses"].append(loss.item())
            if step % 2 == 1:  # two micro-batches per update
                nn.utils.clip_grad_norm_(model.parameters(), 2.0, error_if_nonfinite=True)
                sgd.step()
                adagrad.step()
                sgd.zero_grad()
                adagrad.zero_grad(set_to_none=False)
        for schedule in schedules:
            schedule.step()
        out["lrs"] += [g["lr"] for g in sgd.param_groups + adagrad.param_groups]

    renamed = build(torch, head_name="classifier").to(dtype)
    missing, unexpected = renamed.load_state_dict(model.state_dict(), strict=False)
    renamed.classifier.load_state_dict(model.head.state_dict())
    stem_bn = renamed.stem[1]
    out["log"] = [sorted(missing), sorted(unexpected), int(stem_bn.num_batches_tracked)]
    renamed.eval()
    with torch.no_grad():
        logits = renamed(x[56:])
        statistics = [stem_bn.running_mean.numpy().copy(), stem_bn.running_var.numpy().copy()]
        out["eval"] += [logits.numpy().copy(), *statistics]
        out["acc"] = [float((logits.argmax(1) == y[56:]).float().mean())]
    return out
