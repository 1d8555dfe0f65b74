"""verigrad: every op has one NumPy definition; shapes are checked symbolically before anything runs."""

import contextlib as _contextlib
import math as _math
import sys as _sys
import types as _types
from typing import Any as _Any

from . import _lazy, accelerator, amp, autograd
from . import autograd_functional as _autograd_functional
from . import eager as _eager
from . import function as _function
from . import functions as _functions
from . import modes as _modes
from . import tensor as _tensor_module
from . import tensor_methods as _tensor_methods  # binds the Tensor methods
from . import typeinfo as _typeinfo
from .accelerator import cuda
from .amp import autocast, get_autocast_dtype, is_autocast_enabled
from .autograd import (
    enable_grad,
    inference_mode,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    is_grad_enabled,
    no_grad,
    set_anomaly_enabled,
    set_grad_enabled,
)
from .autograd_functional import grad_transform as grad  # JAX's; verigrad.autograd.grad is PyTorch's
from .autograd_functional import value_and_grad
from .backends import available as available_backends
from .backends import backend, get_backend, get_threads, set_backend, set_threads
from .devices import device
from .dtypes import DType, as_dtype, bf16, bool_, can_cast, f16, f32, f64, i8, i16, i32, i64, u8
from .dtypes import promote as promote_types
from .errors import AxisError, DTypeError, IndexDTypeError, ShapeError, VerigradError, WeightFileError
from .functions import (
    absolute,
    add,
    addcdiv,
    addcmul,
    addmm,
    all,
    allclose,
    amax,
    amin,
    aminmax,
    any,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    argmin,
    argwhere,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    bernoulli,
    bincount,
    block_diag,
    bmm,
    broadcast_tensors,
    broadcast_to,
    bucketize,
    cartesian_prod,
    cdist,
    chunk,
    clamp,
    clamp_max,
    clamp_min,
    column_stack,
    combinations,
    count_nonzero,
    cross,
    cummax,
    cummin,
    deg2rad,
    diag,
    diagonal,
    diff,
    div,
    dot,
    dsplit,
    dstack,
    einsum,
    entr,
    equal,
    fill_diagonal_,
    fix,
    fliplr,
    flipud,
    fmax,
    fmin,
    frac,
    heaviside,
    histc,
    hsplit,
    hstack,
    index_add,
    index_copy,
    index_fill,
    index_put,
    index_select,
    inner,
    isclose,
    isfinite,
    isinf,
    isnan,
    kron,
    kthvalue,
    ldexp,
    lerp,
    log2,
    log10,
    logaddexp2,
    logdet,
    logical_xor,
    logit,
    logsumexp,
    masked_fill,
    masked_scatter,
    masked_select,
    matrix_power,
    max,
    median,
    meshgrid,
    min,
    mm,
    mode,
    moveaxis,
    movedim,
    msort,
    multinomial,
    mvlgamma,
    nan_to_num,
    nanmean,
    nanmedian,
    nanquantile,
    nansum,
    narrow,
    negative,
    nonzero,
    norm,
    normal,
    outer,
    polygamma,
    positive,
    quantile,
    rad2deg,
    ravel,
    reciprocal,
    repeat_interleave,
    roll,
    rot90,
    row_stack,
    scatter,
    scatter_add,
    searchsorted,
    select,
    sgn,
    sinc,
    slogdet,
    sort,
    split,
    square,
    std,
    std_mean,
    sub,
    swapaxes,
    swapdims,
    take,
    take_along_dim,
    tensor_split,
    tensordot,
    tile,
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
    vsplit,
    vstack,
    xlogy,
)
from .functions import addmm as baddbmm  # the same on batches
from .functions.complex_refusals import complex, istft, polar, stft, view_as_complex, view_as_real
from .functions.copies import (
    alias_copy,
    diag_embed,
    diagflat,
    diagonal_copy,
    diagonal_scatter,
    expand_copy,
    narrow_copy,
    permute_copy,
    select_scatter,
    slice_scatter,
    split_with_sizes,
    split_with_sizes_copy,
    squeeze_copy,
    t_copy,
    transpose_copy,
    unbind_copy,
    unfold_copy,
    unsqueeze_copy,
    view_copy,
)
from .functions.histograms import histogram, histogramdd
from .functions.householder import geqrf, ormqr
from .functions.indexing import gather, index_reduce
from .functions.indexing import where_or_positions as where  # the where op, and the one-argument form
from .functions.numeric import (
    broadcast_shapes,
    conj,
    conj_physical,
    corrcoef,
    cov,
    cumulative_trapezoid,
    dist,
    fill,
    float_power,
    isin,
    isneginf,
    isposinf,
    isreal,
    native_dropout_backward,
    nonzero_static,
    put,
    real,
    resize_as_,
    resolve_conj,
    resolve_neg,
    rsub,
    scalar_tensor,
    trapezoid,
    trapz,
    unravel_index,
    vander,
    zero_,
)
from .functions.pointwise import round
from .functions.rearrange import chunk as unsafe_chunk  # PyTorch's unchecked-view variants: the same here
from .functions.rearrange import split as unsafe_split
from .functions.renorm import renorm
from .functions.solvers import (
    addbmm,
    addmv,
    addr,
    cholesky_inverse,
    cholesky_solve,
    lu_unpack,
    mv,
    triangular_solve,
)
from .functions.solvers import legacy_lu as lu
from .functions.solvers import legacy_lu_solve as lu_solve
from .functions.strided import as_strided, as_strided_copy, as_strided_scatter
from .modes import abstract
from .ops import (
    REGISTRY,
    Generator,
    abs,
    acos,
    acosh,
    arange,
    argmax,
    argsort,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    cast,
    ceil,
    concat,
    copysign,
    cos,
    cosh,
    det,
    empty,
    empty_like,
    eq,
    erf,
    exp,
    exp2,
    expand,
    expm1,
    eye,
    flatten,
    flip,
    floor,
    floor_divide,
    fmod,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    ge,
    gelu,
    getitem,
    gt,
    hypot,
    le,
    linspace,
    log,
    log1p,
    logaddexp,
    logcumsumexp,
    logical_and,
    logical_not,
    logical_or,
    logspace,
    lt,
    manual_seed,
    matmul,
    maximum,
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
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    relu,
    remainder,
    reshape,
    result_type,
    rsqrt,
    scatter_reduce,
    sigmoid,
    sign,
    silu,
    sin,
    sinh,
    slice_,
    sqrt,
    squeeze,
    stack,
    tan,
    tanh,
    tensor,
    transpose,
    true_divide,
    trunc,
    unsqueeze,
    zeros,
    zeros_like,
)
from .ops import inv as inverse  # PyTorch's torch.inverse (torch.linalg.inv)
from .ops.angle import angle
from .ops.bitwise import gcd, lcm
from .ops.creation import as_tensor, asarray, empty_permuted, empty_strided, frombuffer, randint_like
from .ops.creation import default_generator as _default_generator
from .ops.linalg_extra import frexp, matrix_exp
from .ops.special import digamma, erfc, erfinv, i0, lgamma, nextafter, signbit
from .ops.special_gamma import igamma, igammac
from .settings import (
    are_deterministic_algorithms_enabled,
    get_default_device,
    get_default_dtype,
    get_float32_matmul_precision,
    is_deterministic_algorithms_warn_only_enabled,
    set_default_device,
    set_default_dtype,
    set_float32_matmul_precision,
    set_printoptions,
    use_deterministic_algorithms,
)
from .shapes import Dim, Size, Spec, dims, spec
from .tensor import (
    LEGACY_TYPES,
    Tensor,
    channels_last,
    channels_last_3d,
    contiguous_format,
    memory_format,
    preserve_format,
)
from .typeinfo import finfo, iinfo

