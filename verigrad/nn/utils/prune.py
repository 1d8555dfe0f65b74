"""PyTorch's torch.nn.utils.prune: a parameter `name` pruned by a mask, as PyTorch does it: the parameter
moves to `name_orig`, the mask is the buffer `name_mask`, and `name` is their product, made again by a
forward pre-hook before each call. Pruning again combines the masks (an unstructured method prunes among
the entries still there); remove() makes the product the parameter again. Masks are computed from the
values (NumPy, no gradient), keeping the `amount` entries or channels with the smallest importance out."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from ...autograd import no_grad
from ...ops import from_numpy
from ...tensor import Tensor
from ..module import Module


def _count(amount: Any, size: int, what: str) -> int:
    """How many of `size` to prune: an int as given, a float in [0, 1] as round(amount * size)."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise TypeError(f"{what}: invalid type for amount: {type(amount).__name__}; an int or a float")
    if isinstance(amount, numbers.Integral):
        if amount < 0:
            raise ValueError(
                f"{what}: amount={amount} should either be a float in [0, 1] or a non-negative int"
            )
        if amount > size:
            raise ValueError(
                f"{what}: amount={amount} should be smaller than the number of parameters to prune={size}"
            )
        return int(amount)
    if not 0.0 <= amount <= 1.0:
        raise ValueError(f"{what}: amount={amount} should either be a float in [0, 1] or a non-negative int")
    return round(amount * size)


class BasePruningMethod:
    """A way to compute a mask (PyTorch's base class); PRUNING_TYPE is "unstructured", "structured" or
    "global"."""

    PRUNING_TYPE = "unstructured"
    dim = -1

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def apply(
        cls, module: Module, name: str, *args: Any, importance_scores: Tensor | None = None, **kwargs: Any
    ) -> Any:
        method = cls(*args, **kwargs)
        orig = module._parameters.get(name)
        pruned_before = orig is None and f"{name}_orig" in module._parameters
        if pruned_before:
            orig = module._parameters[f"{name}_orig"]
            default = module._buffers[f"{name}_mask"].numpy().astype(bool)
        elif orig is None:
            raise AttributeError(
                f"Parameter '{name}' of module {type(module).__name__} has to be a parameter"
            )
        else:
            default = np.ones(tuple(orig.shape), dtype=bool)
        scores = (orig if importance_scores is None else importance_scores).detach().numpy()
        mask = _combined(method, scores, default)
        if not pruned_before:
            del module._parameters[name]
            object.__delattr__(module, name)
            module.register_parameter(f"{name}_orig", orig)
            module.register_buffer(f"{name}_mask", from_numpy(mask.astype(orig.numpy().dtype)))
            handle = module.register_forward_pre_hook(_Reapply(name))
            module.__dict__.setdefault("_pruning", {})[name] = handle
        else:
            with no_grad():
                module._buffers[f"{name}_mask"].assign(from_numpy(mask.astype(orig.numpy().dtype)))
        _reapply(module, name)
        return method


def _combined(method: BasePruningMethod, scores: np.ndarray, default: np.ndarray) -> np.ndarray:
    """The new mask: an unstructured method prunes among the entries the old mask keeps, a structured one
    among the channels it keeps, a global one (a given mask) over the whole (PyTorch's PruningContainer)."""
    if method.PRUNING_TYPE == "global":
        return method.compute_mask(scores, default)
    if method.PRUNING_TYPE == "unstructured":
        mask = default.copy()
        mask[default] = method.compute_mask(scores[default], np.ones(int(default.sum()), dtype=bool))
        return mask
    dim = method.dim % scores.ndim
    others = tuple(d for d in range(scores.ndim) if d != dim)
    keep = default.sum(axis=others) != 0
    index = [slice(None)] * scores.ndim
    index[dim] = keep
    mask = np.zeros_like(default)
    mask[tuple(index)] = method.compute_mask(scores[tuple(index)], default[tuple(index)])
    return mask & default


class _Reapply:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, module: Module, inputs: Any) -> None:
        _reapply(module, self.name)


def _reapply(module: Module, name: str) -> None:
    object.__setattr__(module, name, module._parameters[f"{name}_orig"] * module._buffers[f"{name}_mask"])


def _smallest(values: np.ndarray, count: int) -> np.ndarray:
    """The positions of the `count` smallest values (the first of ties, in order)."""
    return np.argsort(values, kind="stable")[:count]


class Identity(BasePruningMethod):
    """Prunes nothing (a mask of ones)."""

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        return default_mask.copy()


