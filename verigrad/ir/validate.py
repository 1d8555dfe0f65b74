"""Check a Program: SSA form (each value defined once, before use) and every instruction's spec
re-derived from its op's shape and dtype rules. Passes run it in the tests. (It reads programs without
importing program.py, which imports it for `Program.verify`.)"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .printer import instr_text, spec_text


class IRError(Exception):
    """A Program that is not well formed."""


def validate(program: Any) -> None:
    """Raise IRError where the `Program` is not well formed (see the module docstring)."""
    defined: set[int] = set()
    for v in program.inputs:
        if v.id in defined:
            raise IRError(f"input %{v.id} is defined twice")
        defined.add(v.id)
    for i, instr in enumerate(program.instrs):
        where = f"instruction {i} ({instr_text(instr)})"
        for a in instr.args:
            if a.id not in defined:
                raise IRError(f"{where} uses %{a.id} before it is defined")
        if instr.out.id in defined:
            raise IRError(f"{where} defines %{instr.out.id} a second time")
        defined.add(instr.out.id)
        if instr.name == "const":
            value = instr.params["value"]
            if tuple(value.shape) != instr.out.spec.shape:
                raise IRError(f"{where}: the constant has shape {value.shape}")
            continue
        expected = instr.op.spec(*(Tensor(a.spec, None) for a in instr.args), **instr.params)
        if expected != instr.out.spec:
            raise IRError(f"{where}: the op's rules give {spec_text(expected)}")
    for v in [*program.outputs, *program.updates.values()]:
        if v.id not in defined:
            raise IRError(f"the result %{v.id} is never defined")
    names = {v.name for v in program.inputs[program.n_args :]}
    for name, v in program.updates.items():
        if name not in names:
            raise IRError(f"update of {name}, which is not a captured input")
        target = next(i for i in program.inputs if i.name == name)
        if target.spec != v.spec:
            raise IRError(f"update of {name}: {spec_text(v.spec)} written to {spec_text(target.spec)}")
