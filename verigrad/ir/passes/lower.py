"""Lowering: a program for one backend and one binding of the symbols, in the calls that backend makes.

`run(program, values, backend)` gives the program with every size and param concrete (the symbols'
`values`), and each instruction the backend cannot run as one kernel call written in ones it can:

- a composite op the backend has no kernel for is replaced by the instructions of its decomposition,
  traced once for the concrete operands: the same kernels eager mode runs for it, without a trip
  through eager dispatch per call. Equal instructions of inlined decompositions are merged (softmax's
  backward after cross_entropy's forward repeats its max, sub and exp); the passes did that for the
  rest. A decomposition that cannot be traced stays one instruction (the plan runs it eagerly);
- a fused group (fuse.py) the backend has no kernel for, or whose result and operands are all smaller
  than the backend's `ufunc_below`, becomes its members, each an instruction of its own: the kernels
  they would run unfused (ufuncs, on small operands), without a loop over the members inside a kernel.
  But where the backend has a kernel for the group less its members computed from one-element values
  alone (an optimizer's bias corrections), only those become instructions of their own, and the rest
  stays a group. A group a plan may merge with others (`fuse.mergeable`) stays whole however small: a
  merged call costs less than the members of its groups;
- a concat whose pieces are slices, reshapes and permutes of one array that hold each of its elements
  once becomes that array rearranged, one copy (concat_views.py: a packed gradient's pieces, each
  copied to its layout and then all copied into the concat, as attention's backward makes them).

The values of the program keep their ids (with concrete specs); new ones are numbered after them. The
result has no backward mark and no memory plan: the plan (ir/plan.py) binds a kernel to each of its
instructions, in order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ... import modes
from ...autograd import no_grad
from ...dtypes import DType
from ...shapes import Dim, Spec
from ...tensor import Tensor
from ..program import Instr, Program, Value
from ..trace import TraceMode
from . import concat_views
from .fuse import FusedGroup, mergeable


def run(
    program: Program,
    values: dict[str, int],
    backend: Any,
    whole: set[int] | None = None,
    natives: dict[int, Any] | None = None,
) -> Program:
    """`program` lowered for `backend` with the symbols bound to `values` (see the module docstring).
    `whole`: `fuse.mergeable(program)`, where the caller has it. `natives`, where given, receives the
    backend's kernel (or None) for each composite or fused instruction left, by the id of its value:
    the plan binds it without looking it up again."""
    whole = mergeable(program) if whole is None else whole
    lowered = _Lowering(program, values, backend, whole, {} if natives is None else natives).lowered
    return concat_views.run(lowered)


def small_exact(backend: Any, op: Any, spec: Spec, operands: Sequence[Spec]) -> bool:
    """Whether the backend's kernel for `op` is exact and the result (of concrete `spec`) and every
    operand have fewer elements than its `ufunc_below` (0 where it has none): the op's NumPy kernels
    then give the same bits at a lower per-call cost."""
    small = getattr(backend, "ufunc_below", 0)
    if math.prod(spec.shape) >= small or any(math.prod(s.shape) >= small for s in operands):
        return False
    return backend.exactness(op.name, spec.dtype.name).is_exact


_PLAIN = (int, float, str, bool, type(None))


class Concrete:
    """Params and shapes with each Dim evaluated for `values`, once per Dim and shape (a program
    repeats a few sizes)."""

    def __init__(self, values: dict[str, int]) -> None:
        self.values = values
        self.dims: dict[Dim, int] = {}
        self.shapes: dict[tuple, tuple] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, _PLAIN):  # the common case first
            return value
        if isinstance(value, Dim):
            n = self.dims.get(value)
            if n is None:
                n = self.dims[value] = value.evaluate(self.values)
            return n
        if isinstance(value, tuple):
            return tuple(map(self, value))
        if isinstance(value, list):
            return [self(v) for v in value]
        return value

    def shape(self, shape: tuple) -> tuple:
        out = self.shapes.get(shape)
        if out is None:
            out = self.shapes[shape] = (
                shape if all(type(d) is int for d in shape) else tuple(map(self, shape))
            )
        return out

    def spec(self, spec: Spec) -> Spec:
        shape = self.shape(spec.shape)
        return spec if shape is spec.shape else Spec(shape, spec.dtype)


class _Lowering:
    def __init__(
        self, program: Program, values: dict[str, int], backend: Any, whole: set[int], natives: dict
    ) -> None:
        self.backend = backend
        self.natives = natives
        self.concrete = Concrete(values)
        self.whole = whole  # fused results kept whole, however small
        self.same: dict[Any, Value] = {}  # (op, arguments, params) of an inlined instruction -> its value
        out = self.lowered = Program(
            n_args=program.n_args, captured=list(program.captured), _next=program._next
        )
        env: dict[Value, Value] = {}
        for v in program.inputs:
            env[v] = Value(v.id, self.concrete.spec(v.spec), v.name)
            out.inputs.append(env[v])
        self._emit(program.instrs, env)
        out.outputs = [env[v] for v in program.outputs]
        out.updates = {name: env[v] for name, v in program.updates.items()}

    def _emit(self, instrs: Sequence[Instr], env: dict[Value, Value], inlined: bool = False) -> None:
        """Instructions for `instrs`, whose values `env` maps (arguments in, results added). A value of
        the program (not `inlined`) keeps its id."""
        concrete = self.concrete
        for instr in instrs:
            op = instr.op
            if isinstance(op, str):  # "const"
                value = instr.params["value"]
                out = self._new_value(
                    Spec(value.shape, instr.out.spec.dtype), None if inlined else instr.out.id
                )
                self.lowered.instrs.append(Instr(op, (), instr.params, out))
                env[instr.out] = out
                continue
            args = tuple([env[a] for a in instr.args])
            params = {k: concrete(p) for k, p in instr.params.items()} if instr.params else {}
            spec = concrete.spec(instr.out.spec)
            env[instr.out] = self._call(op, params, args, spec, None if inlined else instr.out.id, inlined)

    def _new_value(self, spec: Spec, out_id: int | None) -> Value:
        return self.lowered.new_value(spec) if out_id is None else Value(out_id, spec)

    def _call(
        self,
        op: Any,
        params: dict,
        args: tuple[Value, ...],
        spec: Spec,
        out_id: int | None,
        inlined: bool = False,
    ) -> Value:
        """The value of `op(*args, **params)` of concrete `spec`, after the instructions that compute
        it; `out_id` the id of the program's value it is (None: a value of an inlined decomposition or
        of a group's member). An instruction of an inlined decomposition is merged with an equal one."""
        backend = self.backend
        kernel = None
        group = op.group
        expandable = group is not None or op.decompose is not None  # fused or composite
        if expandable:
            kernel = backend.native(op, spec.dtype)
            whole = out_id is not None and out_id in self.whole
            small = not whole and small_exact(backend, op, spec, [a.spec for a in args])
            if group is not None and kernel is None and not small:
                hoisted = self._hoisted(group, params["params"], args, spec, out_id, inlined)
                if hoisted is not None:
                    return hoisted
            if group is not None and (kernel is None or small):  # small: ufuncs cost less than C
                return self._members(group, params["params"], args)[len(group.ops) - 1]
            if kernel is None:
                sub = decomposition(op, params, tuple([a.spec for a in args]), spec)
                if sub is not None:
                    inner = dict(zip(sub.inputs, args))
                    self._emit(sub.instrs, inner, inlined=True)
                    return inner[sub.outputs[0]]
        key: Any = None
        if inlined:
            try:
                key = (op, tuple([a.id for a in args]), tuple((k, param_key(v)) for k, v in params.items()))
            except TypeError:
                key = None
        if key is not None:
            found = self.same.get(key)
            if found is not None:
                return found
        out = self._new_value(spec, out_id)
        self.lowered.instrs.append(Instr(op, args, params, out))
        if expandable:
            self.natives[out.id] = kernel
        if key is not None:
            self.same[key] = out
        return out

    def _members(
        self, group: FusedGroup, params: tuple, args: tuple[Value, ...], which: Sequence[int] | None = None
    ) -> dict[int, Value]:
        """Each member of `group` (of `which`, in order; default all) an instruction of its own, lowered
        as any instruction is; their values."""
        done: dict[int, Value] = {}
        for m in range(len(group.ops)) if which is None else which:
            member, refs, member_params = group.ops[m], group.wiring[m], dict(params[m])
            member_args = tuple([args[k] if kind == "in" else done[k] for kind, k in refs])
            shape = member.shape_rule(*[a.spec.shape for a in member_args], **member_params)
            done[m] = self._call(member, member_params, member_args, Spec(shape, group.dtypes[m]), None)
        return done

    def _hoisted(
        self,
        group: FusedGroup,
        params: tuple,
        args: tuple[Value, ...],
        spec: Spec,
        out_id: int | None,
        inlined: bool,
    ) -> Value | None:
        """A fused group the backend has no kernel for, where it has one for the group less the members
        computed from one-element values alone (Adam's bias corrections, whose pow the cpu backend does
        not fuse where the C library's is not NumPy's): those members as instructions of their own, the
        rest a group reading their results; None where that is not so."""
        if not group.inputs:
            return None
        same: list[bool] = []  # computed from one-element values alone
        for refs in group.wiring:
            same.append(
                all(math.prod(args[k].spec.shape) == 1 if kind == "in" else same[k] for kind, k in refs)
            )
        rest = [m for m, one in enumerate(same) if not one]
        if len(rest) == len(same) or any(same[m] for m in group.roots):
            return None
        read = sorted({k for m in rest for kind, k in group.wiring[m] if kind == "m" and same[k]})
        shapes: dict[int, tuple] = {}
        for m in (m for m, one in enumerate(same) if one):
            shapes[m] = group.ops[m].shape_rule(
                *[args[k].spec.shape if kind == "in" else shapes[k] for kind, k in group.wiring[m]],
                **dict(params[m]),
            )
        place = {m: ("m", j) for j, m in enumerate(rest)} | {
            m: ("in", len(args) + j) for j, m in enumerate(read)
        }
        rest_op = FusedGroup(
            tuple(group.ops[m] for m in rest),
            tuple(tuple(place[k] if kind == "m" else (kind, k) for kind, k in group.wiring[m]) for m in rest),
            tuple(group.dtypes[m] for m in rest),
            (*group.inputs, *(Spec(shapes[m], group.dtypes[m]) for m in read)),
            tuple(place[m][1] for m in group.roots),
        ).op()
        if self.backend.native(rest_op, spec.dtype) is None:
            return None
        done = self._members(group, params, args, [m for m, one in enumerate(same) if one])
        rest_params = {"params": tuple(params[m] for m in rest)}
        return self._call(rest_op, rest_params, (*args, *(done[m] for m in read)), spec, out_id, inlined)


