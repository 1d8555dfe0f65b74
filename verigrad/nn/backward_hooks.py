"""PyTorch's module backward hooks: `register_full_backward_pre_hook` (hook(module, grad_output)) and
`register_full_backward_hook` (hook(module, grad_input, grad_output)), each called once a backward pass,
with all the gradients at once, and free to replace them.

The module's tensor inputs that require grad are packed into one tensor and handed to forward as views of
it, and so are its tensor outputs: the gradient hook of each packed tensor then sees every gradient of
the group together (eagerly; a traced function would call a Python hook once, when traced, so it is
refused there).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .. import modes
from ..ops import concat
from ..tensor import Tensor


def run_with_backward_hooks(
    module: Any,
    args: tuple,
    kwargs: dict,
    call: Callable[[tuple, dict], Any],
    pre_hooks: list[Callable],
    hooks: list[Callable],
) -> Any:
    """call(args, kwargs) with the module's backward hooks set on its inputs and outputs."""
    if modes.current().name != "eager":
        raise NotImplementedError(
            f"{type(module).__name__}: backward hooks run eagerly only (a compiled function would call them "
            "once, when traced)"
        )
    name = type(module).__name__
    state: dict[str, tuple] = {}
    inputs = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]

    def grad_input_of(grads: list[Tensor] | None) -> tuple:
        by_position = dict(zip(inputs, grads)) if grads is not None else {}
        return tuple(by_position.get(i) for i in range(len(args)))

    def run_hooks(grad_input: tuple) -> tuple:
        for hook in hooks:
            replaced = hook(module, grad_input, state.get("grad_output", ()))
            if replaced is not None:
                grad_input = _checked(name, "grad_input", replaced, grad_input)
        return grad_input

    if inputs and hooks:
        packed, views = _pack(name, [args[i] for i in inputs])
        args = tuple(views[inputs.index(i)] if i in inputs else a for i, a in enumerate(args))

        def on_inputs(g: Tensor) -> Tensor:
            grad_input = run_hooks(grad_input_of(_split(g, views)))
            return concat([grad_input[i].reshape(-1) for i in inputs])

        packed.register_hook(on_inputs)
    output = call(args, kwargs)
    items = list(output) if isinstance(output, tuple | list) else [output]
    outputs = [i for i, o in enumerate(items) if isinstance(o, Tensor) and o.requires_grad]
    if not outputs:
        return output
    packed_out, out_views = _pack(name, [items[i] for i in outputs])
    for i, view in zip(outputs, out_views):
        items[i] = view

    def on_outputs(g: Tensor) -> Tensor:
        grads = dict(zip(outputs, _split(g, out_views)))
        grad_output = tuple(grads.get(i) for i in range(len(items)))
        for hook in pre_hooks:
            replaced = hook(module, grad_output)
            if replaced is not None:
                grad_output = _checked(name, "grad_output", replaced, grad_output)
        state["grad_output"] = grad_output
        if hooks and not inputs:  # no input takes a gradient: the hooks are called from here, as PyTorch's
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to module outputs "
                "since no inputs require gradients.",
                UserWarning,
                stacklevel=2,
            )
            run_hooks(grad_input_of(None))
        return concat([grad_output[i].reshape(-1) for i in outputs])

    packed_out.register_hook(on_outputs)
    if isinstance(output, Tensor):
        return items[0]
    return type(output)(items) if type(output) in (tuple, list) else output


def _pack(name: str, tensors: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
    """One tensor holding `tensors` flattened, and each of them as a view of it."""
    if len({t.dtype for t in tensors}) > 1:
        raise NotImplementedError(f"{name}: backward hooks need the module's tensors to share one dtype")
    packed = concat([t.reshape(-1) for t in tensors])
    views, start = [], 0
    for t in tensors:
        size = t.numel()
        views.append(packed[start : start + size].reshape(t.shape))
        start += size
    return packed, views


def _split(g: Tensor, like: list[Tensor]) -> list[Tensor]:
    out, start = [], 0
    for t in like:
        size = t.numel()
        out.append(g[start : start + size].reshape(t.shape))
        start += size
    return out


def _checked(name: str, what: str, replaced: Any, before: tuple) -> tuple:
    """A hook's replacement of the gradients: as many, each a tensor of the same shape (or None where
    there was none)."""
    replaced = tuple(replaced) if isinstance(replaced, tuple | list) else (replaced,)
    if len(replaced) != len(before):
        raise RuntimeError(f"{name}: a backward hook returned {len(replaced)} {what} for {len(before)}")
    for new, old in zip(replaced, before):
        if old is not None and (not isinstance(new, Tensor) or tuple(new.shape) != tuple(old.shape)):
            raise RuntimeError(f"{name}: a backward hook must return {what} shaped as given")
    return replaced
