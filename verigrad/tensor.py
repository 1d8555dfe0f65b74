"""`Tensor`: a spec, a payload, autograd slots; its operators and methods are bound in `tensor_methods.py`.

The payload (`Tensor.payload`) is what the current mode made: a NumPy array in eager mode (possibly a
strided view), None in abstract mode, an IR value when tracing; `Tensor.data` is PyTorch's, a tensor
sharing it. This module holds what needs no op; the operators and the methods that run ops are bound
from the op modules in one table, `tensor_methods.py`, so the ops can import this module and this
module imports none of them.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import settings
from .devices import CPU, as_device, device, is_device, no_device
from .dtypes import DType, as_dtype, bf16, bool_, f16, f32, f64, from_numpy_dtype, i32, i64, u8
from .shapes import Dim, DimLike, Size, Spec, plain_int, shape_text

Axis = int | Sequence[int] | None
_NONE: Any = object()  # an argument not given


class _Slots:
    """Tensor's memory: its slots (vg_eager writes them by offset); `Tensor` puts PyTorch's checks in front of
    two of them, `grad` and `requires_grad`, as properties over these."""

    # `_view` and `_views`, unset on most tensors: how a view made without history was made, and the views
    # made so of this tensor (weak references), which a recorded in-place write gives a history (inplace.py)
    __slots__ = (
        "__weakref__",
        "_hooks",
        "_node",
        "_view",
        "_views",
        "grad",
        "payload",
        "requires_grad",
        "spec",
    )


_GRAD, _REQUIRES_GRAD = _Slots.__dict__["grad"], _Slots.__dict__["requires_grad"]
# unchecked, without a warning: autograd's own reads and writes
grad_of, set_grad, set_requires_grad = _GRAD.__get__, _GRAD.__set__, _REQUIRES_GRAD.__set__


class Tensor(_Slots):
    """An n-dimensional array with a (possibly symbolic) shape, a dtype and optional gradient."""

    __slots__ = ()
    __array_priority__ = 1000  # NumPy defers `ndarray + Tensor` to Tensor.__radd__

    def __getstate__(self) -> Any:
        """The slots (for pickle and copy; read unchecked: a non-leaf's `grad` warns) without the history
        and the record of views: a copy is a leaf (requiring grad as this tensor), and no view."""
        slots = {}
        for name in _Slots.__slots__[1:]:
            try:
                slots[name] = _Slots.__dict__[name].__get__(self)
            except AttributeError:  # an unset slot
                continue
        for name in ("_node", "_view", "_views"):
            slots.pop(name, None)
        return None, slots

    def __deepcopy__(self, memo: dict) -> Tensor:
        """A copy of a leaf (its values, grad and requires_grad); a non-leaf raises, as PyTorch's."""
        if self._node is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at "
                "the moment."
            )
        copied = memo[id(self)] = type(self).__new__(type(self))
        copied.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return copied

    def __setstate__(self, state: Any) -> None:
        """The slots as `__getstate__` gave them, unchecked (a copy's `grad` comes before its spec)."""
        slots = {"_node": None, "_hooks": None, "grad": None, "requires_grad": False}
        slots.update(state[1] if isinstance(state, tuple) else state or {})
        for name, value in slots.items():
            _Slots.__dict__[name].__set__(self, value)

    def __init__(self, spec: Any = _NONE, data: Any = _NONE, *sizes: int, requires_grad: bool = False):
        if not isinstance(spec, Spec):  # PyTorch's legacy constructor: Tensor([1, 2]), Tensor(2, 3)
            spec, data = _legacy_payload(f32, tuple(a for a in (spec, data, *sizes) if a is not _NONE))
        self.spec = spec
        self.payload = data
        set_grad(self, None)
        self._node: Any = None  # the autograd record of the op that made this tensor
        self._hooks: list | None = None  # register_hook's functions
        set_requires_grad(self, False)
        if requires_grad:
            self.requires_grad_(True)

    # description -------------------------------------------------------------------------------
    @property
    def shape(self) -> Size | tuple[DimLike, ...]:
        """The shape: a `Size` (PyTorch's `torch.Size`), or a tuple holding `Dim`s when it is symbolic."""
        return self.spec.size

    @property
    def dtype(self) -> DType:
        return self.spec.dtype

    @property
    def ndim(self) -> int:
        return len(self.spec.shape)

    def dim(self) -> int:
        return self.ndim

    ndimension = dim

    def size(self, axis: int | None = None, *, dim: int | None = None) -> Any:
        """The shape (a `Size`) or, given `dim`, that dimension's size."""
        if dim is not None:
            if axis is not None:
                raise TypeError("size() takes dim once (as the argument or as dim=), not both")
            axis = dim
        if axis is None:
            return self.spec.size
        axis = plain_int(axis)
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"size(dim): dim must be an int, not {type(axis).__name__}")
        shape = self.spec.size
        if not -len(shape) <= axis < len(shape):
            raise IndexError(
                f"size({axis}): dimension out of range for a tensor of {len(shape)} dimensions "
                f"(expected one in [{-len(shape)}, {len(shape) - 1}])"
            )
        return shape[axis]

    def nelement(self) -> DimLike:
        return self.numel()

    def numel(self) -> DimLike:
        n: DimLike = 1
        for d in self.spec.size:  # ints, as Tensor.shape shows them
            n = n * d
        return n

    def __len__(self) -> int:
        if not self.spec.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.spec.shape[0]  # type: ignore[return-value]

    @property
    def is_abstract(self) -> bool:
        return not isinstance(self.payload, np.ndarray)

    def stride(self, axis: int | None = None) -> tuple[int, ...] | int:
        """Element strides of the payload, as in PyTorch: a [2,3,4] contiguous tensor has (12,4,1)."""
        data = self._array("stride()")
        strides = tuple(s // data.itemsize for s in data.strides)
        return strides if axis is None else strides[axis]

    def is_contiguous(self) -> bool:
        return bool(self._array("is_contiguous()").flags.c_contiguous)

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        if self.is_abstract:
            return f"Tensor(spec={self.spec!r}{grad})"
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(", **settings.PRINT_OPTIONS)
        return f"tensor({body}, dtype={self.dtype.name}{grad})"

    def __format__(self, spec: str) -> str:
        """A 0-d tensor formats as its value (f"{loss:.4f}"), as PyTorch's; any other as object's."""
        if not self.is_abstract and self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    # data out ----------------------------------------------------------------------------------
    def _array(self, what: str) -> np.ndarray:
        if not isinstance(self.payload, np.ndarray):
            raise TypeError(f"{what} needs data, but this tensor is abstract: {self.spec!r}")
        return self.payload

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array (a view of the tensor's memory where the dtype allows)."""
        data = self._array("numpy()")
        if self.dtype.name == "bf16":
            return (data.astype(np.uint32) << 16).view(np.float32)
        return data

    def item(self) -> Any:
        return self.numpy().item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __array_wrap__(self, array: np.ndarray, context: Any = None, return_scalar: bool = False) -> Tensor:
        """A NumPy ufunc's result on a tensor (np.exp(x), np.add(x, 1)) is a tensor, as PyTorch's: a 0-d one
        for a scalar, and uint8 for a bool result (PyTorch's wrapper's cast)."""
        if array.dtype == np.bool_:
            array = array.astype(np.uint8)
        dtype = from_numpy_dtype(array.dtype)
        array = np.asarray(array, dtype.np)
        return Tensor(Spec(tuple(array.shape), dtype), array)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self.numpy().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.numpy().__dlpack_device__()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.is_abstract:
            raise TypeError(f"the truth value of an abstract tensor {self.spec!r} is unknown")
        return bool(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "ib" or self.ndim:
            raise TypeError("only a 0-d integer tensor can be used as an index")
        return int(self.item())

    # autograd and device ------------------------------------------------------------------------
    def requires_grad_(self, flag: bool = True) -> Tensor:
        """PyTorch's: a non-leaf can not be cut off its graph (flag False), an integer tensor not take a
        gradient (RuntimeError, as PyTorch's)."""
        if self._node is None or not flag:  # a non-leaf already requires grad
            self._set_requires_grad(flag)
        return self

    def _set_requires_grad(self, flag: bool) -> None:
        # PyTorch's property setter: any non-leaf raises, even one already requiring grad
        if self._node is not None:
            raise RuntimeError(_LEAF_ONLY + ("" if flag else _DETACH_HINT))
        _refuse_integer_grad(self, flag)
        set_requires_grad(self, bool(flag))

    requires_grad = property(_REQUIRES_GRAD.__get__, _set_requires_grad)

    def _set_grad(self, value: Tensor | None) -> None:
        # PyTorch's checks of `.grad = g`: a tensor (or None) of this tensor's shape and dtype, not itself
        if value is not None:
            _refuse_grad(self, value)
        set_grad(self, value)

    def _del_grad(self) -> None:
        set_grad(self, None)

    def _get_grad(self) -> Tensor | None:
        g = _GRAD.__get__(self)
        if g is None and self._node is not None and not self.retains_grad:
            warnings.warn(_NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return g

    grad = property(_get_grad, _set_grad, _del_grad)

    def detach(self) -> Tensor:
        return Tensor(self.spec, self.payload)

    @property
    def data(self) -> Tensor:
        """PyTorch's `.data`: this tensor's values without history, sharing its storage.

        Writes through it (`p.data.add_(g, alpha=-lr)`, `p.data.copy_(w)`) change `p` and are not recorded.
        """
        return Tensor(self.spec, self.payload)

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data must be set to a Tensor, not {type(value).__name__}")
        if self.requires_grad and not value.dtype.is_float:
            raise RuntimeError(
                "data set to a tensor that requires gradients must be floating point or complex dtype"
            )
        self.spec, self.payload = value.spec, value.payload

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    def cpu(self) -> Tensor:
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Tensor:
        raise no_device("cuda", "Tensor.cuda()")

    is_cpu, is_cuda, is_mps, is_meta = True, False, False, False

    def get_device(self) -> int:
        """-1, PyTorch's answer for a tensor on the CPU."""
        return -1

    def is_pinned(self) -> bool:
        return False

    def pin_memory(self, *args: Any) -> Tensor:
        raise no_device("accelerator", "Tensor.pin_memory()")  # as PyTorch's without an accelerator

    @property
    def grad_fn(self) -> Any:
        """The autograd record of the op that made this tensor (None for a leaf), as PyTorch's grad_fn."""
        return self._node

    @property
    def device(self) -> device:
        return CPU


_NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
    "won't be populated during autograd.backward(). If you indeed want the .grad field to be populated for "
    "a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor."
)
_LEAF_ONLY = "you can only change requires_grad flags of leaf variables."
_DETACH_HINT = (
    " If you want to use a computed variable in a subgraph that doesn't require differentiation use "
    "var_no_grad = var.detach()."
)


def _refuse_integer_grad(t: Tensor, flag: Any) -> None:
    if flag and not (t.dtype.is_float or t.dtype.is_complex):
        raise RuntimeError(
            f"only Tensors of floating point and complex dtype can require gradients (got {t.dtype.name})"
        )


def _refuse_grad(t: Tensor, g: Any) -> None:
    """PyTorch's refusals of `t.grad = g`."""
    if not isinstance(g, Tensor):
        raise TypeError(
            f"assigned grad expected to be a Tensor or None but got grad of type {type(g).__name__}"
        )
    if g is t:
        raise RuntimeError("can't assign Variable as its own grad")
    if g.dtype is not t.dtype:
        raise RuntimeError(
            f"attempting to assign a gradient with dtype '{g.dtype.name}' to a tensor with dtype "
            f"'{t.dtype.name}'. Please ensure that the gradient and the tensor have the same dtype"
        )
    if tuple(g.shape) != tuple(t.shape):
        raise RuntimeError(
            f"attempting to assign a gradient of size '{list(g.shape)}' to a tensor of size "
            f"'{list(t.shape)}'. Please ensure that the gradient and the tensor are the same size"
        )


def describe(x: Any) -> str:
    """How an operand is written in error messages: `f32[n, din]` for a tensor, repr otherwise."""
    if isinstance(x, Tensor):
        return f"{x.dtype.name}{shape_text(x.shape)}"
    if isinstance(x, Dim):
        return str(x)
    return repr(x)


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# PyTorch's `.to(...)` ---------------------------------------------------------------------------
class memory_format:
    """PyTorch's memory formats (torch.channels_last, ...): verigrad's tensors are always contiguous, so
    a format changes no value; calls that take one (`to`, `contiguous`, the dtype methods) check and
    accept it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")


def check_memory_format(where: str, value: Any) -> None:
    """Refuses what is not one of PyTorch's memory formats (None is the default)."""
    if value is not None and not isinstance(value, memory_format):
        raise TypeError(
            f"{where}: memory_format must be a memory format (torch.channels_last, ...), got {value!r}"
        )


def to_arguments(where: str, args: tuple, kwargs: dict) -> tuple[DType | None, bool]:
    """PyTorch's `.to` arguments read: `(dtype)`, `(device, dtype)`, `(tensor)`, with `non_blocking` and
    `copy` after them or by name. Gives the dtype asked for (None: keep it) and `copy`; a device other
    than the CPU is refused."""
    unknown = set(kwargs) - {"device", "dtype", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise TypeError(f"{where}() got unexpected keyword arguments {sorted(unknown)}")
    check_memory_format(where, kwargs.get("memory_format"))
    rest = list(args)
    dev, dtype = kwargs.get("device"), kwargs.get("dtype")
    if rest and isinstance(rest[0], Tensor):
        dtype = rest.pop(0).dtype
    elif rest and isinstance(rest[0], bool | float):  # PyTorch's: a first bool or float names its type
        dtype = bool_ if isinstance(rest.pop(0), bool) else f64
    else:
        if rest and (rest[0] is None or is_device(rest[0]) or _is_index(rest[0])):
            dev = rest.pop(0)
            if rest and isinstance(rest[0], bool):  # (device, non_blocking): PyTorch's TypeError
                raise TypeError(f"{where}() takes (device, dtype) before non_blocking; got {args!r}")
        if rest:
            dtype = rest.pop(0)
    if len(rest) > 2 or not all(isinstance(flag, bool) for flag in rest):
        raise TypeError(
            f"{where}() takes (dtype), (device, dtype) or (tensor), then non_blocking and copy; got {args!r}"
        )
    as_device(dev, where)
    copy = rest[1] if len(rest) == 2 else bool(kwargs.get("copy", False))
    return (None if dtype is None else as_dtype(dtype)), copy


# PyTorch's legacy constructors: Tensor(data), Tensor(*sizes), FloatTensor, LongTensor, ... -------------
def _legacy_payload(dtype: DType, args: tuple) -> tuple[Spec, np.ndarray]:
    """The spec and values of `Tensor(data)` (its values in `dtype`), `Tensor(*sizes)` (zeros: PyTorch
    leaves them uninitialised) or `Tensor()` (empty)."""
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0].spec, args[0].payload  # PyTorch's alias of the same storage
    if len(args) == 1 and isinstance(args[0], Size):  # Tensor(x.shape): a shape, as PyTorch's
        args = tuple(args[0])
    if all(isinstance(a, int | np.integer) and not isinstance(a, bool) for a in args):
        array = np.zeros(tuple(int(a) for a in args) if args else (0,), dtype.np)
    elif len(args) == 1 and isinstance(args[0], list | tuple | np.ndarray):
        if isinstance(args[0], np.ndarray):
            if args[0].dtype.kind not in "biuf":  # PyTorch refuses strings, objects, dates
                raise TypeError(f"{dtype.name} tensor: cannot make one from a {args[0].dtype} array")
            refuse_negative_strides(args[0])
        array = np.array(args[0], dtype=np.float64 if dtype.is_float else None)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{dtype.name} tensor: cannot make one from {array.dtype} values")
        array = np.ascontiguousarray(array.astype(dtype.np))
    else:
        raise TypeError(
            f"Tensor(): takes values or whole-number sizes, not {[type(a).__name__ for a in args]}"
        )
    return Spec(tuple(array.shape), dtype), array


def refuse_negative_strides(array: np.ndarray) -> None:
    """PyTorch's refusal of a NumPy array with a negative stride (a flipped view, x[::-1]) in from_numpy,
    tensor, as_tensor and asarray."""
    if array.size and any(s < 0 for s in array.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative strides are "
            "not supported, as in PyTorch (make a copy of the array first: array.copy())"
        )


class LegacyType(type):
    """The class of FloatTensor, LongTensor, ...: calling one makes a Tensor of its dtype, and a tensor of
    that dtype is an instance, as PyTorch's."""

    dtype: DType

    def __call__(cls, *args: Any) -> Tensor:
        return Tensor(*_legacy_payload(cls.dtype, args))

    def __instancecheck__(cls, x: Any) -> bool:
        return isinstance(x, Tensor) and x.dtype is cls.dtype


LEGACY_TYPES = {
    name: LegacyType(name, (), {"dtype": dtype, "__doc__": f"PyTorch's legacy {name}, of {dtype.name}."})
    for name, dtype in [
        ("FloatTensor", f32),
        ("DoubleTensor", f64),
        ("HalfTensor", f16),
        ("ByteTensor", u8),
        ("IntTensor", i32),
        ("LongTensor", i64),
        ("BoolTensor", bool_),
    ]
}
# PyTorch's legacy type names, as `x.type()` gives them and `x.type(name)` takes them
LEGACY_NAMES = {cls.dtype: f"torch.{name}" for name, cls in LEGACY_TYPES.items()} | {
    bf16: "torch.BFloat16Tensor"
}
