"""`verigrad.signal`, as torch.signal: the window functions of `signal.windows`."""

from __future__ import annotations

from . import windows

__all__ = ["windows"]
