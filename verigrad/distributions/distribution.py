"""The base of verigrad's distributions, as torch.distributions.Distribution: batch and event shapes,
the shape of a draw and the validation switch."""

from __future__ import annotations

import copy
from typing import Any

from ..autograd import no_grad
from ..shapes import Size
from ..tensor import Tensor


class Distribution:
    """A batch of distributions of shape `batch_shape`, each over values of shape `event_shape`."""

    _validate_args = __debug__  # PyTorch's default: arguments and values are checked
    has_rsample = False
    has_enumerate_support = False
    support = "Real()"  # PyTorch's constraint, as the text its repr shows
    _param_names: tuple[str, ...] = ()  # the tensors `expand` broadcasts to a new batch shape

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args takes True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape: Any = (), event_shape: Any = (), validate_args: bool | None = None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args

    def _validate_sample(self, value: Any) -> None:
        """PyTorch's first check of a value given to log_prob or cdf while validating (its message names
        log_prob for both): a number or a list raises ValueError."""
        if self._validate_args and not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _extended_shape(self, sample_shape: Any = ()) -> Size:
        """The shape of `sample(sample_shape)`: sample_shape + batch_shape + event_shape."""
        if not isinstance(sample_shape, Size):
            sample_shape = Size(sample_shape)
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        """The same distribution repeated over `batch_shape` (which the current batch shape broadcasts
        to); the parameters are expanded views."""
        new_batch = Size(batch_shape)
        if not self._param_names:
            raise NotImplementedError(f"{type(self).__name__}.expand is not supported")
        new = copy.copy(self)
        for name in self._param_names:
            value = self.__dict__.get(name)
            if value is not None:
                trailing = tuple(value.shape[len(self._batch_shape) :])
                setattr(new, name, value.expand((*new_batch, *trailing)))
        new._batch_shape = new_batch
        return new

    @property
    def stddev(self) -> Any:
        return self.variance.sqrt()

    @property
    def mean(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.mean is not supported")

    @property
    def mode(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.mode is not supported")

    @property
    def variance(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.variance is not supported")

    def rsample(self, sample_shape: Any = ()) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sample (rsample)")

    def sample(self, sample_shape: Any = ()) -> Any:
        """A draw without gradient (rsample's, where the distribution has one)."""
        with no_grad():
            return self.rsample(sample_shape)

    def cdf(self, value: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.cdf is not supported")

    def icdf(self, value: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.icdf is not supported")

    def entropy(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.entropy is not supported")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
