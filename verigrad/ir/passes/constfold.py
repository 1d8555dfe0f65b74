"""Constant folding: an instruction whose result is known before the program runs becomes a `const`.

Two kinds are folded:
- shape arithmetic: `numel_of x` when the dimensions it counts are concrete (ints; or, given a binding
  of the symbols, any), whatever x's values;
- const-only instructions: every argument a const (creation ops such as `full` and `arange` have none)
  and every param and the result's shape concrete.

The value is the op's reference run on the constants, with the dtype conversion the executor applies,
so the program gives the same bits as before on the reference backend (a backend with its own kernel
for an inexact op would have given that kernel's result instead, within the op's stated bound).

Not folded: composite ops, random ops (their seed stays visible where randomness enters), results of
more than `MAX_ELEMENTS` elements (the program would carry them), and outputs or updates (the caller
would receive the program's own array, the same one each run).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...shapes import Dim, evaluate, numel
from ..program import Program
from ._rewrite import Rewriter, is_const, results

MAX_ELEMENTS = 1024


def run(program: Program, values: dict[str, int] | None = None) -> Program:
    """Fold what is known; with `values` (a binding of the symbols) counts over symbolic dimensions
    are known too, and the program is then only valid for that binding."""
    rw = Rewriter(program)
    keep_results = results(program)
    for index, old in enumerate(program.instrs):
        instr = rw.renamed(old)
        value = None if instr.out.id in keep_results else _fold(instr, rw, values)
        if value is None:
            rw.keep(instr, index, renamed=True)
        else:
            rw.emit("const", (), {"value": value}, instr.out, index)
    return rw.finish()


def _fold(instr, rw: Rewriter, values: dict[str, int] | None) -> np.ndarray | None:
    op, spec = instr.op, instr.out.spec
    if isinstance(op, str) or op.is_composite or op.reference is None or "seed" in instr.params:
        return None
    if instr.name == "numel_of":
        x = instr.args[0]
        counted = [_known(x.spec.shape[a], values) for a in instr.params["axis"]]
        if any(d is None for d in counted):
            return None
        # the reference reads only the counted sizes and the dtype: a stand-in with 1 elsewhere
        stand_in = [1] * len(x.spec.shape)
        for a, d in zip(instr.params["axis"], counted):
            stand_in[a] = d
        arrays = [np.broadcast_to(np.zeros((), x.spec.dtype.np), stand_in)]
    else:
        producers = [rw.producer.get(a.id) for a in instr.args]
        if not all(is_const(p) for p in producers):
            return None
        arrays = [p.params["value"] for p in producers]
    if not _concrete(spec.shape) or not _concrete(instr.params) or numel(spec.shape) > MAX_ELEMENTS:
        return None
    with np.errstate(all="ignore"):
        result = op.reference(*arrays, **instr.params)
    if not isinstance(result, np.ndarray) or result.dtype != spec.dtype.np:  # as the executor does
        result = np.asarray(result).astype(spec.dtype.np, copy=False)
    if result.shape != spec.shape:
        raise AssertionError(f"{instr.name} folded to shape {result.shape}; its rule says {spec.shape}")
    return result  # a view of a constant stays one: the layout is part of the bits downstream


def _known(d: Any, values: dict[str, int] | None) -> int | None:
    if isinstance(d, int):
        return d
    if values is None:
        return None
    try:
        return evaluate(d, values)
    except KeyError:
        return None


def _concrete(value: Any) -> bool:
    if isinstance(value, Dim):
        return False
    if isinstance(value, tuple | list):
        return all(_concrete(v) for v in value)
    if isinstance(value, dict):
        return all(_concrete(v) for v in value.values())
    return True
