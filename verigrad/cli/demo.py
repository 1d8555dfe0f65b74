"""`verigrad demo`: a 2-layer MLP learns to tell three interleaved spirals apart, eagerly, with plain SGD.

Everything here is public verigrad: tensors, autograd, `functional.cross_entropy`, `no_grad` and
in-place `assign`. Run it with `verigrad demo`.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..autograd import no_grad
from ..nn import functional as F
from ..ops import manual_seed, randn, tensor, zeros
from ..tensor import Tensor
from .arguments import MAX_STEPS, step_count


def spirals(points_per_class: int = 200, classes: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Points on `classes` noisy spiral arms in the plane, and each point's arm."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, points_per_class)
        theta = np.linspace(c * 2 * math.pi / classes, c * 2 * math.pi / classes + 4.0, points_per_class)
        theta = theta + rng.normal(0, 0.15, points_per_class)
        xs.append(np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1))
        ys.append(np.full(points_per_class, c))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


@dataclass
class MLP:
    """x -> tanh(x @ w1 + b1) @ w2 + b2, parameters created from the seeded generator."""

    w1: Tensor
    b1: Tensor
    w2: Tensor
    b2: Tensor

    @classmethod
    def create(cls, din: int, hidden: int, dout: int) -> MLP:
        def param(*shape: int, fan_in: int) -> Tensor:
            return (randn(*shape) * (1.0 / math.sqrt(fan_in))).detach().requires_grad_(True)

        return cls(
            param(din, hidden, fan_in=din),
            zeros(hidden, requires_grad=True),
            param(hidden, dout, fan_in=hidden),
            zeros(dout, requires_grad=True),
        )

    def parameters(self) -> list[Tensor]:
        return [self.w1, self.b1, self.w2, self.b2]

    def __call__(self, x: Tensor) -> Tensor:
        return (x @ self.w1 + self.b1).tanh() @ self.w2 + self.b2


def train_mlp(
    steps: int = 300,
    lr: float = 1.0,
    hidden: int = 64,
    seed: int = 0,
    log: Callable[[int, float, float], None] | None = None,
    log_every: int = 25,
) -> list[float]:
    """Full-batch SGD on the spirals; returns the loss at every step and calls `log` every few."""
    manual_seed(seed)
    x_np, y_np = spirals(seed=seed)
    x, y = tensor(x_np), tensor(y_np)
    model = MLP.create(2, hidden, 3)
    losses = []
    for step in range(steps):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        with no_grad():
            for p in model.parameters():
                p.assign(p - lr * p.grad)
                p.grad = None
        losses.append(float(loss))
        if log is not None and (step % log_every == 0 or step == steps - 1):
            accuracy = float((logits.argmax(axis=1) == y).cast("f32").mean())
            log(step, losses[-1], accuracy)
    return losses


def run_demo(steps: int = 300) -> int:
    """Print the loss falling as the MLP learns; the `verigrad demo` command."""
    from rich.console import Console

    console = Console()
    console.print(f"[bold]verigrad demo[/]: a 2-64-3 MLP learns 3 spirals (600 points), {steps} SGD steps")
    console.print(f"{'step':>6}  {'loss':>8}  {'accuracy':>8}")
    start = time.perf_counter()
    losses = train_mlp(steps, log=lambda s, loss, acc: console.print(f"{s:>6}  {loss:8.4f}  {acc:8.1%}"))
    elapsed = time.perf_counter() - start
    console.print(
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {elapsed:.1f} s ({steps / elapsed:.0f} steps/s, eager)"
    )
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`demo`."""
    demo = sub.add_parser("demo", help="train a small MLP eagerly and print the loss falling")
    demo.add_argument(
        "--steps", type=step_count, default=300, help=f"SGD steps (default 300; at most {MAX_STEPS})"
    )
    demo.set_defaults(run=lambda args: run_demo(steps=args.steps))
