"""Sample inputs each op carries, so the registry-driven suites test a new op with no new test code.

Float arrays are made in f64; the suites cast them to the dtype under test. Shapes include scalars,
size-0 and size-1 dimensions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._op import Sample

UNARY_SHAPES = [(), (0,), (1,), (5,), (3, 4), (2, 1, 3)]
BINARY_SHAPES = [
    ((3, 4), (3, 4)),
    ((4, 3), (3,)),
    ((4, 1), (1, 3)),
    ((2, 3), ()),
    ((0, 3), (1, 3)),
    ((1,), (5,)),
    ((2, 1, 4), (3, 1)),
]


def uniform(rng: np.random.Generator, shape: tuple, low: float = -2.0, high: float = 2.0):
    return rng.uniform(low, high, size=shape)


def unary(low: float = -2.0, high: float = 2.0) -> Callable[[np.random.Generator], list[Sample]]:
    """Samples for an element-wise op whose domain is [low, high]."""
    return lambda rng: [Sample((uniform(rng, s, low, high),)) for s in UNARY_SHAPES]


def binary(low: float = -2.0, high: float = 2.0) -> Callable[[np.random.Generator], list[Sample]]:
    """Samples for a broadcasting binary op with operands in [low, high]."""
    return lambda rng: [
        Sample((uniform(rng, sa, low, high), uniform(rng, sb, low, high))) for sa, sb in BINARY_SHAPES
    ]
