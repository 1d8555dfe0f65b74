"""A plan's steps: each one kernel call over numbered slots (`Step`), or several fused steps made one
call (`Merged`); what a step's kernel is (a ufunc, one that writes into `out=`), and the callables the
plan's loop, its generated function and a replay (ir/replay.py) make of a step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..eager import conform
from ..shapes import Spec


class Step:
    """One kernel call: slots in, one slot out, and the spec its result must have."""

    __slots__ = ("fix", "ins", "into", "kernel", "native", "op", "out", "params", "spec")

    def __init__(
        self,
        op: Any,
        kernel: Callable,
        ins: tuple[int, ...],
        out: int,
        spec: Spec,
        params: dict | None = None,
    ) -> None:
        self.op, self.kernel, self.ins, self.out, self.spec = op, kernel, ins, out, spec
        self.params = params or {}
        self.fix: str | None = None  # after the first run: None, "asarray" or "conform"
        self.into: int | None = None  # the input slot whose array the result is written into
        self.native: Callable | None = None  # the backend's kernel where a leaner one runs (small operands)

    def __repr__(self) -> str:
        args = ", ".join(f"x{i}" for i in self.ins)
        into = "" if self.into is None else f" (into x{self.into})"
        return f"x{self.out}: {self.spec!r} = {self.op.name}({args}){into}"


class Merged(Step):
    """Fused steps run as one kernel call in the last one's place (`Plan._merge_groups`, ir/plan.py):
    `outs` their result slots (the last one's last), `intos` the slot each is written into (None: a
    new array), `parts` the steps it stands for."""

    __slots__ = ("intos", "outs", "parts")

    def __init__(self, op: Any, kernel: Callable, ins: tuple[int, ...], parts: list[Step]) -> None:
        super().__init__(op, kernel, ins, parts[-1].out, parts[-1].spec)
        self.parts = parts
        self.outs = tuple([part.out for part in parts])
        self.intos = tuple([part.into for part in parts])

    def __repr__(self) -> str:
        args = ", ".join(f"x{i}" for i in self.ins)
        outs = ", ".join(
            f"x{o}" + ("" if i is None else f" (into x{i})") for o, i in zip(self.outs, self.intos)
        )
        return f"{outs} = {self.op.name}({args})"


def is_ufunc_step(step: Step) -> bool:
    """Whether the step calls a NumPy ufunc on its arrays alone (one result, allocated by the ufunc)."""
    kernel = step.kernel
    return isinstance(kernel, np.ufunc) and kernel.nout == 1 and kernel.nin == len(step.ins)


def takes_out_step(step: Step) -> bool:
    """Whether the step calls a backend's element-wise kernel on its arrays alone that allocates its
    result, or writes it into `out=` (`takes_out`: an array of the result's spec, which may be an
    input), as a ufunc does."""
    kernel = step.kernel
    return getattr(kernel, "takes_out", False) is True and not isinstance(step, Merged)


def writes_into(step: Step) -> bool:
    """Whether the step's kernel allocates a new array for its result, or writes it into `out=` (an
    array of the result's spec, which may be one of its inputs): a fused kernel's."""
    kernel = step.kernel
    return getattr(getattr(kernel, "func", kernel), "writes_into", False) is True


def is_fused_step(step: Step) -> bool:
    """Whether the step runs a fused group's own kernel (one that may write into `out=`)."""
    return step.op.is_fused and "params" in step.params and writes_into(step)


def call_args(step: Step) -> tuple[int, ...]:
    """The slots the loop passes to the step's kernel: its inputs, then the slot(s) it writes into."""
    if isinstance(step, Merged):
        return (*step.ins, *[i for i in step.intos if i is not None])
    return step.ins if step.into is None else (*step.ins, step.into)


def call_outs(step: Step) -> Any:
    """The slot the step's result goes to; a merged call's, a tuple of them."""
    return step.outs if isinstance(step, Merged) else step.out


def _into(kernel: Callable) -> Callable:
    """The kernel (a ufunc, or one that `writes_into`) on all its arguments but the last, into the last
    (as `out`)."""
    return lambda *arrays: kernel(*arrays[:-1], out=arrays[-1])


def recording_kernel(step: Step, fixed: Callable) -> Callable:
    """What a replay records for the step (ir/replay.py): the backend's kernel where the plan runs a
    leaner one on small operands (a replayed call costs less than the ufunc's Python), writing into
    the step's input where the step does and the kernel `takes_out`; else the loop's kernel `fixed`."""
    native = step.native
    if native is None or isinstance(step, Merged):
        return fixed
    if step.into is None:
        return _fixed(native, step)  # with the conversion the step's first result needed (a 0-d sum's)
    if getattr(getattr(native, "func", native), "takes_out", False):
        return _into(native)
    return fixed


def fixed_kernel(step: Step) -> Callable:
    """The step's kernel with the conversion its first result needed, if any."""
    kernel = step.kernel
    if isinstance(step, Merged):
        n, intos = len(step.ins), step.intos

        def merged(*arrays: np.ndarray) -> Any:
            extra = iter(arrays[n:])
            return kernel(*arrays[:n], out=tuple([None if i is None else next(extra) for i in intos]))

        return merged
    if step.into is not None:
        return _into(kernel)
    return _fixed(kernel, step)


def _fixed(kernel: Callable, step: Step) -> Callable:
    """`kernel` with the conversion the step's first result needed, if any."""
    op, spec = step.op, step.spec
    if step.fix == "asarray":
        return lambda *arrays: np.asarray(kernel(*arrays))
    if step.fix == "conform":
        return lambda *arrays: conform(op, kernel(*arrays), spec)
    return kernel
