"""The speed of the compiler itself: tracing, passes, planning, shape checking, and a plan's per-step cost.

Three measurements, each next to a peer, printed in one table with the project's targets:

  1. The CNN training step (`verigrad.models.digits_cnn()`, cross-entropy, backward, Adam; built as
     `verigrad train` builds it with `verigrad.cli.trainer`; batch symbolic) traced, passed through
     `verigrad.ir.passes.optimize` and planned (target: under 20 ms in all). Peer: the same step's first
     call under `torch.compile(dynamic=True)`, with an empty compiler cache and again with the cache that
     call left, each in a fresh process.
  2. `verigrad.check` of a 128-layer MLP whose 129 widths are all different symbols (target: under
     30 ms), and of a GPT-2-small-shaped transformer with symbolic batch and sequence, built inside
     `verigrad.abstract()` (target: under 50 ms). Peer: the times bend-ml reports for its type checks
     of the same two models (0.27 s and 0.38 s; quoted, not measured here).
  3. The per-step overhead of a compiled plan on tiny tensors: the training step (forward, cross-
     entropy, backward, SGD with momentum) of an MLP 4-8-2 at batch 4, in microseconds per kernel call
     (target: under 3): over NumPy's kernels (the reference backend), and over the cpu backend's C
     kernels once the plan replays its recorded calls (ir/replay.py). Peer: PyTorch eager running the
     same step, per aten op it dispatches.

Times are medians of `--repeats` runs after warm-up (spread: fastest and slowest run); everything runs
in this process on one thread except the torch.compile peer.

PyTorch is only needed here, never by verigrad: if it is missing, it is installed (torch==2.13.0).
torch.compile on CPU needs a C++ compiler; where it fails, the table says why.

    python benchmarks/compile_time.py                    # everything (torch.compile takes a minute or more)
    python benchmarks/compile_time.py --no-torch-compile # skip the torch.compile peer
    python benchmarks/compile_time.py --repeats 31
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import console as make_console
from _common import describe_machine, ensure_torch, table, torch_training_step, verigrad
from rich.markup import escape
from rich.table import Table

import verigrad.nn.functional as F
from verigrad import nn
from verigrad.backends import cpu
from verigrad.cli.trainer import make_optimizer, training_step
from verigrad.ir import trace
from verigrad.ir.passes import optimize
from verigrad.ir.plan import Plan, bind
from verigrad.ir.replay import Replay
from verigrad.models import digits_cnn_torch
from verigrad.optim import SGD

CNN_BATCH = 32  # verigrad train's default batch size
BEND_ML = {"mlp": 0.27, "gpt2": 0.38}  # seconds bend-ml reports for its type checks of these models


def timed(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> list[float]:
    """Seconds per call of `fn`, one per repeat, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:.2f} ms"


def spread_ms(seconds: list[float]) -> str:
    return f"{min(seconds) * 1e3:.2f}-{max(seconds) * 1e3:.2f}"


# 1. the CNN training step: trace, passes, plan ----------------------------------------------------
def cnn_step() -> tuple[Callable, tuple]:
    """The training step of `verigrad train` (digits_cnn, cross-entropy, Adam) and its argument specs."""
    verigrad.manual_seed(0)
    model = verigrad.models.digits_cnn()
    step = training_step(model, make_optimizer("adam", model.parameters(), None), nn.CrossEntropyLoss())
    b = verigrad.dims("B")
    return step, (verigrad.spec([b, 1, 8, 8]), verigrad.spec([b], "i64"))


def measure_cnn(repeats: int) -> dict[str, Any]:
    step, specs = cnn_step()
    rng = np.random.default_rng(0)
    x = verigrad.tensor(rng.random((CNN_BATCH, 1, 8, 8), dtype=np.float32))
    y = verigrad.tensor(rng.integers(0, 10, CNN_BATCH))
    stages: dict[str, list[float]] = {"trace": [], "passes": [], "plan": [], "total": [], "first run": []}
    for i in range(repeats + 2):
        t0 = time.perf_counter()
        program = trace(step, *specs)
        t1 = time.perf_counter()
        optimized = optimize(program)
        t2 = time.perf_counter()
        plan = Plan(optimized, bind(optimized, (x, y)), verigrad.get_backend())
        t3 = time.perf_counter()
        plan.run([x.payload, y.payload] + [t.payload.copy() for t in optimized.captured])
        t4 = time.perf_counter()
        if i >= 2:  # the first two are warm-up
            for name, seconds in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t3 - t0, t4 - t3)):
                stages[name].append(seconds)
    return {
        "stages": stages,
        "instructions": (len(program), len(optimized), plan.instructions),
    }


