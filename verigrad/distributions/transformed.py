"""torch.distributions.TransformedDistribution (a base distribution pushed through transforms; SAC's
tanh-squashed Gaussian) and LogNormal (a Normal through exp), with PyTorch's formulas."""

from __future__ import annotations

from typing import Any

from ..autograd import no_grad
from ..shapes import Size
from ..tensor import Tensor
from .distribution import Distribution
from .normal import Normal
from .transforms import ExpTransform, Transform
from .utils import sum_rightmost


class TransformedDistribution(Distribution):
    """TransformedDistribution(base_distribution, transforms, validate_args=None): draws x of the base
    mapped by each transform in turn; log_prob subtracts each log|det Jacobian|."""

    def __init__(self, base_distribution: Distribution, transforms: Any, validate_args: bool | None = None):
        if isinstance(transforms, Transform):
            transforms = [transforms]
        if not isinstance(transforms, (list, tuple)) or not all(isinstance(t, Transform) for t in transforms):
            raise ValueError(
                "TransformedDistribution: transforms must be a Transform or a list of Transforms"
            )
        if not isinstance(base_distribution, Distribution):
            raise TypeError(
                f"TransformedDistribution: base_distribution must be a Distribution, got "
                f"{type(base_distribution).__name__}"
            )
        self.base_dist, self.transforms = base_distribution, list(transforms)
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = max([len(base_distribution.event_shape)] + [t.event_dim for t in self.transforms])
        if event_dim > len(shape):
            raise ValueError(
                f"TransformedDistribution: the base distribution needs at least {event_dim} dimensions, "
                f"got shape {shape}"
            )
        cut = len(shape) - event_dim
        super().__init__(shape[:cut], shape[cut:], validate_args)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    def expand(self, batch_shape: Any, _instance: Any = None) -> TransformedDistribution:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        base_shape = tuple(batch_shape) + tuple(self.event_shape)
        keep = len(base_shape) - len(self.base_dist.event_shape)
        new.base_dist = self.base_dist.expand(base_shape[:keep])
        new._batch_shape = Size(batch_shape)
        return new

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for transform in self.transforms:
                x = transform(x)
            return x

    def log_prob(self, value: Tensor) -> Tensor:
        self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob: Any = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            log_prob = log_prob - sum_rightmost(
                transform.log_abs_det_jacobian(x, y), event_dim - transform.event_dim
            )
            y = x
        return log_prob + sum_rightmost(
            self.base_dist.log_prob(y), event_dim - len(self.base_dist.event_shape)
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class LogNormal(TransformedDistribution):
    """LogNormal(loc, scale, validate_args=None): exp of Normal(loc, scale)."""

    has_rsample = True
    support = "GreaterThan(lower_bound=0.0)"

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        super().__init__(Normal(loc, scale, validate_args=validate_args), ExpTransform(), validate_args)

    @property
    def loc(self) -> Tensor:
        return self.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self) -> Tensor:
        scale2 = self.scale.pow(2)
        return scale2.expm1() * (2 * self.loc + scale2).exp()

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc

    def __repr__(self) -> str:
        return f"LogNormal(loc: {self.loc.size()}, scale: {self.scale.size()})"
