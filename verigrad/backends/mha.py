"""PyTorch's `torch.backends.mha`: whether MultiheadAttention and the Transformer encoder layers take
their inference fast path, whose answers at masked and padded positions verigrad reproduces
(nn/attention.py, nn/transformer_padding.py); turned off, they answer as the ordinary path does."""

from __future__ import annotations

_ENABLED = [True]


def get_fastpath_enabled() -> bool:
    """Whether the fast path may be taken (True unless set otherwise)."""
    return _ENABLED[0]


def set_fastpath_enabled(value: bool) -> None:
    """Let the fast path be taken (True) or never (False)."""
    _ENABLED[0] = bool(value)
