"""Integer-array indexing: `take` gathers along an axis; `take_grad` (its VJP) adds back into zeros;
`gather` (PyTorch's, element by element) and `gather_grad`; `argsort`; `searchsorted`."""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, i64
from ..errors import DTypeError, ShapeError
from ..shapes import Spec, normalize_axis, shape_text
from ._op import Op, Sample, no_bf16
from ._samples import uniform


def _take_canon(x: Spec, idx: Spec, axis: int = 0) -> dict:
    return {"axis": normalize_axis(axis, x.ndim)}


def _take_dtype(x: DType, idx: DType, axis: int) -> DType:
    if idx.kind != "i":
        raise DTypeError(f"indices must be an integer tensor, got {idx.name}")
    return x


def _take_grad_reference(g: np.ndarray, idx: np.ndarray, axis: int, size: int) -> np.ndarray:
    moved = np.moveaxis(g.reshape((*g.shape[:axis], idx.size, *g.shape[axis + idx.ndim :])), axis, 0)
    out = np.zeros((size, *moved.shape[1:]), dtype=g.dtype)
    np.add.at(out, idx.reshape(-1), moved)
    return np.moveaxis(out, 0, axis)


def _take_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((uniform(rng, (5, 3)), rng.integers(0, 5, (4,))), {"axis": 0}),
        Sample((uniform(rng, (2, 6)), rng.integers(0, 6, (2, 3))), {"axis": 1}),
        Sample((uniform(rng, (4,)), np.array([3, 3, 0])), {"axis": 0}),
    ]


take = Op(
    "take",
    shape=lambda x, idx, axis: (*x[:axis], *idx, *x[axis + 1 :]),
    dtype=_take_dtype,
    params=_take_canon,
    reference=lambda x, idx, axis: np.take(x, idx, axis=axis),
    vjp=lambda g, out, x, idx, axis: (take_grad(g, idx, axis=axis, size=x.shape[axis]), None),
    samples=_take_samples,
    torch=lambda t, x, idx, axis: t.index_select(x, axis, idx.reshape(-1)).reshape(
        (*x.shape[:axis], *idx.shape, *x.shape[axis + 1 :])
    ),
    exact=True,
    doc="x indexed along `axis` by an integer tensor: the output has idx's shape in place of that axis.",
)

take_grad = Op(
    "take_grad",
    shape=lambda g, idx, axis, size: (*g[:axis], size, *g[axis + len(idx) :]),
    dtype=lambda g, idx, axis, size: (no_bf16(g), g)[1],  # it adds: no bf16 arithmetic
    reference=_take_grad_reference,
    vjp=lambda g2, out, g, idx, axis, size: (take(g2, idx, axis=axis), None),
    samples=lambda rng: [Sample((uniform(rng, (4, 3)), np.array([1, 0, 1, 3])), {"axis": 0, "size": 5})],
    exact=False,
    doc="Zeros with `size` entries along `axis`, and g's slices added at the positions idx names.",
)


# gather: PyTorch's torch.gather (NumPy's take_along_axis) ---------------------------------------
def _gather_shape(x: tuple, idx: tuple, axis: int) -> tuple:
    if len(x) != len(idx) or any(a != b for d, (a, b) in enumerate(zip(x, idx)) if d != axis):
        raise ShapeError(
            f"gather needs indices shaped as the input but along axis {axis}: "
            f"{shape_text(idx)} for {shape_text(x)}"
        )
    return idx


