"""In-place writes recorded for autograd, as PyTorch records them.

`x.add_(y)` on a tensor with history is `assign(x, add(x, y))`: the new value is computed out of place
from x, then `write` puts it in x's memory (so views and aliases see it) and gives x a new history, a
node from the value. Nodes made before the write still mean x as it was: x's snapshot (its old history,
with a copy of its old values where a backward known to read them needs them, else its memory), which
the nodes that computed the value hold directly and the others find through `versions.resolve`. A
write through a view (`y[:, 0].mul_(2)`, `y.view(-1).add_(1)`) gives each base of the view a new history
too (PyTorch's CopySlices): the base as it was outside the view's elements, the view's new values inside.

Memory changed another way (under no_grad, or through an alias that is not the view's base) is caught in
backward by the version check (`versions.written_after`) where a backward reads it: PyTorch's "modified
by an inplace operation" error, never a gradient from the wrong values.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import versions
from .autograd import Node, reads, regenerate, view_base
from .ops import take, tensor, where, zeros_like
from .tensor import Tensor

_LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
_VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."
_STALE_VIEW = (
    "an in-place write through a view written in place before, whose memory was then written through "
    "another tensor (or not a view of a tensor with history): verigrad does not regenerate its history "
    "(PyTorch does); take the view again after the write"
)
_UNTRACKED_VIEW = (
    "an in-place write of a value that requires grad into a view of a tensor that does not require grad: "
    "verigrad cannot give the viewed tensor a history; write into that tensor itself (x[key] = value, "
    "x.index_put_) or clone() the view first"
)


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


def write(target: Tensor, value: Tensor) -> None:
    """Write `value` (target's shape and dtype) into `target` and record it for autograd (grad mode is on
    and one of them requires grad)."""
    chain = _bases(target) if target._node is not None else [target]
    if target._node is None and target.requires_grad:
        raise RuntimeError(_LEAF)
    if target._node is None and target.payload.base is not None:
        raise RuntimeError(_UNTRACKED_VIEW)
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
    target.requires_grad = True
    for i, base in enumerate(chain[1:], 1):
        params = {"positions": _placement(base.payload, target.payload), "bases": bases[i:]}
        base._node = Node(_AssignView, (olds[id(base)][1], target), params)
        base.requires_grad = True


def _snapshot(t: Tensor, copy: bool) -> Tensor:
    """A tensor with t's history and its values (a copy) or memory (not copied: it will change)."""
    old = Tensor(t.spec, t.payload.copy() if copy else t.payload)
    old._node, old.requires_grad = t._node, t.requires_grad
    if not copy:
        versions.pin(old)  # its history is that before the write, which its memory will not show
    return old


def _reads_output(t: Tensor) -> bool:
    """Whether the backward of the node that made `t` reads t's values."""
    if t._node is None:
        return False
    listed = reads(t._node)
    return listed is None or -1 in listed


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
            raise RuntimeError(_VIEW_OF_LEAF if bases[0].requires_grad else _UNTRACKED_VIEW)
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
