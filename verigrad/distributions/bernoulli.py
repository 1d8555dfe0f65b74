"""torch.distributions.Bernoulli: 0/1 outcomes of probability `probs`, or of `logits` (log-odds)."""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from ..autograd import no_grad
from ..functions.distributions import bernoulli
from ..ops import sigmoid, where
from ..shapes import Size
from ..tensor import Tensor
from .distribution import Distribution
from .utils import as_value, bce_with_logits, binary_logits, broadcast_all, check_param, check_value


class Bernoulli(Distribution):
    """Bernoulli(probs=None, logits=None, validate_args=None), as PyTorch's: exactly one of the two; the
    other is derived on first use. sample() draws with verigrad's generator (not PyTorch's draws)."""

    has_enumerate_support = True
    support = "Boolean()"
    _param_names = ("_probs", "_logits")

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Bernoulli: either `probs` or `logits` must be specified, but not both")
        name = "probs" if probs is not None else "logits"
        given = probs if probs is not None else logits
        (param,), numbers = broadcast_all("Bernoulli", **{name: given})
        self._probs: Tensor | None = param if name == "probs" else None
        self._logits: Tensor | None = param if name == "logits" else None
        super().__init__(Size() if numbers or isinstance(given, Number) else param.shape, (), validate_args)
        if self._validate_args:
            if name == "probs":
                check_param(
                    "Bernoulli",
                    "probs",
                    param,
                    lambda p: (p >= 0) & (p <= 1),
                    "Interval(lower_bound=0.0, upper_bound=1.0)",
                )
            else:
                check_param("Bernoulli", "logits", param, lambda x: ~x.isnan(), "Real()")

    @property
    def probs(self) -> Tensor:
        if self._probs is None:
            self._probs = sigmoid(self._logits)
        return self._probs

    @property
    def logits(self) -> Tensor:
        if self._logits is None:
            self._logits = binary_logits(self._probs)
        return self._logits

    @property
    def param_shape(self) -> Size:
        return (self._probs if self._probs is not None else self._logits).shape

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return bernoulli(self.probs.expand(shape))

    def log_prob(self, value: Any) -> Tensor:
        self._validate_sample(value)
        value = as_value("Bernoulli.log_prob", value, self._any())
        if self._validate_args:
            check_value("Bernoulli.log_prob", value, lambda v: (v == 0) | (v == 1), "Boolean()")
        logits, value = self.logits, value.to(self.logits.dtype)
        return -bce_with_logits(logits, value)

    def _any(self) -> Tensor:
        return self._probs if self._probs is not None else self._logits

    def entropy(self) -> Tensor:
        return bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = self._any().new_tensor([0.0, 1.0]).view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1, *self._batch_shape))
        return values

    def __repr__(self) -> str:
        shown = [(n, t) for n, t in (("probs", self._probs), ("logits", self._logits)) if t is not None]
        args = ", ".join(f"{n}: {t if t.numel() == 1 else t.size()}" for n, t in shown)
        return f"Bernoulli({args})"
