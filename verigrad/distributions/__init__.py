"""`verigrad.distributions`, as torch.distributions: so far the `Categorical` and `Normal` distributions
that policy-gradient programs and VAEs use, and kl_divergence between two of a kind. Another name raises
NotImplementedError saying so."""

from __future__ import annotations

from .categorical import Categorical
from .distribution import Distribution
from .kl import kl_divergence
from .normal import Normal

__all__ = ["Categorical", "Distribution", "Normal", "kl_divergence"]


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    names = ", ".join(__all__)
    raise NotImplementedError(f"verigrad.distributions.{name} is not supported yet (it has {names})")
