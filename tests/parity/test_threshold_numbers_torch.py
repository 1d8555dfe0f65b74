"""F.threshold's numbers taken in the tensor's dtype, as PyTorch's: a threshold or value the dtype cannot
hold raises, an integer tensor keeps its dtype (its value and threshold truncated), -1 into u8 wraps."""

from __future__ import annotations

import pytest
from test_edges_torch import _check

NAN, INF = float("nan"), float("inf")
CASES = [
    ("int8", 0, 300),
    ("int8", 1000, 5),
    ("int8", 0, 2.5),
    ("int32", -0.5, 9),
    ("int32", 0.9, 9.9),
    ("uint8", 1, -1),
    ("int64", 0, NAN),
    ("float16", 0.0, 1e6),
    ("float32", 0.0, 1e300),
    ("float32", 1e300, 0.0),
    ("float32", 0.1, INF),
    ("float64", 0.1, -2.0),
]


@pytest.mark.parametrize(("dtype", "threshold", "value"), CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("inplace", [False, True])
def test_threshold_numbers_as_pytorchs(dtype: str, threshold: float, value: float, inplace: bool) -> None:
    def call(lib):
        x = lib.tensor([-3, 0, 1, 5], dtype=getattr(lib, dtype))
        if dtype.startswith("float"):
            x = lib.tensor([-3.0, 0.1, 0.10000001, NAN], dtype=getattr(lib, dtype))
        return lib.nn.functional.threshold(x, threshold, value, inplace=inplace)

    _check(call)