# Names read on first use (_lazy.py): the namespaces and functions whose modules the Tensor's methods do not
# import already (nn alone is a hundred modules), as `import torch` leaves torch.distributions unread
_LAZY_NAMES = _lazy.table(
    {
        "compile": "check",
        "functions.aten_extra": "_softmax_backward_data _unsafe_masked_index "
        "_unsafe_masked_index_put_accumulate",
        "functions.gradient": "gradient",
        "functions.legacy_cat": "cat concatenate=cat",  # PyTorch's cat: skips 1-D empty tensors
        "functions.segments": "_chunk_cat segment_reduce _segment_reduce=segment_reduce",  # aten's, OpInfo's
        "functions.windows": "bartlett_window blackman_window hamming_window hann_window kaiser_window",
        "io": "load save",  # torch.load and torch.save (io.checkpoint, with safetensors)
        "ir": "Program",
        # PyTorch's older torch.* spellings of linalg's
        "linalg": "cholesky=legacy_cholesky qr=legacy_qr svd=legacy_svd pca_lowrank pinverse svd_lowrank",
        "nn.compiled": "compile",
        "nn.functional": "adaptive_avg_pool1d avg_pool1d bilinear celu channel_shuffle conv1d conv2d conv3d "
        "conv_transpose1d conv_transpose2d conv_transpose3d cosine_similarity hardshrink pairwise_distance "
        "pdist pixel_shuffle pixel_unshuffle prelu selu softmax log_softmax",  # torch.softmax(x, dim, dtype=)
        "nn.functional.grid_sampler": "grid_sampler_2d grid_sampler_3d",
        "nn.functional.native_norms": "_batch_norm_with_update _native_batch_norm_legit native_batch_norm "
        "native_group_norm native_layer_norm",
        "nn.functional.padding": "constant_pad_nd",
        # torch.* names of functional's functions, torch's arguments
        "nn.functional.torch_spellings": "adaptive_max_pool1d alpha_dropout batch_norm dropout embedding "
        "feature_alpha_dropout group_norm instance_norm layer_norm max_pool1d max_pool1d_with_indices "
        "max_pool2d max_pool3d rms_norm rrelu threshold",
    },
    modules=(
        "data", "distributed", "distributions", "fft", "io", "ir", "jit", "library", "linalg", "masked",
        "models", "multiprocessing", "nn", "optim", "profiler", "signal", "special", "testing", "utils",
    ),
)  # fmt: skip
__getattr__, __dir__ = _lazy.attach(__name__, _LAZY_NAMES)

