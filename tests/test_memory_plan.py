"""ir/memory_plan.py: the bytes a run of a plan's calls holds, at its peak and all together."""

from __future__ import annotations

import verigrad
from verigrad.ir.memory_plan import held_bytes, nbytes
from verigrad.ir.steps import Step

OPS = verigrad.REGISTRY


def _step(op: str, ins: tuple[int, ...], out: int, shape: list[int], into: int | None = None) -> Step:
    step = Step(OPS[op], lambda *a: None, ins, out, verigrad.spec(shape))
    step.into = into
    return step


def test_held_bytes_counts_allocated_results_until_their_last_reader():
    """A view (reshape) and a result written into its operand allocate nothing; a result goes after its
    last reader: the three KiB results are never live together, the sum's 4 bytes live with the last."""
    specs = [verigrad.spec(s) for s in ([256], [256], [16, 16], [16, 16], [16, 16], [], [256])]
    calls = [
        _step("exp", (0,), 1, [256]),  # 1 KiB
        _step("reshape", (1,), 2, [16, 16]),  # a view of it
        _step("exp", (2,), 3, [16, 16]),  # 1 KiB, once 1 has gone
        _step("add", (3, 3), 4, [16, 16], into=3),  # into 3's array
        _step("sum", (4,), 5, []),  # 4 bytes
        _step("exp", (0,), 6, [256]),  # 1 KiB, with the sum
    ]
    dead = [(), (1,), (2,), (3, 4), (), (6,)]
    assert nbytes(specs[1]) == 1024 and nbytes(specs[5]) == 4
    assert held_bytes(calls, dead, specs) == (1024 + 4, 3 * 1024 + 4)
    # 1 read last by the exp after its view: both KiB results live then
    assert held_bytes(calls[:3], [(), (), (1, 2)], specs) == (2048, 2048)
