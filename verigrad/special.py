"""`verigrad.special`, as torch.special: the special functions under their SciPy-style names."""

from __future__ import annotations

from .functions.pointwise import round as _round
from .functions.special import (
    entr,
    erfcx,
    i0e,
    i1e,
    log_ndtr,
    logit,
    mvlgamma,
    ndtr,
    ndtri,
    polygamma,
    sinc,
    spherical_bessel_j0,
    xlog1py,
    xlogy,
)
from .functions.statistics import logsumexp
from .ops import exp2, expm1, log1p, log_softmax, sigmoid, softmax
from .ops._op import floating_only
from .ops.polynomials import (
    chebyshev_polynomial_t,
    chebyshev_polynomial_u,
    chebyshev_polynomial_v,
    chebyshev_polynomial_w,
    hermite_polynomial_h,
    hermite_polynomial_he,
    laguerre_polynomial_l,
    legendre_polynomial_p,
    shifted_chebyshev_polynomial_t,
    shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w,
)
from .ops.special import digamma, erfc, erfinv, i0, i1, lgamma
from .ops.unary import erf
from .tensor import Tensor

expit = sigmoid
gammaln = lgamma
psi = digamma
multigammaln = mvlgamma
modified_bessel_i0, modified_bessel_i1 = i0, i1  # PyTorch's other names (without a gradient there)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """torch.special.round: torch.round for float tensors; an integer or bool one raises, as PyTorch's
    (whose torch.round takes them)."""
    floating_only(input.dtype, what="special.round")
    return _round(input, decimals=decimals)


__all__ = [
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "multigammaln",
    "mvlgamma",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "sigmoid",
    "sinc",
    "softmax",
    "spherical_bessel_j0",
    "xlog1py",
    "xlogy",
]


from .ops.special_zeta import zeta as zeta  # noqa: E402

__all__.append("zeta")

from .ops.special_bessel import (  # noqa: E402
    airy_ai,
    bessel_j0,
    bessel_j1,
    bessel_y0,
    bessel_y1,
    modified_bessel_k0,
    modified_bessel_k1,
    scaled_modified_bessel_k0,
    scaled_modified_bessel_k1,
)

__all__ += [
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
]

from .functions.tensor_arguments import checked  # noqa: E402

gammainc = checked("igamma", shown="special_gammainc")  # tensors only, as PyTorch's
gammaincc = checked("igammac", shown="special_gammaincc")

__all__ += ["gammainc", "gammaincc"]