# composite ops without a kernel: their decompositions, traced for concrete operands ------------
_DECOMPOSITIONS: dict[Any, Program | None] = {}


def decomposition(op: Any, params: dict, specs: tuple[Spec, ...], out: Spec) -> Program | None:
    """The decomposition of `op` for operands of these concrete specs, as a Program whose one output
    has the spec `out` (None when it cannot be traced, reads tensors it was not given, or gives
    another spec: the op then stays whole, and the plan runs its decomposition eagerly)."""
    try:
        key: Any = (op.name, specs, tuple((k, param_key(v)) for k, v in sorted(params.items())))
    except TypeError:
        key = None  # a param this cache cannot tell apart reliably: trace again
    if key is not None and key in _DECOMPOSITIONS:
        return _DECOMPOSITIONS[key]
    program = Program()
    args = [Tensor(s, program.add_input(s, f"a{i}")) for i, s in enumerate(specs)]
    program.n_args = len(args)
    mode = TraceMode(program)
    try:
        with modes.using(mode), no_grad():
            result = op.decompose(*args, **params)
        program.outputs = [mode.value_of(result)] if isinstance(result, Tensor) else []
    except Exception:  # a decomposition that only runs eagerly: the plan runs it so, per call
        program.outputs = []
    ok = not mode.captured and program.outputs and program.outputs[0].spec == out
    program = program if ok else None
    if key is not None:
        if len(_DECOMPOSITIONS) > 4096:
            _DECOMPOSITIONS.clear()
        _DECOMPOSITIONS[key] = program
    return program


def param_key(value: Any) -> Any:
    """A key that tells apart every two params a decomposition could treat differently (0.0 and
    -0.0, 1 and 1.0 and True); TypeError for a kind of value it does not know."""
    if isinstance(value, float):
        return (float, value.hex())
    if value is None or isinstance(value, bool | int | str):
        return (type(value), value)
    if isinstance(value, tuple):
        return (tuple, tuple(param_key(v) for v in value))
    if isinstance(value, DType):
        return (DType, value.name)
    raise TypeError(f"no cache key for {type(value).__name__}")
