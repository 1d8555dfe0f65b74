"""`verigrad.distributions`, as torch.distributions: so far the `Categorical` distribution that policy
gradient programs use. Another name raises NotImplementedError saying so."""

from __future__ import annotations

from .categorical import Categorical
from .distribution import Distribution

__all__ = ["Categorical", "Distribution"]


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    names = ", ".join(__all__)
    raise NotImplementedError(f"verigrad.distributions.{name} is not supported yet (it has {names})")