prod = _tensor_methods.prod  # torch.prod(input, dim, keepdim, *, dtype): the method, which casts to dtype
cumsum, cumprod = _tensor_methods.cumsum, _tensor_methods.cumprod  # torch.cumsum(input, dim, *, dtype)
sum, mean = Tensor.sum, Tensor.mean  # torch.sum/mean(input, dim, keepdim, *, dtype): the methods, bound in C
get_rng_state, set_rng_state = _default_generator.get_state, _default_generator.set_state
cuda.amp = amp.cuda_amp  # torch.cuda.amp: disabled, with PyTorch's warnings
clip = clamp
clone, t = Tensor.clone, _tensor_methods.t  # torch.clone(x), torch.t(x)
divide, multiply, subtract = div, mul, sub  # PyTorch's other names
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
dtype = DType  # isinstance(x, torch.dtype)
ger = outer  # PyTorch's older name
adjoint = Tensor.adjoint
strided = _typeinfo.strided  # the one layout: torch.strided
layout = type(strided)
version = _types.SimpleNamespace(__version__="0.1.0", cuda=None, hip=None, debug=False, git_version=None)
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None
# torch.NAME_(x, ...): x.NAME_(...), written into x
abs_, absolute_, acos_, acosh_, arccos_, arccosh_, arcsin_, arcsinh_, arctan_, arctanh_ = (
    Tensor.abs_, Tensor.absolute_, Tensor.acos_, Tensor.acosh_, Tensor.arccos_, Tensor.arccosh_,
    Tensor.arcsin_, Tensor.arcsinh_, Tensor.arctan_, Tensor.arctanh_,
)  # fmt: skip
asin_, asinh_, atan_, atanh_, ceil_, clamp_, clip_, cos_, cosh_, deg2rad_, erf_, erfc_ = (
    Tensor.asin_, Tensor.asinh_, Tensor.atan_, Tensor.atanh_, Tensor.ceil_, Tensor.clamp_, Tensor.clip_,
    Tensor.cos_, Tensor.cosh_, Tensor.deg2rad_, Tensor.erf_, Tensor.erfc_,
)  # fmt: skip
exp_, exp2_, expm1_, fix_, floor_, frac_, gcd_, i0_, lcm_, ldexp_, log_, log10_, log1p_, log2_ = (
    Tensor.exp_, Tensor.exp2_, Tensor.expm1_, Tensor.fix_, Tensor.floor_, Tensor.frac_, Tensor.gcd_,
    Tensor.i0_, Tensor.lcm_, Tensor.ldexp_, Tensor.log_, Tensor.log10_, Tensor.log1p_, Tensor.log2_,
)  # fmt: skip
logit_, nan_to_num_, neg_, negative_, rad2deg_, reciprocal_, relu_, round_, rsqrt_, sigmoid_ = (
    Tensor.logit_, Tensor.nan_to_num_, Tensor.neg_, Tensor.negative_, Tensor.rad2deg_, Tensor.reciprocal_,
    Tensor.relu_, Tensor.round_, Tensor.rsqrt_, Tensor.sigmoid_,
)  # fmt: skip
sin_, sinc_, sinh_, sqrt_, square_, tan_, tanh_, trunc_, xlogy_, clamp_max_, clamp_min_, fill_ = (
    Tensor.sin_, Tensor.sinc_, Tensor.sinh_, Tensor.sqrt_, Tensor.square_, Tensor.tan_, Tensor.tanh_,
    Tensor.trunc_, Tensor.xlogy_, Tensor.clamp_max_, Tensor.clamp_min_, Tensor.fill_,
)  # fmt: skip
set_num_threads, get_num_threads = set_threads, get_threads
float32, float64, float16, bfloat16, int32, int64, uint8 = f32, f64, f16, bf16, i32, i64, u8
int8, int16, short, double, half, long = i8, i16, i16, f64, f16, i64


