"""Instance normalisation, as PyTorch's InstanceNorm1d/2d: each sample's channels normalised over their
own positions (see F.instance_norm), optionally scaled and shifted per channel (affine), and with
track_running_stats kept running statistics that eval() uses."""

from __future__ import annotations

from typing import Any

from ..dtypes import f32
from ..errors import ShapeError
from ..ops import ones, zeros
from ..shapes import DimLike
from ..tensor import Tensor, describe
from . import functional as F
from .module import Module


class _InstanceNorm(Module):
    rank = 0  # the input's rank with its batch axis

    def __init__(
        self,
        num_features: DimLike,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        dtype: Any = f32,
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = ones(num_features, dtype=dtype, requires_grad=True) if affine else None
        self.bias = zeros(num_features, dtype=dtype, requires_grad=True) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (self.rank, self.rank - 1):
            raise ShapeError(
                f"{type(self).__name__} takes {self.rank - 1}-D or {self.rank}-D input, got {describe(x)}"
            )
        unbatched = x.ndim == self.rank - 1
        if unbatched:
            x = x.unsqueeze(0)
        stats = (self.running_mean, self.running_var) if self.track_running_stats else (None, None)
        use_input_stats = self.training or not self.track_running_stats
        y = F.instance_norm(x, *stats, self.weight, self.bias, use_input_stats, self.momentum, self.eps)
        return y.squeeze(0) if unbatched else y

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of [N, C, L] (or [C, L])."""

    rank = 3


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of [N, C, H, W] (or [C, H, W])."""

    rank = 4
