"""Backward as a Program -> Program transformation, with the VJPs the tape uses.

`grad_program(program, argnums)` replays the program's instructions in a new trace, with the chosen
arguments as the variables, then differentiates its scalar output with `autograd.gradients`: each
VJP becomes instructions after the new program's `backward:` mark. It is the same code path as
`verigrad.grad` inside `verigrad.trace`, so `grad_program(trace(f, *specs))` prints exactly as
`trace(grad(f), *specs)` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import modes
from ..autograd import gradients
from ..registry import FUNCS
from ..tensor import Tensor
from .program import Program
from .trace import TraceMode, _renumber


def replay(program: Program, mode: TraceMode, args: Sequence[Tensor]) -> dict[int, Tensor]:
    """Run the program's instructions as op calls in `mode` (active): the arguments are `args`, the
    captured inputs their eager tensors, and updates are assigned again. Returns value id -> tensor."""
    env: dict[int, Tensor] = {v.id: a for v, a in zip(program.inputs, args)}
    env.update({v.id: t for v, t in zip(program.inputs[program.n_args :], program.captured)})
    for instr in program.instrs:
        if instr.name == "const":
            value = instr.params["value"]
            env[instr.out.id] = mode.constant(value, instr.out.spec.dtype)
        else:
            inputs = tuple(env[a.id] for a in instr.args)
            env[instr.out.id] = mode.apply(instr.op, inputs, instr.params, instr.out.spec)
    by_name = {v.name: t for v, t in zip(program.inputs[program.n_args :], program.captured)}
    by_name.update({v.name: a for v, a in zip(program.inputs, args)})  # arguments written into
    for name, value in program.updates.items():
        mode.assign(by_name[name], env[value.id])
    return env


def grad_program(program: Program, argnums: int | Sequence[int] = 0, with_value: bool = False) -> Program:
    """The program of the gradient of `program`'s single scalar output with respect to its
    arguments `argnums` (its outputs: the gradients in that order, after the value if `with_value`).
    Captured inputs keep their names; updates are kept."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if len(program.outputs) != 1:
        raise ValueError(f"grad_program needs a program with one output, this one has {len(program.outputs)}")
    if any(not -program.n_args <= i < program.n_args for i in nums):
        raise ValueError(f"argnums {argnums!r} is out of range for {program.n_args} argument(s)")
    nums = tuple(i % program.n_args for i in nums)
    out_spec = program.outputs[0].spec
    if not out_spec.dtype.is_float or out_spec.shape != ():
        raise ValueError(f"grad_program needs a scalar floating output, got {out_spec!r}")
    new = Program()
    args = []
    for i, v in enumerate(program.inputs[: program.n_args]):
        t = Tensor(v.spec, new.add_input(v.spec, v.name))
        if i in nums:
            if not v.spec.dtype.is_float:
                raise ValueError(f"argument {v.name} is {v.spec.dtype.name}: it has no gradient")
            t.requires_grad_(True)
        args.append(t)
    new.n_args = len(args)
    names = {id(t): v.name for v, t in zip(program.inputs[program.n_args :], program.captured)}
    mode = TraceMode(new, names, list(program.captured))
    try:
        with modes.using(mode):
            env = replay(program, mode, args)
            out = env[program.outputs[0].id]
            variables = [args[i] for i in nums]
            found = gradients(out, variables) if out.requires_grad else [None] * len(variables)
            zeros = FUNCS["zeros_like"]
            grads = [g if g is not None else zeros(v.detach()) for g, v in zip(found, variables)]
            results = [out, *grads] if with_value else grads
            new.outputs = [mode.value_of(t) for t in results]
    finally:
        mode.restore()
    _renumber(new)
    return new


__all__ = ["grad_program", "replay"]