BoolTensor, ByteTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor = (
    LEGACY_TYPES[name]
    for name in (
        "BoolTensor",
        "ByteTensor",
        "DoubleTensor",
        "FloatTensor",
        "HalfTensor",
        "IntTensor",
        "LongTensor",
    )
)


def trace(x: _Any, *specs: _Any, **kwargs: _Any) -> _Any:
    """PyTorch's torch.trace(x), the sum of a matrix's diagonal, for a tensor; for a function,
    verigrad's IR tracer `trace(fn, *specs, names=None)` (also verigrad.ir.trace), which records it
    as a Program."""
    if isinstance(x, Tensor):
        if specs or kwargs:
            raise TypeError("trace(input) takes one matrix (the IR tracer takes a function first)")
        return _functions.trace(x)
    from .ir import trace as ir_trace

    return ir_trace(x, *specs, **kwargs)


def initial_seed() -> int:
    """The seed the default generator was last seeded with."""
    return _default_generator.initial_seed()


def seed() -> int:
    """Seed the default generator from the operating system's entropy; the new seed."""
    return _default_generator.seed()


def is_tensor(obj: object) -> bool:
    """Whether `obj` is a verigrad Tensor."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> bool:
    """Whether the tensor's dtype is a floating one."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_floating_point() takes a Tensor, not {type(input).__name__}")
    return input.dtype.is_float


def detach(input: Tensor) -> Tensor:
    """input's values without history, sharing its memory (torch.detach)."""
    return input.detach()


def is_conj(input: Tensor) -> bool:
    """False: a real tensor is never a lazy conjugate."""
    return input.is_conj()


def is_neg(input: Tensor) -> bool:
    """False: verigrad has no lazy negation bit."""
    return input.is_neg()


def get_device(input: Tensor) -> int:
    """-1, PyTorch's answer for a tensor on the CPU."""
    return input.get_device()


