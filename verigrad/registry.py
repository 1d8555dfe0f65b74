"""Tables filled at import time: every op by name, and the helper functions Tensor methods call.

`Op` records add themselves to OPS; the ops package adds the functions that are not ops (indexing,
in-place assignment, backward) to FUNCS. Tensor methods look both up when they run, so `tensor.py`
needs no import of the ops.
"""

from __future__ import annotations

from typing import Any

OPS: dict[str, Any] = {}
FUNCS: dict[str, Any] = {}
