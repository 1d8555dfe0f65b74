"""A module's `state_dict` and `load_state_dict`, with PyTorch's hooks and its order.

state_dict: each module's pre-hooks (hook(module, prefix, keep_vars)), its parameters and persistent
buffers, its children's, then its post-hooks (hook(module, state_dict, prefix, local_metadata); one
registered by the private `_register_state_dict_hook` may return a new dict, which the outermost call
returns, as PyTorch's).

load_state_dict: the load pre-hooks rewrite a copy of the state; the missing and unexpected keys are found
module by module in PyTorch's order, each module's load post-hooks (hook(module, incompatible_keys)) run
after its subtree is loaded and may edit the lists, then the errors (strict's missing and unexpected keys,
mis-shaped entries) are raised. Without post-hooks nothing is copied where there is an error; a model
with post-hooks is loaded as PyTorch loads, each entry that fits copied before its module's hooks run
(and kept when an error follows).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

from ..autograd import no_grad
from ..ops import tensor
from ..shapes import shape_text
from ..tensor import Tensor

EXTRA_STATE = "_extra_state"  # the key of what a module's get_extra_state returns


class IncompatibleKeys(NamedTuple):
    """What `load_state_dict` returns, as PyTorch's: the model's keys the state lacked, and the state's
    keys the model has not."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        """PyTorch's: "<All keys matched successfully>" when both lists are empty (what a notebook shows
        after model.load_state_dict(...)), else _IncompatibleKeys(missing_keys=..., unexpected_keys=...)."""
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        missing, unexpected = self.missing_keys, self.unexpected_keys
        return f"_IncompatibleKeys(missing_keys={missing!r}, unexpected_keys={unexpected!r})"

    __str__ = __repr__


class StateDictError(RuntimeError, ValueError):
    """A state dict that does not fit the model (RuntimeError, as PyTorch's)."""


def own_state(module: Any) -> list[tuple[str, Tensor]]:
    """The module's own parameters and persistent buffers by name, parameters first."""
    found = [(k, t) for k, t in module._parameters.items() if t is not None]
    transient = module._non_persistent_buffers_set
    return found + [(k, t) for k, t in module._buffers.items() if t is not None and k not in transient]


def new_state() -> OrderedDict:
    """An empty state dict as PyTorch's: an OrderedDict whose `_metadata` maps each module's dotted name
    to its {"version": ...} (what version-migration code and load pre-hooks read)."""
    state: OrderedDict = OrderedDict()
    state._metadata = OrderedDict()  # type: ignore[attr-defined]
    return state


def save(module: Any, state: dict, prefix: str, keep_vars: bool) -> dict:
    """Add the module's entries (and its children's) to `state`, its hooks around them; the dict the
    post-hooks leave (a private hook may return another)."""
    metadata = {"version": getattr(module, "_version", 1)}
    if hasattr(state, "_metadata"):
        state._metadata[prefix[:-1]] = metadata
    for hook, _, _ in list(module.__dict__.get("_state_dict_pre_hooks", ())):
        hook(module, prefix, keep_vars)
    state.update((prefix + name, t if keep_vars else t.data) for name, t in own_state(module))
    if _overrides(module, "get_extra_state"):
        state[prefix + EXTRA_STATE] = module.get_extra_state()
    for name, child in module._modules.items():
        if child is not None:
            save(child, state, f"{prefix}{name}.", keep_vars)
    for hook, public, _ in list(module.__dict__.get("_state_dict_hooks", ())):
        result = hook(module, state, prefix, metadata)
        if public and result is not None:
            raise RuntimeError("state_dict post-hook must return None")
        if result is not None:
            state = result
    return state


def _overrides(module: Any, method: str) -> bool:
    """Whether the module's class defines `method` (Module's own, marked `is_default`, raises)."""
    return not getattr(getattr(type(module), method), "is_default", False)


def load(root: Any, state_dict: dict[str, Any], strict: bool) -> IncompatibleKeys:
    """`root.load_state_dict(state_dict, strict)` (see the module's docstring)."""
    missing: list[str] = []
    unexpected: list[str] = []
    errors: list[str] = []
    hooked = [(p, m) for p, m in root.named_modules() if m.__dict__.get("_load_state_dict_pre_hooks")]
    if hooked:
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # the hooks rewrite a copy (with the metadata), as PyTorch's
        if metadata is not None:
            state_dict._metadata = metadata  # type: ignore[attr-defined]
        for name, module in hooked:
            local = {} if metadata is None else metadata.get(name, {})
            args = (state_dict, f"{name}." if name else "", local, strict)
            for hook, with_module, _ in list(module._load_state_dict_pre_hooks):
                lists = (missing, unexpected, errors)
                hook(module, *args, *lists) if with_module else hook(*args, *lists)
    hooked_after = any(m.__dict__.get("_load_state_dict_post_hooks") for m in root.modules())
    fitting: list[tuple[Tensor, Any]] = []
    _load_module(root, state_dict, "", (missing, unexpected, errors), fitting if not hooked_after else None)
    problems = []
    if strict:
        problems += [f"missing: {k}" for k in missing]
        problems += [f"unexpected: {k}" for k in unexpected]
    problems += errors
    if problems:
        lines = "\n\t".join(problems)
        raise StateDictError(f"Error(s) in loading state_dict for {type(root).__name__}:\n\t{lines}")
    _copy(fitting)
    return IncompatibleKeys(missing, unexpected)


def _copy(pairs: list[tuple[Tensor, Any]]) -> None:
    with no_grad():
        for target, value in pairs:
            target.assign(value if isinstance(value, Tensor) else tensor(value))


def _load_module(
    module: Any, state_dict: dict, prefix: str, found: tuple[list[str], ...], fitting: list | None
) -> None:
    """Note the module's entries that are missing, unexpected or mis-shaped, and those that fit (copied
    now where `fitting` is None), then its children's, then run its load post-hooks (PyTorch's `load`
    within load_state_dict)."""
    missing, unexpected, errors = found
    own = dict(own_state(module))
    pairs = []
    for name, target in own.items():
        key = prefix + name
        if key not in state_dict:
            # a norm layer's step count may be missing, as PyTorch admits (older checkpoints)
            if name != "num_batches_tracked":
                missing.append(key)
            continue
        value = state_dict[key]
        if tuple(value.shape) != tuple(target.shape):
            errors.append(
                f"{key}: shape {shape_text(tuple(value.shape))} in the state, "
                f"{shape_text(target.shape)} in the model"
            )
            continue
        pairs.append((target, value))
    if fitting is None:
        _copy(pairs)
    else:
        fitting += pairs
    extra = prefix + EXTRA_STATE
    if _overrides(module, "set_extra_state"):
        if extra in state_dict:
            module.set_extra_state(state_dict[extra])
        else:
            missing.append(extra)
    elif extra in state_dict:
        unexpected.append(extra)
    for key in state_dict:
        if key.startswith(prefix) and key != extra:
            head, dot, _ = key[len(prefix) :].partition(".")
            if (dot and head not in module._modules) or (not dot and head not in own):
                unexpected.append(key)
    for name, child in module._modules.items():
        if child is not None:
            _load_module(child, state_dict, f"{prefix}{name}.", found, fitting)
    keys = IncompatibleKeys(missing, unexpected)
    for hook, _, _ in list(module.__dict__.get("_load_state_dict_post_hooks", ())):
        if hook(module, keys) is not None:
            raise AssertionError(
                "Hooks registered with ``register_load_state_dict_post_hook`` are not expected to return new "
                "values, if incompatible_keys need to be modified, it should be done inplace."
            )
