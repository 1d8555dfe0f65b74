"""In-place writes recorded for autograd, as PyTorch records them.

`x.add_(y)` on a tensor with history is `assign(x, add(x, y))`: the new value is computed out of place
from x, then `write` puts it in x's memory (so views and aliases see it) and gives x a new history, a
node from the value. Nodes made before the write still mean x as it was: x's snapshot (its old history,
with a copy of its old values where a backward known to read them needs them, else its memory), which
the nodes that computed the value hold directly and the others find through `versions.resolve`. A
write through a view (`y[:, 0].mul_(2)`, `y.view(-1).add_(1)`) gives each base of the view a new history
too (PyTorch's CopySlices): the base as it was outside the view's elements, the view's new values inside.

A view made of a tensor without history (`u = buf[0]` of a plain `buf`) has no node; it keeps how it was made
(`note_view`: the op, its inputs and params, on the view; a weak reference on its base). A recorded write of
the base, or through another of its views, gives each such view a node of that op from the base as written
(PyTorch's regenerated view), and a write through such a view gives its bases a new history as above.

Memory changed another way (under no_grad, or through an alias that is not the view's base) is caught in
backward by the version check (`versions.written_after`) where a backward reads it: PyTorch's "modified
by an inplace operation" error, never a gradient from the wrong values.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import modes, versions
from .autograd import BASE_WRITTEN, MULTI_OUTPUT_TAIL, Node, reads, refused_piece, regenerate, view_base
from .ops import take, tensor, where, zeros_like
from .tensor import Tensor, set_requires_grad

LEAF_IN_PLACE = _LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
_VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."
_STALE_VIEW = (
    "an in-place write through a view written in place before, whose memory was then written through "
    "another tensor (or not a view of a tensor with history): verigrad does not regenerate its history "
    "(PyTorch does); take the view again after the write"
)
# PyTorch's errors for a view it gives no history: one made under no_grad (or a piece of split, chunk or
# unbind of a tensor without history) whose memory is then written in place with grad mode on
_REFUSED_VIEW = "A view was created in no_grad mode and {what} inplace with grad mode enabled. {why}"
NO_GRAD_TAIL = (
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
    "moving both the view and the inplace either both inside the no_grad block (if you don't want the "
    "inplace to be tracked) or both outside (if you want the inplace to be tracked)."
)
_WRITTEN = "is being modified"


class _Assign:
    """The op of a node made by an in-place write: the tensor takes the value's gradient; the tensor as it
    was gets none from here (zeros where the value was not computed from it, as PyTorch's)."""

    name = "assign"
    written = True  # its tensor is one written in place, not a view of its inputs

    @staticmethod
    def vjp(g: Tensor, out: Tensor, old: Tensor, value: Tensor, feeds: bool, bases: tuple) -> tuple:
        return (None if feeds else zeros_like(g), g)


class _AssignView:
    """The op of a base's node after a write through its view (PyTorch's CopySlices): `positions`, where
    each view element sits in the flat base (the base as it was gets the gradient elsewhere)."""

    name = "assign_view"
    written = True

    @staticmethod
    def vjp(g: Tensor, out: Tensor, old: Tensor, view: Tensor, positions: Tensor, bases: tuple) -> tuple:
        inside = np.zeros(int(np.prod(g.shape)), dtype=bool)  # made here: a write keeps positions only
        inside[positions.numpy()] = True
        outside = where(tensor(inside.reshape(tuple(g.shape))), zeros_like(g), g)
        return (outside, take(g.reshape(-1), positions, axis=0).reshape(view.shape))


class _RefusedView:
    """The op of the node a recorded write gives a view PyTorch gives no history (made under no_grad, a piece
    of split, chunk or unbind of a tensor without history): its backward raises PyTorch's error."""

    name = "refused_view"

    @staticmethod
    def vjp(g: Tensor, out: Tensor, base: Tensor, why: str) -> tuple:
        raise RuntimeError(_REFUSED_VIEW.format(what=BASE_WRITTEN, why=why))


def note_view(view: Tensor, op: object, args: tuple, params: dict) -> None:
    """`view`, made by `op` from `args` (with `params`) without history, where it shares memory with one of
    them (its base): keep how it was made, and whether grad mode was on, on the view, and a weak reference
    to it on the base (`versions.keep_view`), so that a recorded write of that memory gives it a history.
    (vg_eager does the same for the calls it makes.)"""
    base = _sharing(view, args)
    if base is not None:
        view._view = (op, args, params, modes.LOCAL.grad[-1])
        versions.keep_view(base, view)


def _sharing(t: Tensor, inputs: tuple) -> Tensor | None:
    """The first of `inputs` whose memory is t's (the same owning array), or None."""
    owner = versions.root(t.payload)
    for i in inputs:
        if type(i.payload) is np.ndarray and versions.root(i.payload) is owner:
            return i
    return None


def write(target: Tensor, value: Tensor) -> None:
    """Write `value` (target's shape and dtype) into `target` and record it for autograd (grad mode is on
    and one of them requires grad)."""
    if target._node is None:
        if target.requires_grad:
            raise RuntimeError(_LEAF)
        chain = _untracked_bases(target)
    else:
        chain = _bases(target)
    # the tensors as they were: the target, its bases, and the other views of its memory that computing
    # the value used (x.reshape(-1) of an x without history has no link to x); a copy where a node that
    # reads it is known (its own node, one that computed the value), else its memory, which the version
    # check guards as PyTorch's does
    feeds = value._node is not None and any(i is target for i in value._node.inputs)
    nodes, aliases, read = _walk(value, target, {id(t) for t in chain})
    olds = {id(t): (t, _snapshot(t, id(t) in read or _reads_output(t))) for t in chain}
    olds.update((id(t), (t, _snapshot(t, True))) for t in aliases)
    for node in nodes:  # they hold the snapshots: the target's new node makes no cycle with them
        if any(id(i) in olds for i in node.inputs):
            node.inputs = tuple(olds[id(i)][1] if id(i) in olds else i for i in node.inputs)
    if id(value) in olds:  # the target's memory itself
        value = olds[id(value)][1]
    np.copyto(target.payload, value.payload)
    tick = versions.note_write(target.payload, recorded=True)
    for t, old in olds.values():
        versions.redirect(t, tick, old)
    for t in chain:
        _move_hooks(t, olds[id(t)][1])
    bases = tuple(weakref.ref(b) for b in chain[1:])  # weak: a base no one holds needs no new history
    target._node = Node(_Assign, (olds[id(target)][1], value), {"feeds": feeds, "bases": bases})
    set_requires_grad(target, True)
    for i, base in enumerate(chain[1:], 1):
        params = {"positions": _placement(base.payload, target.payload), "bases": bases[i:]}
        base._node = Node(_AssignView, (olds[id(base)][1], target), params)
        set_requires_grad(base, True)
    for t in chain:
        _remake_views(t, tick, None)


def refuse_unrecorded(target: Tensor) -> None:
    """PyTorch's error for a write with grad mode on, of values without grad, into a view made under no_grad
    of a tensor that requires grad (PyTorch's view requires grad: the write would be recorded)."""
    t = target
    while (recipe := getattr(t, "_view", None)) is not None and (base := _sharing(t, recipe[1])) is not None:
        if base.requires_grad:
            why = _why_refused(recipe[3])
            if why is not None:
                raise RuntimeError(_REFUSED_VIEW.format(what=_WRITTEN, why=why))
            return
        t = base


def _why_refused(how: object) -> str | None:
    """The tail of PyTorch's error for a view made with `how` (note_view's: grad mode then, or
    versions.MULTI_OUTPUT), None for a view PyTorch gives a history."""
    if how is True:
        return None
    return MULTI_OUTPUT_TAIL if how == versions.MULTI_OUTPUT else NO_GRAD_TAIL


def _untracked_bases(target: Tensor) -> list[Tensor]:
    """target (without history), then the tensors it was made a view of while they had none (note_view),
    up to one that is no such view (or has a history: its bases then); PyTorch's errors for a view it gives
    no history. A tensor sharing memory without a view (`.detach()` of a view, `from_numpy`) is no view: it
    takes the history alone, as PyTorch's."""
    chain, t = [target], target
    while (recipe := getattr(t, "_view", None)) is not None:
        why = _why_refused(recipe[3])
        if why is not None:
            raise RuntimeError(_REFUSED_VIEW.format(what=_WRITTEN, why=why))
        base = _sharing(t, recipe[1])
        if base is None:  # (not made so: a recipe names its base)
            break
        if base._node is not None:
            chain.extend(_bases(base))
            break
        if base.requires_grad:
            raise RuntimeError(_VIEW_OF_LEAF)
        chain.append(base)
        t = base
    return chain


def _remake_views(base: Tensor, tick: int, refused: str | None) -> None:
    """The views made of `base` without history (note_view), its memory now written at clock `tick` with a
    history: each takes a node of the op that made it from base as written (PyTorch's regenerated view;
    nodes made before the write mean it as it was, without history), then its own such views; a view PyTorch
    gives no history (`refused`, or made so) a node whose backward raises PyTorch's error."""
    refs = getattr(base, "_views", None)
    if not refs:
        return
    base._views = None  # it has a history now: views made of it from here on have nodes
    for ref in refs[1:]:
        view = ref()
        if view is None or view._node is not None or view.requires_grad or not view.dtype.is_float:
            continue
        op, inputs, params, how = view._view
        why = refused or _why_refused(how)
        versions.redirect(view, tick, Tensor(view.spec, view.payload))
        view._node = Node(op, inputs, params) if why is None else Node(_RefusedView, (base,), {"why": why})
        set_requires_grad(view, True)
        _remake_views(view, tick, why)


def _snapshot(t: Tensor, copy: bool) -> Tensor:
    """A tensor with t's history and its values (a copy) or memory (not copied: it will change)."""
    old = Tensor(t.spec, t.payload.copy() if copy else t.payload)
    old._node = t._node
    set_requires_grad(old, t.requires_grad)
    if not copy:
        versions.pin(old)  # its history is that before the write, which its memory will not show
    return old


def _reads_output(t: Tensor) -> bool:
    """Whether the backward of the node that made `t` may read t's values, kept then as a copy; not where
    it certainly reads them (exp, relu, sigmoid...: PyTorch saves their output, and its version check
    raises at backward once it was written in place; so does verigrad's, on the memory kept)."""
    return t._node is not None and reads(t._node) is None


def _move_hooks(t: Tensor, old: Tensor) -> None:
    """As PyTorch's: the hooks registered on `t` before the write take the gradient of t as it was (its
    snapshot `old`); retain_grad's stays, and keeps the gradient of t as written."""
    hooks = t._hooks
    if not hooks:
        return
    kept = [h for h in hooks if getattr(h, "retains", None) is t]
    for h in kept:
        hooks.remove(h)  # the same list: a handle of a hook that moved removes it from the snapshot
    old._hooks, t._hooks = hooks, kept or None


def _walk(value: Tensor, target: Tensor, chain: set[int]) -> tuple[list[Node], list[Tensor], set[int]]:
    """The nodes that lead from the tensors of `chain` (ids: the target and its bases) to `value`, all
    made since the last in-place write (so a node is walked by one write at most); the other tensors they
    hold (the value too) that share memory with the target; and the ids of those of `chain` whose values
    one of them reads."""
    owner, memory, clock = versions.root(target.payload), target.payload, versions.clock
    nodes: list[Node] = []
    aliases: list[Tensor] = []
    read: set[int] = set()

    def visit(t: Tensor) -> bool:
        """Note `t` if it shares memory with the target; whether to go on through its node."""
        key, data = id(t), t.payload
        if key in chain:
            return False
        if type(data) is np.ndarray and versions.root(data) is owner and versions.shares_memory(data, memory):
            aliases.append(t)
        return t._node is not None and t._node.stamp == clock  # (not behind the chain: made before)

    seen = {id(value)}
    stack = [value._node] if visit(value) else []
    while stack:
        node = stack.pop()
        nodes.append(node)
        listed = reads(node)
        for k, i in enumerate(node.inputs):
            if id(i) in chain and (listed is None or k in listed):
                read.add(id(i))
            if id(i) not in seen:
                seen.add(id(i))
                if visit(i):
                    stack.append(i._node)
    return nodes, aliases, read


def _bases(target: Tensor) -> list[Tensor]:
    """target, then the tensors it is a view of (each made by an op from the next, sharing its memory, or
    written in place as a view of them), up to the first that is no view; a view of a leaf that requires
    grad is refused, and a view whose base was written in place after the view was made."""
    refused = refused_piece(target, _WRITTEN)
    if refused is not None:
        raise refused
    chain = [target]
    t = target
    while t._node is not None:
        written = getattr(t._node.op, "written", False)
        if written:  # written in place before: its bases then
            bases = [b for b in (ref() for ref in t._node.params["bases"]) if b is not None]
        else:
            base = view_base(t)
            bases = [] if base is None else [base]
        ticks = versions.recorded_ticks(t.payload, t._node.stamp)
        if ticks != []:  # its memory was written through another tensor since its node was made
            if written or not bases or ticks is None:
                raise RuntimeError(_STALE_VIEW)
            regenerate(t, ticks)
        if not bases:
            break
        if bases[0]._node is None:
            if bases[0].requires_grad:
                raise RuntimeError(_VIEW_OF_LEAF)
            chain.extend(_untracked_bases(bases[0]))  # (a base without history: its own bases)
            break
        if written:
            chain.extend(bases)
            break
        chain.append(bases[0])
        t = bases[0]
    return chain


def _addresses(a: np.ndarray) -> np.ndarray:
    """The address of each element of `a`, in a's shape."""
    out = np.full(a.shape, a.__array_interface__["data"][0], np.int64)
    for axis, (size, stride) in enumerate(zip(a.shape, a.strides)):
        out += (np.arange(size, dtype=np.int64) * stride).reshape((size,) + (1,) * (a.ndim - axis - 1))
    return out


def _placement(base: np.ndarray, view: np.ndarray) -> Tensor:
    """Where each element of `view` is in `base`: its position in the flat base (C order)."""
    wanted = _addresses(view).reshape(-1)
    if base.flags.c_contiguous:  # an element's position is its offset over the item size
        offset = wanted - base.__array_interface__["data"][0]
        found = offset // base.itemsize
        ok = bool(np.all((offset % base.itemsize == 0) & (found >= 0) & (found < base.size)))
    else:
        at = _addresses(base).reshape(-1)
        order = np.argsort(at, kind="stable")
        found = order[np.minimum(np.searchsorted(at, wanted, sorter=order), max(at.size - 1, 0))]
        ok = bool(np.array_equal(at[found], wanted))
    if view.itemsize != base.itemsize or not ok:
        raise RuntimeError(
            "an in-place write through a view whose elements are not elements of its base "
            f"(a view of another dtype, {view.dtype} of {base.dtype}): write out of place"
        )
    return tensor(found.astype(np.int64))
