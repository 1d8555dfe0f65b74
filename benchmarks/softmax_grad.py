"""Milliseconds of an f32 softmax forward and backward (eager autograd) against PyTorch's, and the same with
the backward written as before the softmax_grad kernel: seven full-size ops in f64 (casts, products, sum,
difference, cast back). Medians of `--repeats` timed runs, the ways taking turns (`_common.median_ms`)."""

from __future__ import annotations

import argparse

import numpy as np
from _common import ensure_torch, median_ms, set_threads, verigrad

SHAPES = ((256, 1024), (1024, 4096))


def _ways(torch, x: np.ndarray, g: np.ndarray) -> dict:
    vx, vg = verigrad.tensor(x).requires_grad_(True), verigrad.tensor(g)
    tx, tg = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(g)

    def ours() -> None:
        vx.grad = None
        vx.softmax(-1).backward(vg)

    def before() -> None:  # softmax's VJP as it was: out * (g - sum(g * out)) in f64 ops, cast back
        with verigrad.no_grad():
            out = vx.softmax(-1)
            o64, g64 = out.double(), vg.double()
            (o64 * (g64 - (g64 * o64).sum(-1, keepdim=True))).float()

    def theirs() -> None:
        tx.grad = None
        tx.softmax(-1).backward(tg)

    return {"verigrad": ours, "verigrad, VJP in f64 ops": before, "PyTorch": theirs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    torch = ensure_torch()
    set_threads(torch, args.threads)
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        g = rng.standard_normal(shape).astype(np.float32)
        med = median_ms(_ways(torch, x, g), args.repeats, args.calls, args.threads)
        ratios = ", ".join(f"{way} {ms:.3f} ms ({ms / med['PyTorch']:.2f}x)" for way, ms in med.items())
        print(f"f32 {list(shape)}, {args.threads} thread(s): {ratios}")


if __name__ == "__main__":
    main()
