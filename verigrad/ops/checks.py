"""`check_index`: integer positions checked against a size, in eager mode and in compiled plans alike.

Functions that take positions (gather, scatter, index_select, embedding, one_hot, the class targets of
cross_entropy and nll_loss) pass them through this op: its result is a copy of the positions (the
entries equal to `ignore`, where given, made 0), and any other entry outside [0, size) raises the
caller's error, naming the function, the value and the size. As an op it is an instruction of a traced
program, so a compiled plan and its replay check the data of every run as an eager call does (the cpu
backend's kernel checks in C and returns an error code, which stops a replay: ir/replay.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import modes
from ..dtypes import DType
from ..errors import DTypeError
from ..shapes import Spec
from ..tensor import Tensor
from ._op import Op, Sample

# what the positions are, and the error an entry out of range raises; "item": x[index]'s positions, in
# [-size, size) (a negative one counted from the end, made positive), `name` the dimension indexed
WHATS = ("index", "target", "class", "item")


def _canon(idx: Spec, size: Any, name: str, what: str = "index", ignore: int | None = None) -> dict:
    if what not in WHATS:
        raise ValueError(f"check_index: what must be one of {', '.join(WHATS)}, got {what!r}")
    if not isinstance(name, str):
        raise TypeError(f"check_index: name must be the checking function's name, got {name!r}")
    return {"size": size, "name": name, "what": what, "ignore": None if ignore is None else int(ignore)}


def _dtype(idx: DType, **_: Any) -> DType:
    if idx.kind != "i":
        raise DTypeError(f"positions must be an integer tensor, got {idx.name}")
    return idx


def out_of_range(values: np.ndarray, size: int, name: str, what: str, ignore: int | None) -> Exception | None:
    """The error for the first entry of `values` outside [0, size) and not `ignore`; None if none is."""
    bad = (values < (-size if what == "item" else 0)) | (values >= size)
    if ignore is not None:
        bad &= values != ignore
    if not bad.any():
        return None
    first = values[bad].flat[0]
    if what == "target":
        return IndexError(f"{name}: target {first} is out of range for {size} classes")
    if what == "class":  # PyTorch's one_hot messages
        if (values[bad] < 0).any():
            return ValueError(f"{name}: Class values must be non-negative.")
        return ValueError(f"{name}: Class values must be smaller than num_classes ({size}).")
    if what == "item":
        return IndexError(f"index {first} is out of range for {name} of size {size}")
    return IndexError(f"{name}: index {first} is out of range for a dimension of size {size}")


def _reference(idx: np.ndarray, size: int, name: str, what: str, ignore: int | None) -> np.ndarray:
    out = np.array(idx, dtype=idx.dtype, order="C")  # a copy: the caller owns each result
    if out.size and (out.min() < 0 or out.max() >= size):
        error = out_of_range(out, size, name, what, ignore)
        if error is not None:
            raise error
    if ignore is not None:
        out[out == ignore] = 0
    if what == "item":
        out[out < 0] += size
    return out


def _samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.integers(0, 5, (4,)),), {"size": 5, "name": "gather"}),
        Sample((rng.integers(0, 3, (2, 3)),), {"size": 3, "name": "one_hot", "what": "class"}),
        Sample(
            (np.array([2, -100, 0, -100]),),
            {"size": 3, "name": "nll_loss", "what": "target", "ignore": -100},
        ),
        Sample((np.array(4),), {"size": 5, "name": "index_select"}),
        Sample((np.array([[-3, 2], [0, -1]]),), {"size": 3, "name": "dimension 0", "what": "item"}),
        Sample((np.zeros((0,), np.int64),), {"size": 0, "name": "embedding"}),
    ]


def checked(idx: Tensor, size: Any, name: str, what: str = "index", ignore: int | None = None) -> Tensor:
    """`check_index(idx, ...)`; in eager mode, where no entry is ignored, the check alone, idx itself (a
    min and a max, without an op call and a copy): the same error. Traced, the op, which a compiled plan
    runs on every call."""
    values = idx.payload
    eager = isinstance(values, np.ndarray) and isinstance(size, int) and modes.current().name == "eager"
    if ignore is not None or not eager or what not in WHATS:
        return check_index(idx, size=size, name=name, what=what, ignore=ignore)
    # one max over the positions read as unsigned: a negative one is larger than any size
    if what == "item":  # [-size, size): idx as it is, whose negative entries x[idx] counts from the end
        outside = values.size and (values.min() < -size or values.max() >= size)
    else:  # one max over the positions read as unsigned: a negative one is larger than any size
        outside = values.size and values.view(f"u{values.itemsize}").max() >= size
    if outside:
        error = out_of_range(values, size, name, what, None)
        if error is not None:
            raise error
    return idx


check_index = Op(
    "check_index",
    shape=lambda idx, **_: idx,
    dtype=_dtype,
    params=_canon,
    reference=_reference,
    samples=_samples,
    differentiable=False,
    doc="A copy of the integer positions idx, each in [0, size) (an entry equal to `ignore` made 0); "
    "any other raises the error of the function `name` (IndexError; one_hot's ValueError).",
)
