"""PyTorch's `torch.func.functional_call` (and `torch.nn.utils.stateless.functional_call`): a module called
with some of its parameters and buffers replaced by given tensors for the one call, so that gradients flow
to those tensors (meta-learning's inner steps, ensembles over parameter sets)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...ir.guards import modules_changed
from ...tensor import Tensor
from ..module import Module


def _merged(dicts: Mapping[str, Tensor] | Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
    if isinstance(dicts, Mapping):
        return dict(dicts)
    out: dict[str, Tensor] = {}
    for d in dicts:
        repeated = sorted(set(out) & set(d))
        if repeated:
            raise ValueError(f"functional_call: {repeated} appear in more than one of the dicts given")
        out.update(d)
    return out


def _slot(module: Module, name: str) -> tuple[Module, str, str]:
    """The submodule holding the dotted `name`, the leaf name and its table (_parameters or _buffers)."""
    path, _, leaf = name.rpartition(".")
    owner = module.get_submodule(path) if path else module
    for table in ("_parameters", "_buffers"):
        if leaf in getattr(owner, table):
            return owner, leaf, table
    raise AttributeError(f"functional_call: {type(module).__name__} has no parameter or buffer {name!r}")


def functional_call(
    module: Module,
    parameter_and_buffer_dicts: Mapping[str, Tensor] | Sequence[Mapping[str, Tensor]],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """module(*args, **kwargs) with the named parameters and buffers replaced by the given tensors for this
    call (the module's own are put back after, even if the call raises). With tie_weights, a tensor given
    for one name of a parameter the module holds under several (tied weights) replaces all of them; with
    strict, every parameter and buffer must be given."""
    given = _merged(parameter_and_buffer_dicts)
    names = [n for n, _ in module.named_parameters(remove_duplicate=False)]
    names += [n for n, _ in module.named_buffers(remove_duplicate=False)]
    if strict:
        missing, unexpected = sorted(set(names) - set(given)), sorted(set(given) - set(names))
        if missing or unexpected:
            raise RuntimeError(f"functional_call (strict): missing {missing}, unexpected {unexpected}")
    if tie_weights:
        by_id = {id(_current(module, n)): given[n] for n in given if n in names}
        given = {
            **{n: by_id[id(_current(module, n))] for n in names if id(_current(module, n)) in by_id},
            **given,
        }
    saved = []
    try:
        for name, value in given.items():
            owner, leaf, table = _slot(module, name)
            saved.append((owner, leaf, table, getattr(owner, table)[leaf]))
            getattr(owner, table)[leaf] = value
            object.__setattr__(owner, leaf, value)
        modules_changed()
        args = () if args is None else (args if isinstance(args, tuple) else (args,))
        return module(*args, **(kwargs or {}))
    finally:
        for owner, leaf, table, value in reversed(saved):
            getattr(owner, table)[leaf] = value
            object.__setattr__(owner, leaf, value)
        modules_changed()


def _current(module: Module, name: str) -> Tensor:
    owner, leaf, table = _slot(module, name)
    return getattr(owner, table)[leaf]
