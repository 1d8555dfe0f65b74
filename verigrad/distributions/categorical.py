"""torch.distributions.Categorical: a distribution over the categories 0 .. K-1 of the last axis of
`probs` (non-negative weights, normalised) or `logits` (unnormalised log-probabilities)."""

from __future__ import annotations

import math
from typing import Any

from ..autograd import no_grad
from ..dtypes import i64
from ..functions.distributions import multinomial
from ..functions.rearrange import broadcast_tensors
from ..functions.statistics import logsumexp
from ..ops import softmax
from ..ops.creation import arange, full
from ..shapes import Size
from ..tensor import Tensor
from ..typeinfo import finfo
from .distribution import Distribution


class Categorical(Distribution):
    """Categorical(probs=None, logits=None, validate_args=None), as PyTorch's: exactly one of probs or
    logits (a tensor of at least one axis, categories last); the other is derived on first use."""

    has_enumerate_support = True
    _param_names = ("_probs", "_logits", "_param")

    @property
    def support(self) -> str:
        return f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})"

    def __init__(
        self, probs: Tensor | None = None, logits: Tensor | None = None, validate_args: bool | None = None
    ) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: either `probs` or `logits` must be specified, but not both")
        param = probs if probs is not None else logits
        name = "probs" if probs is not None else "logits"
        if not isinstance(param, Tensor):
            raise TypeError(f"Categorical: {name} must be a Tensor, got {type(param).__name__}")
        if param.dim() < 1:
            raise ValueError(f"Categorical: {name} must have at least one dimension, got a 0-d tensor")
        if not param.dtype.is_floating_point:
            raise TypeError(f"Categorical: {name} must be a floating tensor, got {param.dtype}")
        if probs is not None:
            self._probs: Tensor | None = probs / probs.sum(-1, keepdim=True)
            self._logits: Tensor | None = None
        else:
            self._logits = logits - logsumexp(logits, dim=-1, keepdim=True)
            self._probs = None
        self._param, self._name = param, name
        self._num_events = param.size(-1)
        super().__init__(param.shape[:-1], (), validate_args)
        if self._validate_args:
            self._check_param()

    def _check_param(self) -> None:
        """PyTorch's constraints: probs on the simplex (non-negative, summing to 1), logits not NaN."""
        with no_grad():
            name = self._name
            if name == "probs":
                p = self._probs
                ok = bool(((p >= 0).all(-1) & ((p.sum(-1) - 1).abs() < 1e-6)).all())
                constraint = "Simplex()"
            else:
                ok = not bool(self._param.isnan().any())
                constraint = "IndependentConstraint(Real(), 1)"
        if not ok:
            raise ValueError(
                f"Categorical: expected parameter {name} (Tensor of shape {tuple(self._param.shape)}) "
                f"to satisfy the constraint {constraint}, but found invalid values:\n{self._param}"
            )

    @property
    def probs(self) -> Tensor:
        if self._probs is None:
            self._probs = softmax(self._logits, -1)
        return self._probs

    @property
    def logits(self) -> Tensor:
        if self._logits is None:
            eps = finfo(self._probs.dtype).eps
            self._logits = self._probs.clamp(min=eps, max=1 - eps).log()
        return self._logits

    @property
    def param_shape(self) -> Size:
        return self._param.shape

    @property
    def mean(self) -> Tensor:
        return full(self._extended_shape(), math.nan, dtype=self._param.dtype)

    @property
    def variance(self) -> Tensor:
        return self.mean

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """Categories drawn with verigrad's generator (PyTorch's distribution, not its draws), as i64 of
        shape sample_shape + batch_shape."""
        shape = Size(sample_shape) if not isinstance(sample_shape, Size) else sample_shape
        with no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = multinomial(probs_2d, max(shape.numel(), 1), True).T
            if shape.numel() == 0:
                samples_2d = samples_2d[:0]
            return samples_2d.reshape(self._extended_shape(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        """log P(value) for category indices `value` broadcast against batch_shape."""
        self._validate_sample(value)
        if not isinstance(value, Tensor):
            raise TypeError(f"Categorical.log_prob: value must be a Tensor, got {type(value).__name__}")
        if self._validate_args:
            with no_grad():
                ok = bool(((value % 1 == 0) & (value >= 0) & (value <= self._num_events - 1)).all())
            if not ok:
                raise ValueError(
                    f"Categorical.log_prob: expected value (Tensor of shape {tuple(value.shape)}) "
                    f"to be within the support IntegerInterval(lower_bound=0, "
                    f"upper_bound={self._num_events - 1}) of the distribution, "
                    f"but found invalid values:\n{value}"
                )
        index, log_pmf = broadcast_tensors(value.long().unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, index[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        """-sum p log p over the categories (a category of probability 0 adds 0)."""
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        values = arange(self._num_events, dtype=i64).view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1, *self._batch_shape))
        return values

    def __repr__(self) -> str:
        # PyTorch's: each of probs and logits computed so far, its size (its value if it has one element)
        shown = [(n, t) for n, t in (("probs", self._probs), ("logits", self._logits)) if t is not None]
        args = ", ".join(f"{n}: {t if t.numel() == 1 else t.size()}" for n, t in shown)
        return f"Categorical({args})"


class OfCategorical:
    """What a distribution made of a Categorical (`_categorical`) takes from it: probs, logits and
    param_shape, and `expand` (the Categorical expanded; the result of the distribution's own type, as
    PyTorch's)."""

    _categorical: Categorical
    _batch_shape: Size

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._categorical = self._categorical.expand(batch_shape)
        new._batch_shape = Size(batch_shape)
        return new

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape
