"""`Module`: parameters, buffers and submodules found from attributes, as in PyTorch.

A parameter is a tensor made by `nn.Parameter` or a leaf tensor that requires grad; `register_buffer`
adds state that is saved (unless persistent=False) but not trained (BatchNorm's running statistics); any
other tensor attribute is a plain one. Inside `verigrad.abstract()` modules are built from specs, so a
model can be checked for every size with `verigrad.check`. A shape error raised inside a module's forward
names the layer it happened in. Forward hooks (`register_forward_pre_hook`, `register_forward_hook`) see
and may replace a call's arguments and output; backward hooks (`register_full_backward_pre_hook`,
`register_full_backward_hook`, in backward_hooks.py) its gradients.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import modes
from ..autograd import RemovableHandle, no_grad
from ..devices import as_device, no_device
from ..dtypes import DType, as_dtype, f32
from ..errors import DTypeError, ShapeError
from ..ir.guards import modules_changed
from ..shapes import Spec
from ..tensor import Tensor, to_arguments
from . import module_state
from .module_hooks import GLOBAL, TABLES, add_hook, any_global, hooked_call
from .module_hooks import register_module_backward_hook as register_module_backward_hook
from .module_hooks import register_module_forward_hook as register_module_forward_hook
from .module_hooks import register_module_forward_pre_hook as register_module_forward_pre_hook
from .module_hooks import register_module_full_backward_hook as register_module_full_backward_hook
from .module_hooks import register_module_full_backward_pre_hook as register_module_full_backward_pre_hook
from .module_state import IncompatibleKeys as IncompatibleKeys
from .module_state import StateDictError as StateDictError


class _Calls(threading.local):
    """The modules each thread is inside the forward of, outermost first (a layer's error is named by
    the path from its own thread's outermost module)."""

    def __init__(self) -> None:
        self.stack: list[Module] = []


_CALLS = _Calls()
_MARKED: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()  # nn.Parameter's
# nn.Buffer's: the tensor, and whether state_dict saves it (a tensor's id mapped to both, weakly)
_BUFFERS: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
_TRANSIENT: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()  # persistent=False


def mark_parameter(t: Tensor) -> Tensor:
    """Make `t` a parameter when assigned to a module, whether or not it requires grad (nn.Parameter)."""
    _MARKED[id(t)] = t
    return t


def is_marked_parameter(value: Any) -> bool:
    """Whether `value` is a parameter as PyTorch's isinstance(value, nn.Parameter) sees one: made by
    nn.Parameter, or registered as a module's parameter."""
    return isinstance(value, Tensor) and _MARKED.get(id(value)) is value


def mark_buffer(t: Tensor, persistent: bool) -> Tensor:
    """Make `t` a buffer when assigned to a module (nn.Buffer), saved by state_dict if `persistent`."""
    _BUFFERS[id(t)] = t
    if not persistent:
        _TRANSIENT[id(t)] = t
    return t


def marked_buffer(value: Any) -> bool | None:
    """None unless nn.Buffer made `value`; else whether it is persistent."""
    if not isinstance(value, Tensor) or _BUFFERS.get(id(value)) is not value:
        return None
    return _TRANSIENT.get(id(value)) is not value


def is_parameter(value: Any) -> bool:
    """Whether a module attribute set to `value` is a parameter: a tensor made by nn.Parameter, or a leaf
    tensor that requires grad."""
    if not isinstance(value, Tensor):
        return False
    return _MARKED.get(id(value)) is value or (value.requires_grad and value.is_leaf)


_HOOKS = TABLES


class Module:
    """Base class of layers and models: subclass it, assign layers and tensors, write `forward`."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        """As PyTorch's: a parameter (made by `nn.Parameter`, or a leaf tensor that requires grad) or a
        module is registered under `name`, a tensor given to a buffer's name stays a buffer, and one given
        to a parameter's name stays a parameter; any other value, a plain tensor too, is a plain
        attribute (neither state nor trained)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() first")
        persistent = marked_buffer(value)
        if persistent is not None:  # nn.Buffer(...): a buffer, as PyTorch's
            self.register_buffer(name, value, persistent=persistent)
            modules_changed()
            return
        if isinstance(value, Module):
            target = self._modules
        elif is_parameter(value) or (name in self._parameters and isinstance(value, Tensor)):
            target = self._parameters  # PyTorch refuses a plain tensor there; here it is a frozen parameter
        elif name in self._buffers and (value is None or isinstance(value, Tensor)):
            target = self._buffers
        elif value is None and (name in self._parameters or name in self._modules):
            target = self._parameters if name in self._parameters else self._modules
        else:
            target = None
        for table in (self._parameters, self._buffers, self._modules):
            if table is not target:
                table.pop(name, None)
        if target is not self._buffers:
            self._non_persistent_buffers_set.discard(name)
        if target is self._parameters and value is not None:
            mark_parameter(value)
        if target is not None:
            target[name] = value  # a name the table holds keeps its place (and so its order), as in PyTorch
        object.__setattr__(self, name, value)
        modules_changed()  # a compiled call reads its module guards again

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        object.__delattr__(self, name)
        modules_changed()

    def add_module(self, name: str, module: Module | None) -> None:
        """Register `module` (or None, a place for one) as the submodule `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module needs a Module, got {type(module).__name__}")
        self._check_name("add_module", "module", name, self._modules)
        self._modules[name] = module
        object.__setattr__(self, name, module)
        modules_changed()

    register_module = add_module

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Keep `tensor` as state that optimizers do not train; `state_dict` saves it unless not
        `persistent` (then it is moved by `to` but neither saved nor loaded)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"register_buffer: cannot assign {type(tensor).__name__} object to buffer {name!r} "
                "(a Tensor or None expected)"
            )
        self._check_name("register_buffer", "buffer", name, self._buffers)
        for table in (self._parameters, self._modules):
            table.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)
        object.__setattr__(self, name, tensor)

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        """Register `param` (a tensor, trained from now on, or None: no parameter there) as `name`."""
        if param is not None and not isinstance(param, Tensor):
            raise TypeError(
                f"register_parameter: cannot assign {type(param).__name__} object to parameter {name!r} "
                "(a Tensor or None expected)"
            )
        self._check_name("register_parameter", "parameter", name, self._parameters)
        if param is not None and not is_parameter(param):
            param.requires_grad_(True)
        if param is not None:
            mark_parameter(param)
        for table in (self._buffers, self._modules):
            table.pop(name, None)
        self._parameters[name] = param
        object.__setattr__(self, name, param)

    def _check_name(self, function: str, what: str, name: Any, table: dict) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() first")
        if not isinstance(name, str):
            raise TypeError(f"{function}: the {what} name must be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"{function}: the {what} name must be non-empty and contain no '.', got {name!r}")
        if hasattr(self, name) and name not in table:  # a method or another attribute, as PyTorch
            raise KeyError(f"{function}: attribute {name!r} already exists")

    def get_submodule(self, target: str) -> Module:
        """The submodule at the dotted path `target` ("" is this module)."""
        module: Module = self
        walked = type(self).__name__
        for part in target.split(".") if target else []:
            child = module._modules.get(part) if isinstance(module, Module) else None
            if child is None:
                raise AttributeError(f"{walked} has no attribute `{part}`")
            module, walked = child, f"{walked}.{part}"
        return module

    def get_parameter(self, target: str) -> Tensor:
        """The parameter at the dotted path `target` ("layer.weight")."""
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path `target` ("bn.running_mean")."""
        return self._get_member(target, "_buffers", "buffer")

    def _get_member(self, target: str, table: str, what: str) -> Tensor:
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if name not in module.__dict__:
            raise AttributeError(f"{type(module).__name__} has no attribute `{name}`")
        if name not in getattr(module, table):
            raise AttributeError(f"`{name}` is not a {what}")
        return getattr(module, table)[name]

    # traversal ----------------------------------------------------------------------------------
    # Generators, as PyTorch's. A module or tensor reached twice (tied weights, a layer used in two
    # places) is listed once unless remove_duplicate=False, so an optimizer updates it once a step.
    def named_modules(
        self, memo: set[Module] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module and every submodule, depth first, each module once."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(memo, _dotted(prefix, name), remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) for the direct submodules, a module held under two names listed once."""
        seen: set[int] = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def apply(self, fn: Any) -> Module:
        """fn(module) for every submodule, children first, then this one (as PyTorch, e.g. to initialize)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, parameter) for this module's parameters and, with `recurse`, its submodules'."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) for this module's buffers and, with `recurse`, its submodules'."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def _named_members(
        self, table: str, prefix: str, recurse: bool, remove_duplicate: bool
    ) -> Iterator[tuple[str, Tensor]]:
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        seen: set[int] = set()  # by identity: a tensor's == compares elements
        for module_prefix, module in modules:
            for name, t in getattr(module, table).items():
                if t is None or id(t) in seen:  # a buffer registered as None is no state yet, as in PyTorch
                    continue
                if remove_duplicate:
                    seen.add(id(t))
                yield _dotted(module_prefix, name), t

    def requires_grad_(self, flag: bool = True) -> Module:
        """Freeze (False) or unfreeze every parameter: a frozen one gets no gradient, and an optimizer
        given it leaves it as it is."""
        for p in self.parameters():
            p.requires_grad_(flag)
        return self

    # state ----------------------------------------------------------------------------------------
    def state_dict(
        self, *args: Any, destination: dict | None = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Tensor]:
        """Every parameter and persistent buffer by its dotted name, in PyTorch's order: a module's
        parameters, then its buffers, then its children's, in an OrderedDict with PyTorch's `_metadata`.
        As PyTorch's, each is detached (no grad, sharing the storage: a write into it changes the model)
        unless `keep_vars`, which gives the tensors themselves. A tied tensor is under each of its names.
        The arguments given by position (destination, prefix, keep_vars) are taken with PyTorch's
        FutureWarning."""
        if args:
            if len(args) > 3:
                raise TypeError(f"state_dict takes at most 3 positional arguments, got {len(args)}")
            warnings.warn(
                "Positional args are being deprecated, use kwargs instead (state_dict(destination=..., "
                "prefix=..., keep_vars=...))",
                FutureWarning,
                stacklevel=2,
            )
            destination = args[0] if destination is None else destination
            prefix = args[1] if len(args) > 1 and prefix == "" else prefix
            keep_vars = args[2] if len(args) > 2 and keep_vars is False else keep_vars
        state: dict[str, Tensor] = module_state.new_state() if destination is None else destination
        return module_state.save(self, state, prefix, keep_vars)

    def get_extra_state(self) -> Any:
        """What state_dict saves under `_extra_state` where a subclass defines this (with set_extra_state)."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called: a module with "
            "extra state defines get_extra_state and set_extra_state"
        )

    def set_extra_state(self, state: Any) -> None:
        """Take back what get_extra_state gave (load_state_dict calls it where a subclass defines it)."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called: a module with "
            "extra state defines get_extra_state and set_extra_state"
        )

    get_extra_state.is_default = set_extra_state.is_default = True  # type: ignore[attr-defined]

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """Copy values in, cast to each tensor's dtype as PyTorch's `copy_` casts, and return PyTorch's
        named tuple (missing_keys, unexpected_keys). With `strict`, a missing or extra key is an error; a
        mis-shaped entry always is. The error (a RuntimeError, and a ValueError) names every offending
        tensor; as PyTorch's, the entries that fit are copied all the same (module_state.py)."""
        if assign:
            raise NotImplementedError("load_state_dict: assign=True is not supported; the values are copied")
        return module_state.load(self, state_dict, strict)

    # dtypes ---------------------------------------------------------------------------------------
    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Every float parameter and buffer converted to the dtype asked for (`to(dtype)`, `to(device,
        dtype)`, `to(tensor)`) in place (the same tensor objects); make the optimizer after it, as its
        state takes the parameters' dtype when it is made. The CPU, the only device, changes nothing."""
        target, _ = to_arguments("Module.to", args, kwargs)
        if target is None:
            return self
        if not target.is_float:
            raise DTypeError(f"Module.to only accepts floating point dtypes, not {target.name}")
        for t in [*self.parameters(), *self.buffers()]:
            if t.dtype.is_float and t.dtype is not target:
                if isinstance(t.payload, np.ndarray):  # cast as Tensor.to casts (bf16: round to nearest even)
                    t.payload = t.detach().to(target).payload
                t.spec = Spec(t.spec.shape, target)
                if t.grad is not None:  # PyTorch casts the gradient along, in place too
                    t.grad.data = t.grad.detach().to(target)
        return self

    def float(self) -> Module:
        return self.to("f32")

    def double(self) -> Module:
        return self.to("f64")

    def half(self) -> Module:
        return self.to("f16")

    def bfloat16(self) -> Module:
        return self.to("bf16")

    def cpu(self) -> Module:
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Module:
        raise no_device("cuda", "Module.cuda()")

    # modes ----------------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout on, batch statistics) for this module and every submodule; returns it."""
        if not isinstance(mode, bool):
            raise ValueError(f"train: the training mode is expected to be a bool, got {type(mode).__name__}")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        modules_changed()
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the parameters' gradients (PyTorch's default), or with set_to_none=False zero them."""
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    # calling ------------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs) before load_state_dict reads the entries (prefix: this module's dotted name and a
        '.'); as PyTorch's, it may rewrite state_dict (a copy of the one given) and add to the lists."""
        return self._add_hook("_load_state_dict_pre_hooks", hook, True)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """hook(module, incompatible_keys) after load_state_dict loaded this module and its children; it
        may edit the lists in place (what strict then raises for), and must return None."""
        return self._add_hook("_load_state_dict_post_hooks", hook, False)

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """hook(module, prefix, keep_vars) before state_dict adds this module's entries."""
        return self._add_hook("_state_dict_pre_hooks", hook, False)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """hook(module, state_dict, prefix, local_metadata) after state_dict added this module's entries
        (and its children's); it may edit state_dict in place, and must return None."""
        return self._add_hook("_state_dict_hooks", hook, True)

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """PyTorch's private post-hook: like register_state_dict_post_hook, but a dict it returns from the
        module state_dict was called on is what state_dict returns."""
        return self._add_hook("_state_dict_hooks", hook, False)

    def _register_load_state_dict_pre_hook(
        self, hook: Callable, with_module: bool = False
    ) -> RemovableHandle:
        """PyTorch's private form: hook(state_dict, prefix, ...) unless `with_module`."""
        return self._add_hook("_load_state_dict_pre_hooks", hook, with_module)

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """Call `hook(module, args)` before each forward (`hook(module, args, kwargs)` with_kwargs), after
        the hooks registered before (before them with prepend); what it returns, if not None, replaces the
        arguments: a tuple (a single value is made one), or with_kwargs a pair (args, kwargs)."""
        return self._add_hook("_forward_pre_hooks", hook, with_kwargs, prepend)

    def register_forward_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False
    ) -> RemovableHandle:
        """Call `hook(module, args, output)` after each forward (`hook(module, args, kwargs, output)`
        with_kwargs), after the hooks registered before (before them with prepend); what it returns, if
        not None, replaces the output. With always_call, also when forward raises (output None)."""
        return self._add_hook("_forward_hooks", hook, with_kwargs, prepend, always_call)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_input, grad_output)` once a backward pass, when the gradients of the
        module's inputs are known (None for an input that is no tensor or takes none); what it returns,
        if not None, replaces grad_input. Eager calls only (see nn/backward_hooks.py)."""
        return self._add_hook("_backward_hooks", hook, False, prepend)

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_output)` once a backward pass, when the gradients of the module's
        outputs are known; what it returns, if not None, replaces grad_output."""
        return self._add_hook("_backward_pre_hooks", hook, False, prepend)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """PyTorch's deprecated backward hook, which may see the wrong gradients there: refused."""
        raise NotImplementedError(
            f"{type(self).__name__}.register_backward_hook is not supported (PyTorch deprecated it): use "
            "register_full_backward_hook"
        )

    def _add_hook(
        self, table: str, hook: Callable, with_kwargs: bool, prepend: bool = False, always_call: bool = False
    ) -> RemovableHandle:
        return add_hook(self.__dict__.setdefault(table, []), hook, with_kwargs, prepend, always_call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        hooked = self.__dict__
        if (
            hooked.get("_forward_pre_hooks")
            or hooked.get("_forward_hooks")
            or hooked.get("_backward_hooks")
            or hooked.get("_backward_pre_hooks")
            or any_global()
        ):
            return hooked_call(self, args, kwargs, self._call)
        return self._call(args, kwargs)

    @property
    def _traced_state(self) -> tuple:
        """What a compiled function's trace of this module's call depends on besides tensors: its
        `training` flag and its hooks (a compiled function traces again where they have changed)."""
        d = self.__dict__
        hooks = [[*GLOBAL[name], *d.get(name, ())] for name in _HOOKS]
        if not any(hooks):
            return self.training
        return (self.training, *[tuple([id(e[0]) for e in found]) for found in hooks])

    def _call(self, args: tuple, kwargs: dict) -> Any:
        mode = modes.LOCAL.stack[-1]
        if mode.name == "trace":  # what it computes depends on these: a compiled call checks them
            mode.read_flag(self, "_traced_state")
        stack = _CALLS.stack
        stack.append(self)
        try:
            return self.forward(*args, **kwargs)
        except (ShapeError, DTypeError) as e:
            if getattr(e, "layer", None) is None:
                e.layer = self  # the innermost module where it happened
            if len(stack) == 1:  # the outermost module names the layer by its path
                _name_layer(self, e)
            raise
        finally:
            stack.pop()

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        """PyTorch's: one line of settings in the parentheses; else each line of them, then each child,
        on its own line, indented."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        children = [
            f"({name}): {repr(m).replace(chr(10), chr(10) + '  ')}" for name, m in self._modules.items()
        ]
        if len(extra_lines) == 1 and not children:
            return f"{type(self).__name__}({extra_lines[0]})"
        lines = extra_lines + children
        return f"{type(self).__name__}(" + ("\n  " + "\n  ".join(lines) + "\n" if lines else "") + ")"


def factory_dtype(name: str, device: Any = None, dtype: Any = None) -> DType:
    """The dtype a layer's parameters are made in from PyTorch's factory arguments (device=, dtype=):
    f32 when None, else a float dtype (trained parameters are floats, as PyTorch demands); a device
    other than the CPU is refused (`NoDeviceError`, as every factory's)."""
    as_device(device, name)
    found = f32 if dtype is None else as_dtype(dtype)
    if not found.is_float:
        raise LayerDTypeError(
            f"{name}: dtype must be a float dtype (its parameters are trained), got {found.name}"
        )
    return found


class LayerDTypeError(DTypeError, RuntimeError):
    """A dtype a layer refuses (an input in another dtype than its weights, integer weights): a
    RuntimeError, as PyTorch's."""


def check_dtypes(name: str, weight: Tensor, *inputs: tuple[str, Tensor | None]) -> None:
    """Each (what, tensor) of `inputs` in the weights' dtype, as PyTorch demands: an operation with
    them would promote the input silently. Called before any work."""
    for what, t in inputs:
        if t is not None and t.dtype is not weight.dtype:
            raise LayerDTypeError(
                f"{name}: {what} dtype {t.dtype.name} does not match the weights' {weight.dtype.name}; "
                f"convert it (.to({weight.dtype.name})) or the model (model.to({t.dtype.name}))"
            )


def _dotted(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _name_layer(root: Module, error: Any) -> None:
    layer = error.layer
    path = next((name for name, m in root.named_modules() if m is layer), None)
    if isinstance(layer, Module):
        where = f"in layer {path or type(root).__name__} ({layer!r})" if path else f"in {layer!r}"
        error.layer = where
        error.args = (str(error),)
