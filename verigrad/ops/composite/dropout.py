"""dropout: zero each element with probability p and scale the rest by 1 / (1 - p).

The mask is `rand(shape, seed) >= p`, drawn in f64 whatever x's dtype, so a seed gives the same mask
in every dtype and mode. It does not reproduce PyTorch's random stream.
"""

from __future__ import annotations

from ...dtypes import DType, f64
from ...errors import ShapeError
from ...shapes import Spec
from .._op import Op, Sample
from .._samples import uniform
from ..creation import rand_op
from ._common import float_inputs


def _canon(x: Spec, p: float = 0.5, seed: int = 0) -> dict:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"the drop probability p must be in [0, 1], got {p}")
    return {"p": p, "seed": int(seed)}


def _dtype(x: DType, p: float, seed: int) -> DType:
    return float_inputs(x, what="input")


def _decompose(x, p: float, seed: int):
    keep = rand_op(shape=x.shape, seed=seed, dtype=f64) >= p
    scale = 1.0 / (1.0 - p) if p < 1.0 else 0.0  # p = 1: rand < 1 always, so nothing is kept
    return x * (keep.cast(x.dtype) * scale)


dropout = Op(
    "dropout",
    shape=lambda x, p, seed: x,
    dtype=_dtype,
    params=_canon,
    positional=("p", "seed"),
    decompose=_decompose,
    samples=lambda rng: [
        Sample((uniform(rng, (3, 4)),), {"p": 0.5, "seed": 1}),
        Sample((uniform(rng, (2, 1, 5)),), {"p": 0.2, "seed": 7}),
        Sample((uniform(rng, (1,)),), {"p": 0.0, "seed": 3}),
        Sample((uniform(rng, (4, 4)),), {"p": 1.0, "seed": 5}),
        Sample((uniform(rng, (0, 2)),), {"p": 0.5, "seed": 9}),
    ],
    exact=True,
    doc="x * (rand(seed) >= p) / (1 - p): deterministic for a seed (not PyTorch's random stream).",
)
