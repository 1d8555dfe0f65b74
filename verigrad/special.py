"""`verigrad.special`, as torch.special: the special functions under their SciPy-style names."""

from __future__ import annotations

from .functions.special import entr, log_ndtr, logit, mvlgamma, ndtr, polygamma, sinc, xlogy
from .functions.statistics import logsumexp
from .ops import expm1, log_softmax, round, sigmoid, softmax
from .ops.special import digamma, erfc, erfinv, i0, i1, lgamma
from .ops.unary import erf

expit = sigmoid
gammaln = lgamma
psi = digamma
multigammaln = mvlgamma

__all__ = [
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfinv",
    "expit",
    "expm1",
    "gammaln",
    "i0",
    "i1",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "mvlgamma",
    "ndtr",
    "polygamma",
    "psi",
    "round",
    "sigmoid",
    "sinc",
    "softmax",
    "xlogy",
]
