"""`TraceMode` records each op call as an instruction; `trace(fn, *specs)` returns the Program.

Tracing uses the same op calls as eager mode and `check`: the rules run, then the mode appends an
instruction instead of running a kernel. Autograd records the same `Node`s as in eager mode, so
`loss.backward()` (or `verigrad.grad`) inside a traced function appends the backward instructions
(after `backward:`), built from the ops' VJPs. Eager tensors the function reads (parameters,
optimizer state) become named inputs; `assign` to them becomes an update written back.

Names of captured tensors come from what the function can reach before it runs (`capture_names`):
a module's parameters and buffers get their dotted names (`0.weight`), an optimizer's tensors
`opt.lr`, `opt.<i>.<name>`, a tensor held in a variable the variable's name (`w`, `model.w1`). Where
two tensors would share a name, the variable holding each is put in front (`enc.weight`,
`dec.weight`); a tensor nothing names is `c<i>`.

A trace leaves nothing traced behind: the `.grad` of every tensor it can reach is put back as it
was before the trace.
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import modes
from ..autograd import Node, no_grad, records_history
from ..dtypes import DType
from ..shapes import Spec
from ..tensor import Tensor
from .guards import GONE as _GONE
from .guards import SCALARS as _SCALARS
from .guards import ModuleAttributes, ModuleState, attribute, module_attributes
from .program import Program, Value


class TraceMode(modes.Mode):
    name = "trace"

    def __init__(
        self, program: Program, names: dict[int, str] | None = None, watch: list[Tensor] | None = None
    ) -> None:
        self.program = program
        self.names = names or {}  # id(eager tensor) -> the name its input gets
        self.bound: dict[int, Value] = {}  # id(eager tensor) -> its current value
        self.captured: dict[int, Tensor] = {}
        self.input_names: dict[int, str] = {}  # id(eager tensor) -> the name of its input
        self.decomposed = False  # whether a composite op was recorded as its decomposition for autograd
        self.used = {v.name for v in program.inputs}
        # the views made by indexing, held weakly (a view nobody holds needs no refresh):
        self.views: dict[int, tuple[weakref.ref, Tensor, Any]] = {}  # id(view) -> (view, base, key)
        self.children: dict[int, list[tuple[weakref.ref, Any]]] = {}  # id(base) -> its (view, key)s
        self.arguments: dict[int, str] = {}  # id(argument tensor) -> its input's name
        # .grad of every tensor the function can reach, before the trace (restored after it)
        self.saved_grads: dict[int, tuple[Tensor, Any]] = {id(t): (t, t.grad) for t in watch or ()}

    def value_of(self, t: Tensor) -> Value:
        if isinstance(t.payload, Value):
            return t.payload
        if not isinstance(t.payload, np.ndarray):
            raise TypeError(f"an abstract tensor {t.spec!r} reached a trace; pass it as an argument")
        key = id(t)
        if key not in self.bound:
            name = self.names.get(key) or f"c{len(self.captured)}"
            base, k = name, 1
            while name in self.used:
                name, k = f"{base}_{k}", k + 1
            self.used.add(name)
            self.bound[key] = self.program.add_input(t.spec, name)
            self.input_names[key] = name
            self.captured[key] = t
            self.saved_grads.setdefault(key, (t, t.grad))
            self.program.captured.append(t)
        return self.bound[key]

    def apply(self, op: Any, args: tuple[Tensor, ...], params: dict, out: Spec) -> Tensor:
        needs_grad = records_history(op, args, out)
        if needs_grad and op.vjp is None and op.is_composite:
            self.decomposed = True
            return op.decompose(*args, **params)  # the backward pass needs the primitives
        values = tuple([a.payload if type(a.payload) is Value else self.value_of(a) for a in args])
        value = self.program.emit(op, values, params, out)
        t = Tensor(out, value)
        if needs_grad:
            t.requires_grad = True
            t._node = Node(op, args, params)
        return t

    def constant(self, array: np.ndarray, dtype: DType) -> Tensor:
        spec = Spec(tuple(array.shape), dtype)
        return Tensor(spec, self.program.emit("const", (), {"value": array}, spec))

    def assign(self, target: Tensor, value: Tensor) -> None:
        new = self.value_of(value)
        if isinstance(target.payload, Value):
            target.payload = new  # a tensor made inside the trace: rebind it (SSA)
            if id(target) in self.arguments:  # an argument: written back into the caller's tensor
                self.program.updates[self.arguments[id(target)]] = new
            return
        self.value_of(target)  # a captured tensor: its new value is written back
        self.bound[id(target)] = new
        self.program.updates[self.input_names[id(target)]] = new

    def made_view(self, view: Tensor, base: Tensor, key: Any) -> None:
        ref = weakref.ref(view)
        self.views[id(view)] = (ref, base, key)
        children = self.children.setdefault(id(base), [])
        children[:] = [c for c in children if c[0]() is not None]  # the views still held
        children.append((ref, key))

    def view_base(self, view: Tensor) -> tuple[Tensor, Any] | None:
        entry = self.views.get(id(view))
        return None if entry is None or entry[0]() is not view else (entry[1], entry[2])

    def views_of(self, base: Tensor) -> list[tuple[Tensor, Any]]:
        held = [(ref(), key) for ref, key in self.children.get(id(base), ())]
        return [(view, key) for view, key in held if view is not None]

    def restore(self) -> None:
        """Give the tensors back the `.grad` they had: a trace leaves no traced value behind."""
        for t, g in self.saved_grads.values():
            t.grad = g

    def draw_seed(self, generator: Any) -> int:
        """A random draw is recorded, not made: its seed param is its number among the program's
        draws, and each run of the program draws the seeds from their generators (a compiled call
        consumes them as the eager call does). A generator the function made itself gives the same
        numbers at every call: its draw is made now, a constant of the program."""
        if getattr(generator, "_made_in", None) is self:
            return generator.next_seed()
        self.program.draws.append(generator)
        return len(self.program.draws) - 1

    def read_flag(self, obj: Any, name: str) -> None:
        value = getattr(obj, name)
        if name == "_traced_state":  # a module's call: `guards.checker` checks most of these quickly
            read = ModuleState(obj)
            # its numbers (eps, a layer's settings) and children: a changed one traces again
            attributes = (ModuleAttributes(obj), module_attributes(obj))
            self.program.guards.setdefault((id(obj), "__dict__"), attributes)
        else:
            read = functools.partial(attribute, weakref.ref(obj), name)
        self.program.guards.setdefault((id(obj), name), (read, (type(value), value)))

    def begin_backward(self) -> None:
        if self.program.backward_at is None:
            self.program.backward_at = len(self.program.instrs)


# names of the function's arguments --------------------------------------------------------------
def _arg_names(fn: Callable, count: int) -> list[str]:
    if _is_module(fn) and callable(getattr(fn, "forward", None)):
        fn = fn.forward  # a module's call takes forward's arguments
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) < count and any(p.kind == p.VAR_POSITIONAL for p in params):
        base = next(p.name for p in params if p.kind == p.VAR_POSITIONAL)
        names += [f"{base}{i}" for i in range(count - len(names))]
    names = names[:count]
    names += [f"arg{i}" for i in range(len(names), count)]
    seen: set[str] = set()
    for i, n in enumerate(names):  # unique even for odd signatures
        names[i] = n if n not in seen else f"arg{i}"
        seen.add(names[i])
    return names


# names of the tensors a function captures -------------------------------------------------------
_PACKAGE = __name__.split(".")[0] + "."
_MAX_DEPTH = 3  # how deep plain objects and containers are searched for tensors
_MAX_ITEMS = 256  # longer containers are not searched (a list of batches holds no parameters)


def _has_method(obj: Any, *names: str) -> bool:
    """Whether the object's class defines these methods (an instance's __getattr__ does not count)."""
    return not isinstance(obj, type) and all(callable(getattr(type(obj), n, None)) for n in names)


def _is_module(obj: Any) -> bool:
    return _has_method(obj, "named_parameters", "named_buffers")


def _is_optimizer(obj: Any) -> bool:
    return _has_method(obj, "state_tensors")


def _is_function(obj: Any) -> bool:
    return isinstance(obj, types.FunctionType | types.MethodType | functools.partial)


def _searchable(obj: Any) -> bool:
    """A plain object whose attributes may hold tensors (not a class, module, function or array)."""
    if isinstance(obj, type | types.ModuleType | np.ndarray | np.generic | str | bytes | int | float):
        return False
    if _is_function(obj) or not hasattr(obj, "__dict__"):
        return False
    return not type(obj).__module__.startswith(("builtins", "numpy", "rich"))


def _code_names(code: types.CodeType) -> Iterator[str]:
    """Global names a code object (and the functions and comprehensions inside it) may read."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_names(const)


