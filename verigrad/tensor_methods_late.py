"""Tensor's methods that call functions of later layers than `tensor_methods` (linalg's older torch.*
decompositions, nn.functional's activations, nn.UninitializedParameter's materialize), bound when
`verigrad` is imported and their modules imported at their first call (linalg and nn are not read at
start-up); and the queries of what a strided CPU tensor is not (sparse, quantized, nested, in shared
memory)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .tensor import Tensor


def _later(module: str, name: str, method: str | None = None) -> Callable[..., Any]:
    """The method calling `module`'s function `name` (relative to verigrad), imported at the first call."""

    def call(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module, __package__), name)(self, *args, **kwargs)

    call.__name__ = call.__qualname__ = method or name
    call.__doc__ = f"torch.Tensor.{method or name}: verigrad{module}.{name}(self, ...)."
    return call


def to_dense(self: Tensor, dtype: Any = None, *, masked_grad: bool | None = None) -> Tensor:
    """A strided tensor is dense already: itself (cast to `dtype` if given), as PyTorch's."""
    return self if dtype is None else self.to(dtype)


def share_memory_(self: Tensor) -> Tensor:
    """Itself: verigrad's processes share no tensors (torch.multiprocessing pickles them by value)."""
    return self


def _removed(name: str, instead: str) -> Callable[..., Any]:
    """A method PyTorch removed (it raises there too): RuntimeError naming what replaced it."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"This function was deprecated since version 1.9 and is now removed. `torch.{name}` is "
            f"deprecated in favor of `torch.linalg.{instead}` (as in PyTorch)"
        )

    method.__doc__ = f"Removed from PyTorch: use torch.linalg.{instead}."
    return method


METHODS: dict[str, Callable[..., Any]] = {
    "svd": _later(".linalg", "legacy_svd", "svd"),
    "qr": _later(".linalg", "legacy_qr", "qr"),
    "cholesky": _later(".linalg", "legacy_cholesky", "cholesky"),
    "pinverse": _later(".linalg", "pinverse"),
    "lu": _later(".functions.solvers", "legacy_lu", "lu"),
    # X with A X = self for A given as (LU_data, LU_pivots) from lu()
    "lu_solve": _later(".functions.solvers", "legacy_lu_solve", "lu_solve"),
    "hardshrink": _later(".nn.functional.activations", "hardshrink"),
    "prelu": _later(".nn.functional.activations", "prelu"),
    "to_dense": to_dense,
    "share_memory_": share_memory_,
    "is_shared": lambda self: False,
    "materialize": _later(".nn.uninitialized", "materialize"),  # nn.UninitializedParameter's
    "lstsq": _removed("lstsq", "lstsq"),
    "solve": _removed("solve", "solve"),
    "symeig": _removed("symeig", "eigh"),
    "eig": _removed("eig", "eig"),
}
FALSE = ("is_sparse", "is_sparse_csr", "is_quantized", "is_nested", "is_mkldnn", "is_xpu", "is_ipu",
         "is_mtia", "is_maia", "is_vulkan", "is_xla")  # fmt: skip


def bind(cls: type = Tensor) -> None:
    """Set the methods above on `cls`, and the properties that are False for every verigrad tensor."""
    for name, method in METHODS.items():
        setattr(cls, name, method)
    never = property(lambda self: False, doc="False: verigrad's tensors are strided CPU ones.")
    for name in FALSE:
        setattr(cls, name, never)


bind()
