"""Which kernel a plan runs for an instruction of a lowered program (passes/lower.py), params bound.

- a kernel is the backend's own for (op, dtype), else the op's NumPy reference; where the reference
  is chosen and the op offers `fast` for the operands' dtypes, that leaner equivalent (the same
  result, bit for bit, without the per-call dtype rule and no-op casts); a composite op that lowering
  left whole runs the backend's kernel, else its decomposition in eager mode;
- the same bits, cheaper, chosen from the concrete shapes: a backend kernel stated exact on a result
  and operands of fewer elements than the backend's `ufunc_below` runs as the op's `fast`, or as its
  reference where that is a ufunc (a ufunc call costs a fraction of a C kernel's set-up), except in a
  fused group a plan may merge (`whole`) and on two float operands (`picks_a_nan`: NumPy's loops give
  NaN + -NaN either sign, and eager mode runs the backend's kernel); `where` on a 0-d condition returns
  the chosen branch (not where that would hand the caller an argument's or another result's array:
  `ALIASING`); a reshape that must copy (a permuted view) copies through the backend's `contiguous`
  kernel (`_SHAPED_FAST`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops
from ..backends import Backend
from ..backends.reference import decomposition_kernel
from ..eager import EAGER
from ..shapes import Spec
from .passes.lower import small_exact


def choose(
    backend: Backend,
    op: Any,
    params: dict,
    spec: Spec,
    operands: tuple[Spec, ...],
    whole: bool,
    native: Callable | None,
    seeds: list[int] | None = None,
) -> tuple[Callable, Callable | None]:
    """The kernel of a step computing `op(*operands, **params)` of concrete `spec` on `backend`, and,
    where that is a leaner one for small operands, the backend's own (what a replay records; else
    None). `whole`: a fused result a plan may merge, which keeps the backend's kernel; `native`: the
    backend's kernel for a composite or fused op, as lowering found it (None: it has none). `seeds`:
    the run's draws, which a random op's `seed` param numbers (`Program.draws`)."""
    if op.group is not None or op.decompose is not None:  # fused or composite: as lowering found
        kernel = native or decomposition_kernel(op, EAGER)
    else:
        kernel = backend.kernel(op, spec.dtype)
    if seeds is not None and "seed" in params and 0 <= params["seed"] < len(seeds):  # (else a constant)
        return _seeded(kernel, params, seeds), None
    bound = native = None  # native: now the backend's kernel where a leaner one runs
    if (
        kernel is not op.reference
        and not whole
        and small_exact(backend, op, spec, operands)
        and not picks_a_nan(spec, operands)
    ):
        if op.fast is not None:
            bound = op.fast(spec.dtype, tuple([s.dtype for s in operands]), **params)
        elif isinstance(op.reference, np.ufunc) and not params:  # neg, abs: already lean
            bound = op.reference
        if bound is not None:  # a replay makes the backend's call, which costs less without Python
            native = functools.partial(kernel, **params) if params else kernel
    if kernel is op.reference:
        shaped = _SHAPED_FAST.get(op.name)
        if shaped is not None:
            bound = shaped(backend, spec, operands, params)
        if bound is None and op.fast is not None:
            bound = op.fast(spec.dtype, tuple([s.dtype for s in operands]), **params)
    if bound is None:
        bound = functools.partial(kernel, **params) if params else kernel
    return bound, native


def _seeded(kernel: Callable, params: dict, seeds: list[int]) -> Callable:
    """The random op's kernel with the seed of the run's draw its `seed` param numbers, read at each call."""
    draw = params["seed"]
    rest = {name: value for name, value in params.items() if name != "seed"}
    return lambda *arrays: kernel(*arrays, seed=seeds[draw], **rest)


def picks_a_nan(spec: Spec, operands: tuple[Spec, ...]) -> bool:
    """Whether the op may meet two NaNs and give one of them: a float result of two float operands or
    more. Which one NumPy's loops give differs between their vector and scalar paths (NaN + -NaN), so
    their bits are not the backend kernel's, which eager mode runs: the plan runs that kernel too."""
    return spec.dtype.is_float and sum(1 for s in operands if s.dtype.is_float) >= 2


def _select(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a if c else b


def _where_select(backend: Backend, out: Spec, specs: tuple[Spec, ...], params: dict) -> Callable | None:
    """`where` with a 0-d condition and both branches of the result's spec (an optimizer's first-step
    test): the chosen branch itself, the bits np.where would copy it to."""
    c, a, b = specs
    return _select if not c.shape and a == out and b == out else None


_RESHAPE_NO_COPY = np.lib.NumpyVersion(np.__version__) >= "2.1.0"  # np.reshape(..., copy=False)


def _merged(x: np.ndarray) -> np.ndarray:
    """A view of x with its adjacent axes merged where their strides allow (and size-1 axes dropped):
    a permuted array's few blocks."""
    shape: list[int] = []
    strides: list[int] = []
    for n, step in zip(x.shape, x.strides):
        if n == 1:
            continue
        if shape and strides[-1] == step * n:
            shape[-1] *= n
            strides[-1] = step
        else:
            shape.append(n)
            strides.append(step)
    return x.reshape(shape)  # a view: each merge keeps the elements' addresses


def _reshape_copying(backend: Backend, out: Spec, specs: tuple[Spec, ...], params: dict) -> Callable | None:
    """`reshape` that copies (a permuted view, say) through the backend's `contiguous` kernel, after
    merging the view's axes (its C copy takes up to 5 axes): the same elements, in a new C-contiguous
    array, as np.reshape's copy; a view where np.reshape gives one."""
    contiguous = backend.native(ops.contiguous, out.dtype)
    if contiguous is None or not _RESHAPE_NO_COPY:
        return None
    shape = params["shape"]

    def reshape(x: np.ndarray) -> np.ndarray:
        if x.flags.c_contiguous:  # a view (the check costs less than copy=False's)
            return x.reshape(shape)
        try:
            return x.reshape(shape, copy=False)
        except ValueError:  # no view of x has this shape
            return contiguous(_merged(x)).reshape(shape)

    return reshape


# op name -> for the backend, the result's and operands' concrete specs and the params, a leaner
# equivalent of the op's reference (as `Op.fast`, but chosen by shape), or None
_SHAPED_FAST: dict[str, Callable[..., Callable | None]] = {
    "where": _where_select,
    "reshape": _reshape_copying,
}
# such a kernel -> one that copies (the same bits), and the operands it may return
ALIASING: dict[Callable, tuple[Callable, slice]] = {_select: (np.where, slice(1, None))}