class L1Unstructured(BasePruningMethod):
    """The `amount` entries of smallest magnitude."""

    def __init__(self, amount: Any) -> None:
        self.amount = amount

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        mask = default_mask.copy().reshape(-1)
        mask[_smallest(np.abs(t).reshape(-1), _count(self.amount, t.size, "l1_unstructured"))] = False
        return mask.reshape(t.shape)


class RandomUnstructured(BasePruningMethod):
    """`amount` entries drawn at random (NumPy's generator: PyTorch's draws are its own)."""

    def __init__(self, amount: Any) -> None:
        self.amount = amount

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        mask = default_mask.copy().reshape(-1)
        count = _count(self.amount, t.size, "random_unstructured")
        mask[np.random.default_rng().permutation(t.size)[:count]] = False
        return mask.reshape(t.shape)


class LnStructured(BasePruningMethod):
    """The `amount` channels along `dim` of smallest L`n` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: Any, n: Any, dim: int = -1) -> None:
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        dim = self.dim % t.ndim
        channels = np.moveaxis(t, dim, 0).reshape(t.shape[dim], -1)
        order = {"fro": 2}.get(self.n, self.n)
        norms = np.linalg.norm(channels, ord=order, axis=1)
        pruned = _smallest(norms, _count(self.amount, t.shape[dim], "ln_structured"))
        mask = np.ones(t.shape[dim], dtype=bool)
        mask[pruned] = False
        shape = [1] * t.ndim
        shape[dim] = t.shape[dim]
        return np.broadcast_to(mask.reshape(shape), t.shape) & default_mask


class CustomFromMask(BasePruningMethod):
    """The given mask (combined with the one already there)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask.numpy().astype(bool)

    def compute_mask(self, t: np.ndarray, default_mask: np.ndarray) -> np.ndarray:
        return default_mask & self.mask.reshape(default_mask.shape)


def identity(module: Module, name: str) -> Module:
    Identity.apply(module, name)
    return module


def l1_unstructured(
    module: Module, name: str, amount: Any, importance_scores: Tensor | None = None
) -> Module:
    L1Unstructured.apply(module, name, amount, importance_scores=importance_scores)
    return module


def random_unstructured(module: Module, name: str, amount: Any) -> Module:
    RandomUnstructured.apply(module, name, amount)
    return module


def ln_structured(
    module: Module, name: str, amount: Any, n: Any, dim: int, importance_scores: Tensor | None = None
) -> Module:
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(
    parameters: Iterable[tuple[Module, str]],
    pruning_method: type,
    importance_scores: dict | None = None,
    **kwargs: Any,
) -> None:
    """One unstructured method over several parameters as one vector (the smallest entries of all)."""
    pairs = list(parameters)
    if pruning_method not in (L1Unstructured, RandomUnstructured):
        raise NotImplementedError(
            "global_unstructured: pruning_method must be L1Unstructured or RandomUnstructured"
        )
    scores, defaults = [], []
    for module, name in pairs:
        given = (importance_scores or {}).get((module, name))
        orig = module._parameters.get(name, module._parameters.get(f"{name}_orig"))
        mask = module._buffers.get(f"{name}_mask")
        scores.append((orig if given is None else given).detach().numpy().reshape(-1))
        defaults.append(
            np.ones(orig.numel(), bool) if mask is None else mask.numpy().reshape(-1).astype(bool)
        )
    flat = _combined(pruning_method(**kwargs), np.concatenate(scores), np.concatenate(defaults))
    start = 0
    for (module, name), s in zip(pairs, scores):
        part = flat[start : start + s.size]
        start += s.size
        orig = module._parameters.get(name, module._parameters.get(f"{name}_orig"))
        CustomFromMask.apply(module, name, from_numpy(part.reshape(tuple(orig.shape))))


def remove(module: Module, name: str) -> Module:
    """The pruned product made the parameter `name` again; `name_orig`, `name_mask` and the hook gone."""
    handles = module.__dict__.get("_pruning", {})
    if name not in handles:
        raise ValueError(
            f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
        )
    handles.pop(name).remove()
    weight = (module._parameters[f"{name}_orig"] * module._buffers[f"{name}_mask"]).detach()
    del module._parameters[f"{name}_orig"], module._buffers[f"{name}_mask"]
    for attr in (f"{name}_orig", f"{name}_mask", name):
        module.__dict__.pop(attr, None)
    module.register_parameter(name, weight.requires_grad_(True))
    return module


def is_pruned(module: Module) -> bool:
    """Whether a parameter of the module or of one of its submodules is pruned."""
    return any(m.__dict__.get("_pruning") for m in module.modules())