TORCH_CNN_CHILD = r"""
import json, sys, time, traceback
try:
    import torch
    from typing import Any

DIGITS_CNN_TORCH
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = digits_cnn_torch(torch)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(xb, yb):
        logits = model(xb)
        loss = torch.nn.functional.cross_entropy(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    compiled = torch.compile(step, dynamic=True)
    x, y = torch.rand(BATCH, 1, 8, 8), torch.randint(0, 10, (BATCH,))
    start = time.perf_counter()
    compiled(x, y)
    first = time.perf_counter() - start
    start = time.perf_counter()
    compiled(x, y)
    second = time.perf_counter() - start
    print("RESULT " + json.dumps({"first": first, "second": second}))
except Exception as e:
    lines = [ln for ln in traceback.format_exception_only(type(e), e) if ln.strip()]
    print("RESULT " + json.dumps({"error": lines[-1].strip()[:300]}))
"""
TORCH_CNN_CHILD = TORCH_CNN_CHILD.replace("BATCH", str(CNN_BATCH)).replace(
    "DIGITS_CNN_TORCH", textwrap.indent(inspect.getsource(digits_cnn_torch), "    ")
)  # the child builds the CNN with verigrad's own definition, without importing verigrad


def torch_compile_first_call(cache_dir: str, timeout: float) -> dict[str, Any]:
    """The CNN step's first torch.compile call in a fresh process using `cache_dir` as its cache."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
    try:
        done = subprocess.run(
            [sys.executable, "-c", TORCH_CNN_CHILD],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout:.0f} s"}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"exit status {done.returncode}: {tail[:300]}"}


# 2. check: a 128-layer MLP with 129 symbolic widths, and GPT-2 small ------------------------------
def build_mlp(widths: tuple) -> nn.Module:
    layers: list[nn.Module] = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Block(nn.Module):
    """A GPT-2 block: pre-norm causal self-attention and a GELU (tanh) MLP, each with a residual."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x: verigrad.Tensor, mask: verigrad.Tensor) -> verigrad.Tensor:
        b, t, c = x.shape
        hd = c // self.heads
        qkv = self.c_attn(self.ln_1(x))
        q, k, v = (
            qkv[..., i * c : (i + 1) * c].reshape(b, t, self.heads, hd).transpose(1, 2) for i in range(3)
        )
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = verigrad.where(mask, att, -math.inf).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    """GPT-2 small's shapes: 12 layers, d_model 768, 12 heads, vocabulary 50257, context 1024; the
    LM head is the token embedding (tied)."""

    def __init__(
        self, vocab: int = 50257, context: int = 1024, d: int = 768, heads: int = 12, layers: int = 12
    ):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.h = nn.ModuleList(*[Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx: verigrad.Tensor) -> verigrad.Tensor:
        _, t = idx.shape
        pos = verigrad.arange(t)
        mask = pos.reshape(1, t) <= pos.reshape(t, 1)  # row i sees columns 0..i
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x, mask)
        return self.ln_f(x) @ self.wte.weight.T


def measure_checks(repeats: int) -> dict[str, Any]:
    widths = verigrad.dims(" ".join(f"d{i}" for i in range(129)))
    n = verigrad.dims("n")
    b, t = verigrad.dims("B T")

    def build_mlp_abstract() -> nn.Module:
        with verigrad.abstract():
            return build_mlp(widths)

    def build_gpt2_abstract() -> nn.Module:
        with verigrad.abstract():
            return GPT2()

    mlp, gpt2 = build_mlp_abstract(), build_gpt2_abstract()
    x_mlp, x_gpt = verigrad.spec([n, widths[0]]), verigrad.spec([b, t], "i64")
    return {
        "mlp_out": verigrad.check(mlp, x_mlp),
        "gpt2_out": verigrad.check(gpt2, x_gpt),
        "mlp_check": timed(lambda: verigrad.check(mlp, x_mlp), repeats),
        "mlp_build": timed(build_mlp_abstract, repeats),
        "gpt2_check": timed(lambda: verigrad.check(gpt2, x_gpt), repeats),
        "gpt2_build": timed(build_gpt2_abstract, repeats),
    }


# 3. per-step overhead of a plan on tiny tensors ---------------------------------------------------
MLP_BATCH, LR, MOMENTUM = 4, 0.1, 0.9


def tiny_step() -> tuple[Callable, Any, Any, dict]:
    verigrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    step = training_step(model, optimizer, nn.CrossEntropyLoss())
    return step, model, optimizer, {k: v.numpy().copy() for k, v in model.state_dict().items()}


