"""PyTorch's `out=`: a function's result written into the tensor given (resized as PyTorch resizes it)
and that tensor returned; an out of another dtype than the result's is refused (PyTorch casts the result
for some functions and computes in out's dtype for others: a silent difference either way). `ops/` sits
below the Tensor's in-place methods, so an op hands `out` to the writer registered here
(`_op.OUT_WRITER`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .errors import DTypeError
from .ops import _op
from .tensor import Tensor


def write_out(name: str, compute: Callable[[], Any], out: Any) -> Any:
    """`compute()`'s result written into `out` (a tensor, or a tuple of them for a function of several
    results, as `max(x, dim, out=(values, indices))`); returns `out` (a tuple as the result's type)."""
    several = isinstance(out, (tuple, list))
    outs = tuple(out) if several else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(
                f"{name}: out= takes a tensor (a tuple of them for several results), got {type(o).__name__}"
            )
    result = compute()
    results = tuple(result) if isinstance(result, tuple) else (result,)
    if several != isinstance(result, tuple) or len(results) != len(outs):
        raise TypeError(
            f"{name}: out= takes {len(results)} tensor{'s' if len(results) > 1 else ''}, got {len(outs)}"
        )
    if any(isinstance(t, Tensor) and t.requires_grad for t in (*results, *outs)):
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic differentiation, but one "
            "of the arguments requires grad (as in PyTorch)"
        )
    for r, o in zip(results, outs):
        if r.dtype != o.dtype:  # PyTorch casts for some functions and computes in out's dtype for others
            raise DTypeError(
                f"{name}: out= is {o.dtype.name} where the result is {r.dtype.name}; verigrad writes a "
                f"result into a tensor of its own dtype only (use the tensor returned, .to({o.dtype.name}))"
            )
        if tuple(o.shape) != tuple(r.shape):
            if o.numel() != 0:
                warnings.warn(
                    f"{name}: an output with one or more elements was resized since it had shape "
                    f"{list(o.shape)}, which does not match the required output shape {list(r.shape)}; "
                    "resize it to zero elements first (out.resize_(0)) to silence this (as PyTorch warns)",
                    UserWarning,
                    stacklevel=3,
                )
            o.resize_(tuple(r.shape))
        o.copy_(r)
    if not several:
        return out
    return type(result)(*outs) if hasattr(result, "_fields") else type(out)(outs)


_op.OUT_WRITER.append(write_out)
