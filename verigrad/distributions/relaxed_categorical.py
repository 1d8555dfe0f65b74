"""torch.distributions.RelaxedOneHotCategorical (the Gumbel-softmax, or Concrete, distribution) and
ExpRelaxedCategorical (its logarithm), with PyTorch's formulas; rsample is differentiable."""

from __future__ import annotations

from typing import Any

from ..functions.rearrange import broadcast_tensors
from ..functions.statistics import logsumexp
from ..ops import lgamma
from ..ops.creation import rand
from ..tensor import Tensor
from .categorical import Categorical, OfCategorical
from .distribution import Distribution
from .transformed import TransformedDistribution
from .transforms import ExpTransform
from .utils import as_value, check_param, clamp_probs


class ExpRelaxedCategorical(OfCategorical, Distribution):
    """ExpRelaxedCategorical(temperature, probs=None, logits=None, validate_args=None): the log of a
    relaxed one-hot draw, softmax((logits + Gumbel noise) / temperature) in log space."""

    has_rsample = True
    support = "IndependentConstraint(Real(), 1)"

    def __init__(
        self,
        temperature: Any,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: Any = None,
    ) -> None:
        self._categorical = Categorical(probs, logits, validate_args)
        self.temperature = as_value("ExpRelaxedCategorical", temperature, self._categorical._param)
        super().__init__(
            self._categorical.param_shape[:-1], self._categorical.param_shape[-1:], validate_args
        )
        if self._validate_args:
            check_param(
                "ExpRelaxedCategorical", "temperature", self.temperature, lambda t: t > 0, "Positive()"
            )

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        uniforms = clamp_probs(rand(*self._extended_shape(sample_shape), dtype=self.logits.dtype))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - logsumexp(scores, dim=-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        self._validate_sample(value)
        k = self._categorical._num_events
        logits, value = broadcast_tensors(
            self.logits, as_value("ExpRelaxedCategorical.log_prob", value, self.logits)
        )
        log_scale = lgamma(self.temperature * 0 + float(k)) - self.temperature.log() * (-(k - 1))
        score = logits - value * self.temperature
        score = (score - logsumexp(score, dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """RelaxedOneHotCategorical(temperature, probs=None, logits=None, validate_args=None): points of the
    simplex that approach one-hot vectors as temperature falls to 0."""

    has_rsample = True
    support = "Simplex()"

    def __init__(
        self,
        temperature: Any,
        probs: Tensor | None = None,
        logits: Tensor | None = None,
        validate_args: Any = None,
    ) -> None:
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args)

    @property
    def temperature(self) -> Tensor:
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        return self.base_dist.probs
