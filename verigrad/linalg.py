"""`verigrad.linalg`, as torch.linalg: the inverse, the determinant and the solution of linear systems
of square matrices, batched over leading axes (the ops of verigrad/ops/linalg.py, differentiable)."""

from __future__ import annotations

from .ops import det, inv, solve

__all__ = ["det", "inv", "solve"]
