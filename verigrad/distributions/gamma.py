"""torch.distributions.Gamma, Dirichlet and Beta (PyTorch's formulas). Their draws come from
verigrad's generator by Marsaglia and Tsang's method and carry no gradient: PyTorch's rsample
differentiates the draw implicitly, which verigrad does not reproduce, so rsample raises."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd import no_grad
from ..functions.special import xlogy
from ..ops import digamma, lgamma, stack, where
from ..ops.creation import as_tensor, eye, rand, randn
from ..shapes import Size
from ..tensor import Tensor
from ..typeinfo import finfo
from .distribution import Distribution
from .utils import as_value, broadcast_all, check_param, check_value


def standard_gamma(alpha: Tensor) -> Tensor:
    """Gamma(alpha, 1) draws of alpha's shape from verigrad's generator (Marsaglia-Tsang, with the
    alpha < 1 boost u^(1/alpha)); values are clamped at the dtype's smallest normal, as PyTorch's."""
    with no_grad():
        a = alpha.detach().numpy().astype(np.float64)
        boost = a < 1
        d = np.where(boost, a + 1, a) - 1 / 3
        c = 1 / np.sqrt(9 * d)
        out = np.full(a.shape, np.nan)
        todo = np.ones(a.shape, bool)
        while todo.any():
            x = randn(*a.shape, dtype=alpha.dtype).numpy().astype(np.float64)
            u = rand(*a.shape, dtype=alpha.dtype).numpy().astype(np.float64)
            v = (1 + c * x) ** 3
            with np.errstate(divide="ignore", invalid="ignore"):
                ok = (v > 0) & (np.log(u) < 0.5 * x**2 + d - d * v + d * np.log(np.where(v > 0, v, 1)))
            take = todo & ok
            out[take] = (d * v)[take]
            todo &= ~ok
        u = rand(*a.shape, dtype=alpha.dtype).numpy().astype(np.float64)
        out = np.where(boost, out * u ** (1 / np.where(boost, a, 1)), out)
        tiny = finfo(alpha.dtype).tiny
        return as_tensor(np.maximum(out, tiny), dtype=alpha.dtype)


def _no_rsample(name: str) -> NotImplementedError:
    return NotImplementedError(
        f"{name}.rsample is not supported: PyTorch differentiates its gamma draws implicitly, which verigrad "
        "does not reproduce; use sample() (no gradient)"
    )


class Gamma(Distribution):
    """Gamma(concentration, rate, validate_args=None): density rate^a x^(a-1) exp(-rate x) / Gamma(a)."""

    support = "GreaterThanEq(lower_bound=0.0)"
    _param_names = ("concentration", "rate")

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None) -> None:
        (self.concentration, self.rate), numbers = broadcast_all(
            "Gamma", concentration=concentration, rate=rate
        )
        super().__init__(Size() if numbers else self.rate.shape, (), validate_args)
        if self._validate_args:
            for name, t in (("concentration", self.concentration), ("rate", self.rate)):
                check_param("Gamma", name, t, lambda x: x > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        raise _no_rsample("Gamma")

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
            return value.clamp(min=finfo(value.dtype).tiny)

    def log_prob(self, value: Any) -> Tensor:
        value = as_value("Gamma.log_prob", value, self.rate)
        if self._validate_args:
            check_value("Gamma.log_prob", value, lambda v: v >= 0, self.support)
        a, r = self.concentration, self.rate
        return xlogy(a, r) + xlogy(a - 1, value) - r * value - lgamma(a)

    def entropy(self) -> Tensor:
        a = self.concentration
        return a - self.rate.log() + lgamma(a) + (1.0 - a) * digamma(a)

    def __repr__(self) -> str:
        return f"Gamma(concentration: {self.concentration.size()}, rate: {self.rate.size()})"


class Dirichlet(Distribution):
    """Dirichlet(concentration, validate_args=None): distributions on the simplex of the last axis."""

    support = "Simplex()"
    _param_names = ("concentration",)

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if not isinstance(concentration, Tensor) or concentration.dim() < 1:
            raise ValueError("Dirichlet: `concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args)
        if self._validate_args:
            check_param(
                "Dirichlet", "concentration", concentration, lambda x: x > 0,
                "IndependentConstraint(GreaterThan(lower_bound=0.0), 1)",
            )  # fmt: skip

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        """(a - 1)+ normalised; where every a < 1, the one-hot corner at the largest of them (PyTorch's)."""
        cm1 = (self.concentration - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, True)
        corner = eye(cm1.shape[-1], dtype=mode.dtype)[mode.argmax(-1)]
        return where((self.concentration < 1).all(-1, keepdim=True), corner, mode)

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        raise _no_rsample("Dirichlet")

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            g = standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
            return (g / g.sum(-1, keepdim=True)).clamp(min=finfo(g.dtype).tiny, max=1 - finfo(g.dtype).eps)

    def log_prob(self, value: Any) -> Tensor:
        self._validate_sample(value)
        value = as_value("Dirichlet.log_prob", value, self.concentration)
        if self._validate_args:
            check_value(
                "Dirichlet.log_prob", value,
                lambda v: ((v >= 0).all(-1) & ((v.sum(-1) - 1).abs() < 1e-6)), self.support,
            )  # fmt: skip
        a = self.concentration
        return xlogy(a - 1.0, value).sum(-1) + lgamma(a.sum(-1)) - lgamma(a).sum(-1)

    def entropy(self) -> Tensor:
        a = self.concentration
        k, a0 = a.size(-1), a.sum(-1)
        return lgamma(a).sum(-1) - lgamma(a0) - (k - a0) * digamma(a0) - ((a - 1.0) * digamma(a)).sum(-1)

    def __repr__(self) -> str:
        return f"Dirichlet(concentration: {self.concentration.size()})"


class Beta(Distribution):
    """Beta(concentration1, concentration0, validate_args=None): a two-category Dirichlet's first share."""

    support = "Interval(lower_bound=0.0, upper_bound=1.0)"

    def __init__(self, concentration1: Any, concentration0: Any, validate_args: bool | None = None) -> None:
        (c1, c0), numbers = broadcast_all(
            "Beta", concentration1=concentration1, concentration0=concentration0
        )
        self._dirichlet = Dirichlet(stack([c1, c0], -1), validate_args=validate_args)
        super().__init__(Size() if numbers else c1.shape, (), validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Beta:
        new = object.__new__(Beta)
        new.__dict__.update(self.__dict__)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        new._batch_shape = Size(batch_shape)
        return new

    @property
    def concentration1(self) -> Tensor:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        raise _no_rsample("Beta")

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self._dirichlet.sample(sample_shape)[..., 0]

    def log_prob(self, value: Any) -> Tensor:
        self._validate_sample(value)
        value = as_value("Beta.log_prob", value, self.concentration1)
        if self._validate_args:
            check_value("Beta.log_prob", value, lambda v: (v >= 0) & (v <= 1), self.support)
        return self._dirichlet.log_prob(stack([value, 1.0 - value], -1))

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    def __repr__(self) -> str:
        c1, c0 = self.concentration1.size(), self.concentration0.size()
        return f"Beta(concentration1: {c1}, concentration0: {c0})"
