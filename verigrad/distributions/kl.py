"""torch.distributions.kl_divergence for the pairs PyTorch registers among verigrad's distributions
(PyTorch's closed forms). Another pair raises NotImplementedError naming it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..ops import digamma, lgamma, where
from ..tensor import Tensor
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Gamma
from .independent import Independent
from .multivariate_normal import MultivariateNormal, kl_mvn
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .simple import _EULER, Exponential, Gumbel, Laplace, Uniform
from .transformed import LogNormal, TransformedDistribution
from .transforms import AffineTransform, Transform
from .utils import softplus, sum_rightmost


def _normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


def _categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = where(q.probs == 0, math.inf, t)
    t = where(p.probs == 0, 0.0, t)
    return t.sum(-1)


def _one_hot(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _categorical(p._categorical, q._categorical)


def _bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = where(p.probs == 0, 0.0, where(q.probs == 0, math.inf, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = where(p.probs == 1, 0.0, where(q.probs == 1, math.inf, t2))
    return t1 + t2


def _uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return where((q.low > p.low) | (q.high < p.high), math.inf, result)


def _exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


def _laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_abs_diff / q.scale + scale_ratio * (-loc_abs_diff / p.scale).exp() - 1


def _gamma(p: Gamma, q: Gamma) -> Tensor:
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


def _beta(p: Beta, q: Beta) -> Tensor:
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sum_p)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sum_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_q - sum_p) * digamma(sum_p)
    return t1 - t2 + t3 + t4 + t5


def _dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    sum_p = p.concentration.sum(-1)
    t1 = lgamma(sum_p) - lgamma(q.concentration.sum(-1))
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


def _gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    ct1, ct2, ct3 = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t3 = (ct2 + lgamma(1 + ct1) - ct3).exp()
    return t1 + ct1 * _EULER + t3 - (1 + _EULER)


def _equal(x: Any, y: Any) -> bool:
    """Equal parameters (numbers or tensors, elementwise), as PyTorch's AffineTransform.__eq__."""
    same = x == y
    return bool(same.all()) if isinstance(same, Tensor) else bool(same)


def _same_transform(a: Transform, b: Transform) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, AffineTransform):
        return _equal(a.loc, b.loc) and _equal(a.scale, b.scale) and a.event_dim == b.event_dim
    return True


def _transformed(p: TransformedDistribution, q: TransformedDistribution) -> Tensor:
    """KL of the bases when both push them through the same transforms (KL is invariant under them)."""
    same = len(p.transforms) == len(q.transforms) and all(map(_same_transform, p.transforms, q.transforms))
    if not same or p.event_shape != q.event_shape:
        raise NotImplementedError(
            "kl_divergence of two TransformedDistributions is supported only for the same transforms and "
            "event shapes"
        )
    return kl_divergence(p.base_dist, q.base_dist)


def _independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            "kl_divergence(Independent, Independent) with different reinterpreted_batch_ndims "
            f"({p.reinterpreted_batch_ndims} and {q.reinterpreted_batch_ndims}) is not supported"
        )
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


_PAIRS: dict[type, Callable[[Any, Any], Tensor]] = {
    Normal: _normal,
    Categorical: _categorical,
    OneHotCategorical: _one_hot,
    Bernoulli: _bernoulli,
    Uniform: _uniform,
    Exponential: _exponential,
    Laplace: _laplace,
    Gamma: _gamma,
    Beta: _beta,
    Dirichlet: _dirichlet,
    Independent: _independent,
    Gumbel: _gumbel,
    TransformedDistribution: _transformed,
    LogNormal: _transformed,
    MultivariateNormal: kl_mvn,
}


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q), batched, for two distributions of one kind among those PyTorch has a closed form for."""
    rule = _PAIRS.get(type(p)) if type(p) is type(q) else None
    if rule is None:
        kinds = ", ".join(f"{k.__name__}-{k.__name__}" for k in _PAIRS)
        raise NotImplementedError(
            f"kl_divergence({type(p).__name__}, {type(q).__name__}) is not supported (verigrad has {kinds})"
        )
    return rule(p, q)
