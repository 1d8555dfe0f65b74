"""PyTorch's `torch.library.custom_op`: a user's function made an op of the registry.

The op is an `Op` record like a built-in: its reference runs the user's function on the arrays (as eager
Tensors), its spec comes from the function given to `register_fake` (run on specs alone, so `verigrad.check`,
`trace` and `compile` know the result's shape before any work, and a compiled plan runs the op as one
instruction), and its VJP calls the `backward` given to `register_autograd` (with `setup_context`).
Without a fake, an eager call runs the function to learn the result (a trace refuses it, naming
`register_fake`).

`register_kernel(op, dtype, fn, exactness=)` and `elementwise_kernel` are library_kernels.py's.
`register_kernel` gives any op of the registry (a built-in, a custom op, a
user kernel) a kernel of the user's, written in NumPy or calling C through ctypes, on the cpu backend:
verified first, on the op's samples (and their special values, views and sizes, on 1-3 threads), as
`verigrad verify` verifies the built-in kernels; refused, naming the differing case, where it does not
meet the exactness it states.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from . import modes
from .autograd import Node, is_grad_enabled, no_grad
from .autograd_functional import grad_transform
from .compile import compile as compile_fn
from .dtypes import from_numpy_dtype
from .function.ctx import FunctionCtx, backward_grads
from .library_kernels import KernelRefused, KernelSyntaxError, elementwise_kernel, register_kernel
from .ops._op import Op
from .shapes import Spec
from .tensor import Tensor


class _Backward:
    """What `backward_grads` calls: the user's backward as a Function's."""

    def __init__(self, backward: Callable[..., Any]) -> None:
        self.backward = backward


class CustomOp(Op):
    """The Op record of a custom op: its spec from the user's fake function."""

    def __init__(self, definition: CustomOpDef) -> None:
        self.definition = definition
        super().__init__(
            definition.name,
            shape=lambda *shapes, **params: (),
            dtype=lambda *dtypes, **params: None,
            reference=definition._reference,
            vjp=definition._vjp,
            doc=definition.fn.__doc__ or f"the custom op {definition.name}",
        )

    def _spec(self, args: tuple[Tensor, ...], params: dict[str, Any]) -> Spec:
        return self.definition._fake_spec(args, params)


