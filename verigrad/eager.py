"""`EagerMode`: run each op's kernel on the active backend now, and record autograd history."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import inplace, modes, versions
from .autograd import Node, is_grad_enabled
from .backends.active import _ACTIVE
from .backends.reference import decomposition_kernel
from .dtypes import DType
from .shapes import Spec, shape_text
from .tensor import Tensor

_CONSTANT_SPECS: dict[tuple, Spec] = {}  # the specs of tensors made from data (Python scalars lifted)
_CONSTANT_SPECS_KEPT = 1024


class Plan:
    """What eager calls of one op on operands of the same specs and params share, found once (`Op.__call__`
    keeps one per key): the result's spec; the kernel that the backend it was chosen on runs (while that
    backend's `stamp` stands): for a composite op its native kernel or None; and whether the kernel may
    let NumPy warn."""

    __slots__ = ("kernel", "native", "out", "stamp", "warns")

    def __init__(self, out: Spec) -> None:
        self.out = out
        self.stamp: Any = None  # no kernel chosen yet

    def choose(self, op: Any, backend: Any) -> None:
        if op.decompose is None:
            self.kernel = backend.kernel(op, self.out.dtype)
            self.native = self.kernel is not op.reference  # a reference may be replaced: checked per call
        else:
            self.kernel, self.native = backend.native(op, self.out.dtype), True
        self.warns = not getattr(self.kernel, "never_warns", False)
        self.stamp = backend.stamp


class EagerMode(modes.Mode):
    name = "eager"

    def plan(self, op: Any, args: tuple[Tensor, ...], params: dict) -> Plan:
        """The plan of a call of `op` on `args` (the spec rules run here: their errors are raised now)."""
        return Plan(op._spec(args, params))

    def apply(self, op: Any, args: tuple[Tensor, ...], params: dict, out: Spec) -> Tensor:
        return self.run(op, args, params, Plan(out))

    def run(self, op: Any, args: tuple[Tensor, ...], params: dict, plan: Plan) -> Tensor:
        """Run `op`'s kernel on the active backend now (`plan` says which, once per backend and table),
        and record a tape node where an operand requires grad."""
        backend = _ACTIVE[-1]
        if plan.stamp is not backend.stamp or op.group is not None:  # each backend's stamps are its own
            plan.choose(op, backend)  # a fused group's generated kernel is looked up every time
        kernel = plan.kernel
        if not plan.native and kernel is not op.reference:
            plan.choose(op, backend)
            kernel = plan.kernel
        arrays, wanted = [], False  # one pass over the operands: their data, and whether one wants a grad
        for a in args:
            data = a.payload
            if type(data) is not np.ndarray and not isinstance(data, np.ndarray):
                raise _abstract(op, a)
            arrays.append(data)
            if a.requires_grad:
                wanted = True
        # as PyTorch's: only a floating result has a gradient (a cast to an integer, a comparison, an
        # index is a constant)
        needs_grad = wanted and op.differentiable and modes.LOCAL.grad[-1] and plan.out.dtype.is_float
        warns = plan.warns
        if op.decompose is not None:
            if needs_grad and op.vjp is None:
                return op.decompose(*args, **params)  # autograd goes through the primitives
            if kernel is None:
                if not needs_grad:
                    return op.decompose(*args, **params)
                kernel = decomposition_kernel(op, EAGER)  # one tape node with the op's VJP
                warns = True
        if warns:
            result = quietly(kernel, arrays, params)
        else:
            result = kernel(*arrays, **params) if params else kernel(*arrays)
        out = plan.out
        if type(result) is not np.ndarray or result.dtype is not out.dtype.np or result.shape != out.shape:
            result = conform(op, result, out)
        t = Tensor(out, result)
        if needs_grad:
            t.requires_grad = True
            t._node = Node(op, args, params)
        return t

    def constant(self, array: np.ndarray, dtype: DType) -> Tensor:
        key = (array.shape, dtype)  # one spec per shape and dtype: made once, and its hash remembered
        spec = _CONSTANT_SPECS.get(key)
        if spec is None:
            if len(_CONSTANT_SPECS) >= _CONSTANT_SPECS_KEPT:
                _CONSTANT_SPECS.clear()
            spec = _CONSTANT_SPECS[key] = Spec(tuple(array.shape), dtype)
        return Tensor(spec, array)

    def assign(self, target: Tensor, value: Tensor) -> None:
        """Write `value` (target's shape and dtype) into target's memory, ticking its version; recorded
        for autograd, as PyTorch records it, where grad mode is on and either requires grad."""
        if not target.payload.flags.writeable:
            raise RuntimeError("cannot write into a broadcast (read-only) view")
        if (target.requires_grad or value.requires_grad) and is_grad_enabled():
            inplace.write(target, value)
            return
        np.copyto(target.payload, value.payload)
        versions.note_write(target.payload)


try:  # NumPy's error state, a new object each time it is set (as in backends/cpu/_ffi.py)
    from numpy._core._ufunc_config import _extobj_contextvar as _ERROR_STATE
except ImportError:  # another NumPy layout: np.errstate every time
    _ERROR_STATE = None
_QUIET: dict[Any, Any] = {}  # an error state -> the same with every floating-point warning ignored
_QUIET_KEPT = 64


def quietly(kernel: Any, arrays: list, params: dict) -> Any:
    """`kernel(*arrays, **params)` with NumPy's floating-point warnings off (log(-1) is NaN by definition,
    not a warning): what `np.errstate(all="ignore")` sets, made once per error state in force and set
    directly (a quarter of the context manager's cost)."""
    if _ERROR_STATE is None:
        with np.errstate(all="ignore"):
            return kernel(*arrays, **params)
    state = _ERROR_STATE.get()
    quiet = _QUIET.get(state)
    if quiet is None:
        with np.errstate(all="ignore"):
            quiet = _ERROR_STATE.get()
        if len(_QUIET) >= _QUIET_KEPT:
            _QUIET.clear()
        _QUIET[state] = quiet  # the key holds the state alive: its identity is not reused
    token = _ERROR_STATE.set(quiet)
    try:
        return kernel(*arrays, **params)
    finally:
        _ERROR_STATE.reset(token)


def _abstract(op: Any, a: Tensor) -> TypeError:
    return TypeError(
        f"{op.name}: an abstract tensor {a.spec!r} reached eager code; "
        "specs only run inside verigrad.check or verigrad.abstract()"
    )


def conform(op: Any, result: Any, out: Spec) -> np.ndarray:
    """The kernel's result with the dtype of the op's rule; its shape must match the rule's."""
    want = out.dtype.np
    if type(result) is not np.ndarray or (result.dtype is not want and result.dtype != want):
        result = np.asarray(result).astype(want, copy=False)
    if result.shape != out.shape:
        raise AssertionError(
            f"{op.name} produced shape {list(result.shape)} but its rule says {shape_text(out.shape)}"
        )
    return result


EAGER = EagerMode()
modes.set_default(EAGER)
