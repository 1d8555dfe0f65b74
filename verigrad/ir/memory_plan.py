"""What a plan's run holds in memory: the bytes of the results its calls allocate, live from their call to
their last reader, over an order of the calls (ir/plan.py's loop; a replay's fixed buffers hold them all)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..shapes import Spec
from .replay import VIEW_OPS
from .steps import Merged, Step


def nbytes(spec: Spec) -> int:
    """The bytes of an array of the concrete `spec`."""
    return math.prod(spec.shape) * spec.dtype.np.itemsize


def held_bytes(
    calls: Sequence[Step], dead: Sequence[tuple[int, ...]], specs: Sequence[Spec]
) -> tuple[int, int]:
    """(peak, total): the most bytes a run of `calls` holds at once in results its kernels allocate (not a
    view's, not one written into an operand), each dropped after the call of `dead` that reads it last;
    and those results' bytes all together."""
    held: dict[int, int] = {}
    live = total = peak = 0
    for k, step in enumerate(calls):
        outs = step.outs if isinstance(step, Merged) else (step.out,)
        intos = step.intos if isinstance(step, Merged) else (step.into,)
        for slot, into in zip(outs, intos):
            if into is None and step.op.name not in VIEW_OPS:
                held[slot] = size = nbytes(specs[slot])
                live, total = live + size, total + size
        peak = max(peak, live)
        for slot in dead[k]:
            live -= held.pop(slot, 0)
    return peak, total
