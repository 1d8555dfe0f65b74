"""torch.distributions.Normal: Gaussians of mean `loc` and standard deviation `scale` (broadcast
together; Python numbers become tensors of the default dtype)."""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from ..autograd import no_grad
from ..functions.rearrange import broadcast_tensors
from ..ops.creation import as_tensor, randn
from ..ops.special import erfinv
from ..ops.unary import erf
from ..settings import get_default_dtype
from ..shapes import Size
from ..tensor import Tensor
from .distribution import Distribution


def _as_tensor(value: Any, like: Any, what: str) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, Number) and not isinstance(value, bool):
        dtype = like.dtype if isinstance(like, Tensor) else get_default_dtype()
        return as_tensor(float(value), dtype=dtype)
    raise TypeError(f"Normal: {what} must be a Tensor or a number, got {type(value).__name__}")


class Normal(Distribution):
    """Normal(loc, scale, validate_args=None), as PyTorch's: `scale` must be positive (checked, as
    PyTorch's default validation does); sample() draws with verigrad's generator (not PyTorch's draws);
    rsample() is loc + eps * scale, differentiable in loc and scale."""

    has_rsample = True
    _param_names = ("loc", "scale")

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        loc_t, scale_t = _as_tensor(loc, scale, "loc"), _as_tensor(scale, loc, "scale")
        self.loc, self.scale = broadcast_tensors(loc_t, scale_t)
        both_numbers = isinstance(loc, Number) and isinstance(scale, Number)
        super().__init__(Size() if both_numbers else self.loc.shape, (), validate_args)
        if self._validate_args:
            with no_grad():
                if bool(self.loc.isnan().any()):
                    raise ValueError(
                        f"Normal: expected parameter loc to satisfy Real(), found NaN in\n{self.loc}"
                    )
                if not bool((self.scale > 0).all()):
                    raise ValueError(
                        "Normal: expected parameter scale to satisfy the constraint "
                        f"GreaterThan(lower_bound=0.0), but found invalid values:\n{self.scale}"
                    )

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = randn(*shape, dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def _check_value(self, value: Any, what: str) -> Tensor:
        self._validate_sample(value)
        value = _as_tensor(value, self.loc, "value")
        if self._validate_args:
            with no_grad():
                if bool(value.isnan().any()):
                    raise ValueError(
                        f"Normal.{what}: expected value to satisfy Real(), found NaN in\n{value}"
                    )
        return value

    def log_prob(self, value: Any) -> Tensor:
        value = self._check_value(value, "log_prob")
        var = self.scale**2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value: Any) -> Tensor:
        value = self._check_value(value, "cdf")
        return 0.5 * (1 + erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.loc, "value")
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    def __repr__(self) -> str:
        return f"Normal(loc: {self.loc.size()}, scale: {self.scale.size()})"