def _roots(fn: Any, reads: dict | None = None) -> list[tuple[str | None, Any]]:
    """What `fn` can reach, as (variable name, object), nearest first: the object of a bound method
    (its attributes), a callable object itself, closure cells, default arguments, the globals its
    code reads, then the same for the functions found among them. `reads`, if given, gets a guard
    (`Program.guards`) for each closure cell and global among them that holds a Python scalar."""
    roots: list[tuple[str | None, Any]] = []
    queue: list[Any] = [fn]
    seen: set[int] = set()
    while queue:
        f = queue.pop(0)
        if id(f) in seen or len(seen) > 64:
            continue
        seen.add(id(f))
        found: list[tuple[str | None, Any]] = []
        if isinstance(f, functools.partial):
            found += [(f"arg{i}", a) for i, a in enumerate(f.args)]
            found += list(f.keywords.items())
            queue.append(f.func)
        elif isinstance(f, types.MethodType):
            owner = f.__self__
            if _is_module(owner) or _is_optimizer(owner):
                found.append((None, owner))
            elif _searchable(owner):
                found += list(vars(owner).items())
            queue.append(f.__func__)
        elif isinstance(f, types.FunctionType):
            code = f.__code__
            cells = zip(code.co_freevars, f.__closure__ or ())
            cells = [(name, c) for name, c in cells if _filled(c)]
            found += [(name, c.cell_contents) for name, c in cells]
            found += _defaults(f)
            if reads is not None:
                for _, c in cells:
                    _guard_scalar(reads, (id(c), ""), functools.partial(_cell_value, c), c.cell_contents)
            if not (f.__module__ or "").startswith(_PACKAGE):  # verigrad's own globals hold no state
                glob = f.__globals__
                names = [n for n in dict.fromkeys(_code_names(code)) if n in glob]
                found += [(n, glob[n]) for n in names]
                for n in names if reads is not None else ():
                    _guard_scalar(reads, (id(glob), n), functools.partial(_global_value, glob, n), glob[n])
            wrapped = getattr(f, "__wrapped__", None)
            if wrapped is not None:
                queue.append(wrapped)
        elif callable(f) and not isinstance(f, type):  # a module or another callable object
            if _is_module(f) or _is_optimizer(f):
                found.append((None, f))
            elif _searchable(f):
                found += list(vars(f).items())
            call = next((vars(k)["__call__"] for k in type(f).__mro__ if "__call__" in vars(k)), None)
            if isinstance(call, types.FunctionType) and not (_is_module(f) or _is_optimizer(f)):
                queue.append(call)
        for name, obj in found:
            if isinstance(obj, types.ModuleType | type):
                continue
            roots.append((name, obj))
            if _is_function(obj) or (callable(obj) and _searchable(obj)):
                queue.append(obj)
    return roots


