"""Element-wise fusion: a tree of element-wise instructions becomes one `fused` instruction that prints
its composed expression:

    %9: f32[B,8] = fused %3 %4 {relu(add(%3, %4))}

Element-wise ops are the unary ops and activations, their derivative ops, the binary ops (operands
broadcast as usual), comparisons, logical ops, `where`, `cast`, and `broadcast_to` (a view; never the
root). A group grows from a root up through the arguments whose value is used exactly once in the whole
program, by that group, and is not an output or update; so every value read elsewhere stays available
(it is a group's root, or is computed by an instruction of its own). Groups of one are left alone.

The fused instruction's op is an `Op` named "fused", made per group and not registered, whose `group` (a
`FusedGroup`) holds the members: its shape and dtype rules chain the members' rules (so `validate`
re-checks it), its `reference` runs the members' references in order with the executor's dtype
conversion after each (so on the reference backend the program gives the same bits as unfused), and the
members' params travel in the instruction's params (so symbolic sizes in them are bound with the rest).
A backend without fused kernels finds none for it and runs `reference`, unchanged; `FusedGroup.fast`
(see verigrad/ops/_op.py) runs each member's `fast` kernel where it has one, and `FusedGroup.bind` runs
the members with any kernels given (a backend's own, say).

A reduction could absorb its element-wise producers (softmax, layer_norm, cross_entropy) where a backend
has such kernels; `backend_absorbs_reductions` says whether one does. The reference backend has none, so
this pass leaves every reduction as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import REGISTRY, Op
from ..program import Instr, Program
from ._rewrite import Rewriter, results, uses

UNARY = (
    "neg abs exp log expm1 log1p sqrt rsqrt sin cos tanh sigmoid relu gelu gelu_tanh silu "
    "relu_deriv sigmoid_deriv tanh_deriv gelu_deriv gelu_tanh_deriv silu_deriv logical_not cast"
)
BINARY = "add sub mul div pow maximum minimum eq ne lt le gt ge logical_and logical_or where broadcast_to"
ELEMENTWISE = frozenset((UNARY + " " + BINARY).split())
REDUCTIONS = ("softmax", "log_softmax", "layer_norm", "rms_norm", "cross_entropy")


def is_elementwise(instr: Instr) -> bool:
    op = instr.op
    return not isinstance(op, str) and op.name in ELEMENTWISE and REGISTRY.get(op.name) is op


def is_fused(instr: Instr) -> bool:
    """Whether the instruction computes a fused group."""
    return not isinstance(instr.op, str) and instr.op.is_fused


def backend_absorbs_reductions(backend: Any, dtype: Any) -> bool:
    """Whether `backend` has native kernels for the reductions that could absorb element-wise producers
    (softmax, log_softmax, layer_norm, rms_norm, cross_entropy) in `dtype`. The reference backend has
    none; `run` does not absorb, and a pass that did would check this first."""
    return any(backend.native(REGISTRY[name], dtype) is not None for name in REDUCTIONS)


class FusedGroup:
    """The members of one fused group (see the module docstring), in program order, the last one the
    root; `wiring[m]` says where member m reads each argument: ("in", k) the group's k-th input,
    ("m", j) member j's result. A group `merge` made has several results: the members `roots` (the last
    one is the root its rules describe); its kernels return them as a tuple. `op()` is the group as an
    `Op`, whose params are `params`: each member's params, in order."""

    def __init__(
        self, ops: tuple, wiring: tuple, dtypes: tuple, inputs: tuple = (), roots: tuple = ()
    ) -> None:
        self.ops = ops
        self.wiring = wiring
        self.dtypes = dtypes  # each member's result dtype, as its rule gave it
        self.inputs = inputs  # the group's inputs' specs as traced (empty: not known)
        self.roots = roots or (len(ops) - 1,)  # the members whose results the group gives
        self.exact = all(op.exact for op in ops)

    def op(self) -> Op:
        """The group as an op: the members' rules chained, their references run in order."""
        return Op(
            "fused",
            shape=self.shape_rule,
            dtype=self.dtype_rule,
            reference=self.reference,
            fast=self.fast,
            variadic=True,
            exact=self.exact,
            differentiable=False,
            doc="A fused group of element-wise ops: " + ", ".join(op.name for op in self.ops),
            group=self,
        )

    def _chain(self, rule: str, inputs: tuple, params: tuple) -> Any:
        """The members' `rule` (shape_rule or dtype_rule) applied in order; the root's result."""
        done: list[Any] = []
        for op, refs, p in zip(self.ops, self.wiring, params):
            args = [inputs[k] if kind == "in" else done[k] for kind, k in refs]
            done.append(getattr(op, rule)(*args, **dict(p)))
        return done[-1]

    def shape_rule(self, *shapes: tuple, params: tuple) -> tuple:
        return self._chain("shape_rule", shapes, params)

    def dtype_rule(self, *dtypes: Any, params: tuple) -> Any:
        return self._chain("dtype_rule", dtypes, params)

    def bind(self, kernels: list[Callable[..., Any]]) -> Callable[..., np.ndarray]:
        """A kernel for the group: member m is `kernels[m]` called on its arrays (params bound), its result
        converted to the member's dtype as the executor converts each instruction's result."""
        wanted = [dtype.np for dtype in self.dtypes]
        wiring, roots = self.wiring, self.roots

        def run(*arrays: np.ndarray) -> Any:
            done: list[np.ndarray] = []
            for kernel, refs, want in zip(kernels, wiring, wanted):
                out = kernel(*[arrays[k] if kind == "in" else done[k] for kind, k in refs])
                if not isinstance(out, np.ndarray) or out.dtype != want:
                    out = np.asarray(out).astype(want, copy=False)
                done.append(out)
            return done[-1] if len(roots) == 1 else tuple([done[m] for m in roots])

        return run

    def fast(self, out: Any, dtypes: tuple, params: tuple) -> Callable[..., np.ndarray]:
        """The group with each member's own `fast` kernel where it offers one for its operands' dtypes
        (the same bits as its reference, by that contract), else its reference; params bound."""
        kernels = []
        for m, (op, refs, p) in enumerate(zip(self.ops, self.wiring, params)):
            arg_dtypes = tuple(dtypes[k] if kind == "in" else self.dtypes[k] for kind, k in refs)
            fast = getattr(op, "fast", None)
            kernel = fast(self.dtypes[m], arg_dtypes, **dict(p)) if fast is not None else None
            kernels.append(kernel or functools.partial(op.reference, **dict(p)))
        return self.bind(kernels)

    def reference(self, *arrays: np.ndarray, params: tuple) -> np.ndarray:
        """The members' references, in order."""
        kernels = [functools.partial(op.reference, **dict(p)) for op, p in zip(self.ops, params)]
        return self.bind(kernels)(*arrays)


