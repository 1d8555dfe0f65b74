"""torch.distributions.MultivariateNormal: Gaussians over the last axis given by exactly one of a
covariance matrix, a precision matrix or a lower-triangular scale (Cholesky factor), with PyTorch's
formulas (triangular solves read only the lower triangle, as PyTorch's solve_triangular)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import linalg
from ..autograd import no_grad
from ..functions.matrices import diagonal, tril
from ..ops import flip
from ..ops.creation import eye, randn
from ..shapes import Size
from ..tensor import Tensor
from .distribution import Distribution
from .utils import as_value, check_param, check_value


def tril_solve(lower: Tensor, rhs: Tensor) -> Tensor:
    """lower^-1 rhs for lower-triangular `lower` (its upper triangle ignored), batched."""
    batch = np.broadcast_shapes(tuple(lower.shape[:-2]), tuple(rhs.shape[:-2]))
    lower = tril(lower).expand((*batch, *lower.shape[-2:]))
    return linalg.solve(lower, rhs.expand((*batch, *rhs.shape[-2:])))


def _half_log_det(scale_tril: Tensor) -> Tensor:
    return diagonal(scale_tril, dim1=-2, dim2=-1).log().sum(-1)


def _mahalanobis(scale_tril: Tensor, diff: Tensor) -> Tensor:
    """diff^T (L L^T)^-1 diff over the last axis."""
    return tril_solve(scale_tril, diff.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1)


def _positive_definite(m: Tensor) -> Tensor:
    with no_grad():
        symmetric = ((m - m.mT).abs() <= 1e-6 * (1 + m.abs())).all(-1).all(-1)
        return symmetric & (linalg.eigvalsh(m) > 0).all(-1)


def _lower_cholesky(m: Tensor) -> Tensor:
    with no_grad():
        return (m == tril(m)).all(-1).all(-1) & (diagonal(m, dim1=-2, dim2=-1) > 0).all(-1)


class MultivariateNormal(Distribution):
    """MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
    validate_args=None). rsample is loc + L eps with eps from verigrad's generator."""

    has_rsample = True
    support = "IndependentConstraint(Real(), 1)"
    _param_names = ("loc", "_scale_tril", "_covariance_matrix", "_precision_matrix")

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(loc, Tensor) or loc.dim() < 1:
            raise ValueError("MultivariateNormal: loc must be at least one-dimensional.")
        given = {"covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix}
        given["scale_tril"] = scale_tril
        named = [(k, v) for k, v in given.items() if v is not None]
        if len(named) != 1:
            raise ValueError(
                "MultivariateNormal: exactly one of covariance_matrix or precision_matrix or scale_tril "
                "may be specified."
            )
        name, matrix = named[0]
        if not isinstance(matrix, Tensor) or matrix.dim() < 2:
            raise ValueError(
                f"MultivariateNormal: {name} must be at least two-dimensional, with optional leading "
                "batch dimensions"
            )
        batch = Size(np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        n = loc.shape[-1]
        self._scale_tril = self._covariance_matrix = self._precision_matrix = None
        setattr(self, f"_{name}", matrix.expand((*batch, -1, -1)))
        self.loc = loc.expand((*batch, -1))
        super().__init__(batch, (n,), validate_args)
        if self._validate_args:
            check_param("MultivariateNormal", "loc", loc, lambda t: ~t.isnan(), self.support)
            if name == "scale_tril":
                check_param("MultivariateNormal", name, matrix, _lower_cholesky, "LowerCholesky()")
            else:
                check_param("MultivariateNormal", name, matrix, _positive_definite, "PositiveDefinite()")
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = linalg.cholesky(matrix)
        else:  # PyTorch's route from the precision to the scale: a Cholesky factor of the flipped matrix
            lf = linalg.cholesky(flip(matrix, (-2, -1)))
            l_inv = flip(lf, (-2, -1)).mT
            self._unbroadcasted_scale_tril = tril_solve(l_inv, eye(n, dtype=matrix.dtype))

    def expand(self, batch_shape: Any, _instance: Any = None) -> MultivariateNormal:
        new = super().expand(batch_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        return new

    def _full(self, matrix: Tensor) -> Tensor:
        return matrix.expand((*self._batch_shape, *self._event_shape, *self._event_shape))

    @property
    def scale_tril(self) -> Tensor:
        if self._scale_tril is None:
            return self._full(self._unbroadcasted_scale_tril)
        return self._scale_tril

    @property
    def covariance_matrix(self) -> Tensor:
        if self._covariance_matrix is None:
            low = self._unbroadcasted_scale_tril
            return self._full(low @ low.mT)
        return self._covariance_matrix

    @property
    def precision_matrix(self) -> Tensor:
        if self._precision_matrix is None:
            # (L L^T)^-1 of the whole L, as PyTorch's cholesky_inverse, whose gradient reaches L's upper
            # triangle too
            low = self._unbroadcasted_scale_tril
            return self._full(linalg.inv(low @ low.mT))
        return self._precision_matrix

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand((*self._batch_shape, *self._event_shape))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        eps = randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value: Any) -> Tensor:
        self._validate_sample(value)
        value = as_value("MultivariateNormal.log_prob", value, self.loc)
        if self._validate_args:
            check_value("MultivariateNormal.log_prob", value, lambda v: ~v.isnan(), self.support)
        m = _mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - _half_log_det(
            self._unbroadcasted_scale_tril
        )

    def entropy(self) -> Tensor:
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + _half_log_det(
            self._unbroadcasted_scale_tril
        )
        return h if len(self._batch_shape) == 0 else h.expand(tuple(self._batch_shape))

    def __repr__(self) -> str:
        shown = "scale_tril" if self._scale_tril is not None else "covariance_matrix"
        if self._precision_matrix is not None:
            shown = "precision_matrix"
        return f"MultivariateNormal(loc: {self.loc.size()}, {shown}: {getattr(self, shown).size()})"


def kl_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    """KL between two multivariate normals (PyTorch's formula)."""
    if p.event_shape != q.event_shape:
        raise ValueError(
            "kl_divergence(MultivariateNormal, MultivariateNormal): the event shapes differ "
            f"({tuple(p.event_shape)} and {tuple(q.event_shape)})"
        )
    n = p.event_shape[0]
    half_term1 = _half_log_det(q._unbroadcasted_scale_tril) - _half_log_det(p._unbroadcasted_scale_tril)
    term2 = tril_solve(q._unbroadcasted_scale_tril, p._unbroadcasted_scale_tril).pow(2).sum((-2, -1))
    term3 = _mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)