def _guard_scalar(reads: dict, key: tuple, read: Callable[[], Any], value: Any) -> None:
    """Note that the trace read the Python scalar `value` (`read()` reads it again)."""
    if type(value) in _SCALARS:
        reads.setdefault(key, (read, (type(value), value)))


def _cell_value(cell: Any) -> Any:
    return (type(cell.cell_contents), cell.cell_contents) if _filled(cell) else _GONE


def _grad_mode() -> tuple[type, bool]:
    return (bool, modes.LOCAL.grad[-1])


def _global_value(glob: dict, name: str) -> Any:
    value = glob.get(name, _GONE)
    return (type(value), value)


def _defaults(f: types.FunctionType) -> list[tuple[str, Any]]:
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return []
    return [(p.name, p.default) for p in params if p.default is not p.empty]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _join(*parts: str | None) -> str:
    return ".".join(p for p in parts if p)


def _named_tensors(var: str | None, obj: Any, depth: int = 0) -> Iterator[tuple[int, str, str, Tensor]]:
    """(rank, short name, qualified name, tensor) for the tensors `obj` holds; rank 1 is a weaker
    name (an optimizer's parameter, better named by its module)."""
    if isinstance(obj, Tensor):
        if var:
            yield 0, var, var, obj
        return
    if _is_module(obj):
        for name, t in [*obj.named_parameters(), *obj.named_buffers()]:
            yield 0, name, _join(var, name), t
        return
    if _is_optimizer(obj):
        for name, t in obj.state_tensors():
            rest = name[len("opt.") :] if name.startswith("opt.") else name
            yield 0, name, _join(var or "opt", rest), t
        for i, p in enumerate(getattr(obj, "params", ())):
            if isinstance(p, Tensor):
                yield 1, f"opt.params.{i}", _join(var or "opt", f"params.{i}"), p
        return
    if depth >= _MAX_DEPTH or var is None:
        return
    if isinstance(obj, dict):
        items = [(str(k), v) for k, v in obj.items() if isinstance(k, str | int)]
    elif isinstance(obj, list | tuple):
        items = [(str(i), v) for i, v in enumerate(obj)]
    elif _searchable(obj):
        items = list(vars(obj).items())
    else:
        return
    if len(items) > _MAX_ITEMS:
        return
    for key, value in items:
        if isinstance(value, Tensor):
            yield 0, f"{var}.{key}", f"{var}.{key}", value
        else:
            yield from _named_tensors(f"{var}.{key}", value, depth + 1)


