"""Creation: tensors from data, constant fills, ranges, and seeded random tensors.

Random ops are pure: each call draws a 64-bit seed from a `Generator` and passes it as a param, so
the reference (NumPy's PCG64 seeded with it) gives the same bits for the same seed in every mode.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import modes
from ..dtypes import DEFAULT_FLOAT, DType, as_dtype, bf16, bool_, from_numpy_dtype, i64
from ..errors import DTypeError, ShapeError
from ..shapes import DimLike, as_shape
from ..tensor import Tensor
from ._op import Op, Sample
from .index import argsort
from .movement import cast


class Generator:
    """A seedable source of op seeds: the same seed gives the same sequence of random tensors."""

    def __init__(self, seed: int = 0) -> None:
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> Generator:
        self._rng = np.random.Generator(np.random.PCG64(int(seed)))
        return self

    def next_seed(self) -> int:
        return int(self._rng.integers(0, 2**63 - 1))


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Reseed the default generator (used by rand, randn, randint, dropout and nn initialisation)."""
    return default_generator.manual_seed(seed)


# data in ---------------------------------------------------------------------------------------
def tensor(data: Any, dtype: DType | str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor holding a copy of `data` (nested lists, scalars, NumPy arrays or tensors).

    Python floats give f32, ints i64, bools bool; NumPy arrays keep their dtype.
    """
    if isinstance(data, Tensor):  # a copy of the stored values, in their dtype (bf16 bits too)
        out = modes.current().constant(np.array(data._array("tensor()"), order="C"), data.dtype)
    else:
        array = np.array(data)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"cannot make a tensor from {type(data).__name__} of {array.dtype}")
        python = not isinstance(data, np.ndarray | np.generic)
        if python and array.dtype == np.float64 and dtype is None:  # with a dtype: one rounding, to it
            array = array.astype(np.float32)
        if python and dtype is not None:
            _fits(array, as_dtype(dtype))
        out = from_numpy(array if array.flags.c_contiguous else array.copy())  # np.array copied it
    if dtype is not None and as_dtype(dtype) is not out.dtype:
        out = cast(out, dtype=as_dtype(dtype))
    return out.requires_grad_(True) if requires_grad else out


def _fits(array: np.ndarray, dtype: DType) -> None:
    """PyTorch's check of Python numbers for an integer dtype: a signed one must hold them, an unsigned
    one their magnitudes (-1 wraps to 255 in u8, 300 is refused in i8)."""
    if dtype.kind not in "iu" or array.dtype.kind not in "iu" or not array.size:
        return
    top = np.iinfo(dtype.np).max
    low = np.iinfo(dtype.np).min if dtype.kind == "i" else -top
    if array.min() < low or array.max() > top:
        raise ValueError(f"tensor(): a value cannot be converted to {dtype.name} without overflow")


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing `array`'s memory (uint16 widens to i32, uint32 and uint64 to i64, with a copy)."""
    if isinstance(array, np.generic):  # a NumPy scalar: a 0-d array holding its value
        array = np.asarray(array)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy takes a NumPy array, got {type(array).__name__}; use verigrad.tensor")
    dtype = from_numpy_dtype(array.dtype)
    if array.dtype != dtype.np:
        array = array.astype(dtype.np)
    return modes.current().constant(array, dtype)


def from_dlpack(obj: Any) -> Tensor:
    """A tensor sharing the memory of any object that implements the DLPack protocol."""
    return from_numpy(np.from_dlpack(obj))


def _torch_dtype(t: Any, dtype: DType) -> Any:
    """The PyTorch dtype of `dtype` (for the torch lambdas the parity suite calls)."""
    return t.bfloat16 if dtype is bf16 else getattr(t, dtype.np.name)


# fills and ranges ------------------------------------------------------------------------------
def _shape_args(shape: tuple) -> tuple[DimLike, ...]:
    if len(shape) == 1 and isinstance(shape[0], list | tuple | str):
        shape = shape[0]
    return as_shape(shape)


def _fill_params(shape: Any, dtype: Any = DEFAULT_FLOAT, value: float = 0.0) -> dict:
    return {"shape": as_shape(shape), "dtype": as_dtype(dtype), "value": value}


def _fill_reference(shape: tuple, dtype: DType, value: float) -> np.ndarray:
    if dtype is bf16:
        return cast.reference(np.full(shape, value, np.float32), dtype=bf16)
    return np.full(shape, value, dtype.np)


full_op = Op(
    "full",
    shape=lambda shape, dtype, value: shape,
    dtype=lambda shape, dtype, value: dtype,
    params=_fill_params,
    reference=_fill_reference,
    samples=lambda rng: [Sample((), {"shape": (2, 3), "dtype": "f64", "value": 1.5})],
    torch=lambda t, shape, dtype, value: t.full(shape, value, dtype=_torch_dtype(t, dtype)),
    doc="A tensor of `shape` filled with `value`.",
)


def full(shape: Any, value: float, dtype: DType | str = DEFAULT_FLOAT) -> Tensor:
    return full_op(shape=shape, dtype=dtype, value=value)


def zeros(*shape: Any, dtype: DType | str = DEFAULT_FLOAT, requires_grad: bool = False) -> Tensor:
    return full_op(shape=_shape_args(shape), dtype=dtype, value=0).requires_grad_(requires_grad)


def ones(*shape: Any, dtype: DType | str = DEFAULT_FLOAT, requires_grad: bool = False) -> Tensor:
    return full_op(shape=_shape_args(shape), dtype=dtype, value=1).requires_grad_(requires_grad)


def zeros_like(x: Tensor, dtype: Any = None) -> Tensor:
    return full_like(x, 0, dtype)


def ones_like(x: Tensor, dtype: Any = None) -> Tensor:
    return full_like(x, 1, dtype)


def full_like(x: Tensor, value: float, dtype: Any = None) -> Tensor:
    return full_op(shape=x.shape, dtype=x.dtype if dtype is None else dtype, value=value)


def empty(*shape: Any, dtype: Any = DEFAULT_FLOAT) -> Tensor:
    """PyTorch's empty: here a tensor of zeros (no uninitialised memory is ever handed out)."""
    return full_op(shape=_shape_args(shape), dtype=dtype, value=0)


def empty_like(x: Tensor) -> Tensor:
    return zeros_like(x)


def _arange_params(start: DimLike, stop: DimLike, step: int, dtype: Any) -> dict:
    if not isinstance(step, int) or step == 0:
        raise ShapeError(f"arange needs a non-zero integer step, got {step}")
    return {"start": start, "stop": stop, "step": step, "dtype": as_dtype(dtype)}


def _arange_shape(start: DimLike, stop: DimLike, step: int, dtype: DType) -> tuple:
    if isinstance(start, int) and isinstance(stop, int):
        return (len(range(start, stop, step)),)
    if step < 0:
        raise ShapeError("a symbolic arange needs a positive step")
    return ((stop - start + step - 1) // step,)


arange_op = Op(
    "arange",
    shape=_arange_shape,
    dtype=lambda start, stop, step, dtype: dtype,
    params=_arange_params,
    reference=lambda start, stop, step, dtype: np.arange(start, stop, step, dtype=dtype.np),
    samples=lambda rng: [Sample((), {"start": 2, "stop": 11, "step": 3, "dtype": "i64"})],
    torch=lambda t, start, stop, step, dtype: t.arange(start, stop, step, dtype=_torch_dtype(t, dtype)),
    doc="Integers start, start+step, ... below stop (sizes may be symbolic).",
)


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Tensor:
    """start, start + step, ... up to stop (excluded): i64 by default for whole numbers (sizes may be
    symbols), and for a float among them, as PyTorch, start + i * step in f64 rounded to `dtype` (f32 by
    default) for i < ceil((stop - start) / step)."""
    if stop is None:
        start, stop = 0, start
    if not any(isinstance(v, float | np.floating) for v in (start, stop, step)):
        return arange_op(start=start, stop=stop, step=step, dtype=i64 if dtype is None else dtype)
    if step == 0 or not all(math.isfinite(v) for v in (start, stop, step)):
        raise ValueError(f"arange needs finite bounds and a non-zero step, got {start}, {stop}, {step}")
    count = max(0, math.ceil((stop - start) / step))
    values = arange_op(start=0, stop=count, step=1, dtype="f64") * float(step) + float(start)
    return values.cast(DEFAULT_FLOAT if dtype is None else dtype)


def linspace(start: float, end: float, steps: int, dtype: Any = DEFAULT_FLOAT) -> Tensor:
    """`steps` values from start to end, evenly spaced (both ends included; as NumPy's linspace)."""
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"linspace needs a whole number of steps >= 0, got {steps}")
    if as_dtype(dtype) is bool_:
        raise DTypeError("linspace makes numbers, not bool (as PyTorch's); compare its result instead")
    return tensor(np.linspace(start, end, steps), dtype=dtype)


eye_op = Op(
    "eye",
    shape=lambda n, m, dtype: (n, m),
    dtype=lambda n, m, dtype: dtype,
    params=lambda n, m=None, dtype=DEFAULT_FLOAT: {
        "n": n,
        "m": n if m is None else m,
        "dtype": as_dtype(dtype),
    },
    reference=lambda n, m, dtype: np.eye(n, m, dtype=dtype.np),
    samples=lambda rng: [Sample((), {"n": 3, "m": 4, "dtype": "f64"})],
    torch=lambda t, n, m, dtype: t.eye(n, m, dtype=_torch_dtype(t, dtype)),
    doc="Ones on the diagonal of an n x m matrix.",
)


def eye(n: DimLike, m: DimLike | None = None, dtype: Any = DEFAULT_FLOAT) -> Tensor:
    return eye_op(n=n, m=m, dtype=dtype)


# random ----------------------------------------------------------------------------------------
def _random_params(shape: Any, seed: int, dtype: Any = DEFAULT_FLOAT, **bounds: Any) -> dict:
    dtype = as_dtype(dtype)
    return {"shape": as_shape(shape), "seed": int(seed), "dtype": dtype, **bounds}


def _float_random_dtype(dtype: DType) -> DType:
    if dtype.name not in ("f32", "f64"):
        raise TypeError(f"random floats are made in f32 or f64, not {dtype.name}")
    return dtype


def _float_random(name: str, draw, doc: str) -> Op:
    return Op(
        name,
        shape=lambda shape, seed, dtype: shape,
        dtype=lambda shape, seed, dtype: _float_random_dtype(dtype),
        params=_random_params,
        reference=lambda shape, seed, dtype: draw(np.random.default_rng(seed), shape, dtype.np),
        samples=lambda rng: [Sample((), {"shape": (2, 3), "seed": 7, "dtype": "f64"})],
        doc=doc,
    )


rand_op = _float_random(
    "rand",
    lambda g, shape, dtype: g.random(shape, dtype=dtype),
    "Uniform [0, 1) floats from PCG64 seeded with `seed`.",
)
randn_op = _float_random(
    "randn",
    lambda g, shape, dtype: g.standard_normal(shape, dtype=dtype),
    "Standard normal floats from PCG64 seeded with `seed`.",
)
randint_op = Op(
    "randint",
    shape=lambda shape, seed, dtype, low, high: shape,
    dtype=lambda shape, seed, dtype, low, high: dtype,
    params=_random_params,
    reference=lambda shape, seed, dtype, low, high: np.random.default_rng(seed).integers(
        low, high, shape, dtype=dtype.np
    ),
    samples=lambda rng: [Sample((), {"shape": (5,), "seed": 3, "dtype": "i64", "low": 0, "high": 9})],
    doc="Integers in [low, high) from PCG64 seeded with `seed`.",
)


def _seed(generator: Generator | None) -> int:
    return (generator or default_generator).next_seed()


def rand(
    *shape: Any,
    dtype: Any = DEFAULT_FLOAT,
    generator: Generator | None = None,
    requires_grad: bool = False,
) -> Tensor:
    out = rand_op(shape=_shape_args(shape), seed=_seed(generator), dtype=dtype)
    return out.requires_grad_(requires_grad)


def randn(
    *shape: Any,
    dtype: Any = DEFAULT_FLOAT,
    generator: Generator | None = None,
    requires_grad: bool = False,
) -> Tensor:
    out = randn_op(shape=_shape_args(shape), seed=_seed(generator), dtype=dtype)
    return out.requires_grad_(requires_grad)


def rand_like(x: Tensor, generator: Generator | None = None) -> Tensor:
    return rand(*x.shape, dtype=x.dtype, generator=generator)


def randn_like(x: Tensor, generator: Generator | None = None) -> Tensor:
    return randn(*x.shape, dtype=x.dtype, generator=generator)


def randint(low: int, high: int, shape: Any, dtype: Any = i64, generator: Generator | None = None) -> Tensor:
    if high <= low:
        raise ValueError(f"randint needs low < high, got [{low}, {high})")
    return randint_op(shape=shape, seed=_seed(generator), dtype=dtype, low=low, high=high)


def randperm(n: int, dtype: Any = i64, generator: Generator | None = None) -> Tensor:
    """A random permutation of 0 .. n-1 (the order that sorts n uniform doubles)."""
    return argsort(rand(n, dtype="f64", generator=generator)).cast(dtype)


def logspace(start: float, end: float, steps: int, base: float = 10.0, dtype: Any = "f32") -> Tensor:
    """base ** linspace(start, end, steps), computed in f64 and rounded once to `dtype`."""
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"logspace needs a whole number of steps >= 0, got {steps}")
    return from_numpy(np.power(float(base), np.linspace(start, end, steps))).cast(dtype)
