"""torch.distributions.Independent: the rightmost batch axes of a distribution read as event axes
(log_prob and entropy summed over them), as in a diagonal Gaussian policy."""

from __future__ import annotations

from typing import Any

from ..shapes import Size
from ..tensor import Tensor
from .distribution import Distribution
from .utils import sum_rightmost


class Independent(Distribution):
    """Independent(base_distribution, reinterpreted_batch_ndims, validate_args=None)."""

    def __init__(
        self,
        base_distribution: Distribution,
        reinterpreted_batch_ndims: int,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(base_distribution, Distribution):
            raise TypeError(
                "Independent: base_distribution must be a Distribution, got "
                f"{type(base_distribution).__name__}"
            )
        n = reinterpreted_batch_ndims
        batch = tuple(base_distribution.batch_shape)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0 or n > len(batch):
            raise ValueError(
                f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual {n} vs "
                f"{len(batch)}"
            )
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        cut = len(batch) - n
        super().__init__(batch[:cut], batch[cut:] + tuple(base_distribution.event_shape), validate_args)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self) -> bool:  # type: ignore[override]
        return False if self.reinterpreted_batch_ndims > 0 else self.base_dist.has_enumerate_support

    @property
    def support(self) -> str:  # type: ignore[override]
        return f"IndependentConstraint({self.base_dist.support}, {self.reinterpreted_batch_ndims})"

    def expand(self, batch_shape: Any, _instance: Any = None) -> Independent:
        new = object.__new__(Independent)
        new.__dict__.update(self.__dict__)
        n = self.reinterpreted_batch_ndims
        new.base_dist = self.base_dist.expand(tuple(batch_shape) + tuple(self.event_shape[:n]))
        new._batch_shape = Size(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        return self.base_dist.mean

    @property
    def mode(self) -> Tensor:
        return self.base_dist.mode

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Any) -> Tensor:
        self._validate_sample(value)
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self) -> Tensor:
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist}, {self.reinterpreted_batch_ndims})"
