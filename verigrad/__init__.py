"""verigrad: every op has one NumPy definition; shapes are checked symbolically before anything runs."""

from typing import Any as _Any

from . import data, io, linalg, models, nn, optim
from . import eager as _eager
from . import functions as _functions
from . import tensor_methods as _tensor_methods  # binds the Tensor methods
from .autograd import (
    enable_grad,
    grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
    value_and_grad,
)
from .backends import available as available_backends
from .backends import backend, get_backend, get_threads, set_backend, set_threads
from .compile import check, compile
from .dtypes import DType, bf16, bool_, f16, f32, f64, i32, i64, u8
from .errors import DTypeError, ShapeError, VerigradError, WeightFileError
from .functions import (
    addcdiv,
    addcmul,
    addmm,
    all,
    allclose,
    amax,
    amin,
    aminmax,
    any,
    argmin,
    argwhere,
    bernoulli,
    bincount,
    bmm,
    broadcast_tensors,
    bucketize,
    cdist,
    chunk,
    clamp,
    count_nonzero,
    cross,
    cummax,
    cummin,
    deg2rad,
    diag,
    diagonal,
    diff,
    dot,
    einsum,
    equal,
    fill_diagonal_,
    frac,
    histc,
    index_add,
    index_select,
    inner,
    isclose,
    isfinite,
    isinf,
    isnan,
    kron,
    kthvalue,
    lerp,
    log2,
    log10,
    logdet,
    logsumexp,
    masked_fill,
    masked_select,
    matrix_power,
    max,
    median,
    meshgrid,
    min,
    mm,
    mode,
    movedim,
    multinomial,
    nan_to_num,
    nanmedian,
    narrow,
    nonzero,
    norm,
    outer,
    rad2deg,
    repeat_interleave,
    roll,
    rot90,
    scatter,
    scatter_add,
    slogdet,
    sort,
    split,
    square,
    std,
    std_mean,
    tensordot,
    topk,
    tril,
    tril_indices,
    triu,
    triu_indices,
    unbind,
    unflatten,
    unique,
    unique_consecutive,
    var,
    var_mean,
    vdot,
)
from .functions import addmm as baddbmm  # the same on batches
from .functions.indexing import where_or_positions as where  # the where op, and the one-argument form
from .io import load, save
from .ir import Program
from .ir import trace as _ir_trace
from .modes import abstract
from .ops import (
    REGISTRY,
    Generator,
    abs,
    acos,
    acosh,
    add,
    arange,
    argmax,
    argsort,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    cast,
    ceil,
    concat,
    cos,
    cosh,
    cumprod,
    cumsum,
    det,
    div,
    empty,
    empty_like,
    eq,
    erf,
    exp,
    expand,
    expm1,
    eye,
    flatten,
    flip,
    floor,
    fmod,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    gather,
    ge,
    gelu,
    getitem,
    gt,
    hypot,
    le,
    linspace,
    log,
    log1p,
    log_softmax,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logspace,
    lt,
    manual_seed,
    matmul,
    maximum,
    mean,
    minimum,
    mul,
    ne,
    neg,
    ones,
    ones_like,
    pad,
    permute,
    pow,
    prod,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    relu,
    remainder,
    reshape,
    round,
    rsqrt,
    scatter_reduce,
    searchsorted,
    sigmoid,
    sign,
    silu,
    sin,
    sinh,
    slice_,
    softmax,
    sqrt,
    squeeze,
    stack,
    sub,
    sum,
    take,
    tanh,
    tensor,
    transpose,
    trunc,
    unsqueeze,
    zeros,
    zeros_like,
)
from .ops import inv as inverse  # PyTorch's torch.inverse (torch.linalg.inv)
from .ops import tensor as as_tensor
from .shapes import Dim, Spec, dims, spec
from .tensor import Tensor

cat = concat  # PyTorch's names for the same functions
clip = clamp
set_num_threads, get_num_threads = set_threads, get_threads
float32, float64, float16, bfloat16, int32, int64, uint8 = f32, f64, f16, bf16, i32, i64, u8
double, half, long = f64, f16, i64


def trace(x: _Any, *specs: _Any, **kwargs: _Any) -> _Any:
    """PyTorch's torch.trace(x), the sum of a matrix's diagonal, for a tensor; for a function,
    verigrad's IR tracer `trace(fn, *specs, names=None)` (also verigrad.ir.trace), which records it
    as a Program."""
    if isinstance(x, Tensor):
        if specs or kwargs:
            raise TypeError("trace(input) takes one matrix (the IR tracer takes a function first)")
        return _functions.trace(x)
    return _ir_trace(x, *specs, **kwargs)


def device(name: str = "cpu") -> str:
    """PyTorch's torch.device for the device verigrad runs on: "cpu" (a GPU's name is refused)."""
    if name.split(":")[0] != "cpu":
        raise ValueError(f"verigrad runs on the CPU: there is no {name!r} device")
    return "cpu"


class cuda:
    """PyTorch's torch.cuda queries, answered for verigrad: it has no GPU backend."""

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def device_count() -> int:
        return 0


__version__ = "0.1.0"

# `from verigrad import *` gives every public name but these two, which would hide Python's own
__all__ = sorted(name for name in dir() if not name.startswith("_"))
float, bool = f32, bool_  # as torch.float and torch.bool: `vg.float`, `vg.bool`
