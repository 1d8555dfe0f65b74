"""Knowledge distillation in the style of the public tutorials: a teacher built from an nn.ModuleDict of
layers, an nn.ParameterDict of per-class biases and an nn.ParameterList of scales, initialized by
`module.apply` (xavier_uniform_, zeros_), trained a little first; a deep student MLP whose blocks run
under torch.utils.checkpoint (use_reentrant=False), one Linear shared by two blocks (a tied weight: one
entry in the optimizer, two in the state dict); the loss mixes cross-entropy with KLDivLoss of the
teacher's and student's temperature-softened log-probabilities (log_target=True, reduction="batchmean",
times T squared). Gradients accumulate over three micro-batches; clip_grad_norm_ (its returned norm is
logged) and OneCycleLR step once per accumulation. Midway, copy.deepcopy of the student and of its
optimizer (re-pointed at the copy's parameters, loaded from a deep copy of the original's state dict)
trains on beside the original, and its state dict goes through torch.save / torch.load in memory before
the evaluation."""

from __future__ import annotations

import copy
import io
from typing import Any

import numpy as np

from . import record

FEATURES, CLASSES, WIDTH, T = 8, 5, 16, 3.0


def batches(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, FEATURES))
    y = (np.argmax(x[:, :CLASSES] + 0.5 * x[:, CLASSES:].sum(1, keepdims=True), 1)).astype(np.int64)
    return x, y


def build(torch: Any) -> tuple[Any, Any]:
    nn, F = torch.nn, torch.nn.functional
    checkpoint = torch.utils.checkpoint.checkpoint

    class Teacher(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleDict({"inp": nn.Linear(FEATURES, WIDTH), "out": nn.Linear(WIDTH, CLASSES)})
            self.bias = nn.ParameterDict({f"c{i}": nn.Parameter(torch.zeros(1)) for i in range(CLASSES)})
            self.scales = nn.ParameterList([nn.Parameter(torch.ones(WIDTH)) for _ in range(2)])

        def forward(self, x):
            h = torch.tanh(self.layers["inp"](x)) * self.scales[0]
            h = h * self.scales[1]
            return self.layers["out"](h) + torch.cat([self.bias[f"c{i}"] for i in range(CLASSES)])

    class Block(nn.Module):
        def __init__(self, shared: Any) -> None:
            super().__init__()
            self.shared, self.norm = shared, nn.LayerNorm(WIDTH)

        def forward(self, x):
            return x + F.gelu(self.shared(self.norm(x)))

    class Student(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            shared = nn.Linear(WIDTH, WIDTH)
            self.stem = nn.Linear(FEATURES, WIDTH)
            self.blocks = nn.ModuleList([Block(shared), Block(shared), Block(nn.Linear(WIDTH, WIDTH))])
            self.head = nn.Linear(WIDTH, CLASSES)

        def forward(self, x):
            h = self.stem(x)
            for block in self.blocks:
                h = checkpoint(block, h, use_reentrant=False) if self.training else block(h)
            return self.head(h)

    def init(m: Any) -> None:
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)

    torch.manual_seed(0)
    return Teacher().apply(init), Student().apply(init)


def main(torch: Any, saved: dict[str, np.ndarray] | None = None, dtype: Any = None) -> dict[str, Any]:
    """Train teacher then student (in f32, or `dtype`); returns what the parity suite compares."""
    nn, F = torch.nn, torch.nn.functional
    dtype = dtype or torch.float32
    teacher, student = build(torch)
    teacher, student = teacher.to(dtype), student.to(dtype)
    if saved is not None:
        record.load(torch, teacher, {k[2:]: v for k, v in saved.items() if k.startswith("t.")})
        record.load(torch, student, {k[2:]: v for k, v in saved.items() if k.startswith("s.")})
    state = {f"t.{k}": v for k, v in record.state(teacher).items()}
    out: dict[str, Any] = {"state": state | {f"s.{k}": v for k, v in record.state(student).items()}}
    out |= {"losses": [], "lrs": [], "eval": [], "log": []}
    out["log"].append([n for n, _ in student.named_modules(remove_duplicate=False)])
    out["log"].append([n for n, _ in student.named_parameters()])
    x_all, y_all = batches(96, seed=1)
    x_all, y_all = torch.from_numpy(x_all).to(dtype), torch.from_numpy(y_all)

    teach = torch.optim.Adam(teacher.parameters(), lr=0.02)
    for i in range(0, 96, 16):
        teach.zero_grad()
        loss = F.cross_entropy(teacher(x_all[i : i + 16]), y_all[i : i + 16])
        loss.backward()
        teach.step()
        out["losses"].append(loss.item())
    teacher.eval()

    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    params = list(student.parameters())
    out["log"].append(len(params))
    opt = torch.optim.AdamW(params, lr=0.01, weight_decay=0.05)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.02, total_steps=8, pct_start=0.25)

    def step_loss(model: Any, xb: Any, yb: Any) -> Any:
        with torch.no_grad():
            soft = F.log_softmax(teacher(xb) / T, dim=-1)
        logits = model(xb)
        distill = kl(F.log_softmax(logits / T, dim=-1), soft) * T * T
        return (0.5 * F.cross_entropy(logits, yb) + 0.5 * distill) / 3

    def train(model: Any, optimizer: Any, sched: Any, starts: range) -> None:
        model.train()
        for k, i in enumerate(starts):
            loss = step_loss(model, x_all[i : i + 8], y_all[i : i + 8])
            loss.backward()
            if "loss0" not in out:
                out["loss0"], out["grads0"] = loss.item(), record.grads(model)
            out["losses"].append(loss.item())
            if k % 3 == 2:
                norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                out["log"].append(round(float(norm), 4))
                optimizer.step()
                optimizer.zero_grad()
                sched.step()
                out["lrs"].append(sched.get_last_lr()[0])

    train(student, opt, schedule, range(0, 48, 8))
    twin = copy.deepcopy(student)
    twin_opt = copy.deepcopy(opt)
    twin_opt.param_groups[0]["params"] = list(twin.parameters())
    # the moments, keyed to the copy's parameters (a copy: PyTorch's load would share the tensors)
    twin_opt.load_state_dict(copy.deepcopy(opt.state_dict()))
    twin_sched = torch.optim.lr_scheduler.OneCycleLR(twin_opt, max_lr=0.02, total_steps=8, pct_start=0.25)
    twin_sched.load_state_dict(schedule.state_dict())
    out["log"].append(twin.blocks[0].shared is twin.blocks[1].shared)
    train(twin, twin_opt, twin_sched, range(48, 96, 8))
    train(student, opt, schedule, range(48, 96, 8))

    buffer = io.BytesIO()
    torch.save(twin.state_dict(), buffer)
    buffer.seek(0)
    restored = build(torch)[1].to(dtype)
    restored.load_state_dict(torch.load(buffer))
    restored.eval()
    x_test = torch.from_numpy(batches(20, seed=9)[0]).to(dtype)
    with torch.no_grad():
        for model in (restored, student):
            out["eval"].append(F.softmax(model(x_test), dim=-1).numpy())
    return out