def is_inference_mode_enabled() -> bool:
    """Whether an enabled inference_mode block is running this code (verigrad's makes no inference
    tensors: `Tensor.is_inference()` is False)."""
    return autograd.is_inference_mode_enabled()


def set_flush_denormal(mode: bool) -> bool:  # noqa: F811 (PyTorch's argument name; torch.mode is kept)
    """Whether the call took effect, as PyTorch's: turning flushing off always does (verigrad never
    flushes subnormal numbers); turning it on is not supported (False), so results keep them."""
    return not mode


def set_default_tensor_type(t: _Any) -> None:
    """PyTorch's deprecated form of set_default_dtype, given a legacy type (FloatTensor) or its name."""
    if isinstance(t, str):
        named = [d for d, name in _tensor_module.LEGACY_NAMES.items() if name == t]
        if not named:
            raise TypeError(f"set_default_tensor_type: invalid type string {t!r} (verigrad runs on the CPU)")
        dtype = named[0]
    else:
        dtype = getattr(t, "dtype", t)
    if not as_dtype(dtype).is_float:
        raise TypeError("only floating-point types are supported as the default type")
    set_default_dtype(dtype)


def is_complex(input: Tensor) -> bool:
    """False: verigrad has no complex dtypes."""
    return input.is_complex()


def is_signed(input: Tensor) -> bool:
    """Whether the tensor's dtype holds negative values."""
    return input.is_signed()


def is_nonzero(input: Tensor) -> bool:
    """Whether the one-element tensor's value is not zero (PyTorch raises for any other size)."""
    return input.is_nonzero()


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether the two tensors have the same shape."""
    return input.is_same_size(other)


def get_num_interop_threads() -> int:
    """1: verigrad runs independent ops one after another (set_num_threads sets the threads within one)."""
    return 1


def set_num_interop_threads(num: int) -> None:
    """Accepted and kept at 1 (verigrad has no inter-op pool; results do not depend on it)."""
    if not isinstance(num, int) or num < 1:
        raise ValueError(f"set_num_interop_threads: num must be a positive int, got {num!r}")


def chain_matmul(*matrices: Tensor, out: _Any = None) -> Tensor:
    """The product of the matrices in the cheapest order: torch.chain_matmul, linalg.multi_dot's older
    spelling (one matrix is itself)."""
    if out is not None:
        raise NotImplementedError("chain_matmul: out= is not supported; use the returned tensor")
    from .linalg import multi_dot

    return matrices[0].clone() if len(matrices) == 1 else multi_dot(list(matrices))


def typename(obj: _Any) -> str:
    """The type's name as PyTorch gives it: a tensor's legacy type ("torch.FloatTensor"), else the
    module-qualified class name (the bare one for builtins)."""
    if isinstance(obj, Tensor):
        return obj.type()
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module in (None, "builtins") else f"{module}.{cls.__qualname__}"


def numel(input: Tensor) -> int:
    """The number of elements of the tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"numel() takes a Tensor, not {type(input).__name__}")
    return input.numel()


__version__ = "0.1.0"

# `from verigrad import *` gives every public name but these two, which would hide Python's own
__all__ = [name for name in __dir__() if not name.startswith("_")]
float, bool, int = f32, bool_, i32  # as torch.float, torch.bool and torch.int: `vg.float`, `vg.int`


def _namespace(path: str, doc: str, **names: _Any) -> _types.ModuleType:
    """A module `verigrad.<path>` holding `names`, registered in sys.modules so that `import` and
    `from ... import` find it (PyTorch's namespaces that programs import as modules)."""
    return _lazy.namespace(f"{__name__}.{path}", doc, {}, **names)


# torch.func (functional_call, grad, grad_and_value; vmap refused), a module for `from torch.func import ...`
func = _lazy.namespace(
    f"{__name__}.func", "PyTorch's torch.func: functional_call, grad, grad_and_value.",
    _lazy.table({"nn.utils.stateless": "functional_call"}), __name__, grad=grad,
    grad_and_value=_autograd_functional.grad_and_value, vmap=_autograd_functional.vmap,
)  # fmt: skip
vmap = func.vmap


