"""What a public-style program hands back to the parity suite: its state dict and gradients in NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np


def state(model: Any) -> dict[str, np.ndarray]:
    """The model's state dict as NumPy copies (what the PyTorch run saves for the verigrad run)."""
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def load(torch: Any, model: Any, saved: dict[str, np.ndarray]) -> None:
    """Load a state saved by `state` into `model` (strictly: every key, no others)."""
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in saved.items()})


def grads(model: Any) -> dict[str, np.ndarray]:
    """Every named parameter's gradient as a NumPy copy (a parameter without one is left out)."""
    return {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters() if p.grad is not None}
