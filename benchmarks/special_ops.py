"""The special functions and linalg extras of issue 28 (special.bessel_j0, modified_bessel_k0, igamma,
linalg.matrix_exp, linalg.ldl_factor), verigrad's NumPy references against PyTorch's kernels, one thread:
the median of `--repeats` calls of each, ms, and their ratio (each pair timed in the same run).

    python benchmarks/special_ops.py
    python benchmarks/special_ops.py --repeats 9
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import verigrad as vg


def _median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    vg.set_num_threads(1)
    rng = np.random.default_rng(0)
    wide, near = rng.uniform(-30, 30, 100_000), rng.uniform(-1.9, 1.9, 100_000)
    a, x = rng.uniform(0.1, 10, 100_000), rng.uniform(0, 20, 100_000)
    m = rng.standard_normal((64, 64)) * 0.3
    k0_x = np.abs(wide)
    cases = [
        ("special.bessel_j0, 1e5 f64 in [-30, 30]", vg.special.bessel_j0, torch.special.bessel_j0, (wide,)),
        ("special.bessel_j0, 1e5 f64 in [-1.9, 1.9]", vg.special.bessel_j0, torch.special.bessel_j0, (near,)),
        ("special.modified_bessel_k0, 1e5 f64 in [0, 30]", vg.special.modified_bessel_k0,
         torch.special.modified_bessel_k0, (k0_x,)),
        ("igamma, 1e5 f64", vg.igamma, torch.igamma, (a, x)),
        ("linalg.matrix_exp, 64 x 64 f64", vg.linalg.matrix_exp, torch.linalg.matrix_exp, (m,)),
        ("linalg.ldl_factor, 64 x 64 f64", vg.linalg.ldl_factor, torch.linalg.ldl_factor, (m,)),
    ]  # fmt: skip
    print("| op | verigrad ms | PyTorch ms | verigrad / PyTorch |")
    print("|---|---:|---:|---:|")
    for name, ours, theirs, arrays in cases:
        ms = _median_ms(lambda: ours(*[vg.from_numpy(x) for x in arrays]), args.repeats)
        torch_ms = _median_ms(lambda: theirs(*[torch.from_numpy(x) for x in arrays]), args.repeats)
        print(f"| {name} | {ms:.2f} | {torch_ms:.3f} | {ms / torch_ms:.0f}x |")


if __name__ == "__main__":
    main()
