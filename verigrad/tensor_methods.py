"""Tensor's operators and methods, bound in one table from the modules that define them.

`tensor.py` holds the class and what needs no op (shape, dtype, data out, autograd slots); this module
gives it the rest, as JAX binds its array methods: each name maps to the op or function it calls. An
entry is the op itself (`x.exp()` is `exp(x)`), an op with the operands swapped (`2 - x`), or, where
PyTorch's method takes its arguments another way (`dim=`, a shape as several numbers, a dtype), a
method of a few lines below. Importing `verigrad` binds the table once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import autograd, out_argument  # noqa: F401  (out_argument: registers out=)
from .dtypes import DType, as_dtype, f32, f64
from .errors import ShapeError
from .functions import (
    complex_refusals,
    copies,
    distributions,
    histograms,
    householder,
    indexing,
    joining,
    matrices,
    nan_reductions,
    numeric,
    ordering,
    pointwise,
    rearrange,
    renorm,
    solvers,
    special,
    statistics,
    tensor_arguments,
)
from .functions import strided as strided_views
from .ops import (
    array_operands,
    binary,
    bitwise,
    creation,
    linalg,
    linalg_extra,
    movement,
    reduce,
    scan,
    shaping,
    unary,
)
from .ops import index as index_ops
from .ops import special as special_ops
from .ops._op import Op
from .ops.angle import angle as angle_op
from .ops.composite.softmax import log_softmax, softmax
from .ops.matmul import matmul
from .ops.scatter_reduce import scatter_reduce
from .shapes import Size
from .tensor import LEGACY_NAMES, LegacyType, Tensor, check_memory_format, describe, to_arguments
from .tensor_methods_in_place import (
    ADAPTED,
    ALIASES,
    IN_PLACE,
    IN_PLACE_OPERATORS,
    VIEWS_IN_PLACE,
    adapted,
    assigning,
    in_place,
    refuse_overlapping_setitem,
    shape_arg,
    version_counter,
    view_in_place,
)
from .typeinfo import strided

Axis = int | Sequence[int] | None


def _forward(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`x.name(*args)` is `fn(x, *args)`."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    method.__doc__ = f"{getattr(fn, 'name', getattr(fn, '__name__', fn))} of this tensor."
    return method


def _reflected(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`o <op> x` when `o` is not a tensor: `fn(o, x)`."""

    def method(self: Tensor, o: Any) -> Any:
        return fn(o, self)

    return method


def _axis(axis: Any, dim: Any) -> Any:
    return dim if dim is not None else axis


# methods whose arguments differ from the op's ---------------------------------------------------


