"""torch.distributions' one-parameter-pair continuous distributions with closed forms: Uniform,
Exponential, Laplace and Gumbel (PyTorch's formulas). rsample transforms a draw of verigrad's generator
(the same seed does not give PyTorch's numbers), differentiably in the parameters."""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from ..ops.creation import rand
from ..shapes import Size
from ..tensor import Tensor
from ..typeinfo import finfo
from .distribution import Distribution
from .utils import as_value, broadcast_all, check_param, check_value


def _batch(given: tuple[Any, ...], param: Tensor) -> Size:
    return Size() if all(isinstance(g, Number) for g in given) else param.shape


class Uniform(Distribution):
    """Uniform(low, high, validate_args=None): the half-open interval [low, high); low < high is checked."""

    has_rsample = True
    _param_names = ("low", "high")

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        (self.low, self.high), _ = broadcast_all("Uniform", low=low, high=high)
        super().__init__(_batch((low, high), self.low), (), validate_args)
        if self._validate_args:
            check_param("Uniform", "low", self.low, lambda t: t < self.high, "LessThan(upper_bound=high)")

    @property
    def support(self) -> str:
        return f"Interval(lower_bound={self.low}, upper_bound={self.high})"

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return math.nan * self.high

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        u = rand(*self._extended_shape(sample_shape), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def _value(self, value: Any, what: str) -> Tensor:
        self._validate_sample(value)
        value = as_value(f"Uniform.{what}", value, self.low)
        if self._validate_args:
            check_value(f"Uniform.{what}", value, lambda v: (v >= self.low) & (v < self.high), "Interval")
        return value

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value, "log_prob")
        lb = (self.low <= value).to(self.low.dtype)
        ub = (self.high > value).to(self.low.dtype)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value: Any) -> Tensor:
        value = self._value(value, "cdf")
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value: Any) -> Tensor:
        value = as_value("Uniform.icdf", value, self.low)
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return (self.high - self.low).log()

    def __repr__(self) -> str:
        return f"Uniform(low: {self.low.size()}, high: {self.high.size()})"


class Exponential(Distribution):
    """Exponential(rate, validate_args=None): density rate * exp(-rate x) on x >= 0; rate > 0 checked."""

    has_rsample = True
    support = "GreaterThanEq(lower_bound=0.0)"
    _param_names = ("rate",)

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,), _ = broadcast_all("Exponential", rate=rate)
        super().__init__(_batch((rate,), self.rate), (), validate_args)
        if self._validate_args:
            check_param("Exponential", "rate", self.rate, lambda t: t > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return 0 * self.rate

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        u = rand(*self._extended_shape(sample_shape), dtype=self.rate.dtype)
        return -(-u).log1p() / self.rate  # a standard exponential draw, -log(1 - u), scaled

    def _value(self, value: Any, what: str) -> Tensor:
        self._validate_sample(value)
        value = as_value(f"Exponential.{what}", value, self.rate)
        if self._validate_args:
            check_value(f"Exponential.{what}", value, lambda v: v >= 0, self.support)
        return value

    def log_prob(self, value: Any) -> Tensor:
        value = self._value(value, "log_prob")
        return self.rate.log() - self.rate * value

    def cdf(self, value: Any) -> Tensor:
        value = self._value(value, "cdf")
        return 1 - (-self.rate * value).exp()

    def icdf(self, value: Any) -> Tensor:
        value = as_value("Exponential.icdf", value, self.rate)
        return -(-value).log1p() / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - self.rate.log()

    def __repr__(self) -> str:
        return f"Exponential(rate: {self.rate if self.rate.numel() == 1 else self.rate.size()})"


class Laplace(Distribution):
    """Laplace(loc, scale, validate_args=None): density exp(-|x - loc| / scale) / (2 scale)."""

    has_rsample = True
    _param_names = ("loc", "scale")

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        (self.loc, self.scale), _ = broadcast_all("Laplace", loc=loc, scale=scale)
        super().__init__(_batch((loc, scale), self.loc), (), validate_args)
        if self._validate_args:
            check_param("Laplace", "loc", self.loc, lambda t: ~t.isnan(), "Real()")
            check_param("Laplace", "scale", self.scale, lambda t: t > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return 2**0.5 * self.scale

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        # PyTorch's: u uniform on [eps - 1, 1), loc - scale sign(u) log(1 - |u|)
        eps = finfo(self.loc.dtype).eps
        u = rand(*self._extended_shape(sample_shape), dtype=self.loc.dtype) * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value: Any) -> Tensor:
        self._validate_sample(value)
        value = as_value("Laplace.log_prob", value, self.loc)
        if self._validate_args:
            check_value("Laplace.log_prob", value, lambda v: ~v.isnan(), "Real()")
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value: Any) -> Tensor:
        self._validate_sample(value)
        value = as_value("Laplace.cdf", value, self.loc)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value: Any) -> Tensor:
        value = as_value("Laplace.icdf", value, self.loc)
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self) -> Tensor:
        return 1 + (2 * self.scale).log()

    def __repr__(self) -> str:
        return f"Laplace(loc: {self.loc.size()}, scale: {self.scale.size()})"


class Gumbel(Distribution):
    """Gumbel(loc, scale, validate_args=None): density exp(-(z + exp(-z))) / scale with z = (x - loc) / scale.
    rsample is PyTorch's chain: u uniform on [tiny, 1 - eps), then loc - scale log(-log u)."""

    has_rsample = True
    _param_names = ("loc", "scale")

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        (self.loc, self.scale), _ = broadcast_all("Gumbel", loc=loc, scale=scale)
        super().__init__(_batch((loc, scale), self.loc), (), validate_args)
        if self._validate_args:
            check_param("Gumbel", "loc", self.loc, lambda t: ~t.isnan(), "Real()")
            check_param("Gumbel", "scale", self.scale, lambda t: t > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * _EULER

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        info = finfo(self.loc.dtype)
        u = info.tiny + rand(*self._extended_shape(sample_shape), dtype=self.loc.dtype) * (
            1 - info.eps - info.tiny
        )
        return self.loc + (-self.scale) * (-u.log()).log()

    def log_prob(self, value: Any) -> Tensor:
        self._validate_sample(value)
        value = as_value("Gumbel.log_prob", value, self.loc)
        if self._validate_args:
            check_value("Gumbel.log_prob", value, lambda v: ~v.isnan(), "Real()")
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value: Any) -> Tensor:
        value = as_value("Gumbel.cdf", value, self.loc)
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value: Any) -> Tensor:
        value = as_value("Gumbel.icdf", value, self.loc)
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + _EULER)

    def __repr__(self) -> str:
        return f"Gumbel(loc: {self.loc.size()}, scale: {self.scale.size()})"


_EULER = 0.57721566490153286060  # the Euler-Mascheroni constant
