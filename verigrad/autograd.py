"""Reverse-mode autograd on eager tensors: each result remembers the op that made it (a `Node`);
`backward` walks those records in reverse topological order and applies each op's VJP.

The VJPs are written with verigrad ops, so with `create_graph=True` the backward pass is itself
recorded and can be differentiated again.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import modes, versions
from .autograd_graph import NODE_HOOKS, Node, RemovableHandle, run_hooks, run_prehooks
from .grad_mode import _grad_mode as _grad_mode
from .grad_mode import enable_grad as enable_grad
from .grad_mode import inference_mode as inference_mode
from .grad_mode import is_grad_enabled as is_grad_enabled
from .grad_mode import is_inference_mode_enabled as is_inference_mode_enabled
from .grad_mode import no_grad as no_grad
from .grad_mode import set_grad_enabled as set_grad_enabled
from .ops import tensor, zeros_like
from .ops.creation import full_op
from .ops.movement import concat, slice_, unslice
from .tensor import LEGACY_NAMES, Tensor, grad_of, set_grad, set_requires_grad


def records_history(op: Any, args: Sequence[Tensor], out: Any) -> bool:
    """Whether a call of `op` on `args` with a result of spec `out` gets a node (outside eager mode's
    own fast check): a differentiable op, grad mode on, a float result, an input that requires grad."""
    return (
        op.differentiable
        and modes.LOCAL.grad[-1]
        and out.dtype.is_float
        and any(a.requires_grad for a in args)
    )


_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)


_C_WALK: list[Callable[[list, int], list | None]] = []  # vg_eager's topological, once eager.py binds it


def _topological(roots: Sequence[Tensor]) -> list[Tensor]:
    """Tensors that lead to `roots`, inputs before the tensors made from them; a view among them whose
    memory was written in place through another tensor since it was made has its history made again
    first (`regenerate`, as PyTorch's), and the walk starts over. vg_eager walks in C (the same order)
    where no in-place write redirects an input and no node predates the last recorded write."""
    if _C_WALK and not versions.REDIRECTS:
        order = _C_WALK[0](list(roots), versions.last_recorded)
        if order is not None:
            return order
    while True:
        order: list[Tensor] = []
        seen: set[int] = set()
        stack: list[tuple[Tensor, bool]] = [(r, False) for r in reversed(roots)]
        last = versions.last_recorded
        stale = None
        pop, push, visit, done_with = stack.pop, stack.append, seen.add, order.append  # (the hot loop)
        while stack:
            t, done = pop()
            if done:
                done_with(t)
                continue
            key = id(t)
            if key in seen:
                continue
            visit(key)
            push((t, True))
            node = t._node
            if node is not None:
                if node.stamp < last and stale is None and _remade_view(t):
                    ticks = versions.recorded_ticks(t.payload, node.stamp)
                    if ticks:
                        stale = (t, ticks)
                stack.extend((i, False) for i in node.saved() if i.requires_grad and id(i) not in seen)
        if stale is None:
            return order
        regenerate(*stale)


def _remade_view(t: Tensor) -> bool:
    """Whether `t` is a view whose history may be made again (not one pinned to a span between writes)."""
    return view_base(t) is not None and not versions.pinned(t)


def view_base(t: Tensor) -> Tensor | None:
    """The tensor that `t`'s node made t a view of (its first input sharing t's memory), or None: no node,
    a node of an in-place write, or an op whose result is memory of its own."""
    node = t._node
    if node is None or getattr(node.op, "written", False) or type(t.payload) is not np.ndarray:
        return None
    owner = versions.root(t.payload)
    for i in node.inputs:
        if type(i.payload) is np.ndarray and versions.root(i.payload) is owner:
            return i
    return None


MULTI_OUTPUT_TAIL = (
    "This view is the output of a function that returns multiple views. Such functions do not allow the "
    "output views to be modified inplace. You should replace the inplace operation by an out-of-place one."
)
BASE_WRITTEN = "its base or another view of its base has been modified"


def refused_piece(t: Tensor, what: str) -> RuntimeError | None:
    """PyTorch's error for `t`, a piece of split, chunk or unbind of a tensor with history
    (`versions.multi_output`), whose memory `what` in place; None for any other tensor."""
    how = getattr(t, "_view", None)
    if how is None or type(how[3]) is not tuple:
        return None
    name, index = how[3]
    return RuntimeError(f"Output {index} of {name} is a view and {what} inplace. {MULTI_OUTPUT_TAIL}")


def regenerate(view: Tensor, ticks: list[int]) -> None:
    """PyTorch's regenerated view: `view`, made by its node's op from a base whose memory was written in
    place since (at clock readings `ticks`), is made by that op again for each span between those writes
    (the same op and inputs, the span's clock reading: the base as it was then); nodes made in a span
    find its own (`versions.redirect`), and nodes made from now on the view as the base is now. A piece
    of split, chunk or unbind raises PyTorch's error instead."""
    refused = refused_piece(view, BASE_WRITTEN)
    if refused is not None:
        raise refused
    node = view._node
    made = node
    for tick in ticks:
        old = Tensor(view.spec, view.payload)  # its values now: the version check guards a node reading them
        old._node = made
        set_requires_grad(old, view.requires_grad)
        versions.pin(old)
        versions.redirect(view, tick, old)
        made = Node(node.op, node.inputs, node.params)
        made.stamp = tick
    view._node = Node(node.op, node.inputs, node.params)


_MODIFIED = (
    "one of the variables needed for gradient computation has been modified by an inplace operation: "
    "[{what}]{which}, is at version {now}; expected version {then} instead. Hint: {hint}"
)
_HINTS = {
    "values": "it was written in place (itself under no_grad, or through a view or an alias of its memory) "
    "after {op} used it, and verigrad does not keep its old values there; clone() it before the write, or "
    "write out of place",
    "history": "it is a view (or an alias) of memory that a recorded in-place write through another tensor "
    "changed after it was computed and before {op} used it, so its history no longer gives its values "
    "(PyTorch regenerates a view's history, verigrad does not); take the view again after the write",
}


def _modified(x: Tensor, changed: tuple[int, int], hint: str, op: str) -> RuntimeError:
    shape = ", ".join(str(d) for d in x.shape)
    which = "" if x._node is None else f", which is output 0 of {x._node.op.name}"
    what = f"{LEGACY_NAMES.get(x.dtype, x.dtype.name)} [{shape}]"
    text = _MODIFIED.format(what=what, which=which, now=changed[0], then=changed[1], hint=_HINTS[hint])
    return RuntimeError(text.format(op=op))


def _each_other(inputs: tuple[Tensor, ...]) -> tuple[int, ...]:
    """mul's and matmul's: each operand's value is read for the other's gradient."""
    return tuple(i for i, other in ((0, 1), (1, 0)) if inputs[other].requires_grad)


# the inputs whose values an op's VJP reads (-1: its output), for the ops where that is fewer than all
# of them and the output: as PyTorch saves only what its backward reads, the version check passes
# over the rest (`h.add_(r)` after `z = h + 1` is fine); an op not listed has all of them checked
_NOTHING = (
    "add", "sub", "scaled_add", "neg", "positive", "reshape", "permute", "broadcast_to", "contiguous", "cast",
    "slice", "unslice", "pad", "concat", "sum", "mean", "assign", "assign_view",
    "floor", "ceil", "trunc", "round", "sign",
)  # fmt: skip
_INPUT_ONLY = (
    "abs", "log", "log1p", "sin", "cos", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
    "erf", "gelu", "gelu_tanh", "silu",
)  # fmt: skip
_READS: dict[str, tuple[int, ...] | Callable[[tuple[Tensor, ...]], tuple[int, ...] | None]] = {
    **dict.fromkeys(_NOTHING, ()),
    **dict.fromkeys(("take", "take_grad", "gather"), (1,)),
    # (-1: the output) their backward reads their result, not their input (PyTorch's too)
    **dict.fromkeys(_INPUT_ONLY, (0,)),
    **dict.fromkeys(
        ("exp", "exp2", "expm1", "sqrt", "rsqrt", "tan", "tanh", "sigmoid", "relu", "softmax", "log_softmax"),
        (-1,),
    ),
    "where": (0,),
    "mul": _each_other,
    "matmul": _each_other,
    "div": lambda inputs: None if inputs[1].requires_grad else (1,),  # x's gradient reads y alone
}


def reads(node: Node) -> tuple[int, ...] | None:
    """The positions of the inputs whose values `node`'s VJP reads (-1: its output), None for all of them
    and the output (an op not listed in `_READS`)."""
    listed = _READS.get(node.op.name)
    return listed(node.inputs) if callable(listed) else listed


def _read(t: Tensor, node: Node, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The tensors whose values `node`'s VJP reads (`t`, its output, among them unless listed)."""
    listed = reads(node)
    if listed is None:
        return (t, *inputs)
    return tuple(t if i == -1 else inputs[i] for i in listed)


def _check_unmodified(t: Tensor, node: Node | None, inputs: tuple[Tensor, ...]) -> None:
    """PyTorch's version check, before any VJP of `node` (which made `t` from `inputs`) runs: the values
    its VJP reads are those it was made with (memory written in place since raises); and no input with
    history is a view of memory that a write autograd recorded through another tensor changed between its
    own node and this one (PyTorch would have regenerated its history; a write under no_grad changes no
    history, in either). With `node` None, `t` is a root."""
    if node is None:
        changed = None if t._node is None else versions.written_after(t.payload, t._node.stamp, None, True)
        if changed is not None:
            raise _modified(t, changed, "history", "backward")
        return
    stamp = node.stamp
    if stamp != versions.clock:  # else nothing was written since the node was made
        for x in _read(t, node, inputs):
            changed = versions.written_after(x.payload, stamp)
            if changed is not None:
                raise _modified(x, changed, "values", node.op.name)
    for x in inputs:
        made = x._node
        if made is not None and made.stamp != stamp and not versions.pinned(x):  # (pinned: as it was)
            changed = versions.written_after(x.payload, made.stamp, stamp, True)
            if changed is not None:
                raise _modified(x, changed, "history", node.op.name)


def _as_tensors(value: Tensor | Sequence[Tensor], what: str) -> list[Tensor]:
    items = [value] if isinstance(value, Tensor) else list(value)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: element {i} is {type(t).__name__}, not a Tensor")
    return items


def _seeds(roots: list[Tensor], grads: Any, what: str) -> list[Tensor]:
    """The gradient each root starts with (ones for a single value where none is given), checked before
    any work; marks the start of a trace's backward section."""
    given: list[Any] = [None] * len(roots) if grads is None else _as_grads(grads, len(roots), what)
    for i, (root, grad) in enumerate(zip(roots, given)):
        if not root.requires_grad:
            raise RuntimeError(
                f"{what}: element {i} of tensors does not require grad and does not have a grad_fn"
            )
        if grad is None and root.numel() != 1:
            raise RuntimeError(
                f"{what}: grad can be implicitly created only for scalar outputs, got {root.shape}"
            )
        if grad is not None and tuple(grad.shape) != tuple(root.shape):
            raise RuntimeError(f"{what}: gradient shape {grad.shape} does not match {root.shape}")
    modes.current().begin_backward()  # a trace marks where its backward section starts
    # ones_like(r.detach())'s call of the op, without its two frames and the detached tensor
    return [full_op(shape=r.shape, dtype=r.dtype, value=1) if g is None else g for r, g in zip(roots, given)]


def _as_grads(grads: Any, count: int, what: str) -> list[Any]:
    items = [grads] if isinstance(grads, Tensor) else list(grads)
    if len(items) != count:
        raise RuntimeError(f"{what}: got {len(items)} gradients for {count} tensors")
    return [tensor(g) if g is not None and not isinstance(g, Tensor) else g for g in items]


def _propagate(
    roots: list[Tensor], seeds: list[Tensor], create_graph: bool, retain_graph: bool, wrt: list[Tensor] | None
) -> dict[int, Tensor]:
    """Apply the VJPs from `roots` (whose gradients are `seeds`) back to the leaves, in reverse topological
    order. With `wrt` None every leaf's gradient is accumulated into its `.grad`; otherwise only the
    branches that reach a tensor of `wrt` are differentiated, and those tensors' gradients are returned
    by id (no `.grad` is touched). Without `retain_graph` each node passed is freed."""
    order = _topological(roots)
    reaches: set[int] | None = None
    if wrt is not None:  # prune: keep the tensors from which some variable can be reached
        reaches = {id(t) for t in wrt}
        for t in order:
            if t._node is not None and any(id(i) in reaches for i in t._node.saved()):
                reaches.add(id(t))
        order = [t for t in order if id(t) in reaches]
    wanted = None if wrt is None else {id(t) for t in wrt}
    grads: dict[int, Tensor] = {}
    for root, seed in zip(roots, seeds):
        before = grads.get(id(root))
        grads[id(root)] = seed if before is None else before + seed
    found: dict[int, Tensor] = {}
    if versions.any_writes():
        for root in roots:
            _check_unmodified(root, None, ())
    # (the loop runs once per node: the dicts' methods bound once; versions' two tables are read, never
    # rebound, so a write during the pass, by a hook, is seen)
    pop, get, written, redirects = grads.pop, grads.get, versions._MEMORY, versions.REDIRECTS
    anomaly = _ANOMALY["enabled"] and _ANOMALY["check_nan"]
    claimed = _claimed(seeds) if wanted is None else set()
    with _grad_mode(create_graph):
        for t in reversed(order):
            key = id(t)
            g = pop(key, None)
            if g is None:
                continue
            if isinstance(g, _Pieces):
                g = g.total()
            if t._hooks:
                g = _hooked(t, g)
            if wanted is not None and key in wanted:
                found[key] = g  # and on through its node: a variable made from another gives it a part
            node = t._node
            if node is None:
                if wanted is None:
                    _accumulate(t, g, claimed)
                    if t._hooks:
                        _after_accumulation(t)
                continue
            inputs = node.saved() if redirects else node.inputs
            if reaches is not None and not any(id(i) in reaches for i in inputs):
                continue
            if node.freed and reads(node) != ():  # (PyTorch's: a node that saved nothing runs again)
                raise RuntimeError(_FREED)
            if written:
                _check_unmodified(t, node, inputs)
            # a slice's gradient is gathered with its input's others (_Pieces): no unslice made where the
            # pieces tile an axis (eager and traced alike: a compiled step gives eager's bits, -0.0 kept)
            vjp = _slice_vjp if node.op is slice_ else node.op.vjp
            hooks = NODE_HOOKS.get(id(node)) if NODE_HOOKS else None
            if hooks is not None:
                g = run_prehooks(hooks, g)
            step = vjp(g, t, *inputs, **node.params)
            if hooks is not None:
                step = run_hooks(hooks, step, g)
            if anomaly:
                _check_nan(node, step)
            for inp, gi in zip(inputs, step):
                if gi is None or not inp.requires_grad or (reaches is not None and id(inp) not in reaches):
                    continue
                key = id(inp)
                before = get(key)
                if isinstance(gi, _Piece):
                    if not isinstance(before, _Pieces):
                        before = grads[key] = _Pieces(node, inp, before)
                    before.add(gi.g, gi.index)
                    continue
                if gi.spec is not inp.spec:  # (the same spec object: the same shape and dtype)
                    gi = _conformed(node, inp, gi)
                if isinstance(before, _Pieces):
                    before.add(gi)
                else:
                    grads[key] = gi if before is None else before + gi
            if not retain_graph:
                node.freed = True
    return found


# anomaly detection (process-wide, as PyTorch's): a backward step whose gradient holds a NaN raises, naming it
_ANOMALY = {"enabled": False, "check_nan": True}


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on (set_detect_anomaly / detect_anomaly)."""
    return _ANOMALY["enabled"]


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks the gradients for NaN."""
    return _ANOMALY["check_nan"]


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off (torch.set_anomaly_enabled)."""
    _ANOMALY["enabled"], _ANOMALY["check_nan"] = bool(enabled), bool(check_nan)


class set_detect_anomaly(contextlib.ContextDecorator):
    """PyTorch's set_detect_anomaly(mode, check_nan=True): anomaly detection on or off from the call (as a
    function) or for a block (as a context manager: the previous setting comes back after). On, a backward
    step whose gradient holds a NaN raises RuntimeError naming the op, as PyTorch's "Function 'XBackward'
    returned nan values in its 0th output"."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.previous = (_ANOMALY["enabled"], _ANOMALY["check_nan"])
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        set_anomaly_enabled(*self.previous)


class detect_anomaly(contextlib.ContextDecorator):
    """PyTorch's detect_anomaly(check_nan=True): anomaly detection on for a block (see set_detect_anomaly)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
            "enabled for debugging.",
            stacklevel=2,
        )

    def __enter__(self) -> None:
        self.previous = (_ANOMALY["enabled"], _ANOMALY["check_nan"])
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc: object) -> None:
        set_anomaly_enabled(*self.previous)


def _check_nan(node: Node, grads: Any) -> None:
    """Anomaly detection's check of one backward step's gradients (concrete ones: a trace has no values)."""
    for i, gi in enumerate(grads):
        g = getattr(gi, "g", gi)  # a _Piece holds its gradient
        concrete = isinstance(g, Tensor) and isinstance(g.payload, np.ndarray) and g.dtype.is_float
        if concrete and np.isnan(g.numpy()).any():
            # PyTorch's warning first (it adds the forward call's traceback, which verigrad does not keep)
            warnings.warn(f"Error detected in {node.op.name}Backward.", UserWarning, stacklevel=2)
            raise RuntimeError(f"Function '{node.op.name}Backward' returned nan values in its {i}th output.")


class _Piece:
    """The gradient g of a slice `index` of a tensor, not yet written into zeros of its shape."""

    __slots__ = ("g", "index")

    def __init__(self, g: Tensor, index: tuple) -> None:
        self.g, self.index = g, index


def _slice_vjp(g: Tensor, out: Tensor, x: Tensor, index: tuple) -> tuple[_Piece]:
    return (_Piece(g, index),)


class _Pieces:
    """The gradients a tensor receives eagerly while some are of slices of it (slice's VJP, unslice:
    zeros with the piece's gradient written in): where they are all of slices that tile one axis (split,
    chunk, q, k and v cut from one projection), their total is one concat of the pieces' gradients
    (PyTorch's split backward: a -0.0 stays -0.0), not a zero-padded array per piece and their sums;
    otherwise the sum of the unslices and other gradients in the order they came, as without this
    gathering."""

    def __init__(self, node: Node, inp: Tensor, before: Tensor | None) -> None:
        self.node, self.inp = node, inp
        self.parts: list[tuple[Tensor, tuple | None]] = [] if before is None else [(before, None)]

    def add(self, g: Tensor, index: tuple | None = None) -> None:
        """A gradient: of the slice `index` of the tensor, or (None) of the whole tensor."""
        self.parts.append((g, index))

    def _axis(self) -> int | None:
        """The one axis along which the pieces tile the tensor (step 1, consecutive, covering it), or None."""
        shape, indexes = self.inp.shape, [index for _, index in self.parts]
        if len(indexes) < 2 or any(i is None or len(i) != len(shape) for i in indexes):
            return None
        whole = [all(i[a] == (0, n, 1) for i in indexes) for a, n in enumerate(shape)]
        if whole.count(False) != 1:
            return None
        axis = whole.index(False)
        stop = 0
        for start, end, step in sorted(i[axis] for i in indexes):
            if not (isinstance(start, int) and isinstance(end, int)) or step != 1 or start != stop:
                return None
            stop = end
        return axis if stop == shape[axis] else None

    def total(self) -> Tensor:
        axis = self._axis()
        if axis is not None:
            ordered = sorted(self.parts, key=lambda part: part[1][axis][0])  # type: ignore[index]
            g = concat(*[piece for piece, _ in ordered], axis=axis)
            return g if g.spec is self.inp.spec else _conformed(self.node, self.inp, g)
        total = None
        for g, index in self.parts:
            if index is not None:
                g = unslice(g, shape=self.inp.shape, index=index)
                if g.spec is not self.inp.spec:
                    g = _conformed(self.node, self.inp, g)
            total = g if total is None else total + g
        return total  # type: ignore[return-value]


def _conformed(node: Node, inp: Tensor, gi: Tensor) -> Tensor:
    """A VJP's gradient `gi` for `inp` of another spec: in inp's dtype (mixed-dtype ops: each input's
    gradient in its own); RuntimeError where the shapes differ."""
    given, want = gi.spec, inp.spec
    if given.shape != want.shape:
        raise RuntimeError(
            f"the VJP of {node.op.name} gave a gradient of shape {gi.shape} for an input of shape {inp.shape}"
        )
    return gi.cast(inp.dtype) if given.dtype is not want.dtype else gi


def register_hook(t: Tensor, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"register_hook takes a function of the gradient, not {type(hook).__name__}")
    if not t.requires_grad:
        raise RuntimeError("register_hook on a tensor that does not require grad (no gradient reaches it)")
    if t._hooks is None:
        t._hooks = []
    t._hooks.append(hook)
    return RemovableHandle(t._hooks, hook)


def register_post_accumulate_grad_hook(t: Tensor, hook: Callable[[Tensor], None]) -> RemovableHandle:
    """hook(t) after a backward pass accumulated t's gradient into t.grad (a leaf that requires grad), as
    PyTorch's: the optimizer step fused into backward, one parameter at a time."""
    if not callable(hook):
        raise TypeError(f"register_post_accumulate_grad_hook takes a function, not {type(hook).__name__}")
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if not t.is_leaf:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")

    def after(tensor: Tensor) -> None:
        if hook(tensor) is not None:
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")

    after.post_accumulate = True  # type: ignore[attr-defined]
    if t._hooks is None:
        t._hooks = []
    t._hooks.append(after)
    return RemovableHandle(t._hooks, after)


def _after_accumulation(leaf: Tensor) -> None:
    for hook in list(leaf._hooks or ()):
        if getattr(hook, "post_accumulate", False):
            hook(leaf)


def retain_grad(t: Tensor) -> None:
    if not t.requires_grad:
        raise RuntimeError("retain_grad on a tensor that does not require grad (no gradient reaches it)")
    if t.is_leaf or any(getattr(h, "retains", None) is t for h in t._hooks or ()):
        return

    def keep(g: Tensor) -> None:
        _accumulate(t, g)

    keep.retains = t  # type: ignore[attr-defined]
    register_hook(t, keep)


def _hooked(t: Tensor, g: Tensor) -> Tensor:
    """The gradient of `t` after its hooks, in the order registered; the one retain_grad added last of
    all, as PyTorch's (`.grad` holds what the other hooks made of the gradient)."""
    hooks = [h for h in t._hooks or () if not getattr(h, "post_accumulate", False)]
    for hook in sorted(hooks, key=lambda h: getattr(h, "retains", None) is t):
        replaced = hook(g)
        if replaced is None:
            continue
        if not isinstance(replaced, Tensor) or replaced.spec != g.spec:
            what = replaced.spec if isinstance(replaced, Tensor) else type(replaced).__name__
            raise RuntimeError(f"a gradient hook returned {what} for a gradient {g.spec}: give the same")
        g = replaced
    return g


def _memory(data: np.ndarray) -> int:
    """Which memory an array reads: the id of the array at the end of its chain of bases."""
    while isinstance(data.base, np.ndarray):
        data = data.base
    return id(data)


def _claimed(seeds: Sequence[Tensor]) -> set[int]:
    """The memory of a pass's seeds (the caller's own tensors, `backward(gradient)`): a `.grad` must not
    read it, nor another's `.grad` (see _accumulate)."""
    return {_memory(s.payload) for s in seeds if type(s.payload) is np.ndarray}


def _accumulate(leaf: Tensor, g: Tensor, claimed: set[int] | None = None) -> None:
    held = grad_of(leaf)  # (unchecked, as the writes below: g is of the leaf's spec)
    if held is None:
        # a broadcast gradient (a sum's, a mean's) is copied, as PyTorch's AccumulateGrad copies an
        # expanded one: `.grad` is memory that can be written in place (zero_(), an optimizer's update)
        # (without history, the contiguous op's copy is NumPy's: made here, a third of the op call's time);
        # so is one whose memory a seed or another leaf's `.grad` of this pass holds (an add passes its
        # gradient on to both inputs): PyTorch's leaves never share a `.grad`, which is written in place
        data = g.payload
        if type(data) is np.ndarray:
            memory = _memory(data)
            if not data.flags.writeable or (claimed is not None and memory in claimed):
                g = g.contiguous() if g.requires_grad else Tensor(g.spec, data.copy())  # (C order)
                memory = id(g.payload)
            if claimed is not None:
                claimed.add(memory)
        set_grad(leaf, g)
        return
    if type(held.payload) is not type(g.payload):
        # a traced backward pass meeting a gradient computed outside the trace: the compiled function
        # would add that one gradient again on every call, which is not what running it eagerly does
        raise RuntimeError(
            f"a leaf {leaf.spec!r} already holds a gradient from outside the traced function; "
            "clear it first (optimizer.zero_grad(), or .grad = None) inside the function or before it"
        )
    if _in_place(leaf, held, g):
        # PyTorch's AccumulateGrad: `.grad += g`, the same tensor (one holding it sees the sum); NumPy's
        # add, one exact rounding as the kernel's; a write, noted: a node that saved this `.grad` raises
        np.add(held.payload, g.payload, out=held.payload)
        versions.note_write(held.payload)
    else:
        set_grad(leaf, held + g)


def _in_place(leaf: Tensor, held: Tensor, g: Tensor) -> bool:
    """Whether a leaf's gradient is added into its `.grad` in place: eager f32 / f64 arrays of one spec,
    neither with history (create_graph gives a new `.grad` with its own), and not retain_grad's non-leaf
    (whose `.grad` PyTorch replaces)."""
    return (
        leaf._node is None
        and not (held.requires_grad or g.requires_grad)
        and type(held.payload) is np.ndarray
        and type(g.payload) is np.ndarray
        and held.spec == g.spec
        and held.payload.dtype in _SUMMED_IN_PLACE
        and held.payload.flags.writeable
    )


_SUMMED_IN_PLACE = (np.dtype(np.float32), np.dtype(np.float64))


_CYCLE = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter and its "
    "gradient which can cause a memory leak. We recommend using autograd.grad when creating the graph to "
    "avoid this. If you have to use this function, make sure to reset the .grad fields of your parameters "
    "to None after use to break the cycle and avoid the leak."
)
_CYCLE_WARNED: list[bool] = []


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """PyTorch's `autograd.backward`: accumulate the gradients of `tensors` (seeded with `grad_tensors`,
    ones for single values) into `.grad` of every leaf that requires grad, or of `inputs` only. The graph
    is freed unless `retain_graph` (which defaults to `create_graph`): a second pass through it raises."""
    roots = _as_tensors(tensors, "backward()")
    if not roots:
        raise RuntimeError("backward() got no tensors to differentiate")
    if create_graph and not _CYCLE_WARNED:
        _CYCLE_WARNED.append(True)  # once per process, as PyTorch's
        warnings.warn(_CYCLE, UserWarning, stacklevel=2)
    retain = create_graph if retain_graph is None else bool(retain_graph)
    targets = None if inputs is None else _as_tensors(inputs, "backward(inputs=...)")
    if targets is not None:
        if not targets:
            raise RuntimeError("backward(): inputs, when given, must not be empty")
        for i, t in enumerate(targets):
            if not t.requires_grad:
                raise RuntimeError(f"backward(): input {i} of inputs does not require grad")
    seeds = _seeds(roots, grad_tensors, "backward()")
    found = _propagate(roots, seeds, create_graph, retain, targets)
    claimed = _claimed(seeds)
    for t in targets or ():
        g = found.get(id(t))
        if g is not None:
            _accumulate(t, g, claimed)
            if t._hooks:
                _after_accumulation(t)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """PyTorch's `autograd.grad`: the gradients of `outputs` (seeded with `grad_outputs`) with respect to
    each of `inputs`, as a tuple; no `.grad` changes. An input the outputs do not depend on raises, or
    gives None with `allow_unused`, zeros with `materialize_grads`. With `create_graph` the gradients
    have their own history (higher derivatives). The graph is freed unless `retain_graph` (default
    `create_graph`). JAX's function transform is `verigrad.grad`."""
    if is_grads_batched:
        raise NotImplementedError(
            "autograd.grad: is_grads_batched=True (vmap over grad_outputs) is not supported"
        )
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
            "gradient for other parts of the graph, please use torch.autograd.backward.",
            FutureWarning,
            stacklevel=2,
        )
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "autograd.grad: expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    allow = materialize_grads if allow_unused is None else bool(allow_unused)
    roots = _as_tensors(outputs, "autograd.grad(outputs)")
    variables = _as_tensors(inputs, "autograd.grad(inputs)")
    if not roots or not variables:
        raise RuntimeError("autograd.grad needs at least one output and one input")
    for i, t in enumerate(variables):
        if not t.requires_grad:
            raise RuntimeError(
                f"autograd.grad: input {i} (one of the differentiated Tensors) does not require grad"
            )
    retain = create_graph if retain_graph is None else bool(retain_graph)
    seeds = _seeds(roots, grad_outputs, "autograd.grad()")
    found = _propagate(roots, seeds, create_graph, retain, variables)
    out: list[Tensor | None] = []
    for i, t in enumerate(variables):
        g = found.get(id(t))
        if g is None:
            if not allow:
                raise RuntimeError(
                    f"autograd.grad: the differentiated Tensor at index {i} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                g = zeros_like(t.detach())
        out.append(g)
    return tuple(out)


def gradients(
    root: Tensor, wrt: Sequence[Tensor], grad: Tensor | None = None, create_graph: bool = False
) -> list[Tensor | None]:
    """d(root)/d(t) for each t of `wrt` (None where root does not depend on t); no `.grad` changes and
    the graph is kept. In a trace the VJPs become instructions after the program's `backward:` mark, as
    every op call does."""
    found = _propagate([root], _seeds([root], grad, "gradients()"), create_graph, True, list(wrt))
    return [found.get(id(t)) for t in wrt]


class _VariableType(type):
    def __instancecheck__(cls, value: Any) -> bool:
        return isinstance(value, Tensor)


class Variable(metaclass=_VariableType):
    """PyTorch's deprecated autograd.Variable: Variable(t, requires_grad) is a tensor sharing t's memory,
    without its history, requiring grad as asked (every tensor is a Variable to isinstance)."""

    def __new__(cls, data: Tensor, requires_grad: bool = False, volatile: bool = False) -> Tensor:  # type: ignore[misc]
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)
