"""PyTorch's keywords for the operands and leading params of the `torch.*` functions: `torch.sum(input=x)`,
`torch.mm(input=a, mat2=b)`, `torch.transpose(x, dim0=0, dim1=1)`. verigrad's functions name them as they
like (`x`, `a`, `axis0`); `accept` wraps one so that PyTorch's names reach the same positions. The ops take
`input=` in `Op.__call__`; Tensor's methods are not wrapped (their first operand is the tensor itself)."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, MutableMapping
from typing import Any

from ..ops._op import OUT_WRITER, refuse_out

# PyTorch's names of a function's leading positional arguments, where they are not ("input", "other")
_TORCH_NAMES: dict[str, tuple[str, ...]] = {
    "addcdiv": ("input", "tensor1", "tensor2"),
    "addcmul": ("input", "tensor1", "tensor2"),
    "addmm": ("input", "mat1", "mat2"),
    "addmv": ("input", "mat", "vec"),
    "addr": ("input", "vec1", "vec2"),
    "baddbmm": ("input", "batch1", "batch2"),
    "addbmm": ("input", "batch1", "batch2"),
    "allclose": ("input", "other", "rtol", "atol", "equal_nan"),
    "bmm": ("input", "mat2"),
    "broadcast_to": ("input", "size"),
    "cdist": ("x1", "x2", "p"),
    "chunk": ("input", "chunks", "dim"),
    "cross": ("input", "other", "dim"),
    "diag": ("input", "diagonal"),
    "diagonal": ("input", "offset", "dim1", "dim2"),
    "diff": ("input", "n", "dim", "prepend", "append"),
    "dot": ("input", "tensor"),
    "flatten": ("input", "start_dim", "end_dim"),
    "ger": ("input", "vec2"),
    "bernoulli": ("input",),
    "histc": ("input", "bins", "min", "max"),
    "index_select": ("input", "dim", "index"),
    "kthvalue": ("input", "k", "dim", "keepdim"),
    "lerp": ("input", "end", "weight"),
    "masked_fill": ("input", "mask", "value"),
    "mm": ("input", "mat2"),
    "moveaxis": ("input", "source", "destination"),
    "movedim": ("input", "source", "destination"),
    "mv": ("input", "vec"),
    "nan_to_num": ("input", "nan", "posinf", "neginf"),
    "outer": ("input", "vec2"),
    "pow": ("input", "exponent"),
    "float_power": ("input", "exponent"),
    "repeat_interleave": ("input", "repeats", "dim"),
    "roll": ("input", "shifts", "dims"),
    "rot90": ("input", "k", "dims"),
    "split": ("tensor", "split_size_or_sections", "dim"),
    "swapaxes": ("input", "axis0", "axis1"),
    "swapdims": ("input", "dim0", "dim1"),
    "take_along_dim": ("input", "indices", "dim"),
    "tensor_split": ("input", "indices_or_sections", "dim"),
    "tile": ("input", "dims"),
    "topk": ("input", "k", "dim", "largest", "sorted"),
    "transpose": ("input", "dim0", "dim1"),
    "unsafe_chunk": ("input", "chunks", "dim"),
    "unsafe_split": ("tensor", "split_size", "dim"),
    "unsqueeze": ("input", "dim"),
    "where": ("condition", "input", "other"),
}
_OPERAND_FIRST = frozenset({"x", "a", "self"})  # the names verigrad gives a function's tensor operand


def _positional(fn: Callable[..., Any]) -> list[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in inspect.signature(fn).parameters.values() if p.kind in kinds]


def accept(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (PyTorch's `torch.<name>`), taking also PyTorch's keywords for its leading positional arguments;
    `fn` itself where those are its own names already."""
    own = _positional(fn)
    torch_names = _TORCH_NAMES.get(name, ("input", "other"))[: len(own)]
    if all(t == o for t, o in zip(torch_names, own)):
        return fn
    keywords = frozenset(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs and not keywords.issuperset(kwargs):  # a keyword of PyTorch's, not fn's own
            if "out" in kwargs and OUT_WRITER:
                out = kwargs.pop("out")
                return OUT_WRITER[0](name, lambda: call(*args, **kwargs), out)
            refuse_out(name, kwargs)
            given = list(args)
            for i in range(len(given), len(torch_names)):
                key = torch_names[i] if torch_names[i] in kwargs else own[i]
                if key not in kwargs:
                    break
                given.append(kwargs.pop(key))
            args = tuple(given)
        return fn(*args, **kwargs)

    return call


def accept_all(namespace: MutableMapping[str, Any], names: list[str]) -> None:
    """Wrap with `accept` the plain functions among `names` in `namespace` (torch's namespace) whose
    first argument is a tensor operand verigrad names otherwise."""
    for name in names:
        fn = namespace.get(name)
        if not isinstance(fn, types.FunctionType):
            continue
        own = _positional(fn)
        if own and (own[0] in _OPERAND_FIRST or name in _TORCH_NAMES):
            namespace[name] = accept(name, fn)
