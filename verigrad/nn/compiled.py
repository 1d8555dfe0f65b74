"""`verigrad.compile` with PyTorch's `torch.compile` signature: a function becomes a `Compiled` (compile.py);
a module becomes an `OptimizedModule`, a module holding it as `_orig_mod` (so its state dict's keys start
with `_orig_mod.`, as PyTorch's) whose calls run compiled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..compile import Compiled
from ..shapes import Spec
from .module import Module

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


class OptimizedModule(Module):
    """PyTorch's `torch.compile(module)`: `module` as `_orig_mod`, its calls compiled (`Compiled`: a
    call under `no_grad` runs a plan; one whose result must carry gradient history, or that passes
    keyword arguments, runs the module eagerly). Attributes it does not have are the module's."""

    def __init__(self, module: Module, specs: tuple[Spec, ...] | None = None, optimize: bool = True) -> None:
        super().__init__()
        self._orig_mod = module
        self.__dict__["_compiled"] = Compiled(module, specs, optimize)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_compiled"](*args, **kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        return self.forward(*args, **kwargs)  # errors name the layers by the module's own paths

    def program(self, *args: Any) -> Any:
        """The (optimized) Program these arguments run (`Compiled.program`)."""
        return self.__dict__["_compiled"].program(*args)

    def stats(self) -> dict[str, int]:
        """Traces, plans built and plan cache hits so far (`Compiled.stats`)."""
        return self.__dict__["_compiled"].stats()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_orig_mod", "_compiled", "_modules"):
            raise AttributeError(name)
        return getattr(self._orig_mod, name)


def compile(
    model: Callable[..., Any] | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    disable: bool = False,
    specs: tuple[Spec, ...] | None = None,
    optimize: bool = True,
) -> Any:
    """Compile a function or a module (also a decorator, with or without arguments): traced once per
    signature, then run from plans (`verigrad.compile.Compiled`). PyTorch's `torch.compile` keywords are
    taken: `disable=True` returns `model` itself; `fullgraph`, `dynamic`, `mode` and `options` change
    nothing here (verigrad traces the whole function, with symbolic batch sizes); `backend` must be a
    name (PyTorch's `"inductor"`, `"eager"`, `"aot_eager"`): a backend function is refused. `specs`
    fixes the symbolic signature and `optimize=False` skips the IR passes (verigrad's own)."""
    if not isinstance(backend, str):
        raise NotImplementedError(
            f"compile(backend={backend!r}): verigrad compiles with its own IR and plans; a backend "
            "function is not supported (pass a name such as 'inductor', or leave it out)"
        )
    if mode not in _MODES:
        raise RuntimeError(
            f"compile: unrecognized mode={mode!r}; PyTorch's are {', '.join(map(str, _MODES[1:]))}"
        )
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"compile: options must be a dict, not {type(options).__name__}")
    if model is None:
        return lambda m: compile(
            m, backend=backend, mode=mode, disable=disable, specs=specs, optimize=optimize
        )
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model, specs, optimize)
    if not callable(model):
        raise TypeError(f"compile takes a function or a module, not {type(model).__name__}")
    return Compiled(model, specs, optimize)