def merge(groups: list[tuple[Op, tuple, tuple]], results: list[Any]) -> tuple[Op, tuple, tuple]:
    """Fused groups computed in one pass: `groups` holds each group's fused op, its inputs (keys: the
    slots or values that hold them) and its params, in an order where a group reads only earlier groups'
    `results` (the key of each group's result); a group's input that is an earlier group's result is
    read from that member. The merged op gives every group's result, in order (`roots`); also its
    inputs' keys and its params."""
    ops: list = []
    wiring: list = []
    dtypes: list = []
    specs: list = []
    params: list = []
    keys: list = []
    roots: list[int] = []
    root_of: dict[Any, int] = {}
    for (fused_op, inputs, group_params), result in zip(groups, results):
        op = fused_op.group
        base = len(ops)
        for refs in op.wiring:
            merged = []
            for kind, k in refs:
                if kind == "m":
                    merged.append(("m", base + k))
                elif inputs[k] in root_of:
                    merged.append(("m", root_of[inputs[k]]))
                else:
                    if inputs[k] not in keys:
                        keys.append(inputs[k])
                        specs.append(op.inputs[k] if op.inputs else None)
                    merged.append(("in", keys.index(inputs[k])))
            wiring.append(tuple(merged))
        ops += op.ops
        dtypes += op.dtypes
        params += group_params
        roots.append(base + op.roots[-1])
        root_of[result] = roots[-1]
    known = tuple(specs) if all(s is not None for s in specs) else ()
    group = FusedGroup(tuple(ops), tuple(wiring), tuple(dtypes), known, tuple(roots))
    return group.op(), tuple(keys), tuple(params)


