"""torch.distributions.transforms: the bijections TransformedDistribution pushes a draw through
(ExpTransform, TanhTransform, AffineTransform), each with its inverse and log|det Jacobian|. With
cache_size=1 the inverse of the last output returned is the input itself (no round trip), as PyTorch's."""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from ..tensor import Tensor
from .utils import softplus


class Transform:
    """y = T(x), x = T.inv(y) and log|dy/dx| (summed over `event_dim` trailing axes)."""

    event_dim = 0

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError(f"{type(self).__name__}: cache_size must be 0 or 1, got {cache_size!r}")
        self._cache_size = cache_size
        self._cached: tuple[Any, Any] | None = None

    def __call__(self, x: Tensor) -> Tensor:
        if self._cached is not None and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def inv(self, y: Tensor) -> Tensor:
        if self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ExpTransform(Transform):
    """y = exp(x)."""

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class TanhTransform(Transform):
    """y = tanh(x); log|dy/dx| = 2 (log 2 - x - softplus(-2x)), PyTorch's stable form."""

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.atanh()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AffineTransform(Transform):
    """y = loc + scale x (loc and scale tensors or numbers), over `event_dim` trailing axes."""

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size)
        for name, v in (("loc", loc), ("scale", scale)):
            if not isinstance(v, (Tensor, Number)) or isinstance(v, bool):
                raise TypeError(
                    f"AffineTransform: {name} must be a Tensor or a number, got {type(v).__name__}"
                )
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        shape = x.shape
        if isinstance(self.scale, Number):
            result = x.new_full(tuple(shape), math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self.event_dim:
            result = result.reshape((*result.shape[: result.dim() - self.event_dim], -1)).sum(-1)
            shape = shape[: len(shape) - self.event_dim]
        return result.expand(tuple(shape))