class CustomOpDef:
    """What `custom_op` returns: call it as the function; `register_fake`, `register_autograd` and
    `register_kernel` as PyTorch's."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name, self.fn = name, fn
        self.__name__ = name.split("::")[-1]
        self.__doc__ = fn.__doc__
        self._signature = inspect.signature(fn)
        hints = _hints(fn)
        for p in self._signature.parameters.values():
            if p.name not in hints:
                raise ValueError(
                    f"custom_op {name}: parameter {p.name} must have a type annotation (Tensor, float, int,"
                    " bool, ...), as PyTorch infers the op's schema from them; got "
                    f"{fn.__name__}{self._signature}"
                )
        self._tensors = tuple(n for n in self._signature.parameters if _is_tensor(hints[n]))
        self._kernel: Callable[..., Any] = fn
        self._fake: Callable[..., Any] | None = None
        self._backward: Callable[..., Any] | None = None
        self._setup: Callable[..., Any] | None = None
        self.op = CustomOp(self)

    def __repr__(self) -> str:
        return f"<CustomOpDef({self.name})>"

    # registration --------------------------------------------------------------------------------
    def register_fake(self, fn: Callable[..., Any], /) -> Callable[..., Any]:
        """The function giving the result's shape and dtype from the arguments' (it runs on specs alone:
        write it with verigrad ops, `x.new_empty(...)`, `verigrad.empty_like(x)`)."""
        self._fake = fn
        return fn

    def register_autograd(
        self, backward: Callable[..., Any], /, *, setup_context: Callable[..., Any] | None = None
    ) -> None:
        """The op's gradient: `backward(ctx, grad)` returns one gradient per argument (None for a
        non-tensor one); `setup_context(ctx, inputs, output)` saves what it needs."""
        self._backward, self._setup = backward, setup_context

    def register_kernel(
        self, device_types: str | Sequence[str] | None, fn: Callable[..., Any] | None = None, /
    ) -> Any:
        """Another implementation for the CPU (verigrad's only device)."""
        types = (device_types,) if isinstance(device_types, str) or device_types is None else device_types
        if any(t not in (None, "cpu") for t in types):
            raise ValueError(
                f"custom_op {self.name}: register_kernel for {device_types!r}; verigrad runs on the CPU"
            )

        def register(kernel: Callable[..., Any]) -> Callable[..., Any]:
            self._kernel = kernel
            return kernel

        return register if fn is None else register(fn)

    # calls -----------------------------------------------------------------------------------------
    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple[Tensor, ...], dict[str, Any]]:
        """The tensor arguments (in the function's order) and the others by name (the op's params)."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.name}: {e}") from None
        bound.apply_defaults()
        tensors, params = [], {}
        for name, value in bound.arguments.items():
            if name in self._tensors:
                if not isinstance(value, Tensor):
                    raise TypeError(
                        f"{self.name}: argument {name} must be a Tensor, got {type(value).__name__}"
                    )
                tensors.append(value)
            else:
                params[name] = value
        return tuple(tensors), params

    def _arguments(self, tensors: Sequence[Tensor], params: dict[str, Any]) -> tuple:
        given = iter(tensors)
        return tuple(next(given) if n in self._tensors else params[n] for n in self._signature.parameters)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors, params = self._split(args, kwargs)
        if self._fake is not None or modes.current().name != "eager":
            return self.op(*tensors, **params)
        # eagerly without a fake: the function itself gives the result (and so its spec)
        with no_grad():
            out = self._call(self._kernel, tensors, params)
        if is_grad_enabled() and out.dtype.is_float and any(t.requires_grad for t in tensors):
            out = Tensor(out.spec, out.payload)
            out.requires_grad, out._node = True, Node(self.op, tensors, params)
        return out

    def _call(self, fn: Callable[..., Any], tensors: Sequence[Tensor], params: dict[str, Any]) -> Tensor:
        out = fn(*self._arguments(tensors, params))
        if not isinstance(out, Tensor):
            raise TypeError(
                f"{self.name}: the function returned {type(out).__name__}; a custom op returns a Tensor"
            )
        return out

    def _fake_spec(self, tensors: tuple[Tensor, ...], params: dict[str, Any]) -> Spec:
        if self._fake is None:
            raise TypeError(
                f"{self.name} has no fake implementation, so its result's shape is unknown outside eager "
                f"mode; register one with @{self.__name__}.register_fake"
            )
        shapes = [Tensor(t.spec, None) for t in tensors]
        with modes.using(modes.AbstractMode()), no_grad():
            return self._call(self._fake, shapes, params).spec

    def _reference(self, *arrays: np.ndarray, **params: Any) -> np.ndarray:
        tensors = [Tensor(Spec(a.shape, from_numpy_dtype(a.dtype)), a) for a in arrays]
        with modes.using(modes._DEFAULT[0]), no_grad():
            out = self._call(self._kernel, tensors, params)
        return np.array(out.payload, copy=True)  # (fresh: a plan may write into it, a replay keeps it Python)

    def _vjp(self, g: Tensor, out: Tensor, *inputs: Tensor, **params: Any) -> tuple[Tensor | None, ...]:
        if self._backward is None:
            raise RuntimeError(
                f"Trying to backward through {self.name} but no autograd formula was registered. Please use "
                "register_autograd to add one."
            )
        args = self._arguments(inputs, params)
        ctx = FunctionCtx(tuple(isinstance(a, Tensor) and a.requires_grad for a in args))
        if self._setup is not None:
            self._setup(ctx, args, out)
        positions = tuple(i for i, n in enumerate(self._signature.parameters) if n in self._tensors)
        return backward_grads(_Backward(self._backward), self.name, ctx, [g], inputs, positions, len(args))


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """fn's annotations, evaluated where they can be (a string naming a local one stays a string)."""
    try:
        return typing.get_type_hints(fn)
    except (NameError, AttributeError, TypeError):
        return dict(getattr(fn, "__annotations__", {}))


def _is_tensor(hint: Any) -> bool:
    """A parameter annotated `Tensor` (or, left a string, `'x.Tensor'`: `torch.Tensor` in a ported file)."""
    return hint is Tensor or (isinstance(hint, str) and hint.rsplit(".", 1)[-1] == "Tensor")


def custom_op(
    name: str,
    fn: Callable[..., Any] | None = None,
    /,
    *,
    mutates_args: str | Iterable[str],
    device_types: str | Sequence[str] | None = None,
    schema: str | None = None,
    tags: Any = None,
) -> Any:
    """PyTorch's `torch.library.custom_op("mylib::name", mutates_args=())`: the decorated function
    becomes an op of the registry (see the module docstring). Only ops that mutate none of their
    arguments: `mutates_args` must be empty."""
    if mutates_args == "unknown" or tuple(mutates_args):
        raise NotImplementedError(
            f"custom_op {name}: mutates_args={mutates_args!r}; verigrad's custom ops mutate no argument "
            "(pass mutates_args=())"
        )
    if schema is not None:
        raise NotImplementedError(f"custom_op {name}: schema= strings are not read; give type annotations")
    if "::" not in name:
        raise ValueError(f"custom_op: the name must be 'namespace::name', got {name!r}")
    if device_types not in (None, "cpu") and tuple(device_types) != ("cpu",):  # type: ignore[arg-type]
        raise ValueError(f"custom_op {name}: device_types={device_types!r}; verigrad runs on the CPU")

    def make(f: Callable[..., Any]) -> CustomOpDef:
        return CustomOpDef(name, f)

    return make if fn is None else make(fn)