@_contextlib.contextmanager
def _fork_rng(devices: _Any = None, enabled: bool = True, **_: _Any) -> _Any:
    """torch.random.fork_rng: the default generator's state saved, and put back after the block."""
    saved = get_rng_state() if enabled else None
    try:
        yield
    finally:
        if saved is not None:
            set_rng_state(saved)


# torch.random (the default generator's functions), a module for `from torch.random import ...`
random = _namespace(
    "random", "PyTorch's torch.random: the default generator's functions.",
    manual_seed=manual_seed, seed=seed, initial_seed=initial_seed, get_rng_state=get_rng_state,
    set_rng_state=set_rng_state, fork_rng=_fork_rng, default_generator=_default_generator,
)  # fmt: skip
default_generator = random.default_generator


def _is_compiling() -> bool:
    """Whether a verigrad.compile trace is running this code (torch.compiler.is_compiling)."""
    return _modes.current().name == "trace"


def _compiler_disable(fn: _Any = None, recursive: bool = True, reason: _Any = None) -> _Any:
    """torch.compiler.disable: fn itself (verigrad.compile traces what it calls: the results are the same)."""
    return (lambda f: f) if fn is None else fn


# torch.compiler: is_compiling and the decorators that only steer torch.compile (no effect on results here)
_unchanged = lambda fn: fn
compiler = _lazy.namespace(
    f"{__name__}.compiler", "PyTorch's torch.compiler: is_compiling, disable, reset.",
    _lazy.table({"nn.compiled": "compile"}), __name__, is_compiling=_is_compiling,
    is_dynamo_compiling=_is_compiling, disable=_compiler_disable, allow_in_graph=_unchanged,
    assume_constant_result=_unchanged, reset=lambda: None,
)  # fmt: skip

# PyTorch's namespaces that programs import as modules (`import torch.backends.cudnn as cudnn`, `from
# torch.cuda.amp import GradScaler`, `from torch.version import cuda`): the objects verigrad holds them in
for _path, _value in (
    ("backends.cudnn", _sys.modules[f"{__name__}.backends"].cudnn),
    ("backends.cuda", _sys.modules[f"{__name__}.backends"].cuda),
    ("backends.mps", _sys.modules[f"{__name__}.backends"].mps),
    ("cuda", cuda),
    ("cuda.amp", cuda.amp),
    ("version", version),
):
    _sys.modules[f"{__name__}.{_path}"] = _value

# torch.autograd.functional (jacobian, hessian, vjp, jvp, vhp, hvp), importable as a module
autograd.functional = _namespace(
    "autograd.functional", "PyTorch's autograd.functional.",
    **{n: getattr(_autograd_functional, n) for n in ("jacobian", "hessian", "vjp", "jvp", "vhp", "hvp")},
)  # fmt: skip
# the transforms split out of autograd.py stay importable from verigrad.autograd, where they were
for _name in _autograd_functional.__all__:
    setattr(autograd, _name, getattr(_autograd_functional, _name))

# PyTorch's torch.autograd.Function, and its module for `from torch.autograd.function import ...`
autograd.Function, autograd.FunctionCtx = _function.Function, _function.FunctionCtx
autograd.function = _function
_sys.modules[f"{__name__}.autograd.function"] = _function

# PyTorch's names answered in torch_names (torch.maximum refusing numbers, torch.cpu/xpu/mps, the sparse
# layouts; it registers torch.autograd.gradcheck and .profiler and binds x.svd(), x.prelu(), ...)
from . import torch_names as _torch_names  # noqa: E402

globals().update(_torch_names.NAMES)
__all__ += [name for name in _torch_names.NAMES if name not in __all__]

# PyTorch's keywords for the functions' operands (torch.sum(input=x), torch.mm(input=a, mat2=b))
from .functions import torch_keywords as _torch_keywords  # noqa: E402

_torch_keywords.accept_all(globals(), __all__)
