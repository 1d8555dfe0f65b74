"""The autograd graph's nodes: `Node`, how a tensor was made (a tensor's `grad_fn`), and PyTorch's view
of the graph from it: `name()`, `next_functions` ((node, index) per input: the input's own node, an
`AccumulateGrad` for a leaf that requires grad, None for an input that takes no gradient)."""

from __future__ import annotations

import weakref
from typing import Any

from . import versions


class Node:
    """How a tensor was made: the op, its input tensors and its params; `freed` once a backward pass went
    through it without retain_graph (PyTorch frees its saved tensors then: a second pass raises);
    `stamp`, the in-place write clock when it was made (`versions`): an input written in place since is
    its snapshot here, and memory written since is stale."""

    __slots__ = ("__weakref__", "freed", "inputs", "op", "params", "stamp")  # weakly: a Function's ctx

    def __init__(self, op: Any, inputs: tuple[Any, ...], params: dict) -> None:
        self.op, self.inputs, self.params = op, inputs, params
        self.freed = False
        self.stamp = versions.clock

    def saved(self) -> tuple[Any, ...]:
        """The inputs as they were when the node was made (an input written in place since: its snapshot)."""
        inputs, redirects = self.inputs, versions.REDIRECTS
        if not redirects or not any(id(i) in redirects for i in inputs):
            return inputs
        return tuple(versions.resolve(i, self.stamp) for i in inputs)

    def name(self) -> str:
        """PyTorch's style of name: `MulBackward0` for the op `mul`, a custom Function's `<Name>Backward`."""
        name = str(getattr(self.op, "name", type(self.op).__name__))
        if name.endswith("Backward"):
            return name
        return "".join(part[:1].upper() + part[1:] for part in name.split("_")) + "Backward0"

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """(node, 0) for each input: the node that made it, its AccumulateGrad where it is a leaf that
        requires grad, None where it takes no gradient."""
        return tuple((_next(i), 0) for i in self.inputs)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class AccumulateGrad(Node):
    """The node that accumulates a leaf's gradient into `.grad`: `variable` is the leaf (one node per
    leaf while it is held, as PyTorch's)."""

    __slots__ = ("variable",)

    def __init__(self, variable: Any) -> None:
        super().__init__(None, (), {})
        self.variable = variable

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"


_ACCUMULATORS: weakref.WeakValueDictionary[int, AccumulateGrad] = weakref.WeakValueDictionary()


def _next(t: Any) -> Node | None:
    if t._node is not None:
        return t._node
    if not t.requires_grad:
        return None
    found = _ACCUMULATORS.get(id(t))  # the accumulator holds its leaf: the id is not reused meanwhile
    if found is None:
        found = _ACCUMULATORS[id(t)] = AccumulateGrad(t)
    return found
