"""Microseconds per eager op call, and milliseconds per eager training step of a small GPT: verigrad
against PyTorch, on one thread.

The small ops run on 64x64 f32 tensors (`--size`), each three ways: without autograd (inputs that do not
require grad), the forward call on inputs that require grad (it records the tape), and forward and
backward of a tiny chain (`op(x).sum().backward()`, the gradients cleared first). The training step is
one forward pass, cross-entropy, backward pass and AdamW update of a GPT (2 layers, d=64, 4 heads,
T=32, batch 4, vocab 256) written once against the PyTorch API and run with `torch`, `nn` and `F` bound
to verigrad's and to PyTorch's, from the same initial weights. Each time is the median over `--repeats`
timed runs; verigrad and PyTorch take turns within each repeat (the machine's load falls on both), and
on one thread the clock is the calling thread's CPU time.

PyTorch is only needed here: if it is missing, it is installed (torch==2.13.0).

    python benchmarks/eager.py                  # every op, then the GPT step
    python benchmarks/eager.py --ops add,sum --no-gpt --repeats 15
    python benchmarks/eager.py --python-calls   # with verigrad's eager calls in Python (no vg_eager)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import console, describe_machine, ensure_torch, median_ms, set_threads, table, verigrad
from rich.table import Table

import verigrad.nn as vg_nn
import verigrad.nn.functional as vg_F

# the small ops, each written once against the PyTorch API: (torch, F, x, y) -> result
OPS: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "add": lambda torch, F, x, y: x + y,
    "mul": lambda torch, F, x, y: x * y,
    "sub": lambda torch, F, x, y: x - y,
    "div by scalar": lambda torch, F, x, y: x / 3.0,
    "relu": lambda torch, F, x, y: torch.relu(x),
    "exp": lambda torch, F, x, y: torch.exp(x),
    "tanh": lambda torch, F, x, y: torch.tanh(x),
    "sum": lambda torch, F, x, y: x.sum(),
    "mean": lambda torch, F, x, y: x.mean(),
    "sum(dim)": lambda torch, F, x, y: x.sum(dim=1),
    "matmul": lambda torch, F, x, y: x @ y,
    "reshape": lambda torch, F, x, y: x.reshape(-1, 2 * x.shape[1]),
    "transpose": lambda torch, F, x, y: x.transpose(0, 1),
    "getitem slice": lambda torch, F, x, y: x[:, 1:33],
    "softmax": lambda torch, F, x, y: F.softmax(x, dim=-1),
    "cat": lambda torch, F, x, y: torch.cat([x, y], dim=0),
}
MODES = ("no grad", "grad, forward", "forward+backward")


def op_runner(torch: Any, F: Any, op: Callable, x: Any, y: Any, mode: str) -> Callable[[], Any]:
    """One call of `op` in `mode` (see MODES), on `torch`'s tensors made from the arrays x and y."""
    tx, ty = torch.tensor(x), torch.tensor(y)
    if mode == "no grad":
        return lambda: op(torch, F, tx, ty)
    tx.requires_grad_(True)
    ty.requires_grad_(True)
    if mode == "grad, forward":
        return lambda: op(torch, F, tx, ty)

    def chain() -> None:
        tx.grad = ty.grad = None
        op(torch, F, tx, ty).sum().backward()

    return chain


