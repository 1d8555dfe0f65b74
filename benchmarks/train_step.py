"""Milliseconds per training step (forward, backward, optimizer update): verigrad against PyTorch eager.

Workloads, all f32 with batch 64, random inputs and 10 classes, trained on a cross-entropy loss with
Adam (lr 1e-3; `--optimizer sgd`: SGD with momentum 0.9, lr 0.01):

  cnn-28x28  verigrad.models.digits_cnn(28, 28) (conv-relu-pool twice, then a linear layer)
  cnn-8x8    the same CNN on 8x8 images (the shipped digits' size)
  mlp        784-256-10 with a ReLU

Each is run by every backend in `verigrad.available_backends()` and by PyTorch, at each thread count
(`verigrad.set_threads(n)`, `torch.set_num_threads(n)`), in this one process, from the same initial
weights. After warm-up steps, `--steps` steps are timed together, `--repeats` times; the frameworks
take turns within each repeat, so that a change in the machine's load falls on all of them, and each
timed run starts after a short pause and one untimed step (see `ms_per_call` in _common.py). The table
gives the median over the repeats and their spread (min-max), and the ratio of the medians.

PyTorch is only needed here, never by verigrad: if it is missing, it is installed (torch==2.13.0).

    python benchmarks/train_step.py                   # 5 repeats of 20 steps, 1 and 2 threads
    python benchmarks/train_step.py --quick           # a fast look: 3 repeats of 5 steps
    python benchmarks/train_step.py --threads 1 --repeats 9 --steps 50
    python benchmarks/train_step.py --backends cpu --workloads cnn-8x8,mlp
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from _common import console as make_console
from _common import (
    describe_machine,
    ensure_torch,
    ms_in_turns,
    positive_ints,
    set_threads,
    table,
    torch_training_step,
    verigrad,
)
from rich.console import Console
from rich.table import Table

from verigrad import optim as verigrad_optim
from verigrad.cli.trainer import training_step
from verigrad.models import digits_cnn, digits_cnn_torch
from verigrad.nn import CrossEntropyLoss, Linear, ReLU, Sequential

BATCH = 64
CLASSES = 10
SGD_LR, MOMENTUM = 0.01, 0.9
ADAM_LR = 1e-3
OPTIMIZERS = ("adam", "sgd")


@dataclass
class Workload:
    name: str
    input_shape: tuple[int, ...]
    build_verigrad: Callable[[], Any]
    build_torch: Callable[[Any], Any]


def workloads() -> list[Workload]:
    return [
        Workload(
            "cnn-28x28", (BATCH, 1, 28, 28), lambda: digits_cnn(28, 28), lambda t: digits_cnn_torch(t, 28, 28)
        ),
        Workload("cnn-8x8", (BATCH, 1, 8, 8), lambda: digits_cnn(8, 8), lambda t: digits_cnn_torch(t, 8, 8)),
        Workload(
            "mlp",
            (BATCH, 784),
            lambda: Sequential(Linear(784, 256), ReLU(), Linear(256, CLASSES)),
            lambda t: t.nn.Sequential(t.nn.Linear(784, 256), t.nn.ReLU(), t.nn.Linear(256, CLASSES)),
        ),
    ]


def make_optimizer(optim: Any, name: str, parameters: Any) -> Any:
    """`name`'s optimizer from `optim` (verigrad.optim or torch.optim), with this benchmark's settings."""
    if name == "adam":
        return optim.Adam(parameters, lr=ADAM_LR)
    return optim.SGD(parameters, lr=SGD_LR, momentum=MOMENTUM)


def verigrad_step(
    workload: Workload,
    backend: str,
    x: np.ndarray,
    y: np.ndarray,
    compiled: bool = False,
    optimizer_name: str = "adam",
) -> tuple[Callable, Any]:
    """A function that runs one training step on `backend` (eagerly, or through `verigrad.compile`),
    and the model's initial state."""
    verigrad.manual_seed(0)
    with verigrad.backend(backend):
        model = workload.build_verigrad()
    optimizer = make_optimizer(verigrad_optim, optimizer_name, model.parameters())
    xt, yt = verigrad.tensor(x), verigrad.tensor(y)
    train_step = training_step(model, optimizer, CrossEntropyLoss())
    run = verigrad.compile(train_step) if compiled else train_step

    def step() -> None:
        with verigrad.backend(backend):
            run(xt, yt)

    return step, model.state_dict()


