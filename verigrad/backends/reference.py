"""The reference backend: every op runs its NumPy reference. It has no code per op."""

from __future__ import annotations

from ._registry import Backend, add_backend

reference = add_backend(Backend("reference", "NumPy references of every op (the definitions)"))
