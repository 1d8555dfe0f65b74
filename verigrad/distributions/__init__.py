"""`verigrad.distributions`, as torch.distributions: the distributions policy-gradient, SAC and VAE
programs use, with PyTorch's formulas, argument checks and shapes, and kl_divergence for the pairs
PyTorch registers. Draws come from verigrad's generator: the same seed does not give PyTorch's numbers.
Another name raises NotImplementedError saying so."""

from __future__ import annotations

from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .gamma import Beta, Dirichlet, Gamma
from .independent import Independent
from .kl import kl_divergence
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .relaxed_categorical import RelaxedOneHotCategorical
from .simple import Exponential, Gumbel, Laplace, Uniform
from .transformed import LogNormal, TransformedDistribution
from .transforms import AffineTransform, ExpTransform, TanhTransform, Transform

__all__ = [
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Categorical",
    "Dirichlet",
    "Distribution",
    "ExpTransform",
    "Exponential",
    "Gamma",
    "Gumbel",
    "Independent",
    "Laplace",
    "LogNormal",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "RelaxedOneHotCategorical",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "kl_divergence",
]


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    names = ", ".join(__all__)
    # AttributeError, as for any missing name: hasattr() and module scanners (TorchDynamo) rely on it
    raise AttributeError(f"verigrad.distributions.{name} is not supported yet (it has {names})")