def torch_step(
    torch: Any, workload: Workload, state: dict, x: np.ndarray, y: np.ndarray, optimizer_name: str = "adam"
) -> Callable:
    """One PyTorch eager training step, from the same initial weights as verigrad's model."""
    model = workload.build_torch(torch)
    model.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in state.items()})
    optimizer = make_optimizer(torch.optim, optimizer_name, model.parameters())
    return torch_training_step(torch, model, optimizer, torch.from_numpy(x), torch.from_numpy(y))


def run(args: argparse.Namespace, torch: Any, console: Console) -> Table:
    update = "Adam" if args.optimizer == "adam" else "SGD (momentum)"
    out = table(
        f"ms per training step (forward + backward + {update} update), f32, batch {BATCH}; "
        f"median of {args.repeats} x {args.steps} steps",
        ["workload", "threads", "framework", "median ms", "spread ms (min-max)", "ratio vs torch"],
        left=("workload", "framework"),
        no_wrap=True,
    )
    rng = np.random.default_rng(0)
    for workload in [w for w in workloads() if w.name in args.workloads]:
        x = rng.random(workload.input_shape, dtype=np.float32)
        y = rng.integers(0, CLASSES, BATCH)
        for n in args.threads:
            set_threads(torch, n)
            runners: dict[str, Callable] = {}
            for backend in args.backends:
                step, state = verigrad_step(workload, backend, x, y, False, args.optimizer)
                runners[f"verigrad ({backend})"] = step
                runners[f"verigrad ({backend}, compiled)"], _ = verigrad_step(
                    workload, backend, x, y, True, args.optimizer
                )
            runners["torch (eager)"] = torch_step(torch, workload, state, x, y, args.optimizer)
            for step in runners.values():
                for _ in range(args.warmup):
                    step()
            times = ms_in_turns(runners, args.repeats, args.steps, args.pause)
            base = statistics.median(times["torch (eager)"])
            for i, (name, ms) in enumerate(times.items()):
                median = statistics.median(ms)
                ratio = f"{median / base:.1f}x" if name.startswith("verigrad") else "1.0x"
                out.add_row(
                    workload.name if i == 0 and n == args.threads[0] else "",
                    str(n) if i == 0 else "",
                    name,
                    f"{median:.2f}",
                    f"{min(ms):.2f}-{max(ms):.2f}",
                    ratio,
                )
            console.print(f"  {workload.name}, {n} thread(s): done", style="dim")
        out.add_section()
    return out


def names(parser: argparse.ArgumentParser, text: str | None, known: list[str], what: str) -> list[str]:
    """Comma-separated names from `known` (all of them when `text` is None; a parser error otherwise)."""
    if text is None:
        return list(known)
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in known]
    if unknown or not chosen:
        parser.error(f"{what} takes names from {', '.join(known)}; got {text!r}")
    return chosen


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (default 5)")
    parser.add_argument("--steps", type=int, default=20, help="training steps per timed run (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument(
        "--threads", default="1,2", help="comma-separated thread counts to measure (default 1,2)"
    )
    parser.add_argument(
        "--pause", type=float, default=0.3, help="seconds idle before each timed run (default 0.3)"
    )
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adam", help="the update (default adam)")
    parser.add_argument(
        "--backends", default=None, help="comma-separated verigrad backends (default: every available one)"
    )
    parser.add_argument(
        "--workloads", default=None, help="comma-separated workloads (default: cnn-28x28,cnn-8x8,mlp)"
    )
    parser.add_argument("--quick", action="store_true", help="3 repeats of 5 steps, 1 warm-up step")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.steps, args.warmup = 3, 5, 1
    args.threads = positive_ints(parser, args.threads, "--threads")
    args.backends = names(parser, args.backends, verigrad.available_backends(), "--backends")
    args.workloads = names(parser, args.workloads, [w.name for w in workloads()], "--workloads")
    if args.repeats < 1 or args.steps < 1 or args.warmup < 0:
        parser.error("--repeats and --steps must be at least 1, --warmup at least 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch = ensure_torch()
    console = make_console(120)
    console.print(describe_machine(torch))
    table = run(args, torch, console)
    console.print(table)
    console.print(
        "ratio: verigrad's median / PyTorch's median at the same thread count (above 1: verigrad is slower)"
    )


if __name__ == "__main__":
    main()
