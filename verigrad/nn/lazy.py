"""PyTorch's lazy layers (LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d,
LazyInstanceNorm1d/2d/3d): the layer without its input size, which the first forward reads from its input
(or load_state_dict from the checkpoint's weight). Then the parameters are made as the layer would make
them, written into the same tensor objects (an optimizer made before holds them), and the module becomes
the layer itself (type(m) is Linear), as PyTorch's."""

from __future__ import annotations

from typing import Any

from ..ir.guards import modules_changed
from ..ops import empty
from ..tensor import Tensor
from . import convolution, linear, normalization
from .module import Module, mark_parameter
from .uninitialized import initialized, mark_uninitialized


def _lazy(base: type, axis: int, size_name: str, from_weight: Any) -> type:
    """The lazy form of `base`, whose first argument (`size_name`) is read from axis `axis` of the input, or
    from a checkpoint's weight (or running mean) by `from_weight(weight, module)`."""

    class Lazy(base):  # type: ignore[misc,valid-type]
        cls_to_become = base

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            Module.__init__(self)
            groups = kwargs.get(
                "groups", args[5] if base.__name__.startswith("Conv") and len(args) > 5 else 1
            )
            template = base(groups if isinstance(groups, int) else 1, *args, **kwargs)
            self.__dict__["_lazy_args"] = (args, kwargs)
            for name, t in template._parameters.items():  # placeholders: the same names, no elements yet
                self.register_parameter(name, None if t is None else _placeholder(t, True))
            for name, t in template._buffers.items():
                persistent = name not in template._non_persistent_buffers_set
                self.register_buffer(name, None if t is None else _placeholder(t, False), persistent)
            for key, value in template.__dict__.items():
                if (
                    key not in self.__dict__
                    and key not in template._parameters
                    and key not in template._buffers
                ):
                    self.__dict__[key] = value
            self.__dict__[size_name] = 0
            self._register_load_state_dict_pre_hook(self._from_checkpoint, with_module=True)

        def has_uninitialized_params(self) -> bool:
            return type(self) is not base

        def initialize_parameters(self, x: Tensor) -> None:
            """Make the parameters for an input like x (PyTorch's name)."""
            self._materialize(x.shape[axis] if x.ndim else 1)

        def _materialize(self, size: int) -> None:
            args, kwargs = self.__dict__.pop("_lazy_args")
            fresh = base(size, *args, **kwargs)
            for table in ("_parameters", "_buffers"):
                mine = getattr(self, table)
                for name, t in getattr(fresh, table).items():
                    if t is not None and mine.get(name) is not None:
                        mine[name].data = t.detach()  # the same object: an optimizer holding it sees it
                        initialized(mine[name])
            self.__dict__.update({k: v for k, v in _settings(fresh).items() if not k.startswith("_")})
            self.__class__ = base
            modules_changed()

        @staticmethod
        def _from_checkpoint(module: Module, state_dict: dict, prefix: str, *_: Any) -> None:
            name = "weight" if module._parameters.get("weight") is not None else "running_mean"
            weight = state_dict.get(prefix + name)
            if type(module) is not base and isinstance(weight, Tensor) and weight.ndim:
                module._materialize(from_weight(weight, module))

        def forward(self, *inputs: Any, **kwargs: Any) -> Any:
            if type(self) is not base:
                self.initialize_parameters(inputs[0])
            return base.forward(self, *inputs, **kwargs)

    Lazy.__name__ = Lazy.__qualname__ = f"Lazy{base.__name__}"
    Lazy.__doc__ = (
        f"{base.__name__} whose {size_name} is read from the first input (PyTorch's Lazy{base.__name__})."
    )
    return Lazy


def _settings(module: Module) -> dict[str, Any]:
    """A module's attributes but its tables, parameters, buffers and mode (kernel_size, stride, ...)."""
    skip = {"_parameters", "_buffers", "_modules", "training", *module._parameters, *module._buffers}
    return {k: v for k, v in module.__dict__.items() if k not in skip}


def _placeholder(t: Tensor, parameter: bool) -> Tensor:
    """An nn.UninitializedParameter (or UninitializedBuffer) of t's dtype."""
    out = mark_uninitialized(empty(0, dtype=t.dtype).requires_grad_(t.requires_grad))
    return mark_parameter(out) if parameter else out


def _columns(w: Tensor, m: Module) -> int:
    return w.shape[1]


def _grouped_columns(w: Tensor, m: Module) -> int:
    return w.shape[1] * m.groups


def _rows(w: Tensor, m: Module) -> int:
    return w.shape[0]


LazyLinear = _lazy(linear.Linear, -1, "in_features", _columns)
LazyConv1d = _lazy(convolution.Conv1d, 1, "in_channels", _grouped_columns)
LazyConv2d = _lazy(convolution.Conv2d, 1, "in_channels", _grouped_columns)
LazyConv3d = _lazy(convolution.Conv3d, 1, "in_channels", _grouped_columns)
LazyConvTranspose1d = _lazy(convolution.ConvTranspose1d, 1, "in_channels", _rows)
LazyConvTranspose2d = _lazy(convolution.ConvTranspose2d, 1, "in_channels", _rows)
LazyConvTranspose3d = _lazy(convolution.ConvTranspose3d, 1, "in_channels", _rows)
LazyBatchNorm1d = _lazy(normalization.BatchNorm1d, 1, "num_features", _rows)
LazyBatchNorm2d = _lazy(normalization.BatchNorm2d, 1, "num_features", _rows)
LazyBatchNorm3d = _lazy(normalization.BatchNorm3d, 1, "num_features", _rows)
LazyInstanceNorm1d = _lazy(normalization.InstanceNorm1d, 1, "num_features", _rows)
LazyInstanceNorm2d = _lazy(normalization.InstanceNorm2d, 1, "num_features", _rows)
LazyInstanceNorm3d = _lazy(normalization.InstanceNorm3d, 1, "num_features", _rows)
