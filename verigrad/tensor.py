"""`Tensor`: a spec, a payload, and autograd slots. Every operator and method is one line into an op.

The payload is what the current mode made: a NumPy array in eager mode (possibly a strided view),
None in abstract mode, an IR value when tracing. Ops are looked up by name in the registry when a
method runs, so this module does not import them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .dtypes import DType, as_dtype, f32, f64
from .errors import ShapeError
from .registry import FUNCS, OPS
from .shapes import Dim, DimLike, Spec, shape_text

Axis = int | Sequence[int] | None


class Tensor:
    """An n-dimensional array with a (possibly symbolic) shape, a dtype and optional gradient."""

    __slots__ = ("__weakref__", "_hooks", "_node", "data", "grad", "requires_grad", "spec")
    __array_priority__ = 1000  # NumPy defers `ndarray + Tensor` to Tensor.__radd__

    def __init__(self, spec: Spec, data: Any, requires_grad: bool = False) -> None:
        self.spec = spec
        self.data = data
        self.grad: Tensor | None = None
        self._node: Any = None  # the autograd record of the op that made this tensor
        self._hooks: list | None = None  # register_hook's functions
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    # description -------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[DimLike, ...]:
        return self.spec.shape

    @property
    def dtype(self) -> DType:
        return self.spec.dtype

    @property
    def ndim(self) -> int:
        return len(self.spec.shape)

    def dim(self) -> int:
        return self.ndim

    ndimension = dim

    def size(self, axis: int | None = None) -> Any:
        return self.shape if axis is None else self.shape[axis]

    def nelement(self) -> DimLike:
        return self.numel()

    def numel(self) -> DimLike:
        n: DimLike = 1
        for d in self.shape:
            n = n * d
        return n

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]  # type: ignore[return-value]

    @property
    def is_abstract(self) -> bool:
        return not isinstance(self.data, np.ndarray)

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
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        return f"tensor({body}, dtype={self.dtype.name}{grad})"

    # data out ----------------------------------------------------------------------------------
    def _array(self, what: str) -> np.ndarray:
        if not isinstance(self.data, np.ndarray):
            raise TypeError(f"{what} needs data, but this tensor is abstract: {self.spec!r}")
        return self.data

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

    # autograd ----------------------------------------------------------------------------------
    def requires_grad_(self, flag: bool = True) -> Tensor:
        if flag and not self.dtype.is_float:
            raise TypeError(f"only floating tensors can require gradients, not {self.dtype.name}")
        self.requires_grad = flag
        return self

    def backward(
        self, grad: Tensor | None = None, create_graph: bool = False, retain_graph: Any = None
    ) -> None:
        """Accumulate gradients into the leaves' `.grad`. The graph is kept whatever `retain_graph` says
        (it is accepted for PyTorch's code: backward may run again)."""
        FUNCS["backward"](self, grad, create_graph)

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> Any:
        """Call `hook(grad)` whenever the gradient with respect to this tensor has been computed, before it
        goes on (or into a leaf's `.grad`); a tensor it returns replaces the gradient. Returns a handle
        whose `remove()` takes the hook off."""
        return FUNCS["register_hook"](self, hook)

    def retain_grad(self) -> None:
        """Keep this tensor's gradient in `.grad` after backward, as a leaf's (a leaf's is kept anyway)."""
        FUNCS["retain_grad"](self)

    def detach(self) -> Tensor:
        return Tensor(self.spec, self.data)

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    # in place (optimizers, caches) -------------------------------------------------------------
    def assign(self, value: Any) -> Tensor:
        """Overwrite this tensor's values with `value` (same shape and dtype); returns self."""
        return FUNCS["assign"](self, value)

    def zero_(self) -> Tensor:
        return self.assign(0)

    def fill_(self, value: Any) -> Tensor:
        return self.assign(value)

    def copy_(self, src: Any) -> Tensor:
        """src's values (broadcast to this shape, cast to this dtype) written into this tensor."""
        return self.assign(src)

    def add_(self, o: Any, alpha: Any = 1) -> Tensor:
        return self.assign(self + (o if alpha == 1 else o * alpha))

    def sub_(self, o: Any, alpha: Any = 1) -> Tensor:
        return self.assign(self - (o if alpha == 1 else o * alpha))

    def mul_(self, o: Any) -> Tensor:
        return self.assign(self * o)

    def div_(self, o: Any) -> Tensor:
        return self.assign(self / o)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:
        return self.assign(self.clamp(min, max))

    def masked_fill_(self, mask: Any, value: Any) -> Tensor:
        return self.assign(self.masked_fill(mask, value))

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        return FUNCS["diagonal"](self, offset, dim1, dim2)

    def diag(self, diagonal: int = 0) -> Tensor:
        return FUNCS["diag"](self, diagonal)

    def trace(self) -> Tensor:
        return FUNCS["trace"](self)

    def index_add(self, dim: int, index: Tensor, source: Tensor, alpha: Any = 1) -> Tensor:
        """See `verigrad.index_add`."""
        return FUNCS["index_add"](self, dim, index, source, alpha)

    def index_add_(self, dim: int, index: Tensor, source: Tensor, alpha: Any = 1) -> Tensor:
        return self.assign(self.index_add(dim, index, source, alpha))

    def scatter(
        self, dim: int, index: Tensor, src: Any = None, *, value: Any = None, reduce: Any = None
    ) -> Tensor:
        """See `verigrad.scatter`."""
        return FUNCS["scatter"](self, dim, index, src, value=value, reduce=reduce)

    def scatter_(
        self, dim: int, index: Tensor, src: Any = None, *, value: Any = None, reduce: Any = None
    ) -> Tensor:
        return self.assign(self.scatter(dim, index, src, value=value, reduce=reduce))

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """See `verigrad.scatter_add`."""
        return FUNCS["scatter_add"](self, dim, index, src)

    def scatter_add_(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        return self.assign(self.scatter_add(dim, index, src))

    def clamp_min(self, min: Any) -> Tensor:
        return self.clamp(min=min)

    def clamp_max(self, max: Any) -> Tensor:
        return self.clamp(max=max)

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        return FUNCS["narrow"](self, dim, start, length)

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        return FUNCS["unbind"](self, dim)

    def roll(self, shifts: Any, dims: Any = None) -> Tensor:
        return FUNCS["roll"](self, shifts, dims)

    def masked_select(self, mask: Tensor) -> Tensor:
        """See `verigrad.masked_select` (eager only)."""
        return FUNCS["masked_select"](self, mask)

    def nan_to_num(self, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Tensor:
        return FUNCS["nan_to_num"](self, nan, posinf, neginf)

    def count_nonzero(self, dim: Any = None) -> Tensor:
        return FUNCS["count_nonzero"](self, dim)

    def isclose(self, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> Tensor:
        return FUNCS["isclose"](self, other, rtol, atol, equal_nan)

    def atan2(self, other: Any) -> Tensor:
        return OPS["atan2"](self, other)

    def log2(self) -> Tensor:
        return FUNCS["log2"](self)

    def log10(self) -> Tensor:
        return FUNCS["log10"](self)

    def inverse(self) -> Tensor:
        """The inverse of each square matrix [..., n, n] (see `verigrad.linalg.inv`)."""
        return OPS["inv"](self)

    def det(self) -> Tensor:
        """The determinant of each square matrix [..., n, n] (see `verigrad.linalg.det`)."""
        return OPS["det"](self)

    def fill_diagonal_(self, fill_value: Any, wrap: bool = False) -> Tensor:
        """See `verigrad.fill_diagonal_`."""
        return FUNCS["fill_diagonal_"](self, fill_value, wrap)

    def unique(
        self, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
    ) -> Any:
        """See `verigrad.unique` (eager only)."""
        return FUNCS["unique"](self, sorted, return_inverse, return_counts, dim)

    def __iadd__(self, o: Any) -> Tensor:
        return self.assign(self + o)

    def __isub__(self, o: Any) -> Tensor:
        return self.assign(self - o)

    def __imul__(self, o: Any) -> Tensor:
        return self.assign(self * o)

    def __itruediv__(self, o: Any) -> Tensor:
        return self.assign(self / o)

    def __imod__(self, o: Any) -> Tensor:
        return self.assign(self % o)

    # arithmetic --------------------------------------------------------------------------------
    def __add__(self, o: Any) -> Tensor:
        return OPS["add"](self, o)

    def __radd__(self, o: Any) -> Tensor:
        return OPS["add"](o, self)

    def __sub__(self, o: Any) -> Tensor:
        return OPS["sub"](self, o)

    def __rsub__(self, o: Any) -> Tensor:
        return OPS["sub"](o, self)

    def __mul__(self, o: Any) -> Tensor:
        return OPS["mul"](self, o)

    def __rmul__(self, o: Any) -> Tensor:
        return OPS["mul"](o, self)

    def __truediv__(self, o: Any) -> Tensor:
        return OPS["div"](self, o)

    def __rtruediv__(self, o: Any) -> Tensor:
        return OPS["div"](o, self)

    def __mod__(self, o: Any) -> Tensor:
        return OPS["remainder"](self, o)

    def __rmod__(self, o: Any) -> Tensor:
        return OPS["remainder"](o, self)

    def remainder(self, o: Any) -> Tensor:
        return OPS["remainder"](self, o)

    def fmod(self, o: Any) -> Tensor:
        return OPS["fmod"](self, o)

    def __pow__(self, o: Any) -> Tensor:
        return OPS["pow"](self, o)

    def __rpow__(self, o: Any) -> Tensor:
        return OPS["pow"](o, self)

    def __matmul__(self, o: Any) -> Tensor:
        return OPS["matmul"](self, o)

    def __rmatmul__(self, o: Any) -> Tensor:
        return OPS["matmul"](o, self)

    def __neg__(self) -> Tensor:
        return OPS["neg"](self)

    def __abs__(self) -> Tensor:
        return OPS["abs"](self)

    def __eq__(self, o: Any) -> Tensor:  # type: ignore[override]
        return OPS["eq"](self, o)

    def __ne__(self, o: Any) -> Tensor:  # type: ignore[override]
        return OPS["ne"](self, o)

    def __lt__(self, o: Any) -> Tensor:
        return OPS["lt"](self, o)

    def __le__(self, o: Any) -> Tensor:
        return OPS["le"](self, o)

    def __gt__(self, o: Any) -> Tensor:
        return OPS["gt"](self, o)

    def __ge__(self, o: Any) -> Tensor:
        return OPS["ge"](self, o)

    def __and__(self, o: Any) -> Tensor:
        return OPS["logical_and"](self, o)

    def __or__(self, o: Any) -> Tensor:
        return OPS["logical_or"](self, o)

    def __invert__(self) -> Tensor:
        return OPS["logical_not"](self)

    __hash__ = object.__hash__

    def add(self, o: Any) -> Tensor:
        return OPS["add"](self, o)

    def sub(self, o: Any) -> Tensor:
        return OPS["sub"](self, o)

    def mul(self, o: Any) -> Tensor:
        return OPS["mul"](self, o)

    def div(self, o: Any) -> Tensor:
        return OPS["div"](self, o)

    def pow(self, o: Any) -> Tensor:
        return OPS["pow"](self, o)

    def maximum(self, o: Any) -> Tensor:
        return OPS["maximum"](self, o)

    def minimum(self, o: Any) -> Tensor:
        return OPS["minimum"](self, o)

    def matmul(self, o: Any) -> Tensor:
        return OPS["matmul"](self, o)

    def erf(self) -> Tensor:
        return OPS["erf"](self)

    def floor(self) -> Tensor:
        return OPS["floor"](self)

    def ceil(self) -> Tensor:
        return OPS["ceil"](self)

    def trunc(self) -> Tensor:
        return OPS["trunc"](self)

    def sign(self) -> Tensor:
        return OPS["sign"](self)

    def round(self, decimals: int = 0) -> Tensor:
        """The nearest whole number (halves to even); with `decimals`, of x * 10^decimals, scaled back."""
        if not decimals:
            return OPS["round"](self)
        scale = 10.0**decimals
        return OPS["round"](self * scale) / scale

    def mm(self, o: Tensor) -> Tensor:
        """The product of two matrices (PyTorch's mm: 2-D operands only)."""
        return FUNCS["mm"](self, o)

    def bmm(self, o: Tensor) -> Tensor:
        return FUNCS["bmm"](self, o)

    def outer(self, o: Tensor) -> Tensor:
        return FUNCS["outer"](self, o)

    def t(self) -> Tensor:
        """A matrix transposed (a vector or a scalar as it is), as PyTorch's t()."""
        if self.ndim > 2:
            raise ShapeError(f"t() takes at most 2 dimensions, got {describe(self)}; use mT or transpose")
        return self.T

    def where(self, cond: Any, other: Any) -> Tensor:
        """PyTorch's `x.where(cond, y)`: x where cond holds, else y."""
        return OPS["where"](cond, self, other)

    # element-wise unary ----------------------------------------------------------------------------
    def neg(self) -> Tensor:
        return OPS["neg"](self)

    def abs(self) -> Tensor:
        return OPS["abs"](self)

    def exp(self) -> Tensor:
        return OPS["exp"](self)

    def log(self) -> Tensor:
        return OPS["log"](self)

    def expm1(self) -> Tensor:
        return OPS["expm1"](self)

    def log1p(self) -> Tensor:
        return OPS["log1p"](self)

    def sqrt(self) -> Tensor:
        return OPS["sqrt"](self)

    def rsqrt(self) -> Tensor:
        return OPS["rsqrt"](self)

    def sin(self) -> Tensor:
        return OPS["sin"](self)

    def cos(self) -> Tensor:
        return OPS["cos"](self)

    def tanh(self) -> Tensor:
        return OPS["tanh"](self)

    def sigmoid(self) -> Tensor:
        return OPS["sigmoid"](self)

    def relu(self) -> Tensor:
        return OPS["relu"](self)

    def gelu(self, approximate: str = "none") -> Tensor:
        return OPS["gelu_tanh" if approximate == "tanh" else "gelu"](self)

    def silu(self) -> Tensor:
        return OPS["silu"](self)

    def square(self) -> Tensor:
        return OPS["mul"](self, self)

    def reciprocal(self) -> Tensor:
        return OPS["div"](1, self)

    def lerp(self, end: Any, weight: Any) -> Tensor:
        """self + weight * (end - self), as PyTorch's lerp."""
        return FUNCS["lerp"](self, end, weight)

    def addcmul(self, tensor1: Any, tensor2: Any, value: Any = 1) -> Tensor:
        return FUNCS["addcmul"](self, tensor1, tensor2, value)

    def addcdiv(self, tensor1: Any, tensor2: Any, value: Any = 1) -> Tensor:
        return FUNCS["addcdiv"](self, tensor1, tensor2, value)

    def hypot(self, o: Any) -> Tensor:
        return OPS["hypot"](self, o)

    def logaddexp(self, o: Any) -> Tensor:
        return OPS["logaddexp"](self, o)

    def frac(self) -> Tensor:
        return FUNCS["frac"](self)

    def deg2rad(self) -> Tensor:
        return FUNCS["deg2rad"](self)

    def rad2deg(self) -> Tensor:
        return FUNCS["rad2deg"](self)

    def movedim(self, source: Any, destination: Any) -> Tensor:
        return FUNCS["movedim"](self, source, destination)

    moveaxis = movedim

    def swapaxes(self, a: int, b: int) -> Tensor:
        return self.transpose(a, b)

    swapdims = swapaxes

    def unflatten(self, dim: int, sizes: Sequence[Any]) -> Tensor:
        return FUNCS["unflatten"](self, dim, sizes)

    # PyTorch's comparison methods (the operators' ops)
    def eq(self, o: Any) -> Tensor:
        return OPS["eq"](self, o)

    def ne(self, o: Any) -> Tensor:
        return OPS["ne"](self, o)

    def lt(self, o: Any) -> Tensor:
        return OPS["lt"](self, o)

    def le(self, o: Any) -> Tensor:
        return OPS["le"](self, o)

    def gt(self, o: Any) -> Tensor:
        return OPS["gt"](self, o)

    def ge(self, o: Any) -> Tensor:
        return OPS["ge"](self, o)

    def uniform_(self, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
        """Values drawn uniformly from [a, b), in place."""
        return self.assign(FUNCS["rand"](*self.shape, dtype=self.dtype, generator=generator) * (b - a) + a)

    def normal_(self, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
        """Values drawn from N(mean, std^2), in place."""
        return self.assign(FUNCS["randn"](*self.shape, dtype=self.dtype, generator=generator) * std + mean)

    def nonzero(self, as_tuple: bool = False) -> Any:
        """The positions of the non-zero elements, [n, ndim] (or one vector per axis); eager only."""
        return FUNCS["nonzero"](self, as_tuple)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        return FUNCS["clamp"](self, min, max)

    clip = clamp

    def masked_fill(self, mask: Any, value: Any) -> Tensor:
        return FUNCS["masked_fill"](self, mask, value)

    def isnan(self) -> Tensor:
        return FUNCS["isnan"](self)

    def isinf(self) -> Tensor:
        return FUNCS["isinf"](self)

    def isfinite(self) -> Tensor:
        return FUNCS["isfinite"](self)

    def tril(self, diagonal: int = 0) -> Tensor:
        return FUNCS["tril"](self, diagonal)

    def triu(self, diagonal: int = 0) -> Tensor:
        return FUNCS["triu"](self, diagonal)

    # dtype -------------------------------------------------------------------------------------
    def cast(self, dtype: DType | str) -> Tensor:
        return OPS["cast"](self, dtype=as_dtype(dtype))

    astype = cast

    def to(self, dtype: DType | str) -> Tensor:
        """A cast; "cpu" (the only device: code written for PyTorch's `.to(device)`) gives self."""
        if isinstance(dtype, str) and dtype.split(":")[0] in ("cuda", "mps", "xpu"):
            raise ValueError(f"verigrad runs on the CPU: there is no {dtype!r} device")
        return self if isinstance(dtype, str) and dtype == "cpu" else self.cast(dtype)

    def cpu(self) -> Tensor:
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> Tensor:
        raise ValueError(
            "verigrad runs on the CPU: there is no CUDA device (code written for PyTorch can drop .cuda())"
        )

    @property
    def grad_fn(self) -> Any:
        """The autograd record of the op that made this tensor (None for a leaf), as PyTorch's grad_fn."""
        return self._node

    @property
    def device(self) -> str:
        return "cpu"

    def type_as(self, other: Tensor) -> Tensor:
        return self.cast(other.dtype)

    def type(self, dtype: Any = None) -> Any:
        """PyTorch's: the dtype's name without an argument, else the tensor cast to `dtype`."""
        return self.dtype.name if dtype is None else self.cast(dtype)

    # PyTorch's new_*: tensors of this one's dtype (unless given)
    def new_full(self, size: Any, fill_value: Any, dtype: Any = None) -> Tensor:
        return FUNCS["full"](_shape_arg((size,)), fill_value, dtype=self.dtype if dtype is None else dtype)

    def new_zeros(self, *size: Any, dtype: Any = None) -> Tensor:
        return self.new_full(_shape_arg(size), 0, dtype)

    def new_ones(self, *size: Any, dtype: Any = None) -> Tensor:
        return self.new_full(_shape_arg(size), 1, dtype)

    def new_empty(self, *size: Any, dtype: Any = None) -> Tensor:
        return self.new_zeros(*size, dtype=dtype)

    def new_tensor(self, data: Any, dtype: Any = None) -> Tensor:
        return FUNCS["tensor"](data, dtype=self.dtype if dtype is None else dtype)

    def float(self) -> Tensor:
        return self.cast(f32)

    def double(self) -> Tensor:
        return self.cast(f64)

    def half(self) -> Tensor:
        return self.cast("f16")

    def long(self) -> Tensor:
        return self.cast("i64")

    def int(self) -> Tensor:
        return self.cast("i32")

    def bool(self) -> Tensor:
        return self.cast("bool")

    def allclose(self, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
        return FUNCS["allclose"](self, other, rtol, atol, equal_nan)

    def equal(self, other: Tensor) -> bool:
        return FUNCS["equal"](self, other)

    def clone(self) -> Tensor:
        """A copy with memory of its own (a cast always makes one), in the graph as PyTorch's clone is."""
        return self.cast(self.dtype)

    # reductions --------------------------------------------------------------------------------
    def sum(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None, dtype: Any = None) -> Tensor:
        """The sum over `axis`; with `dtype`, of the tensor cast to it first (as PyTorch's)."""
        x = self if dtype is None else self.cast(dtype)
        return OPS["sum"](x, axis=_axis(axis, dim), keepdim=keepdim)

    def mean(
        self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None, dtype: Any = None
    ) -> Tensor:
        """The mean over `axis`; with `dtype`, of the tensor cast to it first (as PyTorch's)."""
        x = self if dtype is None else self.cast(dtype)
        return OPS["mean"](x, axis=_axis(axis, dim), keepdim=keepdim)

    def index_fill(self, dim: int, index: Any, value: Any) -> Tensor:
        """self with the slices at `index` along `dim` set to `value` (PyTorch's index_fill)."""
        return FUNCS["index_fill"](self, dim, index, value)

    def max(self, axis: Any = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        """The largest value over `axis`; given a tensor, the element-wise maximum (as PyTorch)."""
        if isinstance(axis, Tensor):
            return OPS["maximum"](self, axis)
        return OPS["max"](self, axis=_axis(axis, dim), keepdim=keepdim)

    def min(self, axis: Any = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        """The smallest value over `axis`; given a tensor, the element-wise minimum (as PyTorch)."""
        if isinstance(axis, Tensor):
            return OPS["minimum"](self, axis)
        return OPS["min"](self, axis=_axis(axis, dim), keepdim=keepdim)

    def argmax(self, axis: int | None = None, keepdim: bool = False, *, dim: int | None = None):
        return OPS["argmax"](self, axis=_axis(axis, dim), keepdim=keepdim)

    def cumsum(self, axis: int = 0, *, dim: int | None = None) -> Tensor:
        return OPS["cumsum"](self, axis=_axis(axis, dim))

    def cumprod(self, axis: int = 0, *, dim: int | None = None) -> Tensor:
        return OPS["cumprod"](self, axis=_axis(axis, dim))

    def argmin(self, axis: int | None = None, keepdim: bool = False, *, dim: int | None = None):
        return FUNCS["argmin"](self, axis, keepdim, dim=dim)

    amax = max
    amin = min

    def var(self, axis: Axis = None, correction: Any = 1, keepdim: bool = False, **kw: Any) -> Tensor:
        """See `verigrad.var` (`dim=` and `unbiased=` as in PyTorch)."""
        return FUNCS["var"](self, axis, correction, keepdim, **kw)

    def std(self, axis: Axis = None, correction: Any = 1, keepdim: bool = False, **kw: Any) -> Tensor:
        return FUNCS["std"](self, axis, correction, keepdim, **kw)

    def logsumexp(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        return FUNCS["logsumexp"](self, axis, keepdim, dim=dim)

    def prod(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        return OPS["prod"](self, axis=_axis(axis, dim), keepdim=keepdim)

    def norm(self, p: float = 2.0, dim: Axis = None, keepdim: bool = False) -> Tensor:
        """See `verigrad.norm`."""
        return FUNCS["norm"](self, p, dim, keepdim)

    def all(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        return FUNCS["all"](self, axis, keepdim, dim=dim)

    def any(self, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
        return FUNCS["any"](self, axis, keepdim, dim=dim)

    def softmax(self, axis: int = -1, *, dim: int | None = None) -> Tensor:
        return OPS["softmax"](self, axis=_axis(axis, dim))

    def log_softmax(self, axis: int = -1, *, dim: int | None = None) -> Tensor:
        return OPS["log_softmax"](self, axis=_axis(axis, dim))

    # movement ----------------------------------------------------------------------------------
    def reshape(self, *shape: Any) -> Tensor:
        return OPS["reshape"](self, shape=_shape_arg(shape))

    view = reshape

    def permute(self, *axes: Any) -> Tensor:
        return OPS["permute"](self, axes=tuple(_shape_arg(axes)))

    def transpose(self, a: int = -2, b: int = -1) -> Tensor:
        return FUNCS["transpose"](self, a, b)

    @property
    def T(self) -> Tensor:
        """All axes reversed, as NumPy's `.T` (a [n, din] becomes [din, n])."""
        return OPS["permute"](self, axes=tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self) -> Tensor:
        return FUNCS["transpose"](self, -2, -1)

    def expand(self, *shape: Any) -> Tensor:
        return FUNCS["expand"](self, _shape_arg(shape))

    def broadcast_to(self, *shape: Any) -> Tensor:
        return OPS["broadcast_to"](self, shape=_shape_arg(shape))

    def contiguous(self) -> Tensor:
        return OPS["contiguous"](self)

    def expand_as(self, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    view_as = reshape_as

    def split(self, split_size_or_sections: Any, axis: int = 0, *, dim: int | None = None) -> tuple:
        return FUNCS["split"](self, split_size_or_sections, axis, dim=dim)

    def chunk(self, chunks: int, axis: int = 0, *, dim: int | None = None) -> tuple:
        return FUNCS["chunk"](self, chunks, axis, dim=dim)

    def flip(self, *dims: Any) -> Tensor:
        return FUNCS["flip"](self, _shape_arg(dims))

    def repeat(self, *sizes: Any) -> Tensor:
        return FUNCS["repeat"](self, *_shape_arg(sizes))

    def repeat_interleave(self, repeats: int, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        return FUNCS["repeat_interleave"](self, repeats, axis, dim=dim)

    def index_select(self, axis: int, index: Any) -> Tensor:
        return FUNCS["index_select"](self, axis, index)

    def gather(self, axis: int, index: Any) -> Tensor:
        """PyTorch's gather: out[..., j, ...] = self[..., index[..., j, ...], ...] along `axis`."""
        return OPS["gather"](self, index, axis=axis)

    def argsort(self, axis: int = -1, descending: bool = False, *, dim: int | None = None) -> Tensor:
        return OPS["argsort"](self, axis=_axis(axis, dim), descending=descending)

    def sort(self, axis: int = -1, descending: bool = False, *, dim: int | None = None) -> Any:
        return FUNCS["sort"](self, axis, descending, dim=dim)

    def topk(
        self, k: int, axis: int = -1, largest: bool = True, sorted: bool = True, *, dim: Any = None
    ) -> Any:
        return FUNCS["topk"](self, k, axis, largest, sorted, dim=dim)

    def flatten(self, start: int = 0, end: int = -1) -> Tensor:
        return FUNCS["flatten"](self, start, end)

    def unsqueeze(self, axis: int) -> Tensor:
        return FUNCS["unsqueeze"](self, axis)

    def squeeze(self, axis: int | None = None) -> Tensor:
        return FUNCS["squeeze"](self, axis)

    def pad(self, widths: Any, value: float = 0.0) -> Tensor:
        return OPS["pad"](self, widths=tuple(tuple(w) for w in widths), value=value)

    def __getitem__(self, key: Any) -> Tensor:
        return FUNCS["getitem"](self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        FUNCS["setitem"](self, key, value)


def _in_place(name: str) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self.assign(getattr(self, name)(*args, **kwargs))

    method.__name__ = method.__qualname__ = f"{name}_"
    method.__doc__ = f"{name}, written into this tensor."
    return method


def _function_method(name: str) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return FUNCS[name](self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"verigrad.{name} of this tensor."
    return method


for _name in ("kthvalue", "median", "nanmedian", "cummax", "cummin", "kron", "rot90", "diff", "cross",
              "argwhere", "bincount", "histc", "unique_consecutive", "scatter_reduce"):  # fmt: skip
    setattr(Tensor, _name, _function_method(_name))


def _unary_method(name: str) -> Any:
    def method(self: Tensor) -> Tensor:
        return OPS[name](self)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The op {name} (see verigrad.{name})."
    return method


for _name in ("sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh"):
    setattr(Tensor, _name, _unary_method(_name))
    setattr(Tensor, "arc" + _name[1:], _unary_method(_name))  # NumPy's and PyTorch's other names

for _name in ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "relu", "reciprocal", "square",
              "floor", "ceil", "round", "trunc", "sign", "pow", "lerp", "scatter_reduce",
              "index_fill"):  # fmt: skip
    setattr(Tensor, f"{_name}_", _in_place(_name))


NO_CUDA = "verigrad runs on the CPU: there is no CUDA device (code written for PyTorch can drop .cuda())"


def _axis(axis: Any, dim: Any) -> Any:
    return dim if dim is not None else axis


def _shape_arg(shape: tuple) -> tuple:
    """Accept both `x.reshape(2, 3)` and `x.reshape((2, 3))`."""
    if len(shape) == 1 and isinstance(shape[0], list | tuple):
        return tuple(shape[0])
    return shape


def describe(x: Any) -> str:
    """How an operand is written in error messages: `f32[n, din]` for a tensor, repr otherwise."""
    if isinstance(x, Tensor):
        return f"{x.dtype.name}{shape_text(x.shape)}"
    if isinstance(x, Dim):
        return str(x)
    return repr(x)
