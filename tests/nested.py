"""Nested values compared level by level, as checkpoints hold them: dicts of the same type with the same
keys in order, lists and tuples of the same type and length, and a check of the caller's for the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def assert_nested(got: Any, want: Any, leaf: Callable[[Any, Any, str], None], where: str = "") -> None:
    """Walk `want` and `got` together, calling `leaf(got, want, where)` at each non-container value."""
    if isinstance(want, dict):
        assert type(got) is type(want) and list(got) == list(want), where
        for key in want:
            assert_nested(got[key], want[key], leaf, f"{where}[{key!r}]")
    elif isinstance(want, list | tuple):
        assert type(got) is type(want) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_nested(g, w, leaf, f"{where}[{i}]")
    else:
        leaf(got, want, where)
