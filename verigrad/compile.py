"""`check` (a function on abstract tensors: no data, no kernels), `trace`, and `compile`."""

from __future__ import annotations

import functools
import gc
import operator
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from . import modes
from .autograd import Node, enable_grad, is_grad_enabled, records_history
from .autograd import grad as autograd_grad
from .backends import get_backend
from .errors import ShapeError
from .ir.passes import dce, optimize
from .ir.plan import Plan, bind
from .ir.split import split
from .ir.trace import capture_names, flatten, trace_function, unflatten
from .ops import from_numpy, tensor, zeros
from .shapes import Spec, dims, is_concrete, multiple_of
from .tensor import Tensor


def _out_specs(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.spec
    if isinstance(value, tuple | list):
        specs = [_out_specs(v) for v in value]
        return type(value)(*specs) if hasattr(value, "_fields") else type(value)(specs)  # named tuples too
    if isinstance(value, dict):
        return {k: _out_specs(v) for k, v in value.items()}
    return value


def check(fn: Callable[..., Any], *specs: Spec) -> Any:
    """Run `fn` on tensors that are only specs; return the output spec(s) or raise ShapeError. A
    function that calls `backward()` (a training step) is checked through its backward pass and
    optimizer update too; the `.grad` of every tensor it reaches is left as it was.

    >>> n, din, dout = verigrad.dims("n din dout")
    >>> verigrad.check(lambda x, w: x @ w.T, verigrad.spec([n, din]), verigrad.spec([dout, din]))
    f32[n, dout]
    """
    for i, s in enumerate(specs):
        if not isinstance(s, Spec):
            raise TypeError(f"argument {i} of check must be a verigrad.spec, got {type(s).__name__}")
    kept = [(t, t.grad) for t in capture_names(fn)[1]]
    try:
        with modes.using(_CheckMode()):
            return _out_specs(fn(*(Tensor(s, None) for s in specs)))
    finally:
        for t, g in kept:
            t.grad = g


class _CheckMode(modes.AbstractMode):
    """`check`'s mode: specs only, with autograd's records (as a trace keeps them), so that a backward
    pass inside the function is checked as well."""

    def apply(self, op: Any, args: tuple[Tensor, ...], params: dict, out: Spec) -> Tensor:
        t = Tensor(out, None)
        if records_history(op, args, out):
            t.requires_grad = True
            t._node = Node(op, args, params)
        return t


MAX_VARIANTS = 8  # programs traced for one signature, for different values of what they read from Python


class Compiled:
    """`fn` traced once per argument signature, then run from a plan cached per binding of its symbols.

    A call binds the symbols from the arguments' shapes and runs the plan for (those sizes, the
    arguments' dtypes and layouts, the backend), building it on first use. The default signature
    makes the leading dimension shared by the arguments a symbol `B` (falling back to the concrete
    shapes when the function needs them); `specs` fixes it instead, and arguments that break it
    raise ShapeError or DTypeError naming the argument and the symbol.

    Python values the trace read are checked at each call: a module's `training` flag (`model.eval()`)
    and the numbers, strings, bools and None in the function's closure cells and the globals its code
    names; where one has changed, the function is traced again for the new values (up to
    `MAX_VARIANTS` programs a signature, then it runs eagerly, with a warning). Other Python values
    (a list's items, a plain object's attributes) are read when it is traced, as JAX's `jit` does:
    pass what changes as a tensor. A call with keyword arguments runs eagerly. A call whose results must
    carry gradient history (with grad on, a module's output that `backward()` outside will
    differentiate) runs the forward half of the function's joint program (ir/split.py), and its
    results' nodes run the backward half. Random draws (dropout, `rand`) are made at each call, in the order
    and with the numbers of the eager call.

    Captured tensors (parameters, optimizer state) are read at each call and the ones the function
    assigns are written back in place, so a compiled training step updates the model as the eager
    step does; so are the arguments it writes into (`x[k] += v`: the caller's tensor or array).
    Gradients live inside the call: `.grad` is left as it was, and the results carry no gradient
    history; a function whose backward pass feeds nothing it returns or updates raises RuntimeError
    (its gradients would be lost). Called inside a trace, under `verigrad.abstract()`, or with arguments that
    require grad, the function simply runs (so it composes with `trace`, `grad` and `check`).

    Threads may call it at once: a lock of its own makes one trace per signature and one plan per
    binding (the others wait for it), and a plan runs one call at a time, its updates written back before
    the next (`Plan.run`): threads calling one training step on one model apply every step, in turn.
    """

    def __init__(self, fn: Callable[..., Any], specs: tuple[Spec, ...] | None = None, optimize: bool = True):
        if specs is not None:
            specs = tuple(specs)
            for i, s in enumerate(specs):
                if not isinstance(s, Spec):
                    raise TypeError(f"specs[{i}] must be a verigrad.spec, got {type(s).__name__}")
        self.fn = fn
        self.specs = specs
        self.optimize = optimize
        # signature -> its (program, result structure)s, one per value of the flags the trace read
        self._programs: dict[Any, list[tuple[Any, Any]]] = {}
        self._needs_concrete: set[Any] = set()  # default signatures the function cannot trace
        self._eager: set[Any] = set()  # signatures traced MAX_VARIANTS times: new values run eagerly
        self._halves: dict[int, tuple | bool] = {}  # grad-mode program -> `_split`
        self._plans: dict[Any, Any] = {}
        self._fixed: tuple[Any, Any] | None = None  # the entry of declared specs, once traced
        self._seen: dict[Any, Any] = {}  # (program, argument shapes, dtypes and layouts) -> plan
        self._layouts: dict[int, tuple[list, tuple]] = {}  # program -> its captured arrays, their layouts
        self._quick: dict[Any, tuple[Any, Any]] = {}  # argument shapes and dtypes -> _entry's answer
        self._captured: dict[int, dict[str, Tensor]] = {}  # program -> its captured tensors by name
        self.counts = {"traces": 0, "plans": 0}  # hits: the plans' runs but their first (`stats`)
        self._lock = threading.RLock()  # held while tracing and planning (`_traced` may call itself)
        functools.update_wrapper(self, fn, updated=())

    def program(self, *args: Any) -> Any:
        """The (optimized) Program these arguments run, tracing it if needed."""
        args = self._lift(args)
        entry = self._entry(args)
        return (entry or self._trace(self.specs or _default_specs(args)))[0]

    def _lift(self, args: tuple[Any, ...]) -> tuple[Tensor, ...]:
        args = tuple(_as_tensor(a) for a in args)
        if self.specs is not None and len(args) != len(self.specs):
            raise TypeError(
                f"{_name(self.fn)} was compiled for {len(self.specs)} argument(s), got {len(args)}"
            )
        return args

    def _entry(self, args: tuple[Tensor, ...]) -> tuple[Any, Any]:
        entry, quick = self._fixed, None  # declared specs, traced once (hashing them costs ~1 us each)
        if entry is None:
            if self.specs is not None:
                return self._traced(args)
            # the default signature depends on the arguments' shapes and dtypes (and B's declared
            # multiple) alone: making it costs ~10 us a call, so the entry is kept by them
            quick = (tuple([(a.shape, a.dtype) for a in args]), multiple_of("B"))
            entry = self._quick.get(quick)
        if entry is None or (entry[0].guards and not entry[0].holds()):  # a Python value it read changed
            entry = self._traced(args)
            if entry is None:
                return None
            if quick is not None:
                if len(self._quick) > 1024:
                    self._quick.clear()
                self._quick[quick] = entry
        return entry

    def _traced(self, args: tuple[Tensor, ...]) -> tuple[Any, Any]:
        with self._lock:
            return self._traced_locked(args)

    def _traced_locked(self, args: tuple[Tensor, ...]) -> tuple[Any, Any] | None:
        """The entry for these arguments whose program's guards hold (`Program.holds`), traced if none;
        None after `MAX_VARIANTS` traces of the signature (with a warning: it then runs eagerly)."""
        specs = self.specs or _default_specs(args)
        key = tuple(specs)
        if key in self._needs_concrete:
            specs = key = tuple(a.spec for a in args)
        entries = self._programs.setdefault(key, [])
        entry = next((e for e in entries if e[0].holds()), None)
        if entry is None and len(entries) >= MAX_VARIANTS:
            if key not in self._eager:
                self._eager.add(key)
                warnings.warn(
                    f"{_name(self.fn)} was traced {MAX_VARIANTS} times for one signature because Python "
                    "values it reads (a module's training flag, numbers in its closure or globals) kept "
                    "changing; it now runs eagerly for new values (pass changing numbers as tensors)",
                    stacklevel=4,
                )
            return None
        if entry is None:
            try:
                entry = self._trace(specs)
            except (ShapeError, TypeError):
                if self.specs is not None or all(is_concrete(s.shape) for s in specs):
                    raise
                self._needs_concrete.add(key)  # the function needs concrete sizes: trace per size
                return self._traced_locked(args)
            entries.append(entry)
        if self.specs is not None and key not in self._needs_concrete:
            self._fixed = entry
        return entry

    def _trace(self, specs: tuple[Spec, ...]) -> tuple[Any, Any]:
        program, tree = trace_function(self.fn, specs)
        self.counts["traces"] += 1
        if program.backward_at is not None and dce.run(program).backward_at is None:
            raise RuntimeError(
                f"{_name(self.fn)} runs a backward pass but uses none of its gradients: a compiled call "
                "leaves .grad as it was, so they would be lost. Take the optimizer step inside the "
                "function, or return the gradients (verigrad.grad, verigrad.value_and_grad)"
            )
        return (optimize(program) if self.optimize else program), tree

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if (
            kwargs
            or modes.current().name != "eager"
            or (is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args))
        ):
            return self.fn(*args, **kwargs)  # inside a trace or a check, or differentiated from outside
        lifted = self._lift(args)
        entry = self._entry(lifted)
        if entry is None:  # the Python values it reads change from call to call: it runs eagerly
            return self.fn(*args)
        program, tree = entry
        if program.outputs_require_grad:  # a result a backward() outside will differentiate
            return self._with_history(lifted, program, tree)
        return unflatten(tree, iter(self._run(lifted, program)[0]))

    def _run(
        self, args: tuple[Tensor, ...], program: Any, seeds: list[int] | None = None
    ) -> tuple[list[Tensor], list[int]]:
        """The results of the program's plan for these arguments, its updates written back, and the
        seeds its random draws had (drawn now, unless `seeds` gives them)."""
        backend = get_backend()
        arrays = [a.payload for a in args]
        captured = [t.payload for t in program.captured]
        # the plan for arguments of shapes, dtypes and layouts seen before, without binding again
        layouts = tuple([_layout(a) for a in arrays]) + self._captured_layouts(program, captured)
        seen = (id(program), backend.name, tuple([(a.shape, a.dtype) for a in arrays]), layouts)
        plan = self._seen.get(seen)
        if plan is None:
            plan = self._plan(program, args, seen, layouts, backend)
        with plan.lock:  # and the write-back: another thread's run of the plan reads the updates
            if program.draws:  # each call draws its random ops' seeds, as the eager call would
                plan.seeds[:] = seeds if seeds is not None else [g.next_seed() for g in program.draws]
            drawn = list(plan.seeds)
            outputs, updates = plan.run_locked(arrays + captured)
            if updates:
                targets = self._captured_by_name(program)
                if any(name not in targets for name in updates):  # arguments the function wrote into
                    targets = {**targets, **{v.name: a for v, a in zip(program.inputs, args)}}
                _write_back(targets, updates)
        return [Tensor(Spec(o.shape, v.spec.dtype), o) for o, v in zip(outputs, program.outputs)], drawn

    def _with_history(self, args: tuple[Tensor, ...], program: Any, tree: Any) -> Any:
        """A call whose results carry gradient history (a compiled model trained with backward()
        outside, as torch.compile's): the function's joint program (forward, then the VJPs of the
        captured tensors that require grad) split in two (ir/split.py); the forward half runs now and
        keeps the residuals, and each result that requires grad gets a node whose VJP runs the backward
        half, so .grad gets the eager bits. Where the halves do not separate, it runs eagerly."""
        halves = self._halves.get(id(program))
        if halves is None:
            halves = self._halves[id(program)] = self._split(program)
        if not halves:
            return self.fn(*args)
        forward, backward, targets, gradient_tree = halves
        values, _ = self._run(args, forward)
        count = len(program.outputs)
        results, saved = values[:count], values[count:]
        wanted = program.output_grads
        vjp = functools.partial(
            self._backward, backward, args, saved, [r.spec for r in results], wanted, gradient_tree
        )
        for i, (r, needed) in enumerate(zip(results, wanted)):
            if needed:
                r.requires_grad = True
                r._node = Node(_CompiledCall, targets, {"backward": vjp, "index": i})
        return unflatten(tree, iter(results))

    def _split(self, program: Any) -> tuple | bool:
        """(forward, backward, the captured tensors differentiated, the gradients' structure) of the
        function whose grad-mode trace is `program`; False where it cannot be split."""
        targets = tuple(t for t in program.captured if t.requires_grad)
        if not targets:
            return False
        fn, count, wanted = self.fn, program.n_args, program.output_grads

        def joint(*values: Tensor) -> tuple:
            with enable_grad():
                results, _ = flatten(fn(*values[:count]))
                differentiated = [r for r, w in zip(results, wanted) if w]
                grads = autograd_grad(differentiated, targets, grad_outputs=values[count:], allow_unused=True)
                return (*results, *grads)

        cotangents = [v.spec for v, w in zip(program.outputs, wanted) if w]
        traced, joint_tree = trace_function(joint, (*[v.spec for v in program.inputs[:count]], *cotangents))
        halves = split(traced, count, len(cotangents), len(program.outputs))
        if halves is None:
            return False
        forward, backward = (optimize(h) if self.optimize else h for h in halves)
        return forward, backward, targets, (tuple, joint_tree[1][len(program.outputs) :])

    def _backward(
        self, backward: Any, args: tuple, saved: list, specs: list, wanted: tuple, gradient_tree: Any,
        index: int, g: Tensor,
    ) -> tuple:  # fmt: skip
        """The gradients of the differentiated captured tensors for result `index`'s gradient `g` (the
        other results' zero), from the backward half of the call."""
        if is_grad_enabled():
            raise NotImplementedError(
                f"{_name(self.fn)}: a second derivative (create_graph=True) through a compiled call is not "
                "supported; call the function (or module) without verigrad.compile"
            )
        cotangents = [
            g if i == index else zeros(*s.shape, dtype=s.dtype) for i, s in enumerate(specs) if wanted[i]
        ]
        gradients, _ = self._run((*args, *cotangents, *saved), backward)
        return unflatten(gradient_tree, iter(gradients))

    def _plan(
        self, program: Any, args: tuple[Tensor, ...], seen: tuple, layouts: tuple, backend: Any
    ) -> Plan:
        """The plan for these arguments (`seen`: their program, backend, shapes, dtypes and layouts), built
        on first use; one thread builds it while the others wait."""
        with self._lock:
            plan = self._seen.get(seen)
            if plan is not None:
                return plan
            values = bind(program, args)
            key = (id(program), tuple(sorted(values.items())), layouts, backend.name)
            plan = self._plans.get(key)
            if plan is None:
                plan = self._plans[key] = Plan(program, values, backend)
                self.counts["plans"] += 1
            if len(self._seen) > 1024:
                self._seen.clear()
            self._seen[seen] = plan
            return plan

    def _captured_layouts(self, program: Any, arrays: list[np.ndarray]) -> tuple[str, ...]:
        """The layouts of the captured tensors' arrays, remembered while they are the same arrays (a
        model's weights: hundreds of them, read every call)."""
        known = self._layouts.get(id(program))
        if known is not None and len(known[0]) == len(arrays) and all(map(operator.is_, known[0], arrays)):
            return known[1]
        layouts = tuple(_layout(a) for a in arrays)
        self._layouts[id(program)] = (arrays, layouts)
        return layouts

    def _captured_by_name(self, program: Any) -> dict[str, Tensor]:
        found = self._captured.get(id(program))
        if found is None:
            found = self._captured[id(program)] = {
                v.name: t for v, t in zip(program.inputs[program.n_args :], program.captured)
            }
        return found

    def drop_plans(self) -> None:
        """Forget the plans built so far and free their memory (the buffers they hold); the traces are
        kept, and the next call of each binding builds its plan again."""
        with self._lock:
            self._plans.clear()
            self._seen.clear()
        gc.collect()  # a plan that replays and its Replay refer to each other: only a collection frees them

    def stats(self) -> dict[str, int]:
        """How many traces, plans built, and plan cache hits (calls that ran a plan already run) so far."""
        hits = sum(max(plan.runs - 1, 0) for plan in list(self._plans.values()))
        return {**self.counts, "hits": hits}

    def __repr__(self) -> str:
        return f"<compiled {_name(self.fn)}: {self.stats()}>"