@adapted
def backward(
    self: Tensor,
    gradient: Tensor | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """PyTorch's: accumulate gradients into the leaves' `.grad` (see `autograd.backward`); the graph is
    freed unless `retain_graph` (default `create_graph`)."""
    autograd.backward(self, None if gradient is None else [gradient], retain_graph, create_graph, inputs)


@adapted
def clamp_min(self: Tensor, min: Any) -> Tensor:
    return self.clamp(min=min)


@adapted
def clamp_max(self: Tensor, max: Any) -> Tensor:
    return self.clamp(max=max)


@adapted
def t(self: Tensor) -> Tensor:
    """A matrix transposed (a vector or a scalar as it is), as PyTorch's t()."""
    if self.ndim > 2:
        raise ShapeError(f"t() takes at most 2 dimensions, got {describe(self)}; use mT or transpose")
    return self.T


@adapted
def where(self: Tensor, cond: Any, other: Any) -> Tensor:
    """PyTorch's `x.where(cond, y)`: x where cond holds, else y."""
    pointwise.check_numbers("where", self, other)
    return binary.where(cond, self, other)


@adapted
def gelu(self: Tensor, approximate: str = "none") -> Tensor:
    return (unary.gelu_tanh if approximate == "tanh" else unary.gelu)(self)


@adapted
def square(self: Tensor) -> Tensor:
    return pointwise.square(self)


@adapted
def reciprocal(self: Tensor) -> Tensor:
    return binary.div(1, self)


@adapted
def __rtruediv__(self: Tensor, o: Any) -> Tensor:
    """`o / x` for a number o: PyTorch's reciprocal(x) * o, rounded twice (as PyTorch computes it)."""
    return binary.mul(binary.div(1, self), o)


@adapted
def __rdiv__(self: Tensor, o: Any) -> Tensor:
    """PyTorch's older name of __rtruediv__."""
    return binary.mul(binary.div(1, self), o)


@adapted
def swapaxes(self: Tensor, a: int, b: int) -> Tensor:
    return self.transpose(a, b)


# dtype ------------------------------------------------------------------------------------------
@adapted
def cast(self: Tensor, dtype: DType | str) -> Tensor:
    return movement.cast(self, dtype=as_dtype(dtype))


@adapted
def to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """PyTorch's `to(dtype)`, `to(device, dtype)`, `to(other)`, with `non_blocking`, `copy`: self when
    nothing changes (unless `copy=True`); a device other than the CPU is refused."""
    dtype, copy = to_arguments("Tensor.to", args, kwargs)
    out = self if dtype is None or dtype is self.dtype else self.cast(dtype)
    return self.clone() if copy and out is self else out


@adapted
def type_as(self: Tensor, other: Tensor) -> Tensor:
    """PyTorch's: `self.to(other.dtype)`, itself where the dtypes agree."""
    return self if self.dtype is other.dtype else self.cast(other.dtype)


@adapted
def type(self: Tensor, dtype: Any = None, non_blocking: bool = False) -> Any:
    """PyTorch's: the legacy type's name ("torch.FloatTensor") without an argument, else the tensor cast
    to `dtype` (a dtype, a legacy type such as `verigrad.DoubleTensor`, or its name)."""
    if dtype is None:
        return LEGACY_NAMES[self.dtype]
    if isinstance(dtype, str) and dtype.startswith("torch."):
        named = [d for d, name in LEGACY_NAMES.items() if name == dtype]
        if not named:
            raise ValueError(f"Tensor.type({dtype!r}): not one of {sorted(LEGACY_NAMES.values())}")
        dtype = named[0]
    return self.to(dtype.dtype if isinstance(dtype, LegacyType) else dtype)


@adapted
def is_floating_point(self: Tensor) -> bool:
    return self.dtype.is_float


@adapted
def element_size(self: Tensor) -> int:
    """Bytes an element (PyTorch's element_size)."""
    return self.dtype.itemsize


def _cast_to(dtype: DType | str) -> Callable[[Tensor], Tensor]:
    to = as_dtype(dtype)

    def method(self: Tensor, memory_format: Any = None) -> Tensor:
        check_memory_format(f"Tensor.{to.name}", memory_format)
        return self if self.dtype is to else self.cast(to)  # as PyTorch's: self where nothing changes

    method.__doc__ = f"This tensor cast to {to.name} (itself if it is {to.name} already)."
    return method


@adapted
def data_ptr(self: Tensor) -> int:
    """The address of the first element (PyTorch's data_ptr): views of one tensor's memory compare as
    PyTorch's do."""
    return int(self._array("data_ptr()").__array_interface__["data"][0])


@adapted
def storage_offset(self: Tensor) -> int:
    """Elements from the start of the memory this tensor views to its first element (PyTorch's
    storage_offset): 0 for a tensor that owns its memory, 6 for x[1:] of a [4, 6] x."""
    data = root = self._array("storage_offset()")
    while isinstance(root.base, np.ndarray):
        root = root.base
    return (data.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // data.itemsize


@adapted
def detach_(self: Tensor) -> Tensor:
    """This tensor without its history and not requiring grad, in place (PyTorch's detach_); a view, with
    history or not, raises as PyTorch's."""
    if getattr(self, "_view", None) is not None or autograd.view_base(self) is not None:
        raise RuntimeError("Can't detach views in-place. Use detach() instead.")
    self._node, self.requires_grad = None, False  # a leaf by then: the property lets it
    return self


@adapted
def new(self: Tensor, *args: Any) -> Tensor:
    """PyTorch's legacy Tensor.new in this tensor's dtype: new(2, 3) or new(size) a tensor of that shape
    (zeros: PyTorch leaves it uninitialised), new([1, 2]) or new((1, 2)) one holding the data, new() an
    empty one."""
    if not args:
        return self.new_zeros((0,))
    if len(args) == 1 and isinstance(args[0], Tensor):
        raise NotImplementedError(
            "Tensor.new(tensor): not supported; use other.to(x.dtype) or x.new_tensor(...)"
        )
    shape = args[0] if len(args) == 1 and isinstance(args[0], Size) else args  # a tuple is data, as PyTorch's
    if all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
        return self.new_zeros(tuple(shape))
    if len(args) == 1:
        return self.new_tensor(args[0])
    raise TypeError(f"Tensor.new: takes sizes or one sequence of data, got {args!r}")


@adapted
def is_nonzero(self: Tensor) -> bool:
    """Whether the one-element tensor's value is not zero; any other size raises, as PyTorch's."""
    if self.numel() != 1:
        raise RuntimeError(
            f"Boolean value of Tensor with {'no values' if self.numel() == 0 else 'more than one value'} "
            "is ambiguous"
        )
    return bool(self.reshape(()).item() != 0)


@adapted
def is_same_size(self: Tensor, other: Tensor) -> bool:
    """Whether other has this tensor's shape."""
    return tuple(self.shape) == tuple(other.shape)


@adapted
def is_conj(self: Tensor) -> bool:
    """False: a real tensor is never a lazy conjugate."""
    return False


@adapted
def is_neg(self: Tensor) -> bool:
    """False: verigrad has no lazy negation bit."""
    return False


@adapted
def is_inference(self: Tensor) -> bool:
    """False: verigrad's inference_mode makes ordinary tensors (without history)."""
    return False


@adapted
def dim_order(self: Tensor) -> tuple[int, ...]:
    """The axes from the outermost in memory to the innermost (by decreasing stride), as PyTorch's."""
    strides = self.stride()
    return tuple(sorted(range(self.ndim), key=lambda axis: -strides[axis]))


@adapted
def adjoint(self: Tensor) -> Tensor:
    """The last two axes swapped (the conjugate of a real tensor is itself), as PyTorch's adjoint."""
    return self.transpose(-2, -1)


def layout(self: Tensor) -> Any:
    """torch.strided: every verigrad tensor is strided."""
    return strided


def imag(self: Tensor) -> Tensor:
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")  # PyTorch's words


def nbytes(self: Tensor) -> int:
    """Bytes of the elements (PyTorch's nbytes)."""
    return self.numel() * self.dtype.itemsize


def itemsize(self: Tensor) -> int:
    """Bytes an element (PyTorch's itemsize)."""
    return self.dtype.itemsize


def retains_grad(self: Tensor) -> bool:
    """Whether retain_grad() was called on this non-leaf tensor (PyTorch's retains_grad)."""
    return not self.is_leaf and any(getattr(h, "retains", None) is self for h in self._hooks or ())


@adapted
def is_signed(self: Tensor) -> bool:
    """Whether the dtype holds negative values (floats and the signed integers)."""
    return self.dtype.is_float or self.dtype.name.startswith("i")


@adapted
def is_complex(self: Tensor) -> bool:
    """False: verigrad has no complex dtypes."""
    return False


@adapted
def clone(self: Tensor) -> Tensor:
    """A copy with memory of its own (a cast always makes one), in the graph as PyTorch's clone is."""
    return self.cast(self.dtype)


# PyTorch's new_*: tensors of this one's dtype (unless given)
@adapted
def new_full(
    self: Tensor,
    size: Any,
    fill_value: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
) -> Tensor:
    """PyTorch's new_full (and, through it, new_zeros, new_ones, new_empty); `pin_memory` is accepted and
    does nothing, as the factories' (the CPU is the device)."""
    dtype = self.dtype if dtype is None else dtype
    return creation.full(
        shape_arg((size,)), fill_value, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad
    )


@adapted
def new_zeros(self: Tensor, *size: Any, dtype: Any = None, device: Any = None, **factory: Any) -> Tensor:
    return self.new_full(shape_arg(size), 0, dtype, device, **factory)


@adapted
def new_ones(self: Tensor, *size: Any, dtype: Any = None, device: Any = None, **factory: Any) -> Tensor:
    return self.new_full(shape_arg(size), 1, dtype, device, **factory)


@adapted
def new_empty(self: Tensor, *size: Any, dtype: Any = None, device: Any = None, **factory: Any) -> Tensor:
    return self.new_full(shape_arg(size), 0, dtype, device, **factory)


@adapted
def new_empty_strided(self: Tensor, size: Any, stride: Any, dtype: Any = None, **factory: Any) -> Tensor:
    """new_empty(size), the strides checked and not kept (as creation.empty_strided, which takes the
    other factory keywords)."""
    dtype = self.dtype if dtype is None else dtype
    return creation.empty_strided(size, stride, dtype=dtype, **factory)


@adapted
def new_tensor(
    self: Tensor, data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    dtype = self.dtype if dtype is None else dtype
    return creation.tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


# reductions (PyTorch's `dim=` beside NumPy's `axis`) -------------------------------------------
@adapted
def sum(
    self: Tensor, dim: Axis = None, keepdim: bool = False, *, axis: Axis = None, dtype: Any = None
) -> Tensor:
    """The sum over PyTorch's `dim` (`()` sums all) or NumPy's `axis` (`()` sums none); with `dtype`, of
    the tensor cast to it first (as PyTorch's)."""
    if dtype is None:
        return reduce.sum(self, axis=axis, dim=dim, keepdim=keepdim)
    # in dtype throughout: a small integer dtype asked for is kept (not widened to int64), as PyTorch's
    return reduce.sum(self.cast(dtype), axis=axis, dim=dim, keepdim=keepdim).cast(dtype)


@adapted
def prod(
    self: Tensor, dim: Axis = None, keepdim: bool = False, *, axis: Axis = None, dtype: Any = None
) -> Tensor:
    """The product over `dim` or `axis` (all elements when None); with `dtype`, of the tensor cast to
    it first (as PyTorch's)."""
    if dtype is None:
        return reduce.prod(self, axis=_axis(axis, dim), keepdim=keepdim)
    return reduce.prod(self.cast(dtype), axis=_axis(axis, dim), keepdim=keepdim).cast(dtype)


@adapted
def mean(
    self: Tensor, dim: Axis = None, keepdim: bool = False, *, axis: Axis = None, dtype: Any = None
) -> Tensor:
    """The mean over `dim` or `axis` (as `sum`); with `dtype`, of the tensor cast to it first."""
    x = self if dtype is None else self.cast(dtype)
    return reduce.mean(x, axis=axis, dim=dim, keepdim=keepdim)


def _along_axis(
    op: Callable[..., Tensor], default: Any, keepdim: bool, casts: bool = False
) -> Callable[..., Tensor]:
    """A method `x.name(axis, [keepdim], *, dim=)` of an op with those params; with `casts`,
    `x.name(axis, dtype=None, *, dim=)` (x cast to dtype first, as PyTorch's softmax)."""
    if casts:

        def method(self: Tensor, axis: Any = default, dtype: Any = None, *, dim: Any = None) -> Tensor:
            return op(self if dtype is None else self.cast(dtype), axis=_axis(axis, dim))

    elif keepdim:

        def method(self: Tensor, axis: Any = default, keepdim: bool = False, *, dim: Any = None) -> Tensor:
            return op(self, axis=_axis(axis, dim), keepdim=keepdim)

    else:

        def method(self: Tensor, axis: Any = default, *, dim: Any = None) -> Tensor:
            return op(self, axis=_axis(axis, dim))

    method.__doc__ = f"{op.name} over `axis` (or PyTorch's `dim`)."
    return method


def _running(op: Any, x: Tensor, axis: Any, dim: Any, dtype: Any) -> Tensor:
    """cumsum/cumprod in `dtype` when given: the input cast first, and the result in `dtype` (an integer
    one too, which the op would widen to i64: its wrapped values are the narrow type's, as PyTorch's)."""
    if dtype is None:
        return op(x, axis=_axis(axis, dim))
    cast = x.to(dtype)
    out = op(cast, axis=_axis(axis, dim))
    return out if out.dtype == cast.dtype else out.to(dtype)


@adapted
def cumsum(self: Tensor, axis: Any = 0, *, dim: Any = None, dtype: Any = None) -> Tensor:
    """Running sums along `axis` (PyTorch's `dim`), in `dtype` when given (the input cast first)."""
    return _running(scan.cumsum, self, axis, dim, dtype)


@adapted
def cumprod(self: Tensor, axis: Any = 0, *, dim: Any = None, dtype: Any = None) -> Tensor:
    """Running products along `axis` (PyTorch's `dim`), in `dtype` when given (the input cast first)."""
    return _running(scan.cumprod, self, axis, dim, dtype)


@adapted
def round(self: Tensor, decimals: int = 0) -> Tensor:
    """Rounded half to even, to `decimals` places as PyTorch's: round(x * 10^d) / 10^d."""
    return pointwise.round(self, decimals=decimals)


@adapted
def argsort(
    self: Tensor, axis: int = -1, descending: bool = False, *, dim: int | None = None, stable: bool = False
) -> Tensor:
    return index_ops.argsort(self, axis=_axis(axis, dim), descending=descending, stable=stable)


@adapted
def gather(self: Tensor, dim: int, index: Any, *, sparse_grad: bool = False) -> Tensor:
    """PyTorch's gather: out[..., j, ...] = self[..., index[..., j, ...], ...] along `dim`."""
    return indexing.gather(self, dim, index, sparse_grad=sparse_grad)


# movement ---------------------------------------------------------------------------------------
@adapted
def reshape(self: Tensor, *shape: Any) -> Tensor:
    return movement.reshape(self, shape=shape_arg(shape))


@adapted
def view(self: Tensor, *shape: Any) -> Tensor:
    """PyTorch's view: the same memory seen with another shape, refused where that needs a copy (as
    PyTorch's; `reshape` copies there); `view(dtype)` reinterprets the bytes (eager only)."""
    if len(shape) == 1 and isinstance(shape[0], DType | str) and not isinstance(shape[0], int):
        return _view_as_dtype(self, as_dtype(shape[0]))
    shape = shape_arg(shape)
    data = self.payload
    if isinstance(data, np.ndarray) and data.size and not data.flags.c_contiguous:
        try:
            viewed = data.view()
            viewed.shape = tuple(-1 if d == -1 else int(d) for d in shape)
        except (AttributeError, ValueError) as error:
            if "incompatible" not in str(error) and "copy" not in str(error):
                raise
            raise RuntimeError(
                f"view size {list(shape)} is not compatible with the tensor's size and strides "
                f"{describe(self)} (its memory would need a copy); use .reshape(...) instead"
            ) from None
    return movement.reshape(self, shape=shape)


def _view_as_dtype(self: Tensor, dtype: DType) -> Tensor:
    data = self.payload
    if not isinstance(data, np.ndarray):
        raise TypeError(
            f"view(dtype) reinterprets stored bytes: it runs eagerly only, not on {describe(self)}"
        )
    if self.requires_grad:
        raise RuntimeError("view(dtype) of a tensor that requires grad has no gradient; detach() it first")
    return creation.from_numpy(data.view(dtype.np))


@adapted
def view_as(self: Tensor, other: Tensor) -> Tensor:
    return view(self, *other.shape)


@adapted
def permute(self: Tensor, *axes: Any) -> Tensor:
    return movement.permute(self, axes=tuple(shape_arg(axes)))


def T(self: Tensor) -> Tensor:
    """All axes reversed, as NumPy's `.T` (a [n, din] becomes [din, n])."""
    return movement.permute(self, axes=tuple(range(self.ndim - 1, -1, -1)))


def mT(self: Tensor) -> Tensor:
    return self.transpose(-2, -1)  # (eager.py may bind transpose to C)


def H(self: Tensor) -> Tensor:
    """The conjugate transpose of a matrix: a real matrix's transpose (a 0-d tensor's is itself, as
    PyTorch's, which deprecates it)."""
    if self.ndim not in (0, 2):
        raise ShapeError(f"Tensor.H is only supported on matrices (2-D tensors), got a {self.ndim}-D tensor")
    return self.transpose(0, 1) if self.ndim else self


@adapted
def expand(self: Tensor, *shape: Any) -> Tensor:
    return shaping.expand(self, shape_arg(shape))


@adapted
def broadcast_to(self: Tensor, *shape: Any) -> Tensor:
    return movement.broadcast_to(self, shape=shape_arg(shape))


@adapted
def expand_as(self: Tensor, other: Tensor) -> Tensor:
    return self.expand(other.shape)


@adapted
def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    return self.reshape(other.shape)


@adapted
def flip(self: Tensor, *dims: Any) -> Tensor:
    return shaping.flip(self, shape_arg(dims))


@adapted
def pad(self: Tensor, widths: Any, value: float = 0.0) -> Tensor:
    return movement.pad(self, widths=tuple(tuple(w) for w in widths), value=value)


@adapted
def __getitem__(self: Tensor, key: Any) -> Tensor:
    return shaping.getitem(self, key)


@adapted
def __setitem__(self: Tensor, key: Any, value: Any) -> None:
    refuse_overlapping_setitem(self, key, value)
    indexing.setitem(self, key, value)


# the table ----------------------------------------------------------------------------------------
OPERATORS: dict[str, Callable[..., Any]] = {
    "__add__": binary.add,
    "__sub__": binary.sub,
    "__mul__": binary.mul,
    "__truediv__": binary.div,
    "__floordiv__": binary.floor_divide,
    "__mod__": binary.remainder,
    "__pow__": binary.pow,
    "__matmul__": matmul,
    "__eq__": binary.eq,
    "__ne__": binary.ne,
    "__lt__": binary.lt,
    "__le__": binary.le,
    "__gt__": binary.gt,
    "__ge__": binary.ge,
    "__and__": bitwise.bitwise_and,
    "__or__": bitwise.bitwise_or,
    "__xor__": bitwise.bitwise_xor,
    "__lshift__": bitwise.bitwise_left_shift,
    "__rshift__": bitwise.bitwise_right_shift,
    "__neg__": unary.neg,
    "__pos__": special.positive,
    "__abs__": unary.abs,
    "__invert__": bitwise.bitwise_not,
}
REFLECTED = {"__radd__": binary.add, "__rsub__": binary.sub, "__rmul__": binary.mul,
             "__rmod__": binary.remainder, "__rpow__": binary.pow,
             "__rmatmul__": matmul, "__rfloordiv__": binary.floor_divide, "__rand__": bitwise.bitwise_and,
             "__ror__": bitwise.bitwise_or, "__rxor__": bitwise.bitwise_xor,
             "__rlshift__": bitwise.bitwise_left_shift,
             "__rrshift__": bitwise.bitwise_right_shift}  # fmt: skip

HYPERBOLIC_AND_INVERSE = ("sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh")

# x.name(*args) is fn(x, *args), for these names of each module
FORWARDED_FROM = {
    binary: "mul pow remainder fmod eq ne lt le gt ge floor_divide true_divide copysign",
    bitwise: "bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift gcd lcm",
    unary: "neg abs exp exp2 log expm1 log1p sqrt rsqrt sin cos tan tanh sigmoid relu silu erf floor ceil "
    "trunc sign " + " ".join(HYPERBOLIC_AND_INVERSE),
    movement: "contiguous",
    shaping: "assign transpose flatten unsqueeze squeeze",
    autograd: "register_hook retain_grad register_post_accumulate_grad_hook",
    pointwise: "add sub div clamp masked_fill isnan isinf isfinite nan_to_num allclose equal lerp "
    "addcmul addcdiv frac deg2rad rad2deg log2 log10",
    statistics: "amax amin var std logsumexp argmin all any norm count_nonzero bincount histc sum_to_size",
    rearrange: "split chunk repeat repeat_interleave roll narrow select unbind movedim unflatten rot90 diff "
    "unfold",
    matrices: "mm bmm outer diagonal diag trace tril triu fill_diagonal_ kron cross dot vdot inner "
    "matrix_power logdet slogdet",
    ordering: "max min aminmax sort topk kthvalue median nanmedian mode cummax cummin unique "
    "unique_consecutive",
    indexing: "index_select index_add index_reduce index_fill scatter scatter_add masked_select nonzero "
    "argwhere index_put index_put_ index_copy masked_scatter take_along_dim",
    special_ops: "erfc erfinv lgamma digamma i0 signbit",
    special: "sinc xlogy logit sgn mvlgamma positive negative absolute fix",
    joining: "tile ravel fliplr flipud tensor_split hsplit vsplit dsplit msort take",
    nan_reductions: "nansum nanmean quantile nanquantile",
    solvers: "mv addmv addr addbmm cholesky_solve cholesky_inverse triangular_solve",
}
FORWARDED: dict[str, Callable[..., Any]] = {
    name: getattr(module, name) for module, names in FORWARDED_FROM.items() for name in names.split()
}
FORWARDED.update(
    {"arc" + name[1:]: getattr(unary, name) for name in HYPERBOLIC_AND_INVERSE},  # NumPy's other names
    matmul=matmul,
    scatter_reduce=scatter_reduce,
    inverse=linalg.inv,
    det=linalg.det,
    frexp=linalg_extra.frexp,
    angle=angle_op,
    cfloat=complex_refusals.cfloat,
    cdouble=complex_refusals.cdouble,
    stft=complex_refusals.stft,
    istft=complex_refusals.istft,
    matrix_exp=linalg_extra.matrix_exp,
    clamp_min=pointwise.clamp_min,
    clamp_max=pointwise.clamp_max,
    logical_not=binary.logical_not,
    addmm=matrices.addmm,
    baddbmm=matrices.addmm,
    put=numeric.put,
    float_power=numeric.float_power,
    cov=numeric.cov,
    corrcoef=numeric.corrcoef,
    isposinf=numeric.isposinf,
    isneginf=numeric.isneginf,
    isreal=numeric.isreal,
    nonzero_static=numeric.nonzero_static,
    conj=numeric.conj,
    conj_physical=numeric.conj_physical,
    resolve_conj=numeric.resolve_conj,
    resolve_neg=numeric.resolve_neg,
    renorm=renorm.renorm,
    bernoulli=distributions.bernoulli,
    multinomial=distributions.multinomial,
    diag_embed=copies.diag_embed,
    diagflat=copies.diagflat,
    select_scatter=copies.select_scatter,
    slice_scatter=copies.slice_scatter,
    diagonal_scatter=copies.diagonal_scatter,
    split_with_sizes=copies.split_with_sizes,
    narrow_copy=copies.narrow_copy,
    ger=matrices.outer,
    unsafe_chunk=rearrange.chunk,
    unsafe_split=rearrange.split,
    as_strided=strided_views.as_strided,
    geqrf=householder.geqrf,
    histogram=histograms.histogram,
)
ADAPTED.update(
    argmax=_along_axis(reduce.argmax, None, keepdim=True),
    logcumsumexp=_along_axis(scan.logcumsumexp, 0, keepdim=False),
    softmax=_along_axis(softmax, -1, keepdim=False, casts=True),
    log_softmax=_along_axis(log_softmax, -1, keepdim=False, casts=True),
    float=_cast_to(f32),
    double=_cast_to(f64),
    half=_cast_to("f16"),
    bfloat16=_cast_to("bf16"),
    long=_cast_to("i64"),
    int=_cast_to("i32"),
    short=_cast_to("i16"),
    char=_cast_to("i8"),
    byte=_cast_to("u8"),
    bool=_cast_to("bool"),
    polygamma=lambda self, n: special_ops.polygamma(self, n=n),
)
ADAPTED.update(tensor_arguments.METHODS)  # x.maximum(2.0) raises PyTorch's TypeError
PROPERTIES = {
    "T": T,
    "mT": mT,
    "mH": mT,
    "H": H,
    "nbytes": nbytes,
    "itemsize": itemsize,
    "retains_grad": retains_grad,
    "_version": version_counter,
    "layout": layout,
    "real": numeric.real,  # a real tensor's real part is itself
    "imag": imag,  # raises, as PyTorch's for a real tensor
}  # mH: real tensors are their own conjugates


def op_methods() -> dict[str, tuple[Any, bool]]:
    """The methods that call one op with the tensor first (or second: reflected), by name: (op, swapped).
    eager.py binds them to its calls in C where it can."""
    out = {name: (fn, False) for name, fn in {**OPERATORS, **FORWARDED}.items() if isinstance(fn, Op)}
    out.update({name: (fn, True) for name, fn in REFLECTED.items() if isinstance(fn, Op)})
    return out


def bind(cls: type = Tensor) -> None:
    """Set every entry of the table on `cls` (once, when verigrad is imported)."""
    methods: dict[str, Any] = {name: _forward(fn) for name, fn in {**OPERATORS, **FORWARDED}.items()}
    methods.update({name: array_operands.operator(name, OPERATORS[name]) for name in array_operands.UFUNCS})
    methods.update({name: _reflected(fn) for name, fn in REFLECTED.items()})
    methods.update({name: assigning(fn) for name, fn in IN_PLACE_OPERATORS.items()})
    methods.update(ADAPTED)
    methods.update({name: property(fn) for name, fn in PROPERTIES.items()})
    methods.update({f"{name}_": in_place(name) for name in IN_PLACE})
    methods.update({f"{name}_": view_in_place(name) for name in VIEWS_IN_PLACE})
    methods.update({alias: methods[name] for alias, name in ALIASES.items()})
    for name, method in methods.items():
        if getattr(method, "__name__", None) == "method":  # made above: named for where it is bound
            method.__name__, method.__qualname__ = name, f"{cls.__name__}.{name}"
        setattr(cls, name, method)


bind()
