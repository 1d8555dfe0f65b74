"""verigrad: every op has one NumPy definition; shapes are checked symbolically before anything runs."""

from . import data, io, linalg, models, nn, optim
from . import eager as _eager
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
from .io import load, save
from .ir import Program, trace
from .modes import abstract
from .ops import (
    REGISTRY,
    Generator,
    abs,
    acos,
    acosh,
    add,
    addcdiv,
    addcmul,
    addmm,
    all,
    allclose,
    any,
    arange,
    argmax,
    argmin,
    argsort,
    argwhere,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bernoulli,
    bincount,
    bmm,
    broadcast_tensors,
    bucketize,
    cast,
    cdist,
    ceil,
    chunk,
    clamp,
    concat,
    cos,
    cosh,
    count_nonzero,
    cross,
    cummax,
    cummin,
    cumprod,
    cumsum,
    deg2rad,
    det,
    diag,
    diagonal,
    diff,
    div,
    einsum,
    empty,
    empty_like,
    eq,
    equal,
    erf,
    exp,
    expand,
    expm1,
    eye,
    fill_diagonal_,
    flatten,
    flip,
    floor,
    fmod,
    frac,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    gather,
    ge,
    gelu,
    getitem,
    gt,
    histc,
    hypot,
    index_add,
    index_select,
    isclose,
    isfinite,
    isinf,
    isnan,
    kron,
    kthvalue,
    le,
    lerp,
    linspace,
    log,
    log1p,
    log2,
    log10,
    log_softmax,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logspace,
    logsumexp,
    lt,
    manual_seed,
    masked_fill,
    masked_select,
    matmul,
    max,
    maximum,
    mean,
    median,
    meshgrid,
    min,
    minimum,
    mm,
    movedim,
    mul,
    multinomial,
    nan_to_num,
    nanmedian,
    narrow,
    ne,
    neg,
    nonzero,
    norm,
    ones,
    ones_like,
    outer,
    pad,
    permute,
    pow,
    prod,
    rad2deg,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    relu,
    remainder,
    repeat_interleave,
    reshape,
    roll,
    rot90,
    round,
    rsqrt,
    scatter,
    scatter_add,
    scatter_reduce,
    searchsorted,
    sigmoid,
    sign,
    silu,
    sin,
    sinh,
    slice_,
    softmax,
    sort,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    std_mean,
    sub,
    sum,
    take,
    tanh,
    tensor,
    topk,
    transpose,
    tril,
    tril_indices,
    triu,
    triu_indices,
    trunc,
    unbind,
    unflatten,
    unique,
    unique_consecutive,
    unsqueeze,
    var,
    var_mean,
    zeros,
    zeros_like,
)
from .ops import addmm as baddbmm  # the same on batches
from .ops import inv as inverse  # PyTorch's torch.inverse (torch.linalg.inv)
from .ops import tensor as as_tensor
from .ops.derived import where_or_positions as where  # the where op, and the one-argument form
from .shapes import Dim, Spec, dims, spec
from .tensor import Tensor

cat = concat  # PyTorch's names for the same functions
clip = clamp
amax, amin = max, min
set_num_threads, get_num_threads = set_threads, get_threads
float32, float64, float16, bfloat16, int32, int64, uint8 = f32, f64, f16, bf16, i32, i64, u8
double, half, long = f64, f16, i64


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
