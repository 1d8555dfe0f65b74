"""Transforms of functions built on the tape's `grad`: JAX's value_and_grad / grad, torch.func's
grad_and_value (vmap refused), and torch.autograd.functional's jacobian, hessian, vjp, jvp, vhp and hvp.
verigrad/__init__.py re-exports them as `verigrad.autograd.<name>` and `verigrad.autograd.functional`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from .autograd import _grad_mode, grad, gradients, is_grad_enabled
from .ops import ones_like, stack, tensor, zeros_like
from .tensor import Tensor

__all__ = [
    "grad_and_value",
    "grad_transform",
    "hessian",
    "hvp",
    "jacobian",
    "jvp",
    "value_and_grad",
    "vhp",
    "vjp",
    "vmap",
]


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


def grad_transform(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """`verigrad.grad`, as JAX's `grad` (`verigrad.autograd.grad` is PyTorch's): the gradient of the
    scalar-valued `fn` with respect to its positional argument
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


def grad_and_value(
    fn: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """torch.func.grad_and_value: a function returning (gradient, fn(*args)) (with has_aux, (gradient,
    (value, aux))): value_and_grad's results the other way round."""
    both = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        value, gradient = both(*args, **kwargs)
        return gradient, value

    return call


def vmap(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """torch.vmap / torch.func.vmap: refused (verigrad has no batching transform)."""
    raise NotImplementedError(
        "vmap: verigrad has no batching transform; call the function on the batch (most functions take "
        "leading batch axes) or loop over it and stack the results"
    )


# torch.autograd.functional: jacobian, hessian, vjp, jvp, vhp and hvp, written with grad -----------------
def _as_tuple(value: Any, what: str, fn: str) -> tuple[tuple, bool]:
    """`value` as a tuple of tensors and whether it was one; PyTorch's TypeError for anything else (a
    list, a number)."""
    is_tuple = isinstance(value, tuple)
    values = value if is_tuple else (value,)
    for i, v in enumerate(values):
        if not isinstance(v, Tensor):
            where = f"the value at index {i} has" if is_tuple else f"the given {what} has"
            raise TypeError(
                f"The {what} given to {fn} must be either a Tensor or a tuple of Tensors but {where} type "
                f"{type(v)}."
            )
    return values, is_tuple


def _leaves_of(inputs: tuple, create_graph: bool) -> tuple[Tensor, ...]:
    """The inputs as tensors to differentiate by: with create_graph, ones that require grad keep their
    history (the result stays differentiable through them), else new leaves sharing their memory."""
    return tuple(
        x.view_as(x) if create_graph and x.requires_grad else x.detach().requires_grad_(True) for x in inputs
    )


def _grads(
    outputs: tuple[Tensor, ...],
    xs: tuple[Tensor, ...],
    seeds: tuple | None = None,
    create_graph: bool = False,
) -> tuple[Tensor | None, ...]:
    """autograd.grad of the outputs that have history, as PyTorch's functional API (an output made
    without the inputs, a constant, adds nothing); all None where none has."""
    seeds = (None,) * len(outputs) if seeds is None else seeds
    if len(seeds) != len(outputs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(outputs)} but got {len(seeds)}.")
    pairs = [(o, g) for o, g in zip(outputs, seeds) if o.requires_grad]
    if not pairs:
        return (None,) * len(xs)
    outs, gs = zip(*pairs)
    return grad(outs, xs, grad_outputs=gs, retain_graph=True, create_graph=create_graph, allow_unused=True)


def _filled(
    gs: Any, xs: tuple[Tensor, ...], strict: bool, what: str, create_graph: bool = False
) -> tuple[Tensor, ...]:
    """The gradients with zeros for the inputs they do not reach, or (strict) PyTorch's RuntimeError; with
    create_graph too, a gradient without a graph of its own (a constant) raises, as PyTorch's."""
    for j, g in enumerate(gs):
        if g is None and strict:
            raise RuntimeError(f"{what} is independent of input {j}. This is not allowed in strict mode.")
        if g is not None and strict and create_graph and not g.requires_grad:
            raise RuntimeError(
                f"The jacobian of the user-provided function is independent of input {j}. This is not "
                "allowed in strict mode when create_graph=True."
            )
    return tuple(zeros_like(x) if g is None else g for x, g in zip(xs, gs))


def _v_or_one(v: Any, of: tuple[Tensor, ...], what: str, fn: str) -> tuple[Tensor, ...]:
    """v as a tuple, or (PyTorch's rule) ones where v is None and `of` is a single one-element tensor."""
    if v is not None:
        return _as_tuple(v, "v", fn)[0]
    if len(of) != 1 or of[0].numel() != 1:
        raise RuntimeError(
            f"The vector v can only be None if {what} is a single Tensor with a single element."
        )
    return (ones_like(of[0]),)


def _rows(output: Tensor, xs: tuple[Tensor, ...], create_graph: bool, strict: bool = False) -> list[Tensor]:
    """d output / d x for each x: [*output.shape, *x.shape], a backward pass per output element."""
    flat = output.reshape(-1)
    per_input: list[list[Tensor]] = [[] for _ in xs]
    for i in range(flat.shape[0]):
        gs = _grads((flat[i],), xs, create_graph=create_graph)
        gs = _filled(gs, xs, strict, f"Output {i} of the user-provided function", create_graph)
        for j, g in enumerate(gs):
            per_input[j].append(g)
    out = []
    for x, rows in zip(xs, per_input):
        block = tensor([]).cast(x.dtype).reshape(0, *x.shape) if not rows else stack(rows)
        out.append(block.reshape(*output.shape, *x.shape))
    return out


def jacobian(
    func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
    vectorize: bool = False, strategy: str = "reverse-mode",
) -> Any:  # fmt: skip
    """torch.autograd.functional.jacobian: d func(inputs) / d inputs, [*output.shape, *input.shape] per
    (output, input) pair, nested as PyTorch's (a tensor, or tuples where func or inputs are tuples)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"jacobian: strategy must be 'reverse-mode' or 'forward-mode', got {strategy!r}")
    if strict and vectorize:
        raise RuntimeError(
            "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not supported "
            "together. Please either set `strict=False` or `vectorize=False`."
        )
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is only implemented for "
            "`vectorize=True`."
        )
    inputs, in_tuple = _as_tuple(inputs, "inputs", "jacobian")
    with _grad_mode(True):
        xs = _leaves_of(inputs, create_graph)
        outputs, out_tuple = _as_tuple(func(*xs), "outputs of the user-provided function", "jacobian")
        blocks = [_rows(o, xs, create_graph, strict) for o in outputs]
    if not create_graph:
        blocks = [[b.detach() for b in row] for row in blocks]
    blocks = [row[0] for row in blocks] if not in_tuple else [tuple(row) for row in blocks]
    return tuple(blocks) if out_tuple else blocks[0]


def hessian(
    func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
    vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode",
) -> Any:  # fmt: skip
    """torch.autograd.functional.hessian of a function returning one value: the jacobian of its gradient."""
    inputs_tuple, in_tuple = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs: Tensor) -> Any:
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor with one element")
        return jacobian(lambda *ys: func(*ys), xs if in_tuple else xs[0], create_graph=True, strict=strict)

    return jacobian(
        gradient, inputs_tuple if in_tuple else inputs_tuple[0], create_graph=create_graph, strict=strict,
        vectorize=vectorize, strategy=outer_jacobian_strategy,
    )  # fmt: skip


def vjp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> Any:
    """torch.autograd.functional.vjp: (func(inputs), v^T d func / d inputs)."""
    inputs, in_tuple = _as_tuple(inputs, "inputs", "vjp")
    with _grad_mode(True):
        xs = _leaves_of(inputs, create_graph)
        outputs, out_tuple = _as_tuple(func(*xs), "outputs of the user-provided function", "vjp")
        seeds = _v_or_one(v, outputs, "the user-provided function returns", "vjp")
        gs = _grads(outputs, xs, seeds, create_graph)
    gs = _filled(gs, xs, strict, "The output of the user-provided function", create_graph)
    gs = tuple(g if create_graph else g.detach() for g in gs)
    values = tuple(o if create_graph else o.detach() for o in outputs)
    return (values if out_tuple else values[0]), (gs if in_tuple else gs[0])


def jvp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> Any:
    """torch.autograd.functional.jvp: (func(inputs), d func / d inputs . v), from the jacobian."""
    inputs_tuple, _in_tuple = _as_tuple(inputs, "inputs", "jvp")
    vs = _v_or_one(v, inputs_tuple, "the input to the user-provided function is", "jvp")
    with _grad_mode(True):
        xs = _leaves_of(inputs_tuple, create_graph)
        outputs, out_tuple = _as_tuple(func(*xs), "outputs of the user-provided function", "jvp")
        products = []
        for o in outputs:
            total = None
            for block, x, d in zip(_rows(o, xs, create_graph, strict), xs, vs):
                part = (block.reshape(o.numel(), x.numel()) @ d.reshape(-1)).reshape(o.shape)
                total = part if total is None else total + part
            products.append(total if create_graph else total.detach())
    values = tuple(o if create_graph else o.detach() for o in outputs)
    return (values if out_tuple else values[0]), (tuple(products) if out_tuple else products[0])


def vhp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> Any:
    """torch.autograd.functional.vhp: (func(inputs), v^T H)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(
    func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> Any:
    """torch.autograd.functional.hvp: (func(inputs), H v) (H symmetric: vhp's numbers)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(
    func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool, strict: bool, what: str
) -> Any:
    inputs_tuple, in_tuple = _as_tuple(inputs, "inputs", what)
    vs = _v_or_one(v, inputs_tuple, "the input to the user-provided function is", what)
    with _grad_mode(True):
        xs = _leaves_of(inputs_tuple, create_graph)
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError(f"The function given to {what} should return a single Tensor with one element")
        first = _grads((out,), xs, create_graph=True)
        first = _filled(first, xs, strict, "The output of the user-provided function")
        second = _grads(first, xs, vs, create_graph)
    second = _filled(second, xs, strict, "The hessian of the user-provided function")
    second = tuple(g if create_graph else g.detach() for g in second)
    value = out if create_graph else out.detach()
    return value, (second if in_tuple else second[0])
