"""Dropout, as in `torch.nn.functional`: of elements (dropout, alpha_dropout) or of whole channels
(dropout1d, dropout2d, dropout3d, feature_alpha_dropout)."""

from __future__ import annotations

import warnings

from ... import ops
from ...errors import ShapeError
from ...ops.creation import Generator, _seed
from ...shapes import shape_text
from ...tensor import Tensor
from .activations import _inplace


def dropout(
    input: Tensor,
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Zero elements with probability p and scale the rest by 1/(1-p); the identity when not training;
    `inplace` as PyTorch's (the result written into `input`)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    return _inplace(input, ops.dropout(input, p=p, seed=_seed(generator)), inplace)


def _feature_dropout(input: Tensor, p: float, training: bool, generator: Generator | None) -> Tensor:
    """PyTorch's feature dropout: one draw per (axis 0, axis 1) pair, zeroed with probability p, the
    rest scaled by 1/(1-p)."""
    if not training or p == 0.0:
        return dropout(input, p, training)  # checks p
    return input * dropout(ops.ones(*_channels(input), dtype=input.dtype), p, generator=generator)


def _channels(input: Tensor) -> tuple:
    """The shape of one draw per (axis 0, axis 1) pair of `input`: its first two sizes, then ones."""
    return (*input.shape[:2], *([1] * (input.ndim - 2)))


def _unbatched(input: Tensor, p: float, training: bool, generator: Generator | None) -> Tensor:
    """Feature dropout of an input without its batch axis: as a batch of one (channels on axis 0)."""
    return _feature_dropout(input.unsqueeze(0), p, training, generator).squeeze(0)


def _deprecated_rank(name: str, rank: int, spatial: str, ranks: str) -> None:
    warnings.warn(
        f"{name}: Received a {rank}-D input to {name}, which is deprecated and will result in an error in "
        f"a future release. To retain the behavior and silence this warning, please use dropout instead. "
        f"Note that {name} exists to provide channel-wise dropout on inputs with {spatial} spatial "
        f"dimensions, a channel dimension, and an optional batch dimension (i.e. {ranks} inputs).",
        stacklevel=3,
    )


def dropout1d(
    input: Tensor,
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Zero whole channels of [N, C, L] (or [C, L]) with probability p, scaling the rest by 1/(1-p)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d "
            "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
            "dimension, and an optional batch dimension (i.e. 2D or 3D inputs)."
        )
    if input.ndim == 2:
        return _inplace(input, _unbatched(input, p, training, generator), inplace)
    return _inplace(input, _feature_dropout(input, p, training, generator), inplace)


def dropout2d(
    input: Tensor,
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Zero whole channels of [N, C, H, W] with probability p, scaling the rest by 1/(1-p); the identity
    when not training; `inplace` as PyTorch's. As PyTorch's, a 3-D input is [N, C, L] (1-D channels,
    with its warning) and other ranks a deprecated feature dropout over axes 0 and 1."""
    if input.ndim not in (3, 4):
        _deprecated_rank("dropout2d", input.ndim, "2", "3D or 4D")
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
            "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
            "will change in a future release to interpret the input as one without a batch dimension, i.e. "
            "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
            "dropout1d instead.",
            stacklevel=2,
        )
    return _inplace(input, _feature_dropout(input, p, training, generator), inplace)


def dropout3d(
    input: Tensor,
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Zero whole channels of [N, C, D, H, W] (or [C, D, H, W]) with probability p, scaling the rest; as
    PyTorch's, another rank warns and is taken as unbatched."""
    if input.ndim not in (4, 5):
        _deprecated_rank("dropout3d", input.ndim, "3", "4D or 5D")
    if input.ndim != 5:
        return _inplace(input, _unbatched(input, p, training, generator), inplace)
    return _inplace(input, _feature_dropout(input, p, training, generator), inplace)


_SELU_SATURATION = 1.7580993408473766  # -scale * alpha of SELU: where a dropped unit is set


def alpha_dropout(
    input: Tensor,
    p: float = 0.5,
    training: bool = False,
    inplace: bool = False,
    generator: Generator | None = None,
) -> Tensor:
    """SELU's dropout, as PyTorch's: a dropped element is set to SELU's saturation value and the result
    is scaled and shifted so that a standard normal input keeps mean 0 and variance 1; the identity when
    not training."""
    return _alpha(input, p, training, inplace, generator, tuple(input.shape))


def feature_alpha_dropout(
    input: Tensor,
    p: float = 0.5,
    training: bool = False,
    inplace: bool = False,
    generator: Generator | None = None,
) -> Tensor:
    """alpha_dropout of whole channels ([N, C, ...]: one draw per channel), as PyTorch's; outside
    training or with p = 0 the input itself, with p = 1 zeros: these of any shape."""
    if input.ndim < 2 and training and 0.0 < p < 1.0:  # p = 0 and p = 1 need no draw
        raise ShapeError(
            f"feature_alpha_dropout: Feature dropout requires at least 2 dimensions in the input, "
            f"got {shape_text(input.shape)}"
        )
    return _alpha(input, p, training, inplace, generator, _channels(input))


def _alpha(
    input: Tensor, p: float, training: bool, inplace: bool, generator: Generator | None, mask: tuple
) -> Tensor:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _inplace(input, input * 0.0, inplace)
    keep = ops.dropout(ops.ones(*mask, dtype=input.dtype), p=p, seed=_seed(generator)) * (1.0 - p)
    a = 1.0 / ((_SELU_SATURATION**2 * p + 1) * (1 - p)) ** 0.5
    shift = (keep - 1.0) * (_SELU_SATURATION * a) + _SELU_SATURATION * a * p
    return _inplace(input, input * (keep * a) + shift, inplace)
