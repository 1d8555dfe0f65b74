"""`nn.DataParallel` (also `nn.parallel.DataParallel`) as PyTorch's on a machine without accelerators:
a wrapper whose calls run the module itself."""

from __future__ import annotations

from typing import Any

from .module import Module


class DataParallel(Module):
    """DataParallel(module, device_ids=None, output_device=None, dim=0): with no accelerator PyTorch keeps
    no device ids and runs `module` on each call, and so does verigrad; the state dict's keys start with
    'module.' as PyTorch's."""

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an nn.Module, got {type(module).__name__}")
        self.module = module
        self.device_ids: list[int] = []
        self.output_device = None
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)
