"""Creation: constant fills, ranges, and seeded random tensors (tensors from data: `data_in`, re-exported
here).

Random ops are pure: each call draws a 64-bit seed from a `Generator` and passes it as a param, so
the reference (NumPy's PCG64 seeded with it) gives the same bits for the same seed in every mode.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import numpy as np

from .. import modes
from ..devices import CPU, as_device
from ..devices import device as device_type
from ..dtypes import DEFAULT_FLOAT, DType, as_dtype, bf16, bool_, i64
from ..errors import DTypeError, ShapeError
from ..shapes import DimLike, as_shape, plain_int
from ..tensor import Tensor
from ._op import Op, Sample
from .data_in import _torch_dtype, check_number, from_numpy, tensor
from .data_in import as_tensor as as_tensor  # re-exported: verigrad's modules import them from here
from .data_in import asarray as asarray
from .data_in import from_dlpack as from_dlpack
from .data_in import frombuffer as frombuffer
from .factory_args import _grad, _placed, _shape_args
from .index import argsort
from .movement import cast


class Generator:
    """A seedable source of op seeds: the same seed gives the same sequence of random tensors.

    `Generator(seed)`, or PyTorch's `Generator()` / `Generator(device="cpu")` (seed 0 until `manual_seed`).
    As PyTorch's, the default generator is the process's: each draw and each reseeding is atomic, so
    threads drawing at once get the numbers one thread would draw, in some order, none twice.
    """

    def __init__(self, seed: int | str | device_type = 0, device: Any = None) -> None:
        if isinstance(seed, str | device_type):  # PyTorch's Generator("cpu")
            seed, device = 0, seed
        as_device(device, "Generator")
        self._lock = threading.Lock()
        stack = modes.LOCAL.stack  # a generator made inside a traced function is the trace's own
        self._made_in = stack[-1] if stack else None
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> Generator:
        seed = int(seed)
        if seed < 0:  # as numpy's PCG64 refuses it
            raise ValueError("expected non-negative integer")
        with self._lock:  # the PCG64 is made at the first draw: numpy.random is imported when used
            self._initial, self._rng = seed, None
        return self

    def _drawn(self) -> Any:
        """The PCG64 generator of the seed (the caller holds the lock)."""
        if self._rng is None:
            self._rng = np.random.Generator(np.random.PCG64(self._initial))
        return self._rng

    def initial_seed(self) -> int:
        return self._initial

    def seed(self) -> int:
        """Reseed from the operating system's entropy; the new seed."""
        new = int(np.random.SeedSequence().entropy % 2**63)
        self.manual_seed(new)
        return new

    @property
    def device(self) -> device_type:
        return CPU

    def next_seed(self) -> int:
        with self._lock:
            return int(self._drawn().integers(0, 2**63 - 1))

    def get_state(self) -> Tensor:
        """The generator's state as a u8 tensor (PyTorch's `get_state`): `set_state` of it continues
        the same sequence of draws."""
        with self._lock:
            text = json.dumps({"initial": self._initial, "pcg64": self._drawn().bit_generator.state})
        return from_numpy(np.frombuffer(text.encode(), dtype=np.uint8).copy())

    def set_state(self, new_state: Tensor) -> Generator:
        """Restore a state from `get_state` (a u8 tensor); anything else is refused."""
        if not isinstance(new_state, Tensor) or new_state.dtype.name != "u8" or new_state.ndim != 1:
            raise TypeError("set_state takes the u8 tensor that get_state returned")
        try:
            state = json.loads(bytes(new_state.numpy()).decode())
            rng = np.random.Generator(np.random.PCG64())
            rng.bit_generator.state = state["pcg64"]
            initial = int(state["initial"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise ValueError(f"set_state: not a state from get_state ({e})") from None
        with self._lock:
            self._initial, self._rng = initial, rng
        return self


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Reseed the default generator (used by rand, randn, randint, dropout and nn initialisation)."""
    return default_generator.manual_seed(seed)


# fills and ranges ------------------------------------------------------------------------------
def _fill_params(shape: Any, dtype: Any = DEFAULT_FLOAT, value: float = 0.0) -> dict:
    dtype = as_dtype(dtype)
    check_number(value, dtype, "full")
    return {"shape": as_shape(shape), "dtype": dtype, "value": value}


def _fill_reference(shape: tuple, dtype: DType, value: float) -> np.ndarray:
    if dtype is bf16:
        return cast.reference(np.full(shape, value, np.float32), dtype=bf16)
    if dtype.kind == "u" and isinstance(value, int | np.integer) and value < 0:
        value = np.asarray(value, np.int64).astype(dtype.np)  # PyTorch's wrap: -9 is 247 in u8
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


def _fill_dtype(value: Any) -> DType:
    """PyTorch's dtype for a fill value: bool, i64 for a whole number, else the default float (a NumPy
    bool too, which PyTorch reads as a float)."""
    if isinstance(value, bool):
        return bool_
    return i64 if isinstance(value, int | np.integer) else DEFAULT_FLOAT


def full(
    size: Any,
    fill_value: Any,
    *,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of `size` filled with `fill_value`; its dtype, unless given, is PyTorch's: bool for a
    bool, i64 for an int, f32 for a float."""
    _placed("full", device, out, layout)
    dtype = _fill_dtype(fill_value) if dtype is None else dtype
    return _grad(full_op(shape=_shape_args((size,)), dtype=dtype, value=fill_value), requires_grad)


def _filled(
    where: str, value: float, shape: tuple, size: Any, out: Any, dtype: Any, device: Any, layout: Any
) -> Tensor:
    _placed(where, device, out, layout)
    return full_op(
        shape=_shape_args(shape, size, where), dtype=DEFAULT_FLOAT if dtype is None else dtype, value=value
    )


def zeros(
    *shape: Any,
    size: Any = None,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of zeros of the given size (the default float dtype unless `dtype`)."""
    return _grad(_filled("zeros", 0, shape, size, out, dtype, device, layout), requires_grad)


def ones(
    *shape: Any,
    size: Any = None,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of ones of the given size (the default float dtype unless `dtype`)."""
    return _grad(_filled("ones", 1, shape, size, out, dtype, device, layout), requires_grad)


def empty(
    *shape: Any,
    size: Any = None,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """PyTorch's empty: here a tensor of zeros (no uninitialised memory is ever handed out)."""
    return _grad(_filled("empty", 0, shape, size, out, dtype, device, layout), requires_grad)


def empty_permuted(
    size: Any,
    physical_layout: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    """PyTorch's empty_permuted: empty(size) (verigrad's tensors are contiguous: the physical layout, a
    permutation of the axes, is checked and not kept)."""
    if sorted(physical_layout) != list(range(len(size))):
        raise ValueError(
            f"empty_permuted: physical_layout must be a permutation of the {len(size)} axes, "
            f"got {tuple(physical_layout)}"
        )
    return empty(size=tuple(size), dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def empty_strided(
    size: Any,
    stride: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    """PyTorch's empty_strided: empty(size) (verigrad's tensors are contiguous: the strides, one
    non-negative int per axis, are checked and not kept)."""
    size, stride = tuple(size), tuple(stride)
    if len(stride) != len(size) or not all(isinstance(s, int) and s >= 0 for s in stride):
        raise ValueError(
            f"empty_strided: stride must give one non-negative int for each of the {len(size)} axes of "
            f"size {size}, got {stride}"
        )
    return empty(size=size, dtype=dtype, layout=layout, device=device, requires_grad=requires_grad)


def full_like(
    x: Tensor,
    fill_value: float,
    dtype: Any = None,
    *,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """A tensor of x's shape (and dtype, unless given) filled with `fill_value` (`memory_format=` is
    accepted: the result is contiguous)."""
    return _filled_like("full_like", x, fill_value, dtype, device, requires_grad, layout)


def _filled_like(
    where: str, x: Tensor, value: Any, dtype: Any, device: Any, requires_grad: bool, layout: Any
) -> Tensor:
    _placed(where, device, layout=layout)
    out = full_op(shape=x.shape, dtype=x.dtype if dtype is None else dtype, value=value)
    return _grad(out, requires_grad)


def zeros_like(
    x: Tensor,
    dtype: Any = None,
    *,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """Zeros shaped as x (its dtype unless `dtype`)."""
    return _filled_like("zeros_like", x, 0, dtype, device, requires_grad, layout)


def ones_like(
    x: Tensor,
    dtype: Any = None,
    *,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """Ones shaped as x (its dtype unless `dtype`)."""
    return _filled_like("ones_like", x, 1, dtype, device, requires_grad, layout)


def empty_like(
    x: Tensor,
    dtype: Any = None,
    *,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """PyTorch's empty_like: here zeros."""
    return _filled_like("empty_like", x, 0, dtype, device, requires_grad, layout)


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


def _arange_reference(start: int, stop: int, step: int, dtype: DType) -> np.ndarray:
    """An integer dtype's values wrap as PyTorch's (counted in i64, then cast): arange(-1, 2, 2) in u8
    is [255, 1]."""
    if dtype.kind in "iu":
        return np.arange(start, stop, step, dtype=np.int64).astype(dtype.np)
    return np.arange(start, stop, step, dtype=dtype.np)


arange_op = Op(
    "arange",
    shape=_arange_shape,
    dtype=lambda start, stop, step, dtype: dtype,
    params=_arange_params,
    reference=lambda start, stop, step, dtype: _arange_reference(start, stop, step, dtype),
    samples=lambda rng: [Sample((), {"start": 2, "stop": 11, "step": 3, "dtype": "i64"})],
    torch=lambda t, start, stop, step, dtype: t.arange(start, stop, step, dtype=_torch_dtype(t, dtype)),
    doc="Integers start, start+step, ... below stop (sizes may be symbolic).",
)


def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    *,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """start, start + step, ... up to end (excluded): i64 by default for whole numbers (sizes may be
    symbols), and for a float among them, as PyTorch, start + i * step in f64 rounded to `dtype` (f32 by
    default) for i < ceil((end - start) / step); an integer dtype truncates them first, as PyTorch's."""
    _placed("arange", device, out, layout)
    return _grad(_arange(start, end, step, dtype), requires_grad)


def _arange(start: Any, stop: Any, step: Any, dtype: Any) -> Tensor:
    if stop is None:
        start, stop = 0, start
    numbers = all(isinstance(v, int | float | np.integer | np.floating) for v in (start, stop, step))
    if numbers and (stop - start) * step < 0:
        raise ValueError(
            f"arange: upper bound and lower bound inconsistent with step sign: {start}, {stop}, {step}"
        )
    if not any(isinstance(v, float | np.floating) for v in (start, stop, step)):
        return arange_op(start=start, stop=stop, step=step, dtype=i64 if dtype is None else dtype)
    if step == 0 or not all(math.isfinite(v) for v in (start, stop, step)):
        raise ValueError(f"arange needs finite bounds and a non-zero step, got {start}, {stop}, {step}")
    count = max(0, math.ceil((stop - start) / step))
    if dtype is not None and as_dtype(dtype).np.kind in "iu":
        # PyTorch's: the bounds and step truncated to integers, and for i64 the count from them too
        start, stop, step = (math.trunc(v) for v in (start, stop, step))
        if step == 0:
            raise ValueError("arange: the step, truncated to an integer, is 0")
        if as_dtype(dtype) is i64:
            span = stop - start + step - (1 if step > 0 else -1)
            count = max(0, abs(span) // abs(step) * (1 if (span >= 0) == (step > 0) else -1))
        return (arange_op(start=0, stop=count, step=1, dtype="i64") * step + start).cast(dtype)
    values = arange_op(start=0, stop=count, step=1, dtype="f64") * float(step) + float(start)
    return values.cast(DEFAULT_FLOAT if dtype is None else dtype)


def linspace(
    start: float,
    end: float,
    steps: int,
    *,
    out: Any = None,
    dtype: Any = DEFAULT_FLOAT,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """`steps` values from start to end, evenly spaced (both ends included), in PyTorch's arithmetic: start
    and end rounded to `dtype` (an integer dtype truncates them), step = (end - start) / (steps - 1), the
    first half start + i * step and the second end - (steps - 1 - i) * step, in `dtype` (in f64, then
    truncated, for integers)."""
    _placed("linspace", device, out, layout)
    steps = plain_int(steps)
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"linspace needs a whole number of steps >= 0, got {steps}")
    dtype = as_dtype(dtype)
    if dtype is bool_:
        raise DTypeError("linspace makes numbers, not bool (as PyTorch's); compare its result instead")
    first, last, step, _ = _spacing("linspace", start, end, steps, dtype)
    if dtype.np.kind == "f" and dtype not in (bf16,):
        first, last, step = (dtype.np.type(v) for v in (first, last, step))
    i = np.arange(steps)
    values = np.where(i < steps // 2, first + step * i, last - step * (steps - 1 - i))
    if steps == 1:
        values = np.array([first])
    return tensor(values.astype(dtype.np, copy=False), dtype=dtype, requires_grad=requires_grad)


def _spacing(name: str, start: Any, end: Any, steps: int, dtype: DType) -> tuple[float, float, float, bool]:
    """linspace's and logspace's (start, end, step, integral) as PyTorch's kernels compute them: start and end
    rounded to `dtype` (truncated for an integer dtype), the step in f64 from them. A 0-d tensor is its
    value."""
    bounds = []
    for value in (start, end):
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise ShapeError(f"{name} takes 0-d tensors as start and end, got shape {tuple(value.shape)}")
            value = value.item()
        if isinstance(value, complex):
            raise DTypeError(f"{name}: verigrad has no complex dtype, got start or end {value!r}")
        bounds.append(value)
    integral = dtype.np.kind in "iub"
    if integral:
        first, last = (float(math.trunc(v)) for v in bounds)
    else:
        first, last = (float(np.asarray(v, dtype=np.float64).astype(dtype.np)) for v in bounds)
    step = (last - first) / (steps - 1) if steps > 1 else 0.0
    return first, last, step, integral


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


def eye(
    n: DimLike,
    m: DimLike | None = None,
    *,
    out: Any = None,
    dtype: Any = DEFAULT_FLOAT,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The n x m identity matrix (m = n unless given)."""
    _placed("eye", device, out, layout)
    return _grad(eye_op(n=n, m=m, dtype=dtype), requires_grad)


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
    """The seed of one random op's draw, as the current mode makes it: the generator's next seed
    eagerly; in a trace, a number standing for the seed each run of the program draws (ir/trace.py)."""
    return modes.current().draw_seed(generator or default_generator)


_HALF_BITS = {"f16": 11, "bf16": 8}  # significant bits: f16 and bf16 draws are f32 draws made shorter


def _float_randoms(where: str, op: Op, shape: tuple, size: Any, generator: Any, out: Any, dtype: Any,
                   device: Any, requires_grad: bool, layout: Any = None) -> Tensor:  # fmt: skip
    _placed(where, device, out, layout)
    shape = _shape_args(shape, size, where)
    dtype = DEFAULT_FLOAT if dtype is None else as_dtype(dtype)
    if dtype.name not in _HALF_BITS:
        return _grad(op(shape=shape, seed=_seed(generator), dtype=dtype), requires_grad)
    draw = op(shape=shape, seed=_seed(generator), dtype=DEFAULT_FLOAT)
    if op is rand_op:  # kept below 1: the f32 draw cut to the half type's bits, as PyTorch draws them
        scale = 2.0 ** _HALF_BITS[dtype.name]
        draw = (draw * scale).floor() / scale
    return _grad(draw.cast(dtype), requires_grad)


def rand(
    *shape: Any,
    size: Any = None,
    generator: Generator | None = None,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform [0, 1) floats of the shape given (several sizes, a tuple, or `size=`)."""
    return _float_randoms("rand", rand_op, shape, size, generator, out, dtype, device, requires_grad, layout)


def randn(
    *shape: Any,
    size: Any = None,
    generator: Generator | None = None,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal floats of the shape given (several sizes, a tuple, or `size=`)."""
    return _float_randoms(
        "randn", randn_op, shape, size, generator, out, dtype, device, requires_grad, layout
    )


def rand_like(
    x: Tensor,
    generator: Generator | None = None,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """Uniform draws in [0, 1) shaped as x (its dtype unless `dtype`)."""
    dtype = x.dtype if dtype is None else dtype
    return _float_randoms("rand_like", rand_op, tuple(x.shape), None, generator, None, dtype, device,
                          requires_grad, layout)  # fmt: skip


def randn_like(
    x: Tensor,
    generator: Generator | None = None,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """Standard normal draws shaped as x (its dtype unless `dtype`)."""
    dtype = x.dtype if dtype is None else dtype
    return _float_randoms("randn_like", randn_op, tuple(x.shape), None, generator, None, dtype, device,
                          requires_grad, layout)  # fmt: skip


def _randint_bounds(args: tuple, low: Any, high: Any, size: Any, where: str, with_size: bool = True) -> tuple:
    """PyTorch's `(high, size)` and `(low, high, size)` (by position or name) as (low, high, size)."""
    named = {k: v for k, v in (("low", low), ("high", high), ("size", size)) if v is not None}
    forms = [("high", "size"), ("low", "high", "size")] if with_size else [("high",), ("low", "high")]
    for form in forms:
        positional = [name for name in form if name not in named]
        if len(positional) == len(args) and set(named) <= set(form):
            given = {**named, **dict(zip(positional, args))}
            break
    else:
        shown = " or ".join(f"{where}({', '.join(form)})" for form in forms)
        raise TypeError(f"{where} takes {shown}; got {len(args)} positional and {sorted(named)} by name")
    bounds = (given.get("low", 0), given["high"])
    if not all(isinstance(b, int | np.integer) and not isinstance(b, bool) for b in bounds):
        raise TypeError(f"{where}: low and high must be whole numbers, got {bounds}")
    if bounds[1] <= bounds[0]:
        raise ValueError(f"{where} needs low < high, got [{bounds[0]}, {bounds[1]})")
    shape = given.get("size")
    if with_size and not isinstance(shape, list | tuple):
        raise TypeError(f"{where}: size must be a tuple of ints, not {type(shape).__name__}")
    return int(bounds[0]), int(bounds[1]), shape


def randint(
    *args: Any,
    low: Any = None,
    high: Any = None,
    size: Any = None,
    generator: Generator | None = None,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Integers in [low, high) (low 0 unless given) of shape `size`: PyTorch's `randint(high, size)`,
    `randint(low, high, size)`; i64 unless `dtype` says otherwise (a float dtype holds whole numbers)."""
    low, high, shape = _randint_bounds(args, low, high, size, "randint")
    return _randint("randint", low, high, shape, generator, out, dtype, device, requires_grad, layout)


def _randint(where: str, low: int, high: int, shape: Any, generator: Any, out: Any, dtype: Any, device: Any,
             requires_grad: bool, layout: Any = None) -> Tensor:  # fmt: skip
    _placed(where, device, out, layout)
    dtype = i64 if dtype is None else as_dtype(dtype)
    if dtype is bool_ or (dtype.kind == "u" and low < 0):
        raise ValueError(f"{where}: [{low}, {high}) does not fit {dtype.name}")
    draw = randint_op(shape=as_shape(shape), seed=_seed(generator), dtype=i64, low=low, high=high)
    return _grad(draw if dtype is i64 else cast(draw, dtype=dtype), requires_grad)


def randint_like(
    x: Tensor,
    *args: Any,
    low: Any = None,
    high: Any = None,
    generator: Generator | None = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """Integers in [low, high) of x's shape and dtype (unless given): `randint_like(x, high)`,
    `randint_like(x, low, high)`."""
    low, high, _ = _randint_bounds(args, low, high, None, "randint_like", with_size=False)
    dtype = x.dtype if dtype is None else dtype
    return _randint(
        "randint_like", low, high, tuple(x.shape), generator, None, dtype, device, requires_grad, layout
    )


def randperm(
    n: int,
    *,
    generator: Generator | None = None,
    out: Any = None,
    dtype: Any = i64,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A random permutation of 0 .. n-1 (the order that sorts n uniform doubles)."""
    _placed("randperm", device, out, layout)
    return _grad(argsort(rand(n, dtype="f64", generator=generator)).cast(dtype), requires_grad)


def logspace(
    start: float,
    end: float,
    steps: int,
    base: float = 10.0,
    *,
    out: Any = None,
    dtype: Any = DEFAULT_FLOAT,
    layout: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """base ** e for `steps` exponents e evenly spaced from start to end, as PyTorch's kernel: start and end
    rounded to `dtype` (truncated for an integer dtype, whose base is rounded to f32), the exponents in f64
    (the first half start + i * step, the second end - (steps - 1 - i) * step), the powers in f64, rounded
    once to `dtype` (truncated for integers)."""
    _placed("logspace", device, out, layout)
    steps = plain_int(steps)
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"logspace needs a whole number of steps >= 0, got {steps}")
    dtype = as_dtype(dtype)
    first, last, step, integral = _spacing("logspace", start, end, steps, dtype)
    base_given, base = base, float(np.float32(base)) if integral else float(base)
    i = np.arange(steps)
    exponents = np.where(i < steps // 2, first + step * i, last - step * (steps - 1 - i))
    if steps == 1:  # PyTorch's base ** start, start as given
        given = start.item() if isinstance(start, Tensor) else start
        base, exponents = float(base_given), np.array([float(given)])
    with np.errstate(all="ignore"):
        values = np.power(base, exponents)
        if integral:
            values = np.trunc(values)
    return _grad(from_numpy(values).cast(dtype), requires_grad)
