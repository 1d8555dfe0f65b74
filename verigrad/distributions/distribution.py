"""The base of verigrad's distributions, as torch.distributions.Distribution: batch and event shapes,
the shape of a draw and the validation switch."""

from __future__ import annotations

from typing import Any

from ..shapes import Size


class Distribution:
    """A batch of distributions of shape `batch_shape`, each over values of shape `event_shape`."""

    _validate_args = __debug__  # PyTorch's default: arguments and values are checked

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

    def rsample(self, sample_shape: Any = ()) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sample (rsample)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