def _positions(idx: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """The full index of every element idx names: its own position, with idx's value along `axis`."""
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    return tuple(grid)


def _gather_reference(x: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    if x.ndim == 0:  # PyTorch's: a 0-d tensor as a vector of one
        return np.take_along_axis(x.reshape(1), idx.reshape(1), axis=0).reshape(())
    return np.take_along_axis(x, idx, axis=axis)


def _gather_vjp(g, out, x, idx, axis):
    return (gather_grad(g, idx, axis=axis, size=x.shape[axis] if x.ndim else 1), None)


def _gather_grad_reference(g: np.ndarray, idx: np.ndarray, axis: int, size: int) -> np.ndarray:
    if g.ndim == 0:
        return _gather_grad_reference(g.reshape(1), idx.reshape(1), 0, size).reshape(())
    out = np.zeros((*g.shape[:axis], size, *g.shape[axis + 1 :]), dtype=g.dtype)
    np.add.at(out, _positions(idx, axis), g)
    return out


def _gather_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((uniform(rng, (3, 5)), rng.integers(0, 5, (3, 4))), {"axis": 1}),
        Sample((uniform(rng, (4, 2)), rng.integers(0, 4, (6, 2))), {"axis": 0}),
        Sample((uniform(rng, (2, 3, 4)), np.array([[[1, 1]] * 3] * 2)), {"axis": 2}),
        Sample((uniform(rng, ()), np.array(0)), {"axis": 0}),  # PyTorch's: a 0-d tensor, a vector of one
    ]


gather = Op(
    "gather",
    shape=_gather_shape,
    dtype=_take_dtype,
    params=_take_canon,
    reference=_gather_reference,
    vjp=_gather_vjp,
    samples=_gather_samples,
    torch=lambda t, x, idx, axis: t.gather(x, axis, idx),
    exact=True,
    doc="out[..., j, ...] = x[..., idx[..., j, ...], ...] along `axis` (PyTorch's gather): idx is shaped "
    "as x but along `axis`.",
)

gather_grad = Op(
    "gather_grad",
    shape=lambda g, idx, axis, size: (*g[:axis], size, *g[axis + 1 :]) if g else (),
    dtype=lambda g, idx, axis, size: (no_bf16(g), g)[1],
    reference=_gather_grad_reference,
    vjp=lambda g2, out, g, idx, axis, size: (gather(g2, idx, axis=axis), None),
    samples=lambda rng: [Sample((uniform(rng, (3, 4)), rng.integers(0, 2, (3, 4))), {"axis": 1, "size": 2})],
    torch=lambda t, g, idx, axis, size: t.zeros(
        (*g.shape[:axis], size, *g.shape[axis + 1 :]), dtype=g.dtype
    ).scatter_add(axis, idx, g),
    exact=False,
    doc="Zeros with `size` entries along `axis`, and each g[..., j, ...] added at idx[..., j, ...] "
    "(gather's VJP).",
)


def _place_shape(x: tuple, idx: tuple, axis: int, size: int) -> tuple:
    if tuple(x) != tuple(idx):
        raise ShapeError(f"place needs indices shaped as the values: {shape_text(idx)} for {shape_text(x)}")
    return (*x[:axis], size, *x[axis + 1 :])


def _place_reference(x: np.ndarray, idx: np.ndarray, axis: int, size: int) -> np.ndarray:
    out = np.zeros((*x.shape[:axis], size, *x.shape[axis + 1 :]), dtype=x.dtype)
    np.put_along_axis(out, idx, x, axis=axis)
    return out


def _place_samples(rng: np.random.Generator) -> list[Sample]:
    """Indices without repeats along the axis (where they repeat, the values written must be equal)."""
    idx = np.stack([rng.permutation(6)[:4] for _ in range(3)])
    return [Sample((uniform(rng, (3, 4)), idx), {"axis": 1, "size": 6})]


place = Op(
    "place",
    shape=_place_shape,
    dtype=lambda x, idx, axis, size: (no_bf16(x), _take_dtype(x, idx, axis))[1],
    params=lambda x, idx, axis, size: {"axis": normalize_axis(axis, x.ndim), "size": int(size)},
    reference=_place_reference,
    vjp=lambda g, out, x, idx, axis, size: (gather(g, idx, axis=axis), None),
    samples=_place_samples,
    torch=lambda t, x, idx, axis, size: t.zeros(
        (*x.shape[:axis], size, *x.shape[axis + 1 :]), dtype=x.dtype
    ).scatter(axis, idx, x),
    exact=True,
    doc="Zeros with `size` entries along `axis`, x[..., j, ...] written at idx[..., j, ...] (a position "
    "named twice must get equal values: max unpooling's); its VJP gathers, so every x gets its position's "
    "gradient.",
)


# argsort --------------------------------------------------------------------------------------
def _argsort_canon(
    x: Spec, axis: int = -1, descending: bool = False, dim: int | None = None, stable: bool = False
) -> dict:
    """`axis` (or PyTorch's `dim`) and the order. The sort is always stable, which is one of the orders
    `stable=False` allows and the one PyTorch's CPU sort gives."""
    return {"axis": normalize_axis(dim if dim is not None else axis, x.ndim), "descending": bool(descending)}


def _argsort_reference(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable: ties keep their order; NaN sorts above every number (last ascending, first descending)."""
    if x.ndim == 0:
        return np.zeros((), dtype=np.int64)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64)
    flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(x.shape[axis] - 1 - flipped, axis).astype(np.int64)


argsort = Op(
    "argsort",
    shape=lambda x, axis, descending: x,
    dtype=lambda x, axis, descending: (no_bf16(x), i64)[1],
    params=_argsort_canon,
    positional=("axis", "descending"),  # PyTorch's argsort(input, dim, descending)
    reference=_argsort_reference,
    samples=lambda rng: (
        [
            Sample(
                (np.array([[3.0, 1.0, 2.0, 1.0], [0.5, np.nan, -1.0, 0.5]]),), {"axis": 1, "descending": d}
            )
            for d in (False, True)
        ]
        + [Sample((uniform(rng, (4, 3)),), {"axis": 0, "descending": False})]
    ),
    torch=lambda t, x, axis, descending: t.argsort(x, dim=axis, descending=descending, stable=True),
    differentiable=False,
    doc="The indices that sort x along `axis` (stably; NaN above every number), as i64.",
)


# searchsorted: PyTorch's torch.searchsorted (and bucketize) ----------------------------------------
def _searchsorted_shape(seq: tuple, values: tuple, right: bool) -> tuple:
    """A sorted sequence [K] for any values, or sorted rows [..., K] for values [..., M] of the same
    leading axes; the result has the values' shape."""
    if len(seq) > 1 and (len(values) != len(seq) or any(a != b for a, b in zip(seq[:-1], values[:-1]))):
        raise ShapeError(
            f"searchsorted: sorted rows {shape_text(seq)} need values of the same leading axes, got "
            f"{shape_text(values)}"
        )
    if len(seq) == 0:
        raise ShapeError("searchsorted needs a sorted sequence of at least one axis, got a scalar")
    return values


def _searchsorted_dtype(seq: DType, values: DType, right: bool) -> DType:
    no_bf16(seq, values)
    return i64


def _searchsorted_reference(seq: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    side = "right" if right else "left"
    if seq.dtype.kind == "f" and np.isnan(seq).any():  # NumPy orders NaN last; PyTorch's search does not
        return _nan_bound(seq, values, right)
    if seq.ndim == 1:
        return np.searchsorted(seq, values, side=side).astype(np.int64)
    if seq.size == 0 or values.size == 0:  # no rows, or empty rows: every value goes first
        return np.zeros(values.shape, dtype=np.int64)
    rows, tail = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
    found = [np.searchsorted(r, v, side=side) for r, v in zip(rows, tail)]
    return np.array(found, dtype=np.int64).reshape(values.shape)


def _nan_bound(seq: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    """PyTorch's binary search, step by step, for a sequence holding NaN: it goes right of a middle
    element unless that is >= the value (> with `right`), so a NaN probed sends every value right."""
    rows = seq.reshape(1, -1) if seq.ndim == 1 else seq.reshape(-1, seq.shape[-1])
    tail = values.reshape(1, -1) if seq.ndim == 1 else values.reshape(rows.shape[0], -1)
    start = np.zeros(tail.shape, np.int64)
    end = np.full(tail.shape, rows.shape[1], np.int64)
    while (start < end).any():
        active = start < end
        mid = start + ((end - start) >> 1)
        probed = np.take_along_axis(rows, np.minimum(mid, rows.shape[1] - 1), axis=1)
        with np.errstate(invalid="ignore"):
            left = probed > tail if right else probed >= tail
        start = np.where(active & ~left, mid + 1, start)
        end = np.where(active & left, mid, end)
    return start.reshape(values.shape)


searchsorted = Op(
    "searchsorted",
    shape=_searchsorted_shape,
    dtype=_searchsorted_dtype,
    params=lambda seq, values, right=False: {"right": bool(right)},
    reference=_searchsorted_reference,
    samples=lambda rng: (
        [
            Sample((np.array([-1.0, 0.0, 0.0, 2.5]), np.array([[-2.0, 0.0], [1.0, 3.0]])), {"right": r})
            for r in (False, True)
        ]
        + [Sample((np.sort(uniform(rng, (2, 5)), axis=1), uniform(rng, (2, 3))), {"right": False})]
    ),
    torch=lambda t, seq, values, right: t.searchsorted(seq, values, right=right),
    differentiable=False,
    doc="Where each value would go in the sorted sequence (or each row of sorted rows) to keep it "
    "sorted: the first such place, or with `right` the last (PyTorch's searchsorted), as i64.",
)
