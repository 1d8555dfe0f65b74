"""The autograd graph's nodes: `Node`, how a tensor was made (a tensor's `grad_fn`), and PyTorch's view
of the graph from it: `name()`, `next_functions` ((node, index) per input: the input's own node, an
`AccumulateGrad` for a leaf that requires grad, None for an input that takes no gradient), its hooks
(`register_hook`, `register_prehook`, kept beside the nodes: most have none), `metadata`, and a custom
Function's context read through its node (`needs_input_grad`, `saved_tensors`, `apply`), as PyTorch's."""

from __future__ import annotations

import weakref
from collections.abc import Callable
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

    def _op_name(self) -> str:
        return str(getattr(self.op, "name", type(self.op).__name__))

    def name(self) -> str:
        """PyTorch's name where an op maps to one clearly (`MmBackward0` for a matmul of matrices), else
        its style: `MulBackward0` for the op `mul`, a custom Function's `<Name>Backward`."""
        name = self._op_name()
        if name.endswith("Backward"):
            return name
        torch_name = _TORCH_NAMES.get(name)
        found = torch_name(self) if torch_name is not None else None
        if found is not None:
            return found
        return "".join(part[:1].upper() + part[1:] for part in name.split("_")) + "Backward0"

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """(node, 0) for each input: the node that made it, its AccumulateGrad where it is a leaf that
        requires grad, None where it takes no gradient; an op's index and mask inputs are left out (a
        custom Function's are not), as PyTorch's."""
        every = self._op_name().endswith("Backward")
        return tuple((_next(i), 0) for i in self.inputs if every or i.dtype.is_float or i.dtype.is_complex)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    def register_prehook(self, hook: Callable[[tuple], tuple | None]) -> RemovableHandle:
        """hook(grad_outputs) before this node's backward runs; what it returns (not None) replaces them."""
        return _add_hook(self, 1, hook)

    def register_hook(self, hook: Callable[[tuple, tuple], tuple | None]) -> RemovableHandle:
        """hook(grad_inputs, grad_outputs) after this node's backward ran; what it returns (not None)
        replaces grad_inputs."""
        return _add_hook(self, 2, hook)

    @property
    def metadata(self) -> dict:
        """A dict of the caller's, kept while the node lives (PyTorch's grad_fn.metadata)."""
        return _entry(self)[3]

    def apply(self, *grads: Any) -> Any:
        """A custom Function's backward on `grads` (PyTorch's grad_fn.apply)."""
        fn, ctx = getattr(self.op, "fn", None), self._ctx()
        if fn is None or ctx is None:
            raise AttributeError(f"'{self.name()}' object has no attribute 'apply'")
        return fn.backward(ctx, *grads)

    def _ctx(self) -> Any:
        params = object.__getattribute__(self, "params")
        return params.get("ctx") if isinstance(params, dict) else None

    def __getattr__(self, name: str) -> Any:
        # a custom Function's node is its ctx in PyTorch: needs_input_grad, saved_tensors, its own fields
        ctx = None if name.startswith("__") else self._ctx()
        if ctx is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return getattr(ctx, name)


class RemovableHandle:
    """What a `register_hook` returns: `remove()` takes the hook off again."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


# id(node) -> (the node, weakly; its prehooks; its hooks; its metadata), for the nodes that have any
NODE_HOOKS: dict[int, tuple[weakref.ref, list, list, dict]] = {}


def _entry(node: Node) -> tuple[weakref.ref, list, list, dict]:
    key = id(node)
    entry = NODE_HOOKS.get(key)
    if entry is None or entry[0]() is not node:
        entry = NODE_HOOKS[key] = (
            weakref.ref(node, lambda _, key=key: NODE_HOOKS.pop(key, None)),
            [],
            [],
            {},
        )
    return entry


def _add_hook(node: Node, which: int, hook: Callable) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"a node's hook must be a function, not {type(hook).__name__}")
    hooks = _entry(node)[which]
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


def run_prehooks(entry: tuple, g: Any) -> Any:
    """The gradient of a node's output after its prehooks (`entry`, from NODE_HOOKS)."""
    for hook in list(entry[1]):
        replaced = hook((g,))
        if replaced is not None:
            g = replaced[0]
    return g


def run_hooks(entry: tuple, step: Any, g: Any) -> tuple:
    """A node's gradients for its inputs (`step`) after its hooks (`entry`, from NODE_HOOKS)."""
    step = tuple(step)
    for hook in list(entry[2]):
        replaced = hook(step, (g,))
        if replaced is not None:
            if len(replaced) != len(step):
                raise RuntimeError(f"a node's hook returned {len(replaced)} gradients for {len(step)} inputs")
            step = tuple(replaced)
    return step


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


def _reduction(stem: str) -> Callable[[Node], str]:
    """PyTorch's <stem>Backward0 over every dim (sum()), <stem>Backward1 along dims (sum(dim))."""

    def name(node: Node) -> str:
        axis, ndim = node.params.get("axis"), node.inputs[0].ndim
        every = axis is None or (len(axis) == ndim and not node.params.get("keepdim"))
        return f"{stem}Backward{0 if every else 1}"

    return name


def _matmul(node: Node) -> str | None:
    ranks = tuple(i.ndim for i in node.inputs)
    return {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0"}.get(ranks)


def _cast(node: Node) -> str:
    same = node.params.get("dtype") is node.inputs[0].dtype
    return "CloneBackward0" if same else "ToCopyBackward0"


# ops whose node PyTorch names otherwise (a function of the node; None: the default name)
_TORCH_NAMES: dict[str, Callable[[Node], str | None]] = {
    "matmul": _matmul,
    "sum": _reduction("Sum"),
    "mean": _reduction("Mean"),
    "max": lambda node: "AmaxBackward0",
    "min": lambda node: "AminBackward0",
    "max_of_all": lambda node: "MaxBackward1",
    "min_of_all": lambda node: "MinBackward1",
    "cast": _cast,
    "scaled_add": lambda node: "SubBackward0" if node.params.get("alpha", 1) < 0 else "AddBackward0",
    "reshape": lambda node: "ViewBackward0",
    "concat": lambda node: "CatBackward0",
    "broadcast_to": lambda node: "ExpandBackward0",
}
