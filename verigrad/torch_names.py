"""PyTorch's names that `verigrad/__init__.py` takes from here in one block (`NAMES`), and the modules it
registers for `import torch.X` spellings: the functions whose operands must be tensors (torch.maximum(x,
2.0) raises PyTorch's TypeError), the sparse layouts factories refuse, torch.cpu / xpu / mps queries,
torch.autograd.gradcheck and torch.autograd.profiler (verigrad.profiler's, imported when first read),
torch.autograd.grad_mode, .graph and .forward_ad (forward-mode AD refused).
Importing this binds the Tensor methods of `tensor_methods_late` (x.svd(), x.prelu(), ...)."""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from collections.abc import Iterator
from typing import Any

from . import autograd, gradcheck, typeinfo
from . import tensor_methods_late as tensor_methods_late  # binds its methods on import
from .functions.tensor_arguments import FUNCTIONS

PACKAGE = __name__.rsplit(".", 1)[0]


def namespace(path: str, doc: str, **names: Any) -> types.ModuleType:
    """A module `verigrad.<path>` holding `names`, registered in sys.modules (so that `import` finds it)."""
    module = types.ModuleType(f"{PACKAGE}.{path}", doc)
    module.__dict__.update(names)
    sys.modules[module.__name__] = module
    return module


# torch.autograd.gradcheck / gradgradcheck, and `from torch.autograd.gradcheck import GradcheckError`
autograd.gradcheck, autograd.gradgradcheck = gradcheck.gradcheck, gradcheck.gradgradcheck  # type: ignore[attr-defined]
sys.modules[f"{PACKAGE}.autograd.gradcheck"] = gradcheck

# torch.autograd.profiler's names: verigrad.profiler's (its profile with the older signature)
_AUTOGRAD_PROFILER = {"profile": "LegacyProfile", "record_function": "record_function",
                      "EventList": "EventList", "FunctionEvent": "FunctionEvent",
                      "FunctionEventAvg": "FunctionEventAvg"}  # fmt: skip


def _autograd_profiler(name: str) -> Any:
    if name not in _AUTOGRAD_PROFILER:
        names = ", ".join(_AUTOGRAD_PROFILER)
        raise AttributeError(f"verigrad.autograd.profiler has no {name!r} (it has {names})")
    return getattr(importlib.import_module(f"{PACKAGE}.profiler"), _AUTOGRAD_PROFILER[name])


autograd.profiler = namespace("autograd.profiler", "PyTorch's torch.autograd.profiler.")  # type: ignore[attr-defined]
autograd.profiler.__getattr__ = _autograd_profiler  # type: ignore[attr-defined]

# torch.autograd.grad_mode, .graph and .forward_ad, as programs import them; what verigrad lacks raises
autograd.grad_mode = namespace(  # type: ignore[attr-defined]
    "autograd.grad_mode", "PyTorch's torch.autograd.grad_mode.", no_grad=autograd.no_grad,
    enable_grad=autograd.enable_grad, set_grad_enabled=autograd.set_grad_enabled,
    inference_mode=autograd.inference_mode,
)  # fmt: skip


def _unsupported(name: str, instead: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{name} is not supported: {instead}")

    refuse.__name__ = refuse.__qualname__ = name.rsplit(".", 1)[-1]
    return refuse


@contextlib.contextmanager
def _save_on_cpu(pin_memory: bool = False, device_type: str = "cuda") -> Iterator[None]:
    """PyTorch's torch.autograd.graph.save_on_cpu: saved tensors are on the CPU already."""
    yield


_HOOKS = "a backward pass reads the tensors its ops saved as they were saved (no pack/unpack hooks)"
autograd.graph = namespace(  # type: ignore[attr-defined]
    "autograd.graph", "PyTorch's torch.autograd.graph.", Node=autograd.Node, save_on_cpu=_save_on_cpu,
    saved_tensors_hooks=_unsupported("torch.autograd.graph.saved_tensors_hooks", _HOOKS),
    register_multi_grad_hook=_unsupported(
        "torch.autograd.graph.register_multi_grad_hook", "register a hook on each tensor (register_hook)"
    ),
)  # fmt: skip
_JVP = "verigrad has no forward-mode AD (torch.autograd.functional.jvp computes Jacobian-vector products)"
autograd.forward_ad = namespace(  # type: ignore[attr-defined]
    "autograd.forward_ad", "PyTorch's torch.autograd.forward_ad: forward-mode AD, which verigrad refuses.",
    **{name: _unsupported(f"torch.autograd.forward_ad.{name}", _JVP)
       for name in ("dual_level", "make_dual", "unpack_dual", "enter_dual_level", "exit_dual_level")},
)  # fmt: skip

NAMES: dict[str, Any] = {
    **FUNCTIONS,  # maximum, minimum, fmax, fmin, atan2, hypot, isclose, dist, logical_and, ...
    # torch.cpu, torch.xpu and torch.mps: the queries device-agnostic programs make (the CPU is the device)
    "cpu": namespace("cpu", "PyTorch's torch.cpu: the CPU is the device.", is_available=lambda: True,
                     device_count=lambda: 1, current_device=lambda: "cpu", synchronize=lambda *_: None),
    "xpu": namespace("xpu", "PyTorch's torch.xpu: none.", is_available=lambda: False, device_count=lambda: 0),
    "mps": namespace("mps", "PyTorch's torch.mps: none.", is_available=lambda: False, device_count=lambda: 0),
    # PyTorch's other layouts, which factories refuse (verigrad's tensors are torch.strided)
    **{name: getattr(typeinfo, name)
       for name in ("sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged")},
}  # fmt: skip