def gpt(
    torch: Any, nn: Any, F: Any, vocab: int, d: int, heads: int, layers: int, T: int, gelu: str = "none"
) -> Any:
    """A nanoGPT-style decoder written against the PyTorch API of (torch, nn, F); `gelu` is the MLP's
    GELU's `approximate` ("none": erf, as nanoGPT's nn.GELU())."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

        def forward(self, x: Any) -> Any:
            B, L, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q = q.view(B, L, heads, C // heads).transpose(1, 2)
            k = k.view(B, L, heads, C // heads).transpose(1, 2)
            v = v.view(B, L, heads, C // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // heads))
            att = att.masked_fill(self.mask[:, :, :L, :L] == 0, float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, L, C)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate=gelu))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, idx: Any) -> Any:
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


def gpt_step(
    torch: Any, nn: Any, F: Any, state: dict | None, args: argparse.Namespace
) -> tuple[Callable, dict]:
    """A training step (forward, cross-entropy, backward, AdamW) of the GPT on fixed random tokens, and
    the model's state (the initial weights: PyTorch's, copied into verigrad's model)."""
    model = gpt(torch, nn, F, args.vocab, args.d, args.heads, args.layers, args.T, args.gelu)
    if state is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    rng = np.random.default_rng(0)
    idx = torch.tensor(rng.integers(0, args.vocab, (args.batch, args.T)))
    target = torch.tensor(rng.integers(0, args.vocab, (args.batch, args.T)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> float:
        loss = F.cross_entropy(model(idx).view(-1, args.vocab), target.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    return step, {k: np.array(v.detach().numpy()) for k, v in model.state_dict().items()}


def us(ms: float) -> str:
    return f"{ms * 1e3:.2f}"


def run_ops(args: argparse.Namespace, torch: Any) -> Table:
    out = table(
        f"us per call, {args.size}x{args.size} f32, 1 thread; median of {args.repeats} runs of {args.calls}",
        ["op", "mode", "verigrad us", "torch us", "verigrad / torch"],
        left=("op", "mode"),
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.size, args.size), dtype=np.float32)
    y = rng.standard_normal((args.size, args.size), dtype=np.float32)
    for name in args.ops:
        for i, mode in enumerate(MODES):
            ways = {
                "verigrad": op_runner(verigrad, vg_F, OPS[name], x, y, mode),
                "torch": op_runner(torch, torch.nn.functional, OPS[name], x, y, mode),
            }
            med = median_ms(ways, args.repeats, args.calls, 1)
            ratio = med["verigrad"] / med["torch"]
            out.add_row(name if i == 0 else "", mode, us(med["verigrad"]), us(med["torch"]), f"{ratio:.2f}x")
    return out


def run_gpt(args: argparse.Namespace, torch: Any) -> Table:
    out = table(
        f"ms per eager GPT training step (forward, backward, AdamW): {args.layers} layers, d={args.d}, "
        f"{args.heads} heads, T={args.T}, batch {args.batch}, vocab {args.vocab}, GELU {args.gelu}; "
        f"1 thread, median of {args.repeats} runs of {args.steps}",
        ["framework", "first loss", "median ms", "verigrad / torch"],
        left=("framework",),
    )
    torch.manual_seed(0)
    torch_run, state = gpt_step(torch, torch.nn, torch.nn.functional, None, args)
    verigrad_run, _ = gpt_step(verigrad, vg_nn, vg_F, state, args)
    first = {"verigrad": verigrad_run(), "torch": torch_run()}  # the same weights: the same first loss
    med = median_ms({"verigrad": verigrad_run, "torch": torch_run}, args.repeats, args.steps, 1)
    for way in ("verigrad", "torch"):
        out.add_row(way, f"{first[way]:.6f}", f"{med[way]:.3f}", f"{med[way] / med['torch']:.2f}x")
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default=",".join(OPS), help="comma-separated ops (default: all)")
    parser.add_argument("--size", type=int, default=64, help="the ops' tensors are size x size (default 64)")
    parser.add_argument("--repeats", type=int, default=9, help="timed runs per measurement (default 9)")
    parser.add_argument("--calls", type=int, default=200, help="op calls per timed run (default 200)")
    parser.add_argument("--steps", type=int, default=5, help="GPT steps per timed run (default 5)")
    parser.add_argument("--no-ops", action="store_true", help="skip the small ops")
    parser.add_argument("--no-gpt", action="store_true", help="skip the GPT training step")
    parser.add_argument(
        "--python-calls", action="store_true", help="eager calls in Python, not vg_eager's C (docs/eager.md)"
    )
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--T", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument(
        "--gelu", choices=("none", "tanh"), default="none", help="the GELU's approximate (default none: erf)"
    )
    args = parser.parse_args(argv)
    args.ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    unknown = [o for o in args.ops if o not in OPS]
    if unknown:
        parser.error(f"--ops takes names from {', '.join(OPS)}; got {', '.join(unknown)}")
    if min(args.size, args.repeats, args.calls, args.steps, args.layers, args.d, args.heads, args.T) < 1:
        parser.error("sizes, counts and repeats must be at least 1")
    if args.d % args.heads:
        parser.error("--d must be a multiple of --heads")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch = ensure_torch()
    out = console(110)
    out.print(describe_machine(torch))
    set_threads(torch, 1)
    verigrad.ones(1) + 1.0  # the cpu backend loaded: vg_eager bound where it can be
    calls = verigrad.eager.c_calls(not args.python_calls)
    out.print(f"verigrad's eager calls: {'vg_eager (C)' if calls and not args.python_calls else 'Python'}")
    if not args.no_ops:
        out.print(run_ops(args, torch))
    if not args.no_gpt:
        out.print(run_gpt(args, torch))
    out.print("verigrad / torch: the ratio of the medians (above 1: verigrad is slower)")


if __name__ == "__main__":
    main()
