"""The guard check before each compiled call (`Program.holds`, `ir/guards.py`), on a tiny model with as
many modules as SmolLM2's decode step (30 blocks of 9 modules), or with `--smollm2` on that decode
step itself: the check as it is (the module guards read again only after nn.Module's counter moved),
the reads of the guards each call made before (`_traced_state`, grad mode: not the `ModuleAttributes`
ones), the reads of every guard (what a call after a module changed costs now), and a whole compiled
call (the decode step with `--smollm2`), as medians of `--repeats` runs of `--number` calls each.

    python benchmarks/guards.py
    python benchmarks/guards.py --smollm2 --repeats 7
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

from _common import verigrad

from verigrad.ir.guards import ModuleAttributes

nn = verigrad.nn


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(3)], nn.ReLU())
        self.extra = nn.ModuleList([nn.Identity(), nn.Identity()])

    def forward(self, x):
        return x + self.extra[1](self.extra[0](self.layers(self.norm(x))))


def per_call_us(fn: Callable[[], object], number: int, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(runs)


def tiny(blocks: int) -> tuple[object, Callable[[], object]]:
    model = nn.Sequential(*[Block(8) for _ in range(blocks)])
    x = verigrad.randn(1, 8)
    step = verigrad.compile(lambda x: model(x))
    for _ in range(3):
        step(x)
    return step.program(x), lambda: step(x)


def smollm2() -> tuple[object, Callable[[], object]]:
    import numpy as np

    from verigrad.compile import Compiled
    from verigrad.models.catalog import load_language_model
    from verigrad.models.fetch import fetch

    model, _ = load_language_model(str(fetch("smollm2")), "f32")
    cache = model.new_cache(1, 4096)
    model.last_logits(np.arange(100, 140, dtype=np.int64)[None], cache)

    def call() -> object:
        return model.last_logits(np.asarray([[5]], dtype=np.int64), cache)

    for _ in range(3):
        call()
    step = next(c for c in gc.get_objects() if isinstance(c, Compiled) and c._fixed is not None)
    return step._fixed[0], call


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--blocks", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--number", type=int, default=200)
    p.add_argument("--smollm2", action="store_true", help="SmolLM2-135M's decode step (f32, 1 thread)")
    args = p.parse_args()
    verigrad.set_threads(1)
    with verigrad.no_grad():
        program, call = smollm2() if args.smollm2 else tiny(args.blocks)
        every = list(program.guards.values())
        before = [(r, v) for r, v in every if not isinstance(r, ModuleAttributes)]
        rows = {
            "guards": len(every),
            "holds() us": per_call_us(program.holds, args.number, args.repeats),
            "reads as before us": per_call_us(
                lambda: all(read() == value for read, value in before), args.number, args.repeats
            ),
            "every guard read us": per_call_us(
                lambda: all(read() == value for read, value in every), args.number, args.repeats
            ),
            "compiled call us": per_call_us(call, max(1, args.number // 10), args.repeats),
        }
    for name, value in rows.items():
        print(f"{name:>22}: {value:.1f}" if isinstance(value, float) else f"{name:>22}: {value}")


if __name__ == "__main__":
    main()