def measure_overhead(torch: Any, repeats: int, calls: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    x_np, y_np = rng.random((MLP_BATCH, 4), dtype=np.float32), rng.integers(0, 2, MLP_BATCH)
    x, y = verigrad.tensor(x_np), verigrad.tensor(y_np)

    step, _, _, state = tiny_step()
    program = optimize(trace(step, verigrad.spec(["B", 4]), verigrad.spec(["B"], "i64")))
    values = bind(program, (x, y))
    arrays = [x.payload, y.payload] + [t.payload for t in program.captured]
    generated = Plan(program, values, verigrad.get_backend())
    looping = Plan(program, values, verigrad.get_backend())
    looping.generate_after = math.inf  # stays in its loop over the steps
    replayed = Plan(program, values, cpu.cpu)  # the cpu backend's kernels, replayed (ir/replay.py)

    def runs(plan: Plan) -> Callable[[], None]:
        def run() -> None:
            for _ in range(calls):
                plan.run(arrays)

        return run

    step2, _, _, _ = tiny_step()
    compiled = verigrad.compile(step2)

    def run_compiled() -> None:
        for _ in range(calls):
            compiled(x, y)

    warmup = math.ceil((generated.generate_after + 2) / calls)  # past the plan's generation
    plan_s = [s / calls for s in timed(runs(generated), repeats, warmup=warmup)]
    loop_s = [s / calls for s in timed(runs(looping), repeats, warmup=warmup)]
    compiled_s = [s / calls for s in timed(run_compiled, repeats, warmup=warmup)]
    replay_s = [s / calls for s in timed(runs(replayed), repeats, warmup=warmup)]
    assert generated.source is not None and looping.source is None
    recorded = replayed._replay
    replayed_steps = recorded.kinds.count("replay") if isinstance(recorded, Replay) else 0

    # PyTorch eager, the same step from the same weights; its op count is what reaches the dispatcher
    torch.set_num_threads(1)
    tnn = torch.nn
    model = tnn.Sequential(tnn.Linear(4, 8), tnn.ReLU(), tnn.Linear(8, 2))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    torch_step = torch_training_step(torch, model, optimizer, torch.from_numpy(x_np), torch.from_numpy(y_np))

    def run_torch() -> None:
        for _ in range(calls):
            torch_step()

    torch_s = [s / calls for s in timed(run_torch, repeats, warmup=5)]
    return {
        "plan": plan_s,
        "loop": loop_s,
        "compiled": compiled_s,
        "replay": replay_s,
        "replay_steps": (len(replayed.calls), replayed_steps),
        "torch": torch_s,
        "steps": generated.instructions,
        "instructions": len(program),
        "torch_ops": count_torch_ops(torch, torch_step),
    }


def count_torch_ops(torch: Any, fn: Callable[[], None]) -> int | None:
    """The aten ops one call of `fn` dispatches (forward, backward and optimizer), or None."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        return None

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


# the table -----------------------------------------------------------------------------------------
def us(seconds: list[float], per: int) -> str:
    return f"{statistics.median(seconds) * 1e6 / per:.2f} µs"


def verdict(value: float, target: float) -> str:
    return "yes" if value < target else "NO"


def make_table(cnn: dict, checks: dict, overhead: dict, torch_compile: dict | None, repeats: int) -> Table:
    summary = table(
        f"Speed of the compiler: medians of {repeats} runs (spread: fastest-slowest)",
        ["measurement", "verigrad", "spread", "target", "met", "peer", "peer value"],
        left=("measurement", "peer"),
        center=("met",),
    )

    def row(measurement: str, seconds: list[float] | None = None, *rest: str) -> None:
        cells = [measurement, ms(seconds), spread_ms(seconds)] if seconds else [measurement, "", ""]
        cells += list(rest) + [""] * (4 - len(rest))
        summary.add_row(*(escape(c) for c in cells))  # sizes print as [B, T, ...]: not rich markup

    st = cnn["stages"]
    raw, optimized, steps = cnn["instructions"]
    if torch_compile is None:
        cold, warm = ("torch.compile first call", "not run (--no-torch-compile)"), ("", "")
    else:
        cold = ("torch.compile, first call, empty cache", _seconds_or_error(torch_compile["cold"]))
        warm = ("torch.compile, first call, warm cache", _seconds_or_error(torch_compile["warm"]))
    row(f"CNN training step (digits_cnn, Adam, batch B): {raw} instructions traced")
    row("  trace", st["trace"])
    row(f"  passes (-> {optimized} instructions)", st["passes"])
    row(f"  plan (-> {steps} kernel calls)", st["plan"])
    total = statistics.median(st["total"])
    row("  trace + passes + plan", st["total"], "< 20 ms", verdict(total, 0.020), *cold)
    row(f"  first run of the plan (checked; batch {CNN_BATCH})", st["first run"], "", "", *warm)
    summary.add_section()

    mlp, gpt = statistics.median(checks["mlp_check"]), statistics.median(checks["gpt2_check"])
    peer = "bend-ml type check (reported)"
    out = checks["mlp_out"]
    row(
        f"check: 128-layer MLP, 129 symbolic widths -> {out}",
        checks["mlp_check"],
        "< 30 ms",
        verdict(mlp, 0.030),
        peer,
        f"{BEND_ML['mlp']:.2f} s",
    )
    row("  building the MLP in abstract()", checks["mlp_build"])
    out = checks["gpt2_out"]
    row(
        f"check: GPT-2 small, symbolic B, T -> {out}",
        checks["gpt2_check"],
        "< 50 ms",
        verdict(gpt, 0.050),
        peer,
        f"{BEND_ML['gpt2']:.2f} s",
    )
    row("  building GPT-2 in abstract()", checks["gpt2_build"])
    summary.add_section()

    steps, instrs, ops = overhead["steps"], overhead["instructions"], overhead["torch_ops"]
    plan_step, compiled_step = statistics.median(overhead["plan"]), statistics.median(overhead["compiled"])
    torch_step = statistics.median(overhead["torch"])
    summary.add_row(
        f"MLP 4-8-2 step (SGD), batch {MLP_BATCH}, reference backend: Plan.run, per kernel call"
        f" ({steps} calls)",
        us(overhead["plan"], steps),
        f"step {plan_step * 1e6:.0f} µs",
        "< 3 µs",
        verdict(plan_step / steps, 3e-6),
        f"torch eager, per aten op ({ops} ops)",
        us(overhead["torch"], ops) if ops else "n/a",
    )
    summary.add_row(
        f"  per instruction of the optimized program ({instrs})",
        us(overhead["plan"], instrs),
        "",
        "",
        "",
        "torch eager, whole step",
        f"{torch_step * 1e6:.0f} µs",
    )
    summary.add_row(
        f"  the same plan before it is generated (its first {Plan.generate_after} runs), per kernel call",
        us(overhead["loop"], steps),
        f"step {statistics.median(overhead['loop']) * 1e6:.0f} µs",
    )
    summary.add_row(
        "  through verigrad.compile (bind, run, write-back), per kernel call",
        us(overhead["compiled"], steps),
        f"step {compiled_step * 1e6:.0f} µs",
    )
    calls, replayed = overhead["replay_steps"]
    summary.add_row(
        f"  the step's plan on the cpu backend, replayed ({replayed} of {calls} calls recorded), per call",
        us(overhead["replay"], calls),
        f"step {statistics.median(overhead['replay']) * 1e6:.0f} µs",
        "< 3 µs",
        verdict(statistics.median(overhead["replay"]) / calls, 3e-6),
    )
    return summary


def _seconds_or_error(result: dict) -> str:
    if "error" in result:
        return f"failed: {result['error']}"
    return f"{result['first']:.1f} s"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per measurement (default 15)")
    parser.add_argument(
        "--calls",
        type=int,
        default=200,
        help="plan runs per timed run of the per-step overhead (default 200)",
    )
    parser.add_argument("--no-torch-compile", action="store_true", help="skip the torch.compile peer")
    parser.add_argument(
        "--torch-timeout", type=float, default=900, help="seconds allowed for each torch.compile call"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.calls < 1:
        parser.error("--repeats and --calls must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch = ensure_torch()
    console = make_console(200)
    console.print(describe_machine(torch))
    verigrad.set_threads(1)
    cnn = measure_cnn(args.repeats)
    console.print("  CNN step traced, passed and planned", style="dim")
    checks = measure_checks(args.repeats)
    console.print("  checks done", style="dim")
    with verigrad.backend("reference"):  # the plan's own cost, over NumPy's kernels (the cpu backend's
        overhead = measure_overhead(torch, args.repeats, args.calls)  # C wrappers cost more on tiny arrays)
    console.print("  per-step overhead done", style="dim")
    torch_compile = None
    if not args.no_torch_compile:
        with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
            console.print("  torch.compile, empty cache (a minute or more)...", style="dim")
            cold = torch_compile_first_call(cache, args.torch_timeout)
            console.print("  torch.compile, warm cache...", style="dim")
            warm = torch_compile_first_call(cache, args.torch_timeout)
        torch_compile = {"cold": cold, "warm": warm}
    console.print(make_table(cnn, checks, overhead, torch_compile, args.repeats))
    console.print(
        "The CNN stages are timed one after the other on the same programs; the plan's first run is not in "
        "the total (torch.compile's first call includes running the step once). The per-step rows time "
        f"{args.calls} consecutive calls per run, on inputs that do not change (the plans are not written "
        "back); torch's step is per aten op its dispatcher sees (forward, backward and optimizer)."
    )


if __name__ == "__main__":
    main()