class _CompiledCall:
    """The op of the node of a compiled call's result that backward() differentiates (`_with_history`)."""

    name = "compiled_call"

    @staticmethod
    def vjp(g: Tensor, out: Tensor, *inputs: Tensor, backward: Any, index: int) -> tuple:
        return backward(index, g)


def _as_tensor(a: Any) -> Tensor:
    """Arguments as tensors: a NumPy array is read in place (no copy), anything else is converted."""
    if isinstance(a, Tensor):
        return a
    if isinstance(a, np.ndarray) and a.dtype.kind in "biuf":
        return from_numpy(a)
    return tensor(a)


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _layout(array: np.ndarray) -> str:
    """What a plan may assume of an argument's memory: C-contiguous, or strided."""
    return "C" if array.flags.c_contiguous else "strided"


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _write_back(by_name: dict[str, Tensor], updates: dict[str, np.ndarray]) -> None:
    """Copy the updated values into the captured tensors and arguments `by_name` (but those the plan
    wrote in place).
    A value that is (a view of) another captured tensor's memory is copied first, so `a, b = b, a` swaps
    rather than duplicates."""
    updates = {name: a for name, a in updates.items() if a is not by_name[name].payload}  # written in place
    if not updates:
        return
    targets = {id(_root(by_name[name].payload)) for name in updates}
    safe = {name: array.copy() if id(_root(array)) in targets else array for name, array in updates.items()}
    for name, array in safe.items():
        np.copyto(by_name[name].payload, array)


def _default_specs(args: tuple[Tensor, ...]) -> tuple[Spec, ...]:
    batch = args[0].shape[0] if args and args[0].ndim else None
    if batch is None or batch <= 1:
        return tuple(a.spec for a in args)
    if batch % multiple_of("B"):  # the user declared B a multiple of something this batch is not
        return tuple(a.spec for a in args)
    b = dims("B", multiple_of=multiple_of("B"))
    return tuple(
        Spec((b, *a.shape[1:]) if a.ndim and a.shape[0] == batch else a.shape, a.dtype) for a in args
    )


def compile(
    fn: Callable[..., Any] | None = None, *, specs: tuple[Spec, ...] | None = None, optimize: bool = True
):
    """Compile `fn` (also usable as a decorator): traced once, run from cached plans."""
    if fn is None:
        return lambda f: Compiled(f, specs, optimize)
    return Compiled(fn, specs, optimize)