_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def opcheck(
    op: CustomOpDef,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    test_utils: str | Sequence[str] = _TESTS,
    raise_exception: bool = True,
    atol: float | None = None,
    rtol: float | None = None,
) -> dict[str, Any]:
    """PyTorch's `torch.library.opcheck`: whether a custom op's registrations hold on these arguments.
    test_schema: the call writes no argument and returns no argument or view of one; test_autograd_
    registration: an argument requiring grad has a `register_autograd`; test_faketensor: the fake gives
    the real result's shape and dtype; test_aot_dispatch_dynamic: a compiled call (sizes symbolic) gives
    the eager result's bits, and its gradient's where autograd is registered. "SUCCESS" for each, or its
    exception (raised where `raise_exception`). `atol`/`rtol` are accepted: the comparisons are exact."""
    if not isinstance(op, CustomOpDef):
        raise TypeError(f"opcheck takes an op made by verigrad.library.custom_op, got {type(op).__name__}")
    names = (test_utils,) if isinstance(test_utils, str) else tuple(test_utils)
    for name in names:
        if name not in _TESTS:
            raise ValueError(f"opcheck: test_utils {name!r} is none of {_TESTS}")
    tensors, params = op._split(tuple(args), dict(kwargs or {}))
    results: dict[str, Any] = {}
    for name in names:
        try:
            _CHECKS[name](op, tensors, params)
        except Exception as e:
            if raise_exception:
                raise OpCheckError(f"opcheck({op.name}): {name} failed: {e}") from e
            results[name] = e
        else:
            results[name] = "SUCCESS"
    return results


class OpCheckError(Exception):
    """An opcheck test that failed (PyTorch's `OpCheckError`)."""


def _eager(op: CustomOpDef, tensors: Sequence[Tensor], params: dict[str, Any]) -> Tensor:
    """The op's function itself on the arguments (not the op: its fake is under test)."""
    with no_grad():
        return op._call(op._kernel, tensors, params)


def _check_schema(op: CustomOpDef, tensors: tuple[Tensor, ...], params: dict[str, Any]) -> None:
    before = [np.array(t.payload, copy=True) for t in tensors]
    out = _eager(op, tensors, params)
    for name, t, old in zip(op._tensors, tensors, before):
        if not np.array_equal(t.payload, old, equal_nan=True):
            raise RuntimeError(
                f"{op.name} wrote into its argument {name}, which mutates_args=() says it does not"
            )
        if np.shares_memory(out.payload, t.payload):
            raise RuntimeError(f"{op.name} returned its argument {name} or a view of it; return a new tensor")


def _check_autograd(op: CustomOpDef, tensors: tuple[Tensor, ...], params: dict[str, Any]) -> None:
    if op._backward is None and any(t.requires_grad and t.dtype.is_float for t in tensors):
        raise RuntimeError(
            f"{op.name}: an argument requires grad but the op has no autograd formula; register one with "
            "register_autograd"
        )


def _check_fake(op: CustomOpDef, tensors: tuple[Tensor, ...], params: dict[str, Any]) -> None:
    want = _eager(op, tensors, params).spec
    got = op._fake_spec(tensors, params)
    if got != want:
        raise RuntimeError(f"{op.name}: the fake gives {got!r}, the op {want!r}")


def _check_compiled(op: CustomOpDef, tensors: tuple[Tensor, ...], params: dict[str, Any]) -> None:
    def call(*ts: Tensor) -> Tensor:
        return op(*op._arguments(ts, params))

    plain = [t.detach() for t in tensors]
    eager, compiled = call(*plain), compile_fn(call)(*plain)
    if eager.payload.tobytes() != compiled.payload.tobytes() or eager.spec != compiled.spec:
        raise RuntimeError(f"{op.name}: the compiled call gives other values than the eager one")
    wrt = tuple(k for k, t in enumerate(tensors) if t.requires_grad and t.dtype.is_float)
    if not wrt or op._backward is None:
        return
    grads = grad_transform(lambda *ts: call(*ts).sum(), argnums=wrt)
    eager_g, compiled_g = grads(*plain), compile_fn(grads)(*plain)
    for k, a, b in zip(wrt, eager_g, compiled_g):
        if a.payload.tobytes() != b.payload.tobytes():
            raise RuntimeError(f"{op.name}: the compiled gradient of argument {k} differs from the eager one")


_CHECKS = {
    "test_schema": _check_schema,
    "test_autograd_registration": _check_autograd,
    "test_faketensor": _check_fake,
    "test_aot_dispatch_dynamic": _check_compiled,
}


__all__ = [
    "CustomOp",
    "CustomOpDef",
    "KernelRefused",
    "KernelSyntaxError",
    "OpCheckError",
    "custom_op",
    "elementwise_kernel",
    "opcheck",
    "register_kernel",
]
