"""`CheckedBackend(backend)`: a backend's kernels with every call held to its reference at the stated
exactness, for checking a whole program (a compiled training step) kernel by kernel."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ops import REGISTRY
from ..kernel_table import Backend, Exactness
from .cases import dtype_name
from .compare import compare
from .suite import HIDDEN, cannot_overflow, reference_kernel


class CheckedBackend(Backend):
    """Runs `inner`'s kernels, each call held to its reference on the same inputs at the stated
    exactness; what failed is in `failures`, the calls made per (op, dtype) in `calls`, the largest
    difference in ulps seen in `worst_ulps`. A kernel for a fused group (not an op of the registry) is
    held to its group's reference at the exactness it states as `kernel.exactness`; one that states
    none runs unchecked."""

    def __init__(self, inner: Backend, name: str | None = None) -> None:
        super().__init__(name or f"{inner.name}-checked", f"{inner.name}, every kernel call checked")
        self.inner = inner
        self.failures: list[str] = []
        self.calls: dict[tuple[str, str], int] = {}
        self.worst_ulps: dict[tuple[str, str], int] = {}

    def exactness(self, op: str, dtype: str) -> Exactness:
        return self.inner.exactness(op, dtype)

    def reruns(self) -> int:
        return self.inner.reruns()

    def report(self) -> dict[str, list[str]]:
        return self.inner.report()

    def native(self, op: Any, dtype: Any) -> Any:
        kernel = self.inner.native(op, dtype)
        fused = op.is_fused and hasattr(kernel, "exactness")  # a fused group's kernel: its claim
        if kernel is None or (op.name not in REGISTRY and not fused):
            return kernel
        key = (op.name, dtype.name)
        exactness = kernel.exactness if fused else self.inner.exactness(*key)
        reference = op.reference if fused else reference_kernel(op)
        want = dtype.np

        def checked(*arrays: np.ndarray, **params: Any) -> Any:
            with np.errstate(all="ignore"):
                expected = np.asarray(reference(*arrays, **params)).astype(want, copy=False)
                reruns = self.inner.reruns()
                result = kernel(*arrays, **params)
            verdict = compare(np.asarray(result).astype(want, copy=False), expected, exactness)
            if not verdict.message and self.inner.reruns() > reruns and cannot_overflow(arrays):
                verdict.message = HIDDEN
            self.calls[key] = self.calls.get(key, 0) + 1
            if verdict.message:
                inputs = ", ".join(f"{dtype_name(a)}{list(a.shape)}" for a in arrays)
                self.failures.append(f"{op.name} {dtype.name} ({inputs}, {params}): {verdict.message}")
            if verdict.ulps:
                self.worst_ulps[key] = max(self.worst_ulps.get(key, 0), verdict.ulps)
            return result

        return checked
