"""PyTorch's module backward hooks: `register_full_backward_pre_hook` (hook(module, grad_output)) and
`register_full_backward_hook` (hook(module, grad_input, grad_output)), each called once a backward pass,
with all the gradients at once, and free to replace them.

As PyTorch's `BackwardHook`: the module's tensor arguments, and its tensor outputs (a tensor or a tuple's
tensors), pass through an identity Function whose backward sees all of their gradients together. On the
outputs' side the gradients are not materialized, so an output the loss does not use gives None in
grad_output; on the inputs' side they are, so an input tensor that takes no gradient gives zeros in
grad_input. Eagerly only (a traced function would call a Python hook once, when traced, so it is refused).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .. import modes
from ..function import Function
from ..tensor import Tensor

_NO_INPUT_GRAD = (
    "Full backward hook is firing when gradients are computed with respect to module outputs since no "
    "inputs require gradients."
)


class BackwardHookFunction(Function):
    """The identity on `tensors`, whose backward hands their gradients to `on_grads` (PyTorch's
    BackwardHookFunction); `materialize`: whether a tensor that got none is given zeros."""

    @staticmethod
    def forward(ctx: Any, on_grads: Callable, materialize: bool, *tensors: Tensor) -> tuple[Tensor, ...]:
        ctx.on_grads = on_grads
        ctx.set_materialize_grads(materialize)
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Tensor | None) -> tuple[Tensor | None, ...]:
        return (None, None, *ctx.on_grads(grads))


class _BackwardHook:
    """One call's hooks: grad_output is kept from the outputs' backward until the inputs' one."""

    def __init__(self, module: Any, pre_hooks: list[Callable], hooks: list[Callable]) -> None:
        self.module, self.pre_hooks, self.hooks = module, pre_hooks, hooks
        self.name = type(module).__name__
        self.grad_outputs: tuple | None = None
        self.n_inputs, self.inputs = 0, None  # inputs: the tensors' positions, None where none is wrapped
        self.n_outputs, self.outputs = 0, None

    def wrap_inputs(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        args, self.inputs = self._wrapped(args, self._on_inputs, True)
        return args

    def wrap_outputs(self, output: Any) -> Any:
        single = not isinstance(output, tuple)
        items = (output,) if single else output
        self.n_outputs = len(items)
        items, self.outputs = self._wrapped(items, self._on_outputs, False)
        return items[0] if single else items

    def _wrapped(self, items: tuple, on_grads: Callable, materialize: bool) -> tuple[tuple, list | None]:
        """`items` with its tensors passed through the Function, and their positions (None and `items`
        unchanged where none requires grad, as PyTorch's)."""
        positions = [i for i, a in enumerate(items) if isinstance(a, Tensor)]
        if not any(items[i].requires_grad for i in positions):
            return items, None
        passed = BackwardHookFunction.apply(on_grads, materialize, *[items[i] for i in positions])
        out = list(items)
        for i, t in zip(positions, passed):
            out[i] = t
        return type(items)(out) if type(items) is tuple else tuple(out), positions

    def _on_outputs(self, grads: tuple) -> tuple:
        grad_outputs = _spread(self.outputs, grads, self.n_outputs)
        for hook in self.pre_hooks:
            replaced = hook(self.module, grad_outputs)
            if replaced is not None:
                grad_outputs = _checked(self.name, "backward pre hook", "grad_output", replaced, grad_outputs)
        if self.inputs is None:  # no input takes a gradient: the hooks are called from here, as PyTorch's
            warnings.warn(_NO_INPUT_GRAD, UserWarning, stacklevel=2)
            for hook in self.hooks:
                replaced = hook(self.module, (None,) * self.n_inputs, grad_outputs)
                if replaced is not None and not (
                    isinstance(replaced, tuple) and all(r is None for r in replaced)
                ):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should always return "
                        "None or None for all gradients."
                    )
        else:
            self.grad_outputs = grad_outputs
        return tuple(grad_outputs[i] for i in self.outputs)

    def _on_inputs(self, grads: tuple) -> tuple:
        if self.grad_outputs is None:  # the gradient reached the inputs without passing the outputs
            return grads
        grad_inputs = _spread(self.inputs, grads, self.n_inputs)
        for hook in self.hooks:
            replaced = hook(self.module, grad_inputs, self.grad_outputs)
            if replaced is not None:
                grad_inputs = _checked(self.name, "backward hook", "grad_input", replaced, grad_inputs)
        self.grad_outputs = None
        return tuple(grad_inputs[i] for i in self.inputs)


def run_with_backward_hooks(
    module: Any,
    args: tuple,
    call: Callable[[tuple], Any],
    pre_hooks: list[Callable],
    hooks: list[Callable],
) -> Any:
    """call(args) (the forward and the forward hooks) with the module's backward hooks set on its tensor
    arguments and outputs."""
    if modes.current().name != "eager":
        raise NotImplementedError(
            f"{type(module).__name__}: backward hooks run eagerly only (a compiled function would call them "
            "once, when traced)"
        )
    hook = _BackwardHook(module, pre_hooks, hooks)
    output = call(hook.wrap_inputs(args))
    if not isinstance(output, Tensor | tuple):
        warnings.warn(
            "For backward hooks to be called, module output should be a Tensor or a tuple of Tensors but "
            f"received {type(output)}",
            UserWarning,
            stacklevel=3,
        )
    return hook.wrap_outputs(output)


def _spread(positions: list[int], grads: tuple, size: int) -> tuple:
    """The gradients of the tensors at `positions` among `size` items, None at the others."""
    out: list = [None] * size
    for i, g in zip(positions, grads):
        out[i] = g
    return tuple(out)


def _checked(name: str, kind: str, what: str, replaced: Any, before: tuple) -> tuple:
    """A hook's replacement of the gradients: as many as given (PyTorch's RuntimeError otherwise), each
    None or a tensor of the shape given."""
    if not isinstance(replaced, tuple | list):
        replaced = (replaced,)
    if len(replaced) != len(before):
        raise RuntimeError(
            f"{name}: {kind.capitalize()} returned an invalid number of {what}, got {len(replaced)}, but "
            f"expected {len(before)}"
        )
    for new, old in zip(replaced, before):
        if new is not None and old is not None and tuple(new.shape) != tuple(old.shape):
            raise RuntimeError(f"{name}: a {kind} changed the size of {what} ({new.shape} for {old.shape})")
    return tuple(replaced)