def capture_names(fn: Callable) -> tuple[dict[int, str], list[Tensor]]:
    """Names for the eager tensors `fn` can reach (by id), and those tensors."""
    chosen: dict[int, tuple[int, str, str, Tensor]] = {}
    for var, obj in _roots(fn):
        for rank, short, qualified, t in _named_tensors(var, obj):
            if id(t) not in chosen or rank < chosen[id(t)][0]:
                chosen[id(t)] = (rank, short, qualified, t)
    holders: dict[str, set[int]] = {}
    for key, (_, short, _, _) in chosen.items():
        holders.setdefault(short, set()).add(key)
    names = {
        key: short if len(holders[short]) == 1 else qualified
        for key, (_, short, qualified, _) in chosen.items()
    }
    return names, [t for _, _, _, t in chosen.values()]


# the function's result as a flat list of tensors --------------------------------------------------
def flatten(result: Any) -> tuple[list[Tensor], Any]:
    """The tensors in a (nested) tuple, list or dict, and the structure to put them back into."""
    if isinstance(result, Tensor):
        return [result], ("tensor",)
    if isinstance(result, tuple | list):
        leaves: list[Tensor] = []
        subtrees = []
        for item in result:
            sub_leaves, sub = flatten(item)
            leaves += sub_leaves
            subtrees.append(sub)
        return leaves, (type(result), subtrees)
    if isinstance(result, dict):
        leaves, subtrees = flatten(list(result.values()))
        return leaves, (dict, list(result.keys()), subtrees)
    return [], ("value", result)


