"""torch.distributions.OneHotCategorical: a Categorical whose values are one-hot vectors."""

from __future__ import annotations

from typing import Any

from ..ops.creation import eye
from ..tensor import Tensor
from .categorical import Categorical, OfCategorical
from .distribution import Distribution
from .utils import check_value


class OneHotCategorical(OfCategorical, Distribution):
    """OneHotCategorical(probs=None, logits=None, validate_args=None): event_shape is (K,)."""

    has_enumerate_support = True
    support = "OneHot()"

    def __init__(
        self, probs: Tensor | None = None, logits: Tensor | None = None, validate_args: bool | None = None
    ):
        self._categorical = Categorical(probs, logits, validate_args)
        param = self._categorical.param_shape
        super().__init__(param[:-1], param[-1:], validate_args)

    def _one_hot(self, index: Tensor) -> Tensor:
        return eye(self._event_shape[0], dtype=self.probs.dtype)[index]

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        return self._one_hot(self.probs.argmax(-1))

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        return self._one_hot(self._categorical.sample(sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        self._validate_sample(value)
        if self._validate_args:
            check_value(
                "OneHotCategorical.log_prob", value,
                lambda v: ((v == 0) | (v == 1)).all(-1) & (v.sum(-1) == 1), self.support,
            )  # fmt: skip
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = self._event_shape[0]
        values = eye(n, dtype=self.probs.dtype).view((n,) + (1,) * len(self._batch_shape) + (n,))
        if expand:
            values = values.expand((n, *self._batch_shape, n))
        return values

    def __repr__(self) -> str:
        return repr(self._categorical).replace("Categorical", "OneHotCategorical", 1)