def mergeable(program: Program) -> set[int]:
    """The ids of fused results a plan may compute in one merged call (`merge`): those of fused
    instructions that read results of other fused instructions of their shape which nothing else
    reads or returns (they may be updates, written back), and those results."""
    readers: dict[int, int] = {}
    for instr in program.instrs:
        for a in instr.args:
            readers[a.id] = readers.get(a.id, 0) + 1
    outputs = {v.id for v in program.outputs}
    fused = {i.out.id: i for i in program.instrs if type(i.op) is not str and i.op.group is not None}
    found: set[int] = set()
    for instr in fused.values():
        parts = {
            a.id
            for a in instr.args
            if a.id in fused
            and readers[a.id] == 1
            and a.id not in outputs
            and a.spec.shape == instr.out.spec.shape
        }
        if parts:
            found |= parts | {instr.out.id}
    return found


def run(program: Program) -> Program:
    groups = _groups(program)
    rw = Rewriter(program)
    member_of = {j for members in groups.values() for j in members[:-1]}
    for index, instr in enumerate(program.instrs):
        if index in member_of:
            continue  # computed inside its group's instruction
        if index in groups:
            op, args, params = _fused([program.instrs[j] for j in groups[index]])
            rw.emit(op, args, params, instr.out, index)
        else:
            rw.keep(instr, index)
    return rw.finish()


def _groups(program: Program) -> dict[int, list[int]]:
    """Root index -> the indices of its group's members (ascending; the root last), for groups of two
    or more."""
    count, keep = uses(program), results(program)
    producer = {instr.out.id: i for i, instr in enumerate(program.instrs)}
    taken: set[int] = set()
    groups: dict[int, list[int]] = {}
    for root in reversed(range(len(program.instrs))):
        instr = program.instrs[root]
        if root in taken or not is_elementwise(instr) or instr.name == "broadcast_to":
            continue
        members, stack = [root], [instr]
        while stack:
            for a in stack.pop().args:
                j = producer.get(a.id)
                if j is None or j in taken or count[a.id] != 1 or a.id in keep:
                    continue
                if is_elementwise(program.instrs[j]):
                    members.append(j)
                    stack.append(program.instrs[j])
        if len(members) > 1:
            taken.update(members)
            groups[root] = sorted(members)
    return groups


def _fused(members: list[Instr]) -> tuple[Op, tuple, dict]:
    position = {instr.out.id: m for m, instr in enumerate(members)}
    inputs: list = []
    slot: dict[int, int] = {}
    wiring = []
    for instr in members:
        refs = []
        for a in instr.args:
            if a.id in position:
                refs.append(("m", position[a.id]))
            else:
                if a.id not in slot:
                    slot[a.id] = len(inputs)
                    inputs.append(a)
                refs.append(("in", slot[a.id]))
        wiring.append(tuple(refs))
    group = FusedGroup(
        tuple(instr.op for instr in members),
        tuple(wiring),
        tuple(instr.out.spec.dtype for instr in members),
        tuple(a.spec for a in inputs),
    )
    params = tuple(tuple(instr.params.items()) for instr in members)
    return group.op(), tuple(inputs), {"params": params}
