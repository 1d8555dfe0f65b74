"""Reverse-mode autograd on eager tensors: each result remembers the op that made it (a `Node`);
`backward` walks those records in reverse topological order and applies each op's VJP.

The VJPs are written with verigrad ops, so with `create_graph=True` the backward pass is itself
recorded and can be differentiated again.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any

from . import modes
from .ops import ones_like, tensor, zeros_like
from .tensor import Tensor

_GRAD_ENABLED = [True]


def is_grad_enabled() -> bool:
    """Whether operations are recorded for backward now (False inside no_grad)."""
    return _GRAD_ENABLED[-1]


class _grad_mode(contextlib.ContextDecorator):
    """Grad mode `enabled` inside the block, or the decorated function (a class, not a generator: every
    backward enters one)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __enter__(self) -> None:
        _GRAD_ENABLED.append(self.enabled)

    def __exit__(self, *exc: object) -> None:
        _GRAD_ENABLED.pop()


class no_grad(contextlib.ContextDecorator):
    """Ops inside record no gradient history (as a context manager or a decorator)."""

    def __enter__(self) -> None:
        _GRAD_ENABLED.append(False)

    def __exit__(self, *exc: object) -> None:
        _GRAD_ENABLED.pop()


def enable_grad() -> contextlib.AbstractContextManager[None]:
    return _grad_mode(True)


def inference_mode(mode: bool = True) -> contextlib.AbstractContextManager[None]:
    """PyTorch's inference_mode: no_grad (with mode=False, grad mode as it is)."""
    return no_grad() if mode else contextlib.nullcontext()


class set_grad_enabled(contextlib.ContextDecorator):
    """Turn gradient recording on or off: as a call, from here on; as a context manager or a decorator,
    for its block, then back to what it was."""

    def __init__(self, mode: bool) -> None:
        self.previous = _GRAD_ENABLED[-1]
        _GRAD_ENABLED[-1] = bool(mode)
        self.mode = bool(mode)

    def __enter__(self) -> None:
        _GRAD_ENABLED[-1] = self.mode

    def __exit__(self, *exc: object) -> None:
        _GRAD_ENABLED[-1] = self.previous


class Node:
    """How a tensor was made: the op, its input tensors and its params."""

    __slots__ = ("inputs", "op", "params")

    def __init__(self, op: Any, inputs: tuple[Tensor, ...], params: dict) -> None:
        self.op, self.inputs, self.params = op, inputs, params


def _topological(root: Tensor, stop: set[int] | None = None) -> list[Tensor]:
    """Tensors that lead to `root`, inputs before the tensors made from them; the walk does not go
    past a tensor whose id is in `stop` (the variables `gradients` differentiates by)."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        if t._node is not None and (stop is None or id(t) not in stop):
            stack.extend((i, False) for i in t._node.inputs if i.requires_grad and id(i) not in seen)
    return order


def _seed(root: Tensor, grad: Tensor | None, what: str) -> Tensor:
    if not root.requires_grad:
        raise RuntimeError(f"{what} on a tensor that does not require grad (no leaf needs it)")
    modes.current().begin_backward()  # a trace marks where its backward section starts
    if grad is None:
        if root.numel() != 1:
            raise RuntimeError(f"{what} without a gradient needs a single value, got {root.shape}")
        return ones_like(root.detach())
    if tuple(grad.shape) != tuple(root.shape):
        raise RuntimeError(f"gradient shape {grad.shape} does not match {root.shape}")
    return grad


def _propagate(root: Tensor, grad: Tensor, create_graph: bool, wrt: list[Tensor] | None) -> dict[int, Tensor]:
    """Apply the VJPs from `root` (whose gradient is `grad`) back to the leaves, in reverse topological
    order. With `wrt` None every leaf's gradient is accumulated into its `.grad`; otherwise the walk
    stops at the tensors of `wrt`, only the branches that reach them are differentiated, and their
    gradients are returned by id (no `.grad` is touched)."""
    stop = None if wrt is None else {id(t) for t in wrt}
    order = _topological(root, stop)
    if stop is not None:  # prune: keep the tensors from which some variable can be reached
        reaches: set[int] = set()
        for t in order:
            if id(t) in stop or (t._node is not None and any(id(i) in reaches for i in t._node.inputs)):
                reaches.add(id(t))
        order = [t for t in order if id(t) in reaches]
    grads: dict[int, Tensor] = {id(root): grad}
    found: dict[int, Tensor] = {}
    with _grad_mode(create_graph):
        for t in reversed(order):
            g = grads.pop(id(t), None)
            if g is None:
                continue
            if t._hooks:
                g = _hooked(t, g)
            if stop is not None and id(t) in stop:
                found[id(t)] = g
                continue
            if t._node is None:
                _accumulate(t, g)
                continue
            node = t._node
            for inp, gi in zip(node.inputs, node.op.vjp(g, t, *node.inputs, **node.params)):
                if gi is None or not inp.requires_grad:
                    continue
                given, wanted = gi.spec, inp.spec
                if given is not wanted:  # (the same spec object: the same shape and dtype)
                    if given.shape != wanted.shape:
                        raise RuntimeError(
                            f"the VJP of {node.op.name} gave a gradient of shape {gi.shape} "
                            f"for an input of shape {inp.shape}"
                        )
                    if given.dtype is not wanted.dtype:  # mixed-dtype ops: each input's gradient in its own
                        gi = gi.cast(inp.dtype)
                key = id(inp)
                before = grads.get(key)
                grads[key] = gi if before is None else before + gi
    return found


class RemovableHandle:
    """What `Tensor.register_hook` returns: `remove()` takes the hook off again."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def register_hook(t: Tensor, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"register_hook takes a function of the gradient, not {type(hook).__name__}")
    if not t.requires_grad:
        raise RuntimeError("register_hook on a tensor that does not require grad (no gradient reaches it)")
    if t._hooks is None:
        t._hooks = []
    t._hooks.append(hook)
    return RemovableHandle(t._hooks, hook)


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
    hooks = list(t._hooks or ())
    for hook in sorted(hooks, key=lambda h: getattr(h, "retains", None) is t):
        replaced = hook(g)
        if replaced is None:
            continue
        if not isinstance(replaced, Tensor) or replaced.spec != g.spec:
            what = replaced.spec if isinstance(replaced, Tensor) else type(replaced).__name__
            raise RuntimeError(f"a gradient hook returned {what} for a gradient {g.spec}: give the same")
        g = replaced
    return g


