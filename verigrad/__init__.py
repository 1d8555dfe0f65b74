"""verigrad: every op has one NumPy definition; shapes are checked symbolically before anything runs."""

from . import data, functional, io, models, nn, optim
from . import eager as _eager
from .autograd import enable_grad, grad, is_grad_enabled, no_grad, value_and_grad
from .backends import available as available_backends
from .backends import backend, get_backend, set_backend, set_threads
from .compile import check, compile
from .dtypes import DType, bf16, bool_, f16, f32, f64, i32, i64
from .errors import DTypeError, ShapeError, VerigradError, WeightFileError
from .io import load, save
from .ir import Program, trace
from .modes import abstract
from .ops import (
    REGISTRY,
    Generator,
    abs,
    add,
    all,
    any,
    arange,
    argmax,
    argmin,
    argsort,
    cast,
    chunk,
    clamp,
    concat,
    cos,
    cumsum,
    div,
    einsum,
    eq,
    exp,
    expand,
    expm1,
    eye,
    flatten,
    flip,
    from_dlpack,
    from_numpy,
    full,
    gather,
    ge,
    gelu,
    getitem,
    gt,
    index_select,
    isfinite,
    isinf,
    isnan,
    le,
    log,
    log1p,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logsumexp,
    lt,
    manual_seed,
    masked_fill,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    ne,
    neg,
    ones,
    ones_like,
    pad,
    permute,
    pow,
    rand,
    randint,
    randn,
    relu,
    reshape,
    rsqrt,
    sigmoid,
    silu,
    sin,
    slice_,
    softmax,
    sort,
    split,
    sqrt,
    squeeze,
    stack,
    std,
    sub,
    sum,
    take,
    tanh,
    tensor,
    transpose,
    tril,
    triu,
    unsqueeze,
    var,
    where,
    zeros,
    zeros_like,
)
from .shapes import Dim, Spec, dims, spec
from .tensor import Tensor

cat = concat  # PyTorch's names for the same functions
clip = clamp
amax, amin = max, min

__version__ = "0.1.0"
