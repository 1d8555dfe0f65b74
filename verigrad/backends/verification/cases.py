"""The cases the verification suite runs a kernel on, made from its op's samples: each sample with its
float values mixed with special values (signed zeros, infinities, NaN, subnormals and, unless the claim
is a tolerance, the largest finite values), replaced by zeros of both signs and ones, with each of its
sizes set to 0, to 1 and grown, and with its inputs as views (offset, transposed, offset and strided,
reversed, broadcast, unaligned; grown ones transposed and strided), in every dtype whose result the
kernel computes. A case the op's rules refuse is dropped."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import ALL, DType, bf16, from_numpy_dtype
from ...errors import DTypeError, ShapeError
from ...ops._op import Op
from ...shapes import Spec
from ...tensor import Tensor

GROWN_SIZE = 600  # a grown size is at least this (rows past the pairwise-summation blocks)
GROWN_LIMIT = 1 << 13  # elements of the largest input (and of the result, times 2) of a grown case


@dataclass
class Case:
    """One call of a kernel: what it is, its arrays and its (canonical) params."""

    what: str
    arrays: tuple[np.ndarray, ...]
    params: dict[str, Any]
    out: Spec

    def inputs(self) -> str:
        return ", ".join(f"{dtype_name(a)}{list(a.shape)}" for a in self.arrays) or "no arrays"


_NAMES = {np.dtype(d.storage): d.name for d in ALL if d is not bf16}


def dtype_name(a: np.ndarray) -> str:
    """The verigrad name of an array's dtype (uint16 holds bf16)."""
    return _NAMES.get(a.dtype, "bf16" if a.dtype == np.uint16 else str(a.dtype))


def cases_for(
    op: Any, reaches: Callable[[str], bool], tolerance: bool = False, seed: int = 0, extra: Sequence[Any] = ()
) -> Iterator[Case]:
    """Every case of `op` whose result dtype `reaches` accepts (see the module docstring), from its
    samples and the `extra` ones a backend adds (`Backend.samples`). `tolerance` leaves the largest
    finite values out of the special values: a kernel that sums in another order than the reference may
    round huge cancelling terms differently, which no `rtol` covers."""
    rng = np.random.default_rng(seed)
    samples = list(op.samples(np.random.default_rng(seed))) if op.samples is not None else []
    samples += extra
    seen: set = set()
    for i, sample in enumerate(samples):
        arrays = [np.asarray(a) for a in sample.args]
        templates = [(f"sample {i}", arrays, tuple(LAYOUTS))]
        for what, new, grown in _resized(arrays, rng):  # grown sizes: also as strided views
            templates.append((f"sample {i}, {what}", new, GROWN_LAYOUTS if grown else ()))
        for what, template, layouts in templates:
            key = (tuple((a.shape, a.dtype.kind) for a in template), repr(sample.params))
            if key in seen:
                continue
            seen.add(key)
            floats = [k for k, a in enumerate(template) if a.dtype.kind == "f"]
            for dtype in ALL if floats else (None,):
                specs = [
                    Spec(a.shape, dtype if k in floats else from_numpy_dtype(a.dtype))
                    for k, a in enumerate(template)
                ]
                found = result_spec(op, specs, sample.params)
                if found is None or not reaches(found[0].dtype.name):
                    continue
                out, params = found
                if math.prod(out.shape) > 2 * GROWN_LIMIT:
                    continue  # a size grown in both operands (an outer product): too large a result
                cast = [_cast(a, dtype) if k in floats else a for k, a in enumerate(template)]
                name = f"{what}, {dtype.name}" if dtype is not None else what
                yield Case(name, tuple(cast), params, out)
                if dtype is not None and not dtype.is_float and out.dtype is not dtype:
                    continue  # ints or bool promoted to the result's dtype: the plain values suffice
                last = (name, cast)
                if dtype is not None and any(template[k].size for k in floats):
                    pool = _specials(dtype, tolerance)
                    mixed = [_mix(a, pool, rng, 0.3) if k in floats else a for k, a in enumerate(cast)]
                    yield Case(f"{name}, special values", tuple(mixed), params, out)
                    last = (f"{name}, special values", mixed)
                    signs = _cast(_SIGNED_ZEROS, dtype)  # ties between zeros: which one an order keeps
                    zeros = [_mix(a, signs, rng, 1.0) if k in floats else a for k, a in enumerate(cast)]
                    yield Case(f"{name}, signed zeros and ones", tuple(zeros), params, out)
                    if what == f"sample {i}":
                        only = [_mix(a, pool, rng, 1.0) if k in floats else a for k, a in enumerate(cast)]
                        yield Case(f"{name}, only special values", tuple(only), params, out)
                yield from _viewed(*last, params, out, layouts)  # the special values if any


