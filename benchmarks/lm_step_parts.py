"""The element-wise and row-wise parts of the small GPT's training step (benchmarks/lm_train.py), one
thread: GELU (exact, as the GPT's F.gelu) and layer norm forward and forward + backward on the step's
shapes, a residual add, the loss (F.cross_entropy on the step's [1024, 4096] logits) forward + backward,
AdamW's update of the small GPT's parameters (52 tensors, 1.3M numbers, weight decay 0.1), and causal
attention (F.scaled_dot_product_attention, is_causal) forward and forward + backward at the small GPT's
size (B 8, H 4, T 128, head 32) and the base one's (T 256, head 64), q, k and v views of one projection,
verigrad eager against PyTorch eager, calls alternating in one process (the machine's load moves both
alike); milliseconds of CPU time, the median of `--repeats` calls each (`--only attention`: the parts
whose name holds that word).

    python benchmarks/lm_step_parts.py --repeats 30
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _gpt_shapes() -> list[tuple[int, ...]]:
    """The shapes of the small GPT's parameters (benchmarks/lm_train.py's), the embedding tied to the head."""
    from lm_train import SIZES, gpt

    import verigrad

    return [tuple(p.shape) for p in gpt(verigrad, SIZES["small"]).parameters()]


def parts(torch: Any, convert: Callable) -> dict[str, Callable[[], Any]]:
    """Each part as a call of `torch`'s namespace (PyTorch's or verigrad's) on seed-0 inputs."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    h, gh = rng.standard_normal((2, 8, 128, 512)).astype(np.float32)  # the MLP's hidden activations
    x, gx = rng.standard_normal((2, 8, 128, 128)).astype(np.float32)  # the residual stream
    w, b = (1 + 0.1 * rng.standard_normal((2, 128))).astype(np.float32)
    xa, xb = convert(x), convert(gx)

    def gelu_backward() -> None:
        t = convert(h).requires_grad_(True)
        F.gelu(t).backward(convert(gh))

    def attention(b: int, h: int, t: int, d: int, backward: bool) -> Callable[[], Any]:
        qkv = rng.uniform(-2, 2, (b, t, 3, h, d)).astype(np.float32)
        g = rng.uniform(-2, 2, (b, h, t, d)).astype(np.float32)

        def call() -> None:
            whole = convert(qkv).requires_grad_(backward)
            q, k, v = (whole[:, :, i].transpose(1, 2) for i in range(3))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            if backward:
                out.backward(convert(g))

        return call

    logits = rng.standard_normal((1024, 4096)).astype(np.float32) * 0.5
    targets = rng.integers(0, 4096, 1024)

    def loss_backward() -> None:
        F.cross_entropy(convert(logits).requires_grad_(True), convert(targets)).backward()

    params = [convert(rng.standard_normal(s).astype(np.float32)) for s in _gpt_shapes()]
    for p in params:
        p.grad = convert(rng.standard_normal(p.shape).astype(np.float32) * 1e-3)
    adamw = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1)

    def norm_backward() -> None:
        t, wt, bt = (convert(a).requires_grad_(True) for a in (x, w, b))
        F.layer_norm(t, (128,), wt, bt).backward(convert(gx))

    return {
        "gelu forward": lambda: F.gelu(convert(h)),
        "gelu forward + backward": gelu_backward,
        "layer_norm forward": lambda: F.layer_norm(convert(x), (128,), convert(w), convert(b)),
        "layer_norm forward + backward": norm_backward,
        "residual add": lambda: xa + xb,
        "cross_entropy forward + backward": loss_backward,
        "AdamW step": adamw.step,
        "attention T 128 forward": attention(8, 4, 128, 32, False),
        "attention T 128 forward + backward": attention(8, 4, 128, 32, True),
        "attention T 256 forward": attention(8, 4, 256, 64, False),
        "attention T 256 forward + backward": attention(8, 4, 256, 64, True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed calls of each part (default 30)")
    parser.add_argument("--only", default="", help="time only the parts whose name holds this")
    args = parser.parse_args()
    import torch

    import verigrad

    verigrad.set_threads(1)
    torch.set_num_threads(1)
    ours, theirs = parts(verigrad, verigrad.tensor), parts(torch, torch.tensor)
    print(f"{'part':36s} {'verigrad ms':>12s} {'torch ms':>9s} {'ratio':>6s}")
    for name in [name for name in ours if args.only in name]:
        times: dict[str, list[float]] = {"verigrad": [], "torch": []}
        for _ in range(3):
            ours[name](), theirs[name]()
        for _ in range(args.repeats):
            for side, call in (("verigrad", ours[name]), ("torch", theirs[name])):
                start = time.process_time()
                call()
                times[side].append(time.process_time() - start)
        a, b = (statistics.median(times[s]) * 1e3 for s in ("verigrad", "torch"))
        print(f"{name:36s} {a:12.3f} {b:9.3f} {a / b:5.2f}x")


if __name__ == "__main__":
    main()