def _accumulate(leaf: Tensor, g: Tensor) -> None:
    if leaf.grad is None:
        leaf.grad = g
        return
    if type(leaf.grad.payload) is not type(g.payload):
        # a traced backward pass meeting a gradient computed outside the trace: the compiled function
        # would add that one gradient again on every call, which is not what running it eagerly does
        raise RuntimeError(
            f"a leaf {leaf.spec!r} already holds a gradient from outside the traced function; "
            "clear it first (optimizer.zero_grad(), or .grad = None) inside the function or before it"
        )
    leaf.grad = leaf.grad + g


def backward(root: Tensor, grad: Tensor | None = None, create_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into `.grad` of every leaf that requires grad."""
    _propagate(root, _seed(root, grad, "backward()"), create_graph, None)


def gradients(
    root: Tensor, wrt: Sequence[Tensor], grad: Tensor | None = None, create_graph: bool = False
) -> list[Tensor | None]:
    """d(root)/d(t) for each t of `wrt` (None where root does not depend on t); no `.grad` changes.

    The tensors of `wrt` need not be leaves: the gradient stops at them. In a trace the VJPs become
    instructions after the program's `backward:` mark, as every op call does.
    """
    found = _propagate(root, _seed(root, grad, "gradients()"), create_graph, list(wrt))
    return [found.get(id(t)) for t in wrt]


def _check_argnums(argnums: int | Sequence[int], count: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(i, int) and not isinstance(i, bool) for i in nums):
        raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    out = []
    for i in nums:
        if not -count <= i < count:
            raise ValueError(f"argnums {i} is out of range for a call with {count} positional argument(s)")
        out.append(i % count)
    if len(set(out)) != len(out):
        raise ValueError(f"argnums {argnums!r} repeats an argument")
    return tuple(out)


def value_and_grad(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """As JAX's: a function returning `(fn(*args), gradient)`, the gradient of the scalar `fn` with
    respect to the positional argument `argnums` (a tuple of gradients when `argnums` is a tuple).
    With `has_aux`, fn returns `(scalar, aux)` and the result is `((scalar, aux), gradient)`.

    It runs wherever the function runs: eagerly on the tape, or inside `verigrad.trace`/`compile`,
    where the same VJPs become instructions of the program. No `.grad` is read or written; captured
    tensors (parameters) are constants here. An argument that does not reach the result gets zeros.
    Nested (`grad(grad(f))`) works: when the arguments already carry gradient history, the gradient
    keeps its own.
    """
    single = isinstance(argnums, int)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums = _check_argnums(argnums, len(args))
        args = list(args)
        variables = []
        nested = is_grad_enabled() and any(
            isinstance(args[i], Tensor) and args[i].requires_grad for i in nums
        )
        for i in nums:
            a = args[i] if isinstance(args[i], Tensor) else tensor(args[i])
            if not a.dtype.is_float:
                raise TypeError(f"grad: argument {i} is {a.dtype.name}; only floating tensors have gradients")
            if not (nested and a.requires_grad):
                a = a.detach().requires_grad_(True)
            args[i] = a
            variables.append(a)
        with _grad_mode(True):
            result = fn(*args, **kwargs)
        if has_aux and not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError("with has_aux=True the function must return a pair (scalar, aux)")
        out, aux = result if has_aux else (result, None)
        if not isinstance(out, Tensor):
            raise TypeError(f"grad needs the function to return a tensor, got {type(out).__name__}")
        if out.numel() != 1 or not out.dtype.is_float:
            raise TypeError(
                f"grad needs the function to return a single floating value, got {out.dtype.name}"
                f"{list(out.shape)}"
            )
        if out.requires_grad:
            found = gradients(out, variables, create_graph=nested)
        else:  # no argument reaches the result
            found = [None] * len(variables)
        grads = tuple(g if g is not None else zeros_like(v.detach()) for g, v in zip(found, variables))
        value = out if nested else out.detach()
        value = (value, aux) if has_aux else value
        return value, (grads[0] if single else grads)

    return wrapper


def grad(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """As JAX's `grad`: the gradient of the scalar-valued `fn` with respect to its positional argument
    `argnums` (a tuple of gradients when `argnums` is a tuple); see `value_and_grad`.

    >>> verigrad.grad(lambda x: (x * x).sum())(verigrad.tensor([1.0, 2.0]))
    tensor([2., 4.], dtype=f32)
    """
    value_and_grad_fn = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        value, g = value_and_grad_fn(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper
