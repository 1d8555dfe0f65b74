"""Print a Program: a header with the inputs, one line per instruction, `backward:`, and returns.
(It reads programs without importing program.py, which imports it for `str(program)`.)

program(%0 x: f32[n,din], %1 w: f32[dout,din]) {
  %2: f32[din,dout] = permute %1 (axes=(1,0))
  %3: f32[n,dout] = matmul %0 %2
  return %3
}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType
from ..shapes import Dim, Spec


def const_text(value: np.ndarray) -> str:
    if value.ndim == 0:
        return str(value[()])  # the shortest text that reads back as the same value of its dtype
    flat = value.reshape(-1)
    if flat.size and (flat == flat[0]).all():
        return f"full({flat[0]})"
    return "array(...)"


def spec_text(spec: Spec) -> str:
    return f"{spec.dtype.name}[{','.join(str(d) for d in spec.shape)}]"


# params left out of the printed line when they have these values: the usual settings of windowed
# ops and reductions. A pair of equal sizes prints as one number: `kernel=2` for (2, 2).
_QUIET = {
    "padding": ((0, 0), 0),
    "dilation": ((1, 1), 1),
    "layout": ("NCHW",),
    "pad_value": (0.0,),
    "keepdim": (False,),
}


def param_text(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == value[1] and isinstance(value[0], int):
        return str(value[0])
    if isinstance(value, tuple | list):
        return "(" + ",".join(param_text(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, DType | Dim):
        return str(value)
    if isinstance(value, np.ndarray):
        return const_text(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def instr_text(instr: Any) -> str:
    """One instruction (an `Instr`) as a line of the program's text, without its indent."""
    head = f"%{instr.out.id}: {spec_text(instr.out.spec)} = {instr.name}"
    if instr.name == "const":
        return f"{head} {const_text(instr.params['value'])}"
    if instr.op.is_fused:
        return head + _group_text(instr)
    args = "".join(f" %{a.id}" for a in instr.args)
    params = ", ".join(f"{k}={param_text(v)}" for k, v in instr.params.items() if not _is_quiet(k, v))
    return head + args + (f" ({params})" if params else "")


def _group_text(instr: Any) -> str:
    """` %3 %4 {relu(add(%3, %4))}`: a fused group's inputs and its composed expression."""
    group = instr.op.group
    done: list[str] = []
    for op, refs, p in zip(group.ops, group.wiring, instr.params["params"]):
        args = [f"%{instr.args[k].id}" if kind == "in" else done[k] for kind, k in refs]
        args += [f"{k}={param_text(v)}" for k, v in p]
        done.append(f"{op.name}({', '.join(args)})")
    inputs = "".join(f" %{a.id}" for a in instr.args)
    return f"{inputs} {{{done[-1]}}}"


def _is_quiet(key: str, value: Any) -> bool:
    return any(value == q and type(value) is type(q) for q in _QUIET.get(key, ()))


def _input_text(v: Any) -> str:
    return f"%{v.id} {v.name}: {spec_text(v.spec)}"


def format_program(program: Any) -> str:
    """The text of a `Program` (see the module docstring)."""
    inputs = [_input_text(v) for v in program.inputs]
    if len(inputs) <= 4:
        lines = [f"program({', '.join(inputs)}) {{"]
    else:
        lines = ["program(", *(f"    {t}," for t in inputs), ") {"]
    for i, instr in enumerate(program.instrs):
        if i == program.backward_at:
            lines.append("backward:")
        lines.append("  " + instr_text(instr))
    if program.outputs:
        lines.append("  return " + ", ".join(f"%{v.id}" for v in program.outputs))
    lines += [f"  {name} <- %{v.id}" for name, v in program.updates.items()]
    if getattr(program, "draws", None):
        lines.append(f"  # seed=k: the k-th of the {len(program.draws)} random draws each run makes")
    lines.append("}")
    return "\n".join(lines)
