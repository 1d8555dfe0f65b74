"""Tokens per second and peak memory of a GPT's training step: verigrad (eager and compiled) against
PyTorch (eager and `torch.compile`), at 1 and 2 threads.

The model is one GPT file written against the `torch` namespace and run unchanged on both frameworks
(`import verigrad as torch`): pre-norm blocks of causal self-attention
(`F.scaled_dot_product_attention(q, k, v, is_causal=True)`) and a GELU MLP, learned positions, the
embedding tied to the head, AdamW (weight decay 0.1, lr 3e-4), cross-entropy on random tokens; f32.

  small  ~1.3M parameters: 4 layers, width 128, 4 heads, context 128, vocabulary 4096, batch 8
  base   ~10M parameters:  6 layers, width 320, 5 heads, context 256, vocabulary 8192, batch 8
  lora   SmolLM2-135M-Instruct (its Q4_1 GGUF, from verigrad's cache: `verigrad fetch smollm2`) with LoRA
         adapters (r 8, alpha 16, q_proj and v_proj), one sequence of 256 tokens, the loss on its second
         half (an answer), AdamW on the adapters, clipping at 1: verigrad's `verigrad finetune` step on the
         quantized base against the same LoRA in PyTorch (tests/parity/test_finetune_torch.py) on the
         de-quantized f32 weights

Each (size, threads, way) runs in a fresh subprocess, so that its peak resident memory (`getrusage`'s
maxrss, which includes the interpreter and the framework's libraries: the "idle" rows give that floor
for an import of each framework alone) is its own: the models start from the same seed-0 state dict
(GPT-2's initialization, loaded into both). After `--warmup` untimed steps, each of `--repeats` timed runs
times `--steps` steps; the table gives tokens/s from the median run, the spread, the ratio to PyTorch
eager at the same thread count, and, for the compiled ways, the first call's time (tracing or
torch.compile's code generation).

    python benchmarks/lm_train.py                       # both sizes, 1 and 2 threads, every way
    python benchmarks/lm_train.py --sizes small --threads 1 --no-torch-compile
    python benchmarks/lm_train.py --sizes lora --steps 1 --repeats 3 --warmup 1
    python benchmarks/lm_train.py --profile             # cProfile of verigrad's eager step (small)
    python benchmarks/lm_train.py --attention           # the small GPT's attention kernels against PyTorch's
    python benchmarks/lm_train.py --attention --sizes small,base  # and the base GPT's (context 256)
    python benchmarks/lm_train.py --matmul              # the small GPT's products and loss against PyTorch's
    python benchmarks/lm_train.py --compiled            # its compiled step against its eager one, one process
    python benchmarks/lm_train.py --compiled --sizes base --threads 1 --repeats 9 --steps 1  # the 10.1M GPT's
    python benchmarks/lm_train.py --kernels             # its compiled step's kernels on 1 and 2 threads
    python benchmarks/lm_train.py --sizes lora --profile --steps 1   # the same three for the LoRA step
    python benchmarks/lm_train.py --sizes lora --kernels --repeats 1
    python benchmarks/lm_train.py --sizes lora --matmul --repeats 5  # its products and attention
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _common import console as make_console
from _common import describe_machine, positive_ints, table


@dataclass(frozen=True)
class Size:
    layers: int
    width: int
    heads: int
    context: int
    vocab: int
    batch: int = 8


SIZES = {"small": Size(4, 128, 4, 128, 4096), "base": Size(6, 320, 5, 256, 8192)}
LORA = "lora"  # SmolLM2's LoRA step, measured by `measure_lora`
LORA_TOKENS, LORA_RANK, LORA_ALPHA, LORA_TARGETS = 256, 8, 16.0, ("q_proj", "v_proj")
WAYS = ("verigrad eager", "verigrad compiled", "torch eager", "torch.compile")
LR, WEIGHT_DECAY = 3e-4, 0.1


def gpt(torch: Any, size: Size) -> Any:
    """The GPT of `size`, written with `torch`'s namespace (PyTorch's or verigrad's)."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            w = size.width
            self.ln1, self.ln2 = nn.LayerNorm(w), nn.LayerNorm(w)
            self.qkv, self.proj = nn.Linear(w, 3 * w), nn.Linear(w, w)
            self.up, self.down = nn.Linear(w, 4 * w), nn.Linear(4 * w, w)

        def forward(self, x: Any) -> Any:
            b, t, w = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(w, dim=2)
            q, k, v = (z.view(b, t, size.heads, w // size.heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, w))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(size.vocab, size.width)
            self.positions = nn.Embedding(size.context, size.width)
            self.blocks = nn.ModuleList([Block() for _ in range(size.layers)])
            self.ln = nn.LayerNorm(size.width)

        def forward(self, idx: Any) -> Any:
            x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.ln(x) @ self.tokens.weight.t()

    return GPT()


def train_step(torch: Any, model: Any) -> Any:
    """step(x, y): cross-entropy of model(x) against y, backward and an AdamW update; returns the loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    F = torch.nn.functional

    def step(x: Any, y: Any) -> Any:
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def state_dict(size: Size) -> dict[str, np.ndarray]:
    """GPT-2's initial weights as arrays, from seed 0: N(0, 0.02) matrices and embeddings, zero biases,
    the layer norms' ones and zeros (PyTorch's N(0, 1) embeddings, tied to the head, would give logits
    of spread ~sqrt(width), probabilities below f32's normal range and a step slowed by subnormals)."""
    import verigrad

    rng = np.random.default_rng(0)
    out = {}
    for name, value in gpt(verigrad, size).state_dict().items():
        v = value.numpy()
        if ".ln" in name or name.startswith("ln."):
            out[name] = v.copy()
        elif name.endswith("bias"):
            out[name] = np.zeros_like(v)
        else:
            out[name] = (rng.standard_normal(v.shape) * 0.02).astype(np.float32)
    return out


def batch(size: Size) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, size.vocab, (size.batch, size.context + 1))
    return tokens[:, :-1].copy(), tokens[:, 1:].copy()


def measure(size_name: str, way: str, threads: int, args: argparse.Namespace) -> dict[str, Any]:
    """One configuration, in this process: the first call's seconds, each timed run's tokens/s, and
    the peak resident memory in MiB."""
    if way == "idle verigrad" or way == "idle torch":
        __import__(way.split()[1])
        return {"peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if size_name == LORA:
        step, xt, yt, tokens = lora_step(way, threads)
        return timed(step, xt, yt, tokens, threads, args)
    size = SIZES[size_name]
    weights, (x, y) = state_dict(size), batch(size)
    if way.startswith("verigrad"):
        import verigrad as torch

        torch.set_threads(threads)
        model = gpt(torch, size)
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
        step = train_step(torch, model)
        if way == "verigrad compiled":
            step = torch.compile(step)
    else:
        import torch  # type: ignore[no-redef]

        torch.set_num_threads(threads)
        model = gpt(torch, size)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        step = train_step(torch, model)
        if way == "torch.compile":
            step = torch.compile(step)
    return timed(step, torch.from_numpy(x), torch.from_numpy(y), size.batch * size.context, threads, args)


def lora_step(way: str, threads: int) -> tuple[Any, Any, Any, int]:
    """SmolLM2's LoRA training step for `way`, its inputs and the tokens it reads."""
    from verigrad.models.fetch import model_path

    path = model_path("smollm2")
    if not path.is_file():
        raise SystemExit(f"no {path}: run `verigrad fetch smollm2` first")
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 49152, (1, 1, LORA_TOKENS))
    targets = np.roll(ids, -1, axis=-1)
    targets[..., : LORA_TOKENS // 2] = -100  # the prompt's half: no loss
    if way.startswith("verigrad"):
        import verigrad
        from verigrad.cli import finetune_trainer as ft
        from verigrad.models.llama import Llama
        from verigrad.models.lora import add_lora

        verigrad.set_threads(threads)
        verigrad.manual_seed(0)
        model = add_lora(Llama.from_gguf(path, activations="f32"), LORA_TARGETS, LORA_RANK, LORA_ALPHA)
        model.rope_rows(LORA_TOKENS)
        optimizer = verigrad.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        step = ft.finetune_step(model, optimizer, 1.0)
        step = verigrad.compile(step) if way == "verigrad compiled" else step
        return step, verigrad.from_numpy(ids), verigrad.from_numpy(targets), LORA_TOKENS
    import torch

    sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests" / d) for d in ("", "parity")]
    from test_finetune_torch import torch_lora_loss, torch_weights

    torch.set_num_threads(threads)
    config, weights = torch_weights(path)
    torch.manual_seed(0)
    adapters = {}
    for i in range(config.n_layers):
        for name in LORA_TARGETS:
            rows = (config.n_heads if name == "q_proj" else config.n_kv_heads) * config.head_dim
            a = torch.nn.init.kaiming_uniform_(torch.empty(LORA_RANK, config.dim), a=5**0.5)
            adapters[(i, name)] = (a.requires_grad_(), torch.zeros(rows, LORA_RANK, requires_grad=True))
    params = [p for pair in adapters.values() for p in pair]
    optimizer = torch.optim.AdamW(params, lr=1e-4)

    def step(x: Any, y: Any) -> Any:
        optimizer.zero_grad()
        loss = torch_lora_loss(config, weights, adapters, LORA_ALPHA / LORA_RANK, x[0], y[0])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        return loss

    step = torch.compile(step) if way == "torch.compile" else step
    return step, torch.from_numpy(ids), torch.from_numpy(targets), LORA_TOKENS


def timed(step: Any, xt: Any, yt: Any, tokens_per_step: int, threads: int, args: argparse.Namespace) -> dict:
    """The first call's seconds, each timed run's tokens/s and the peak resident memory in MiB."""
    start = time.perf_counter()
    loss = float(step(xt, yt).detach())
    first = time.perf_counter() - start
    for _ in range(args.warmup):
        step(xt, yt)
    tokens = tokens_per_step * args.steps
    clock = time.process_time if threads == 1 else time.perf_counter  # one thread: the load adds no time
    rates = []
    for _ in range(args.repeats):
        start = clock()
        for _ in range(args.steps):
            step(xt, yt)
        rates.append(tokens / (clock() - start))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"first_s": first, "rates": rates, "peak_mib": peak, "loss": loss}


def in_subprocess(size: str, way: str, threads: int, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--one", f"{size}:{way}:{threads}"]
    command += ["--steps", str(args.steps), "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        lines = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()
        errors = [line for line in lines if "Error: " in line and not line.startswith(" ")]
        return {"error": (errors or lines)[-1][:60]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def parameters(size: Size) -> int:
    w = size.width
    return size.vocab * w + size.context * w + size.layers * (12 * w * w + 13 * w) + 2 * w


def run(args: argparse.Namespace) -> None:
    console = make_console(130)
    console.print(describe_machine())
    ways = [w for w in WAYS if args.torch_compile or w != "torch.compile"]
    for size_name in args.sizes:
        if size_name == LORA:
            title = (
                f"lora: SmolLM2-135M (Q4_1 base; PyTorch: de-quantized f32) with LoRA r {LORA_RANK} on "
                f"{', '.join(LORA_TARGETS)}, {LORA_TOKENS} tokens, AdamW on the adapters"
            )
        else:
            size = SIZES[size_name]
            title = (
                f"{size_name}: GPT of {parameters(size) / 1e6:.1f}M parameters ({size.layers} layers, width "
                f"{size.width}, {size.heads} heads, context {size.context}, vocabulary {size.vocab}, batch "
                f"{size.batch}), AdamW, f32"
            )
        out = table(
            f"{title}; tokens/s of the median of {args.repeats} x {args.steps} steps",
            ["threads", "way", "tokens/s", "spread", "vs torch eager", "first call s", "peak MiB", "loss"],
            left=("way",),
            no_wrap=True,
        )
        for threads in args.threads:
            results = {w: in_subprocess(size_name, w, threads, args) for w in ways}
            base = statistics.median(results["torch eager"].get("rates") or [math.nan])
            for i, (way, r) in enumerate(results.items()):
                if "error" in r:
                    out.add_row(str(threads) if i == 0 else "", way, "failed: " + r["error"], *[""] * 5)
                    continue
                median = statistics.median(r["rates"])
                digits = ",.1f" if median < 100 else ",.0f"  # the LoRA step's few tokens/s
                out.add_row(
                    str(threads) if i == 0 else "",
                    way,
                    f"{median:{digits}}",
                    f"{min(r['rates']):{digits}}-{max(r['rates']):{digits}}",
                    f"{median / base:.2f}x",
                    f"{r['first_s']:.1f}",
                    f"{r['peak_mib']:.0f}",
                    f"{r['loss']:.4f}",
                )
            console.print(f"  {size_name}, {threads} thread(s): done", style="dim")
            out.add_section()
        idle = {w: in_subprocess(size_name, f"idle {w}", 1, args)["peak_mib"] for w in ("verigrad", "torch")}
        console.print(out)
        console.print(
            f"peak MiB after importing alone: verigrad {idle['verigrad']:.0f}, torch {idle['torch']:.0f}"
        )


def attention_layer(args: argparse.Namespace) -> None:
    """A GPT's attention alone (`small`: B 8, H 4, T 128, head 32; with `--sizes base`, also its B 8, H 5,
    T 256, head 64; q, k, v views of one qkv projection), one thread: verigrad's attention_lse and
    attention_grad kernels against PyTorch's scaled_dot_product_attention (its flash kernel), forward and
    forward + backward, calls alternating in one process; milliseconds of process CPU time (what other
    processes take of the machine is not counted), minimum and median of each. On an AVX-512 machine also
    verigrad's kernels with their AVX2 loops (the AVX-512 ones turned off)."""
    import torch

    import verigrad

    verigrad.set_threads(1)
    torch.set_num_threads(1)
    names = [s for s in args.sizes if s in SIZES] if args.sizes_given else ["small"]
    for name in names:
        size = SIZES[name]
        print(f"{name}: B {size.batch}, H {size.heads}, T {size.context}, head {size.width // size.heads}")
        _attention_layer_of(args, torch, size)


def _attention_layer_of(args: argparse.Namespace, torch: Any, size: Size) -> None:
    """attention_layer's timings for one size."""
    import verigrad
    from verigrad import ops
    from verigrad.backends import cpu

    b, h, t, d = size.batch, size.heads, size.context, size.width // size.heads
    rng = np.random.default_rng(0)
    qkv = rng.uniform(-2, 2, (b, t, 3, h, d)).astype(np.float32)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    g = rng.uniform(-2, 2, (b, h, t, d + 1)).astype(np.float32)
    g[..., d] = 0.0  # the log-sum-exp's gradient, as sdpa's backward gives it
    forward, grad = (cpu.cpu.native(op, verigrad.f32) for op in (ops.attention_lse, ops.attention_grad))
    out = forward(q, k, v, scale=None)
    tq, tk, tv = (torch.tensor(np.ascontiguousarray(x), requires_grad=True) for x in (q, k, v))
    tg = torch.tensor(np.ascontiguousarray(g[..., :d]))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def torch_forward() -> None:
        with torch.no_grad():
            sdpa(tq, tk, tv, is_causal=True)

    calls = {
        "verigrad forward": lambda: forward(q, k, v, scale=None),
        "verigrad backward": lambda: grad(g, q, k, v, out, scale=None),
        "torch forward": torch_forward,
        "torch forward + backward": lambda: sdpa(tq, tk, tv, is_causal=True).backward(tg),
    }
    if "avx512" in cpu.vector_paths():  # the AVX2 loops too (attention_flash.c's AVX-512 ones off)
        switch = cpu.cpu.library.fn("vg_attention_avx512", [ctypes.c_int], restype=ctypes.c_int)

        def on_avx2(call: Any) -> Any:
            def run() -> None:
                was = switch(0)
                try:
                    call()
                finally:
                    switch(was)

            return run

        calls["verigrad forward, AVX2"] = on_avx2(calls["verigrad forward"])
        calls["verigrad backward, AVX2"] = on_avx2(calls["verigrad backward"])
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.repeats * 20):
        for name, call in calls.items():
            start = time.process_time()
            call()
            times[name].append((time.process_time() - start) * 1e3)
    for name, ms in times.items():
        print(f"{name:26s} min {min(ms):6.2f} ms  median {statistics.median(ms):6.2f} ms")
    ours = [f + b for f, b in zip(times["verigrad forward"], times["verigrad backward"], strict=True)]
    ratio = statistics.median(o / t for o, t in zip(ours, times["torch forward + backward"], strict=True))
    print(f"verigrad forward + backward over torch's, median of the rounds: {ratio:.2f}x")


def matmul_and_loss(args: argparse.Namespace) -> None:
    """The small GPT's matrix products (per layer x @ W^T, g @ W and g^T x of qkv, proj, up and down, four
    layers; the tied head's once) and its cross-entropy (forward, and forward + backward, on the (1024,
    4096) logits), one thread, process time: verigrad with the fast path's packed GEMM (matmul_packed.c) and
    without it (OpenBLAS's tiles, matmul_blas.c), PyTorch's, and the eager step with and without it; calls
    alternating in one process, the median and the minimum of `--repeats` rounds."""
    import torch

    import verigrad
    from verigrad.backends.cpu import matmul as cpu_matmul

    verigrad.set_threads(1)
    torch.set_num_threads(1)
    size, rng = SIZES["small"], np.random.default_rng(0)
    m, w = size.batch * size.context, size.width
    shapes = {
        "qkv": (3 * w, w),
        "proj": (w, w),
        "up": (4 * w, w),
        "down": (w, 4 * w),
        "head": (size.vocab, w),
    }
    products = {}  # name: (calls per step, [(a, b)] of x @ W^T, g @ W, g^T x)
    for name, (n, k) in shapes.items():
        x, weight = (
            rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((n, k)).astype(np.float32),
        )
        g = rng.standard_normal((m, n)).astype(np.float32)
        products[name] = (1 if name == "head" else size.layers, [(x, weight.T), (g, weight), (g.T, x)])
    logits = (rng.standard_normal((m, size.vocab)) * 0.5).astype(np.float32)
    target = rng.integers(0, size.vocab, m)

    def timed_ms(call: Any) -> float:
        start = time.process_time()
        call()
        return (time.process_time() - start) * 1e3

    def ours(a: np.ndarray, b: np.ndarray) -> Any:
        return lambda: cpu_matmul.matmul(a, b, exact=False)

    def theirs(a: np.ndarray, b: np.ndarray) -> Any:
        ta, tb = (torch.from_numpy(v) if v.flags.c_contiguous else torch.from_numpy(v.T).T for v in (a, b))
        return lambda: ta @ tb

    def loss(framework: Any, backward: bool) -> Any:
        x = framework.tensor(logits, requires_grad=backward)
        y = framework.from_numpy(target)

        def call() -> None:
            with framework.enable_grad() if backward else framework.no_grad():
                value = framework.nn.functional.cross_entropy(x, y)
                if backward:
                    value.backward()
                    x.grad = None

        return call

    calls = {}
    for name, (count, pairs) in products.items():
        for way, make in (("verigrad", ours), ("torch", theirs)):
            fns = [make(a, b) for a, b in pairs] * count
            calls[(name, way)] = lambda fns=fns: [f() for f in fns]
    for label, backward in (("loss forward", False), ("loss fwd+bwd", True)):
        calls[(label, "verigrad")], calls[(label, "torch")] = loss(verigrad, backward), loss(torch, backward)
    model = gpt(verigrad, size)
    model.load_state_dict({k: verigrad.tensor(v) for k, v in state_dict(size).items()})
    step = train_step(verigrad, model)
    xs, ys = (verigrad.from_numpy(a) for a in batch(size))
    step(xs, ys)
    lib = cpu_matmul._state["lib"]
    times: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.repeats):
        for kernel in ("packed", "openblas")[:: 1 if round_ % 2 else -1]:  # each first in turn
            lib.packed_products(int(kernel == "packed"))
            for (name, way), call in calls.items():
                if way == "verigrad" and (kernel == "packed" or name in products):
                    times.setdefault((name, way if kernel == "packed" else kernel), []).append(timed_ms(call))
            times.setdefault(("eager step", "verigrad" if kernel == "packed" else kernel), []).append(
                timed_ms(lambda: step(xs, ys))
            )
        lib.packed_products(1)
        for (name, way), call in calls.items():
            if way == "torch":
                times.setdefault((name, way), []).append(timed_ms(call))
    for label, stat in (("median", statistics.median), ("minimum", min)):
        value = {key: stat(v) for key, v in times.items()}
        for way in ("verigrad", "openblas", "torch"):
            value[("all products", way)] = sum(value[(name, way)] for name in products)
        header = ("verigrad", "openblas", "torch", "vs openblas", "vs torch")
        print(f"{'ms, ' + label:14s} " + " ".join(f"{h:>{max(9, len(h))}s}" for h in header))
        for name in (*products, "all products", "loss forward", "loss fwd+bwd", "eager step"):
            ours_ms, before, torch_ms = (value.get((name, way)) for way in ("verigrad", "openblas", "torch"))
            row = f"{name:14s} {ours_ms:9.2f} " + (f"{before:9.2f} " if before else f"{'':10s}")
            row += f"{torch_ms:9.2f} " if torch_ms else f"{'':10s}"
            row += f"{ours_ms / before:10.2f}x " if before else f"{'':12s}"
            print(row + (f"{ours_ms / torch_ms:8.2f}x" if torch_ms else ""))


def lora_products(args: argparse.Namespace) -> None:
    """The LoRA step's base products (SmolLM2-135M, 256 tokens: per layer x @ W^T and g @ W of qkv, o,
    gate_up and down, 30 layers; the tied head's once) and its attention (9 heads of 64, 256 tokens,
    causal; forward, and forward + backward, 30 layers), one thread, process time: verigrad's f32
    kernels against PyTorch's, calls alternating in one process, the median of `--repeats` rounds, and
    the milliseconds they add up to in a step."""
    import torch

    import verigrad
    from verigrad.backends.cpu import matmul as cpu_matmul

    verigrad.set_threads(1)
    torch.set_num_threads(1)
    rng, m = np.random.default_rng(0), LORA_TOKENS
    shapes = {"qkv": (960, 576), "o": (576, 576), "gate_up": (3072, 576), "down": (576, 1536)}
    shapes["head"] = (49152, 576)
    calls: dict[str, tuple[int, Any, Any]] = {}  # name: (calls per step, ours, theirs)
    for name, (n, k) in shapes.items():
        x, w = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((n, k), dtype=np.float32)
        g = rng.standard_normal((m, n), dtype=np.float32)
        for way, (a, b) in (("x @ W^T", (x, w.T)), ("g @ W", (g, w))):
            ta, tb = (
                torch.from_numpy(v) if v.flags.c_contiguous else torch.from_numpy(v.T).T for v in (a, b)
            )
            calls[f"{name} {way}"] = (
                1 if name == "head" else 30,
                lambda a=a, b=b: cpu_matmul.matmul(a, b, exact=False),
                lambda ta=ta, tb=tb: ta @ tb,
            )
    qkv = [rng.standard_normal((1, 9, m, 64), dtype=np.float32) for _ in range(3)]

    def attention(framework: Any, backward: bool) -> Any:
        q, k, v = (framework.tensor(a, requires_grad=backward) for a in qkv)

        def call() -> None:
            out = framework.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            if backward:
                out.sum().backward()

        return call

    for label, backward in (("attention fwd", False), ("attention fwd+bwd", True)):
        calls[label] = (30, attention(verigrad, backward), attention(torch, backward))
    times: dict[tuple[str, int], list[float]] = {}
    for round_ in range(args.repeats + 1):
        for name, (_, ours, theirs) in calls.items():
            for i, call in list(enumerate((ours, theirs)))[:: 1 if round_ % 2 else -1]:
                start = time.process_time()
                call()
                if round_:  # the first round warms up
                    times.setdefault((name, i), []).append((time.process_time() - start) * 1e3)
    print(f"{'ms, median':24s} {'verigrad':>9s} {'torch':>9s} {'ratio':>7s} {'per step':>9s} {'torch':>9s}")
    steps = [0.0, 0.0]
    for name, (count, _, _) in calls.items():
        ours, theirs = (statistics.median(times[(name, i)]) for i in (0, 1))
        if name != "attention fwd":
            steps = [steps[0] + count * ours, steps[1] + count * theirs]
        row = f"{name:24s} {ours:9.2f} {theirs:9.2f} {ours / theirs:6.2f}x"
        print(f"{row} {count * ours:9.1f} {count * theirs:9.1f}")
    row = f"{'products + attention':24s} {'':9s} {'':9s} {steps[0] / steps[1]:6.2f}x"
    print(f"{row} {steps[0]:9.1f} {steps[1]:9.1f}")


def small_steps(threads: int, size_name: str = "small") -> tuple[dict[str, Any], Any, Any]:
    """A GPT's (the small one by default) eager and compiled verigrad steps (each its own model from the
    same weights) and the batch."""
    import verigrad

    size = SIZES[size_name]
    verigrad.set_threads(threads)
    weights = state_dict(size)
    steps = {}
    for way in ("eager", "compiled"):
        model = gpt(verigrad, size)
        model.load_state_dict({k: verigrad.tensor(v) for k, v in weights.items()})
        step = train_step(verigrad, model)
        steps[way] = verigrad.compile(step) if way == "compiled" else step
    x, y = (verigrad.from_numpy(a) for a in batch(size))
    return steps, x, y


def compiled_against_eager(args: argparse.Namespace) -> None:
    """The small GPT's compiled step against its eager one in one process, steps alternating (the machine's
    load moves both alike), after 12 untimed steps each (past a plan's checked run and its replay
    decision): the median and minimum milliseconds of `--repeats` rounds of `--steps` steps (CPU time
    on one thread, wall time on more), and whether the two losses have the same bits. With `--sizes`, each
    of its GPTs."""
    names = [s for s in args.sizes if s in SIZES] if args.sizes_given else ["small"]
    for size_name, threads in ((n, t) for n in names for t in args.threads):
        steps, x, y = small_steps(threads, size_name)
        losses = {way: [float(step(x, y).detach()) for _ in range(12)] for way, step in steps.items()}
        clock = time.process_time if threads == 1 else time.perf_counter
        times: dict[str, list[float]] = {way: [] for way in steps}
        for round_ in range(args.repeats):
            for way in list(steps)[:: 1 if round_ % 2 else -1]:  # each first in turn
                start = clock()
                for _ in range(args.steps):
                    steps[way](x, y)
                times[way].append((clock() - start) / args.steps * 1e3)
        eager, compiled = (statistics.median(times[way]) for way in ("eager", "compiled"))
        print(
            f"{size_name}, {threads} thread(s): eager {eager:.1f} ms (min {min(times['eager']):.1f}), "
            f"compiled {compiled:.1f} ms (min {min(times['compiled']):.1f}): compiled "
            f"{eager / compiled:.2f}x eager's speed; losses the same bits: "
            f"{losses['eager'] == losses['compiled']}"
        )


def step_kernels(args: argparse.Namespace) -> None:
    """A GPT's compiled step (each of `--sizes`' GPTs, the small one by default), kernel by kernel (the
    plan's calls: the kernels eager mode runs too), on 1 and 2 threads: each call's minimum wall time over
    `--repeats` x 4 calls on the operands of a step's run (a busy machine's load adds to each call's
    time, least to the minimum), summed by op. The "cpu" columns count thread CPU time instead
    (`cpu.timed_chunks`, the static schedule; another process's load adds none): on 1 thread, the chunks'
    time; on 2, each split's slowest thread's plus what ran whole, the time on two idle cores, dispatch
    aside; the minimum over as many calls."""
    names = [s for s in args.sizes if s in SIZES or s == LORA] if args.sizes_given else ["small"]
    for size_name in names:
        print(f"{size_name}:")
        if size_name == LORA:
            compiled, x, y, _ = lora_step("verigrad compiled", 1)
        else:
            steps, x, y = small_steps(1, size_name)
            compiled = steps["compiled"]
        kernel_times(compiled, x, y, args.repeats)
    whole_steps_on_idle_cores(args)


def kernel_times(compiled: Any, x: Any, y: Any, repeats: int) -> None:
    """`step_kernels`'s table for a compiled step and its batch."""
    import verigrad
    from verigrad.backends import cpu
    from verigrad.ir.steps import call_args, fixed_kernel

    for _ in range(3):
        compiled(x, y)
    (plan,) = compiled._plans.values()
    arrays = [x.payload, y.payload] + [t.payload.copy() for t in plan.program.captured]
    env: list[Any] = [None] * len(plan.specs)
    for slot, value in plan.consts.items():
        env[slot] = value
    for slot, a in zip(plan.input_slots, arrays):
        env[slot] = a
    calls = []  # (op name, kernel, operands): operands a kernel writes into are copies
    with np.errstate(all="ignore"):
        for step in plan.calls:
            kernel, ins = fixed_kernel(step), call_args(step)
            operands = [env[i].copy() if i in ins[len(step.ins) :] else env[i] for i in ins]
            result = kernel(*operands)
            outs = getattr(step, "outs", (step.out,))
            for slot, r in zip(outs, result if len(outs) > 1 else (result,)):
                env[slot] = r
            if step.op.name not in ("reshape", "permute", "slice", "cast", "check_index"):
                calls.append((step.op.name + (" (merged)" if len(outs) > 1 else ""), kernel, operands))
    totals: dict[str, dict[Any, float]] = {}  # by op: wall ms on 1 and 2 threads, ("cpu", n) thread CPU ms
    counts: dict[str, int] = {}
    with np.errstate(all="ignore"):
        for name, kernel, operands in calls:
            counts[name] = counts.get(name, 0) + 1
            total = totals.setdefault(name, dict.fromkeys((1, 2, ("cpu", 1), ("cpu", 2)), 0.0))
            for threads in (1, 2):
                verigrad.set_threads(threads)
                best = best_cpu = math.inf
                for _ in range(repeats * 4):
                    start = time.perf_counter()
                    kernel(*operands)
                    best = min(best, time.perf_counter() - start)
                with cpu.static_schedule(), cpu.timed_chunks() as counted:
                    for _ in range(repeats * 4):
                        kernel(*operands)
                        took = counted()
                        best_cpu = min(best_cpu, took.whole + took.slowest)
                total[threads] += best * 1e3
                total[("cpu", threads)] += best_cpu * 1e3
    verigrad.set_threads(1)
    one, two, one_cpu, two_cpu = (sum(t[n] for t in totals.values()) for n in (1, 2, ("cpu", 1), ("cpu", 2)))
    header = ("calls", "1 thread ms", "share", "2 threads ms", "speed-up", "cpu 1", "cpu 2", "cpu speed-up")
    print(f"{'op':26s} " + " ".join(f"{h:>{max(5, len(h))}s}" for h in header))
    for name, t in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        c1, c2 = t[("cpu", 1)], t[("cpu", 2)]
        print(
            f"{name:26s} {counts[name]:5d} {t[1]:11.2f} {t[1] / one:5.1%} {t[2]:12.2f} {t[1] / t[2]:7.2f}x "
            f"{c1:5.2f} {c2:5.2f} {c1 / c2 if c2 else 1:11.2f}x"
        )
    print(
        f"{'all':26s} {len(calls):5d} {one:11.2f} {'':5s} {two:12.2f} {one / two:7.2f}x "
        f"{one_cpu:5.1f} {two_cpu:5.1f} {one_cpu / two_cpu:11.2f}x"
    )


def whole_steps_on_idle_cores(args: argparse.Namespace) -> None:
    """The small GPT's eager and compiled steps in thread CPU time (`cpu.timed_chunks`, the static
    schedule; medians of `--repeats` steps): on 1 thread the caller's time, of which its chunks and the
    rest (Python, and C outside the pool's chunks); on 2 threads, estimated for two idle cores, the rest
    (as on 1 thread) plus what runs whole and each split's slowest thread, the dispatch aside."""
    import verigrad
    from verigrad.backends import cpu

    steps, x, y = small_steps(1)
    for way, step in steps.items():
        parts: dict[int, list[tuple[float, float]]] = {1: [], 2: []}  # (outside the chunks, chunks' time)
        for threads in (1, 2):
            verigrad.set_threads(threads)
            for _ in range(3):
                step(x, y)
            with cpu.static_schedule(), cpu.timed_chunks() as counted:
                for _ in range(args.repeats):
                    counted()
                    start = time.thread_time()
                    step(x, y)
                    caller, took = time.thread_time() - start, counted()
                    parts[threads].append((caller - took.whole - took.total, took.whole + took.slowest))
        verigrad.set_threads(1)
        rest = statistics.median(p[0] for p in parts[1]) * 1e3
        one, two = (statistics.median(p[1] for p in parts[n]) * 1e3 for n in (1, 2))
        print(
            f"{way} step, thread CPU ms: 1 thread {rest + one:.1f} (chunks {one:.1f}, the rest {rest:.1f}); "
            f"2 idle cores {rest + two:.1f} (chunks {two:.1f}): {(rest + one) / (rest + two):.2f}x"
        )


def profile(args: argparse.Namespace) -> None:
    """cProfile of verigrad's eager step on the small GPT, one thread, in CPU time: the top functions by own
    time."""
    import cProfile
    import pstats

    import verigrad

    if args.sizes == [LORA]:
        step, x, y, _ = lora_step("verigrad eager", args.threads[0])
    else:
        size = SIZES["small"]
        verigrad.set_threads(args.threads[0])
        model = gpt(verigrad, size)  # the timed runs' weights (a default init's subnormal logits crawl)
        model.load_state_dict({k: verigrad.tensor(v) for k, v in state_dict(size).items()})
        step = train_step(verigrad, model)
        x, y = (verigrad.from_numpy(a) for a in batch(size))
    for _ in range(2):
        step(x, y)
    profiler = cProfile.Profile(time.process_time)  # CPU time: the load of a busy machine adds none
    profiler.enable()
    for _ in range(args.steps):
        step(x, y)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", help="comma-separated: small, base, lora (default all; --kernels: small, its GPTs)"
    )
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--steps", type=int, default=3, help="steps per timed run (default 3)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps after the first (default 2)")
    parser.add_argument("--no-torch-compile", dest="torch_compile", action="store_false")
    parser.add_argument("--profile", action="store_true", help="profile verigrad's eager step instead")
    parser.add_argument(
        "--attention",
        action="store_true",
        help="time the small (--sizes: and base) GPT's attention kernels against PyTorch's (CPU time)",
    )
    parser.add_argument(
        "--matmul",
        action="store_true",
        help="time the small GPT's matrix products and loss against PyTorch's",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="the small GPT's compiled step against its eager one, alternating in one process",
    )
    parser.add_argument(
        "--kernels",
        action="store_true",
        help="a GPT's compiled step kernel by kernel (the small one, or --sizes' GPTs), on 1 and 2 threads",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.threads = positive_ints(parser, args.threads, "--threads")
    args.sizes_given = args.sizes is not None
    args.sizes = [s.strip() for s in (args.sizes or "small,base,lora").split(",") if s.strip()]
    if not args.sizes or any(s not in (*SIZES, LORA) for s in args.sizes):
        parser.error(f"--sizes takes names from {', '.join((*SIZES, LORA))}, got {args.sizes}")
    if args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--steps and --repeats must be at least 1, --warmup at least 0")
    if args.one:
        size, way, threads = args.one.split(":")
        print(json.dumps(measure(size, way, int(threads), args)))
    elif args.profile:
        profile(args)
    elif args.attention:
        attention_layer(args)
    elif args.matmul:
        lora_products(args) if args.sizes == [LORA] else matmul_and_loss(args)
    elif args.compiled:
        compiled_against_eager(args)
    elif args.kernels:
        step_kernels(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
