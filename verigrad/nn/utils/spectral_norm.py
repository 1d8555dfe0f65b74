"""PyTorch's `torch.nn.utils.spectral_norm` (Miyato et al.): a weight divided by its largest singular
value, estimated by power iteration, one step (or n_power_iterations) each forward in training."""

from __future__ import annotations

from typing import Any

from ...autograd import no_grad
from ...ops import randn
from ...tensor import Tensor
from ..functional import normalize

_TRANSPOSED = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


def _matrix(weight: Tensor, dim: int) -> Tensor:
    """The weight as [size of dim, everything else] (dim moved first)."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape(weight.shape[0], -1)


class _SpectralNorm:
    """The forward pre-hook: `name` = name_orig / sigma, sigma = u . (W v), u and v (buffers) refined by
    power iteration first when the module is training."""

    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def compute_weight(self, module: Any, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        matrix = _matrix(weight, self.dim)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.assign(normalize(matrix.T @ u, dim=0, eps=self.eps))
                    u.assign(normalize(matrix @ v, dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()
        sigma = (u * (matrix @ v)).sum()
        return weight / sigma

    def __call__(self, module: Any, inputs: Any) -> None:
        object.__setattr__(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(
    module: Any, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None
) -> Any:
    """The parameter `name` becomes name_orig, with buffers name_u and name_v (random unit vectors), and
    `name` is name_orig / its spectral norm, computed before each forward. dim: the output axis (1 for
    the transposed convolutions, else 0). Returns the module."""
    hooks = module.__dict__.setdefault("_spectral_norm", {})
    if name in hooks:
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    if dim is None:
        dim = 1 if type(module).__name__ in _TRANSPOSED else 0
    fn = _SpectralNorm(name, n_power_iterations, dim, eps)
    with no_grad():
        rows, cols = _matrix(weight, dim).shape
        u = normalize(randn(rows, dtype=weight.dtype), dim=0, eps=eps)
        v = normalize(randn(cols, dtype=weight.dtype), dim=0, eps=eps)
    module._parameters.pop(name)
    module.register_parameter(name + "_orig", weight)
    object.__setattr__(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    hooks[name] = (module.register_forward_pre_hook(fn), fn)
    return module


def remove_spectral_norm(module: Any, name: str = "weight") -> Any:
    """Undo spectral_norm: `name` is a parameter again, with the value name_orig / sigma has now."""
    found = module.__dict__.get("_spectral_norm", {}).pop(name, None)
    if found is None:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    handle, fn = found
    handle.remove()
    with no_grad():
        weight = fn.compute_weight(module, do_power_iteration=False).detach()
    for suffix in ("_u", "_v"):
        module._buffers.pop(name + suffix, None)
    module._parameters.pop(name + "_orig", None)
    module.__dict__.pop(name, None)
    module.register_parameter(name, weight.requires_grad_(True))
    return module
