"""`EagerMode`: run each op's kernel on the active backend now, and record autograd history."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import autograd, inplace, modes, versions
from .autograd import Node, is_grad_enabled
from .backends import active
from .backends.reference import decomposition_kernel
from .dtypes import DType
from .shapes import Size, Spec, shape_text
from .tensor import Tensor

_CONSTANT_SPECS: dict[tuple, Spec] = {}  # the specs of tensors made from data (Python scalars lifted)
_CONSTANT_SPECS_KEPT = 1024


class Plan:
    """What eager calls of one op on operands of the same specs and params share, found once (`Op.__call__`
    keeps one per key): the result's spec; the kernel that the backend it was chosen on runs (while that
    backend's `stamp` stands): for a composite op its native kernel or None; whether the kernel may
    let NumPy warn; and how vg_eager may call the kernel's C function itself (`fast`: see `_ffi.direct`),
    or None."""

    __slots__ = ("fast", "kernel", "native", "out", "stamp", "warns")

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
        self.fast = getattr(self.kernel, "eager_c", None)
        self.stamp = backend.stamp
        if _C_CALLS["try"] and getattr(backend, "library", None) is not None:
            install_c_calls()  # the cpu backend's library is loaded: vg_eager can be built beside it


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
        blocks = active.LOCAL.stack  # this thread's backend blocks, else the process's default
        backend = blocks[-1] if blocks else active._DEFAULT[0]
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
        elif result.base is not None or (arrays and result is arrays[0]):  # maybe a view of an operand
            inplace.note_view(t, op, args, params)
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
        if is_grad_enabled():
            if target.requires_grad or value.requires_grad:
                inplace.write(target, value)
                return
            inplace.refuse_unrecorded(target)
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

# Eager calls in C (backends/cpu/extension/vg_eager.c): Op.__call__, Elementwise.__call__ and Tensor's
# methods that call one op become vg_eager Methods once the cpu backend's library is loaded; each runs
# the steps of `Op.__call__` and `EagerMode.run` above with the same objects, and hands whatever it does
# not take to the Python code it replaces (kept in `_PYTHON`).
_C_CALLS: dict[str, Any] = {"try": True, "module": None}
_PYTHON: dict[tuple[type, str], Any] = {}


def install_c_calls() -> bool:
    """Bind the ops' eager calls and Tensor's op methods to vg_eager (once); whether they are bound."""
    if not _C_CALLS["try"]:
        return _C_CALLS["module"] is not None
    _C_CALLS["try"] = False
    from . import tensor_methods
    from .backends.cpu import fastcall
    from .dtypes import f32, f64
    from .ops._op import REGISTRY, Op
    from .ops.binary import Elementwise

    ext = fastcall.eager_module()
    if ext is None:
        return False
    ext.setup(Tensor, Plan, Node, DType, Size, f32, f64, EAGER, modes.LOCAL, active.LOCAL, active._DEFAULT,
              versions, conform, _ERROR_STATE, _QUIET, fastcall.recording_test())  # fmt: skip
    _install_readers(ext)
    _PYTHON[(Op, "__call__")] = Op.__dict__["__call__"]
    _PYTHON[(Elementwise, "__call__")] = Elementwise.__dict__["__call__"]
    Op.__call__ = _named(ext.Method(None, _PYTHON[(Op, "__call__")]))
    Elementwise.__call__ = _named(ext.Method(None, _PYTHON[(Elementwise, "__call__")], elementwise=True))
    for name, (op, swap) in tensor_methods.op_methods().items():
        if type(op).__call__ not in (Op.__call__, Elementwise.__call__):
            continue  # a class of its own call
        _PYTHON[(Tensor, name)] = python = Tensor.__dict__[name]
        setattr(
            Tensor, name, _named(ext.Method(op, python, swap=swap, elementwise=isinstance(op, Elementwise)))
        )
    # x.transpose(a, b): shaping.transpose's common case (two int axes in range) made in C
    _PYTHON[(Tensor, "transpose")] = python = Tensor.__dict__["transpose"]
    Tensor.transpose = _named(ext.Method(REGISTRY["permute"], python, transpose=True))
    # x.sum(), x.mean(1, keepdim=True): the op called as tensor_methods' sum and mean call it (the same
    # keywords, defaults and order: the same plan key); a dtype goes through the method
    for name in ("sum", "mean"):
        _PYTHON[(Tensor, name)] = python = Tensor.__dict__[name]
        keywords = {"axis": None, "dim": None, "keepdim": False}
        method = ext.Method(REGISTRY[name], python, keywords=keywords, positional=("dim", "keepdim"))
        setattr(Tensor, name, _named(method))
    # x.reshape(-1, 128), x.view(2, 3): the reshape op called with shape= as the methods call it
    for name, shaped in (("reshape", 1), ("view", 2)):
        _PYTHON[(Tensor, name)] = python = Tensor.__dict__[name]
        setattr(Tensor, name, _named(ext.Method(REGISTRY["reshape"], python, shaped=shaped)))
    # x.softmax(-1), x.log_softmax(dim=1): the op called with axis= (a dtype goes through the method)
    for name in ("softmax", "log_softmax"):
        _PYTHON[(Tensor, name)] = python = Tensor.__dict__[name]
        setattr(Tensor, name, _named(ext.Method(REGISTRY[name], python, along=True)))
    # x[:, 1:5], x[0]: shaping.getitem's case of ints and slices, its slice and reshape ops called in C (an
    # eager view is made_view's no-op, as Mode's: EagerMode keeps it)
    if EagerMode.made_view is modes.Mode.made_view:
        _PYTHON[(Tensor, "__getitem__")] = python = Tensor.__dict__["__getitem__"]
        Tensor.__getitem__ = _named(ext.Method(REGISTRY["slice"], python, getitem=REGISTRY["reshape"]))
    # cat([x, y], dim=0): PyTorch's cat, its legacy rule's check (no 1-D empty tensor) made in C, then concat
    from .functions import legacy_cat

    _PYTHON[(legacy_cat.Cat, "__call__")] = python = legacy_cat.Cat.__dict__["__call__"]
    legacy_cat.Cat.__call__ = _named(ext.Method(REGISTRY["concat"], python, legacy=True))
    # x.shape: the spec's Size read in C (the property's Python frame was a tenth of a reshape's call)
    _PYTHON[(Tensor, "shape")] = python = Tensor.__dict__["shape"]
    ext.shape_fallback(python.fget)
    Tensor.shape = property(ext.shape_of, doc=python.__doc__)
    # x.shape[1]: Size's item as tuple's, in C (a slice makes a Size in Python)
    _PYTHON[(Size, "__getitem__")] = python = Size.__dict__["__getitem__"]
    Size.__getitem__ = _named(ext.Method(None, python, item=True))
    # PyTorch's other names of these methods (x.multiply for x.mul) call what the methods now are
    for alias, name in tensor_methods.ALIASES.items():
        if (Tensor, name) in _PYTHON and Tensor.__dict__.get(alias) is _PYTHON[(Tensor, name)]:
            setattr(Tensor, alias, getattr(Tensor, name))
    autograd._C_WALK[:] = [ext.topological]  # backward's walk of the graph (off with the calls)
    _C_CALLS["module"] = ext
    return True


def _install_readers(loaded: Any) -> None:
    """Give vg_eager (`loaded`) what its direct calls read the thread count, min_chunk and NumPy's buffer
    size through (eager_fast.c's `count_value`): the settings and the objects their Python readers compare."""
    import os

    from .backends import threads
    from .backends.cpu import _ffi
    from .backends.kernel_table import Backend

    environ, encodekey = getattr(os.environ, "_data", None), getattr(os.environ, "encodekey", None)
    keys = (threads.THREAD_COUNT.variable, _ffi.MIN_CHUNK.variable)
    if isinstance(environ, dict) and encodekey is not None and environ is threads._ENVIRON:
        keys = tuple(encodekey(k) for k in keys)
    else:  # the settings' own `get` every time
        environ = None
    bufsize = _ffi.bufsize if _ffi._extobj_contextvar is not None else None
    loaded.readers(
        Backend.__dict__["threads"],
        threads.THREAD_COUNT,
        _ffi.MIN_CHUNK,
        environ,
        *keys,
        bufsize,
        _ffi._bufsize_seen,
        _ffi._extobj_contextvar,
    )


def _named(method: Any) -> Any:
    """A vg_eager Method named and documented as the Python function it stands for."""
    for name in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(method, name, getattr(method.fallback, name, None))
    return method


def c_calls(on: bool) -> bool:
    """Turn the eager calls in C on or off (off: every call runs the Python code); whether they were on.
    For tests and benchmarks that compare both ways."""
    ext = _C_CALLS["module"]
    return False if ext is None else bool(ext.enabled(on))