def result_spec(op: Any, specs: list[Spec], params: dict) -> tuple[Spec, dict] | None:
    """The result spec and canonical params the op's rules give operands of these specs, or None if
    they refuse them (called directly: `Op.spec` would also look for the user's line of the error)."""
    try:
        if op.canonical_params is not None:
            params = op.canonical_params(*specs, **params)
        if type(op)._spec is not Op._spec:  # a custom op's spec comes from the user's fake, not the rules
            return _custom_spec(op, specs, params)
        shape = op.shape_rule(*[s.shape for s in specs], **params)
        return Spec(shape, op.dtype_rule(*[s.dtype for s in specs], **params)), dict(params)
    except (ShapeError, DTypeError, TypeError, ValueError):
        return None


def _custom_spec(op: Any, specs: list[Spec], params: dict) -> tuple[Spec, dict] | None:
    """A custom op's spec from its fake; None where the fake fails on these operands (a missing param,
    say): the user's function may raise anything."""
    try:
        return op._spec(tuple(Tensor(s, None) for s in specs), params), dict(params)
    except Exception:
        return None


def _cast(a: np.ndarray, dtype: DType) -> np.ndarray:
    """Float sample values in `dtype` (bf16: the upper half of the f32 bits)."""
    if dtype is bf16:
        return np.asarray(a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if dtype.kind == "b":
        return np.asarray(a != 0)
    with np.errstate(all="ignore"):
        return a.astype(dtype.np)


def _specials(dtype: DType, tolerance: bool) -> np.ndarray:
    """Signed zeros, infinities, NaN, subnormals and other edges of `dtype`, in its storage."""
    if dtype.kind == "b":
        return np.array([False, True])
    if dtype.kind in "iu":
        info = np.iinfo(dtype.np)
        return np.array([0, 1, 2, info.min, info.max], dtype.np)
    fi = np.finfo(np.float32 if dtype is bf16 else dtype.np)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -2.0, 3.0]
    values += [fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny / 3, fi.eps]
    if not tolerance:
        values += [fi.max, -fi.max, 88.5, -104.0, 710.0, -746.0]
    with np.errstate(over="ignore"):
        return _cast(np.array(values, np.float64), dtype)


_SIGNED_ZEROS = np.array([0.0, -0.0, 1.0, -1.0])


def _mix(a: np.ndarray, pool: np.ndarray, rng: np.random.Generator, share: float) -> np.ndarray:
    """`a` with a `share` of its elements replaced by values from `pool` (at least one when share is 1)."""
    pick = rng.random(a.shape) < share
    out = a.copy()
    out[pick] = rng.choice(pool, int(pick.sum()))
    if share >= 1 and a.size >= pool.size:  # every special value at least once
        out.reshape(-1)[rng.permutation(a.size)[: pool.size]] = pool
    return out