def unflatten(tree: Any, leaves: Iterator[Any]) -> Any:
    """The inverse of `flatten`: `leaves` fill the places the tensors had."""
    if tree[0] == "tensor":
        return next(leaves)
    if tree[0] == "value":
        return tree[1]
    if tree[0] is dict:
        return dict(zip(tree[1], unflatten(tree[2], leaves)))
    kind, subtrees = tree
    items = [unflatten(s, leaves) for s in subtrees]
    if kind is tuple or kind is list:
        return kind(items)
    try:
        return kind(*items)  # a named tuple
    except TypeError:
        return tuple(items)


# tracing ---------------------------------------------------------------------------------------
def _renumber(program: Program) -> None:
    """Number the values in printing order: inputs (arguments, then captured), then instructions."""
    k = 0
    for v in program.inputs:
        v.id, k = k, k + 1
    for instr in program.instrs:
        instr.out.id, k = k, k + 1
    program._next = k


def trace_function(
    fn: Callable[..., Any], specs: tuple[Spec, ...], names: dict[int, str] | None = None
) -> tuple[Program, Any]:
    """The Program of `fn` on symbolic tensors of `specs`, and the structure of its result (for
    `unflatten`): the program's outputs are the result's tensors in order.

    A composite op without a VJP of its own (conv2d) is recorded as its decomposition when a gradient
    may be taken through it; if the function then takes none (and returns no result that carries
    gradient history), it is traced again under `no_grad`, so that a forward program keeps such ops
    whole."""
    specs = tuple(_as_spec(s, i) for i, s in enumerate(specs))
    found, reachable = capture_names(fn)
    names = {**found, **(names or {})}
    program, tree, mode = _trace_once(fn, specs, names, reachable)
    if program.backward_at is None and mode.decomposed and not program.outputs_require_grad:
        with no_grad():
            program, tree, _ = _trace_once(fn, specs, names, reachable)
    _renumber(program)
    return program, tree


def _trace_once(
    fn: Callable[..., Any], specs: tuple[Spec, ...], names: dict[int, str], reachable: list[Tensor]
) -> tuple[Program, Any, TraceMode]:
    program = Program()
    args = [Tensor(s, program.add_input(s, name)) for s, name in zip(specs, _arg_names(fn, len(specs)))]
    program.n_args = len(args)
    mode = TraceMode(program, names, reachable)
    mode.arguments = {id(a): v.name for a, v in zip(args, program.inputs)}
    _roots(fn, program.guards)  # the Python scalars it reads: a compiled call traces again if one changes
    program.guards["grad mode", ""] = (_grad_mode, (bool, modes.LOCAL.grad[-1]))
    try:
        with modes.using(mode):
            result = fn(*args)
            tensors, tree = flatten(result)
            program.outputs = [mode.value_of(t) for t in tensors]
            # a forward whose results a backward() outside will differentiate (not a whole training step)
            program.output_grads = tuple(t.requires_grad for t in tensors)
            program.outputs_require_grad = program.backward_at is None and any(program.output_grads)
    finally:
        mode.restore()
    return program, tree, mode


def _as_spec(s: Any, i: int) -> Spec:
    if isinstance(s, Spec):
        return s
    if isinstance(s, Tensor):
        return s.spec
    raise TypeError(f"argument {i} of trace must be a verigrad.spec (or a tensor), got {type(s).__name__}")


def trace(fn: Callable[..., Any], *specs: Spec, names: dict[int, str] | None = None) -> Program:
    """Record `fn` run on symbolic tensors of `specs` as a Program (see `print(program)`).

    >>> n, din = verigrad.dims("n din")
    >>> print(verigrad.trace(lambda x: (x * 2).relu(), verigrad.spec([n, din])))
    program(%0 x: f32[n,din]) {
      %1: f32[] = const 2.0
      %2: f32[n,din] = mul %0 %1
      %3: f32[n,din] = relu %2
      return %3
    }
    """
    return trace_function(fn, specs, names)[0]