def _resized(
    arrays: list[np.ndarray], rng: np.random.Generator
) -> Iterator[tuple[str, list[np.ndarray], bool]]:
    """The arrays with every dimension of one size set to 0, to 1, and grown (floats drawn again in the
    sample's range; int and bool arrays repeated), for each size of the sample; True when grown."""
    sizes = sorted({d for a in arrays for d in a.shape if d > 1})
    for s in sizes:
        for new in (0, 1, _grown(arrays, s)):
            if new is not None:
                yield f"size {s}->{new}", [_refill(a, s, new, rng) for a in arrays], new > 1


def _grown(arrays: list[np.ndarray], s: int) -> int | None:
    factor = -(-GROWN_SIZE // s)
    while factor > 1:
        sizes = [a.size * factor ** a.shape.count(s) for a in arrays]
        if max(sizes) <= GROWN_LIMIT:
            return s * factor
        factor //= 2
    return None


def _refill(a: np.ndarray, s: int, new: int, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(new if d == s else d for d in a.shape)
    if shape == a.shape:
        return a
    if a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (-2.0, 2.0)
        return rng.uniform(low, high, shape).astype(a.dtype)
    return np.resize(a, shape) if a.size else np.zeros(shape, a.dtype)


LAYOUTS: dict[str, Callable[[np.ndarray], np.ndarray | None]] = {}


def _layout(name: str) -> Callable:
    def add(fn: Callable[[np.ndarray], np.ndarray | None]) -> Callable:
        LAYOUTS[name] = fn
        return fn

    return add


@_layout("transposed")
def _transposed(a: np.ndarray) -> np.ndarray | None:
    """The same values stored transposed (Fortran order)."""
    return np.ascontiguousarray(a.T).T if a.ndim >= 2 and a.size else None


@_layout("offset")
def _offset(a: np.ndarray) -> np.ndarray | None:
    """The same values, contiguous, from the second element of a larger buffer."""
    if a.size == 0:
        return None
    out = np.zeros(a.size + 1, a.dtype)[1:].reshape(a.shape)
    out[...] = a
    return out


@_layout("offset and strided")
def _offset_strided(a: np.ndarray) -> np.ndarray | None:
    """The same values at every other element of a larger buffer, from its second element on."""
    if a.ndim == 0 or a.size == 0:
        return None
    big = np.zeros((*a.shape[:-1], 2 * a.shape[-1] + 1), a.dtype)
    big[..., 1::2] = a
    return big[..., 1::2]


@_layout("reversed")
def _reversed(a: np.ndarray) -> np.ndarray | None:
    """The same values read with a negative stride."""
    return a[::-1].copy()[::-1] if a.ndim and a.size else None


@_layout("broadcast")
def _broadcast(a: np.ndarray) -> np.ndarray | None:
    """The first row repeated by a zero stride (read-only)."""
    return np.broadcast_to(a[:1], a.shape) if a.ndim and a.shape[0] > 1 else None


@_layout("unaligned")
def _unaligned(a: np.ndarray) -> np.ndarray | None:
    """The same values at an address that is not a multiple of the item size."""
    if a.itemsize == 1 or a.size == 0:
        return None
    out = np.frombuffer(bytearray(a.nbytes + 1), a.dtype, a.size, offset=1).reshape(a.shape)
    out[...] = a
    return out


GROWN_LAYOUTS = ("transposed", "offset and strided")  # grown sizes: split over threads as views


def _viewed(
    name: str, arrays: list[np.ndarray], params: dict, out: Spec, layouts: Sequence[str]
) -> Iterator[Case]:
    """The case with all its arrays in each of `layouts`, and (two arrays or more, every layout) with
    only the first."""
    for layout in layouts:
        views = [LAYOUTS[layout](a) for a in arrays]
        if all(v is None for v in views):
            continue
        yield Case(
            f"{name} {layout}", tuple(a if v is None else v for a, v in zip(arrays, views)), params, out
        )
        if len(arrays) > 1 and views[0] is not None and len(layouts) == len(LAYOUTS):
            yield Case(f"{name} {layout} (first input)", (views[0], *arrays[1:]), params, out)
