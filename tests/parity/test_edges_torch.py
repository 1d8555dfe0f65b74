"""The edges of ops against PyTorch, value by value, dtype by dtype and raising or not: Python numbers an
integer or float dtype cannot hold (fills, writes, clamp and where bounds, integer exponents, tensor()),
sources of another dtype than the tensor written into (no silent promotion), arange's step sign, and
NaN, ties, empty and 0-d operands, type promotion with Python numbers, and integer overflow in sums."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

NAN, INF = float("nan"), float("inf")


def _outcome(call: Callable[[Any], Any], lib: Any) -> Any:
    """What `call(lib)` gives as NumPy arrays (a tuple for a tuple), or "raises"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call(lib)
    except Exception:  # the kind of error differs between the libraries; raising or not must not
        return "raises"
    if isinstance(result, tuple | list):
        return tuple(np.asarray(r.numpy()) for r in result)
    return np.asarray(result.detach().numpy() if hasattr(result, "detach") else result.numpy())


def _check(call: Callable[[Any], Any]) -> None:
    ours, theirs = _outcome(call, verigrad), _outcome(call, torch)
    if isinstance(theirs, str) or isinstance(ours, str):
        assert isinstance(ours, str) and isinstance(theirs, str), f"verigrad: {ours!r}, torch: {theirs!r}"
        return
    for a, b in zip(
        ours if isinstance(ours, tuple) else (ours,), theirs if isinstance(theirs, tuple) else (theirs,)
    ):
        assert a.dtype == b.dtype and a.shape == b.shape, (
            f"verigrad {a.dtype}{a.shape}, torch {b.dtype}{b.shape}"
        )
        np.testing.assert_array_equal(a, b)


def _fills(v: Any) -> dict[str, Callable[[Any], Any]]:
    """Every way of writing the number v into a u8 / i8 / i32 / f32 tensor."""
    mask = lambda lib: lib.tensor([True, False])
    return {
        "fill_ u8": lambda lib: lib.zeros(2, dtype=lib.uint8).fill_(v),
        "fill_ i8": lambda lib: lib.zeros(2, dtype=lib.int8).fill_(v),
        "fill_ f32": lambda lib: lib.zeros(2).fill_(v),
        "full u8": lambda lib: lib.full((2,), v, dtype=lib.uint8),
        "full i64": lambda lib: lib.full((2,), v, dtype=lib.int64),
        "full_like i8": lambda lib: lib.full_like(lib.ones(2, dtype=lib.int8), v),
        "new_full i8": lambda lib: lib.ones(2, dtype=lib.int8).new_full((2,), v),
        "masked_fill u8": lambda lib: lib.zeros(2, dtype=lib.uint8).masked_fill(mask(lib), v),
        "masked_fill f32": lambda lib: lib.zeros(2).masked_fill(mask(lib), v),
        "index_fill u8": lambda lib: lib.ones(2, dtype=lib.uint8).index_fill(0, lib.tensor([0]), v),
        "scatter u8": lambda lib: lib.ones(2, dtype=lib.uint8).scatter(0, lib.tensor([0]), v),
        "setitem slice u8": lambda lib: _set(lib.zeros(2, dtype=lib.uint8), slice(None), v),
        "setitem int i32": lambda lib: _set(lib.zeros(2, dtype=lib.int32), 0, v),
        "setitem mask i32": lambda lib: _set(lib.zeros(2, dtype=lib.int32), mask(lib), v),
        "clamp min u8": lambda lib: lib.clamp(lib.ones(2, dtype=lib.uint8), min=v),
        "clamp max i16": lambda lib: lib.clamp(lib.ones(2, dtype=lib.int16), max=v),
        "clamp max f32": lambda lib: lib.clamp(lib.ones(2), max=v),
        "where u8": lambda lib: lib.where(mask(lib), lib.ones(2, dtype=lib.uint8), v),
        "x.where i8": lambda lib: lib.ones(2, dtype=lib.int8).where(mask(lib), v),
        "pow u8": lambda lib: lib.pow(lib.ones(2, dtype=lib.uint8), v),
        "tensor i8": lambda lib: lib.tensor([v], dtype=lib.int8),
        "add alpha i8": lambda lib: lib.add(
            lib.ones(2, dtype=lib.int8), lib.ones(2, dtype=lib.int8), alpha=v
        ),
        "sub alpha f32": lambda lib: lib.sub(lib.ones(2), lib.ones(2), alpha=v),
        "addcmul value i16": lambda lib: lib.addcmul(*[lib.ones(2, dtype=lib.int16)] * 3, value=v),
        "index_add alpha u8": lambda lib: lib.ones(2, dtype=lib.uint8).index_add(
            0, lib.tensor([0]), lib.ones(1, dtype=lib.uint8), alpha=v
        ),
        "lerp weight f32": lambda lib: lib.lerp(lib.ones(2), lib.zeros(2), v),
        "lerp weight f16": lambda lib: lib.lerp(lib.ones(2).half(), lib.zeros(2).half(), v),
        "where f16": lambda lib: lib.where(mask(lib), lib.ones(2).half(), v),
        "clamp max f16": lambda lib: lib.clamp(lib.ones(2).half(), max=v),
        "fill_diagonal_ i8": lambda lib: lib.ones(2, 2, dtype=lib.int8).fill_diagonal_(v),
        "addcdiv value f32": lambda lib: lib.addcdiv(lib.ones(2), lib.ones(2), lib.ones(2), value=v),
    }


def _set(x: Any, key: Any, value: Any) -> Any:
    x[key] = value
    return x


NUMBERS = (300, -1, -256, 255, -1.5, 2.7, NAN, INF, 1e300)
FILLS = [(f"{name} {v!r}", call) for v in NUMBERS for name, call in _fills(v).items()]


@pytest.mark.parametrize(("label", "call"), FILLS, ids=[label for label, _ in FILLS])
def test_numbers_a_dtype_cannot_hold(label: str, call: Callable[[Any], Any]) -> None:
    _check(call)


def _sources(source: str) -> dict[str, Callable[[Any], Any]]:
    """Functions writing (or adding) a tensor of dtype `source` into an f32 tensor."""
    s = lambda lib: lib.ones(1, dtype=getattr(lib, source))
    i = lambda lib: lib.tensor([0])
    return {
        "scatter": lambda lib: lib.zeros(3).scatter(0, i(lib), s(lib)),
        "scatter_add": lambda lib: lib.zeros(3).scatter_add(0, i(lib), s(lib)),
        "index_add": lambda lib: lib.zeros(3).index_add(0, i(lib), s(lib)),
        "put": lambda lib: lib.zeros(3).put(i(lib), s(lib)),
        "lerp end": lambda lib: lib.lerp(lib.zeros(1), s(lib), 0.5),
        "index_copy": lambda lib: lib.zeros(3).index_copy(0, i(lib), s(lib)),
        "setitem": lambda lib: _set(lib.zeros(3), i(lib), s(lib)),
        "index_put acc": lambda lib: lib.zeros(3).index_put((i(lib),), s(lib), accumulate=True),
    }


SOURCES = [
    (f"{name} <- {d}", call)
    for d in ("float32", "float64", "int64", "bool")
    for name, call in _sources(d).items()
]


@pytest.mark.parametrize(("label", "call"), SOURCES, ids=[label for label, _ in SOURCES])
def test_sources_of_another_dtype(label: str, call: Callable[[Any], Any]) -> None:
    _check(call)


RANGES = [
    (1, 0, 1),
    (0, -1, 1),
    (0, 1, -1),
    (1.0, 0.0, 0.5),
    (0, 0, 1),
    (0, 0, -1),
    (5, 1, -2),
    (0, 1, 0.1),
    (1, 2.5, 0.5),
]


@pytest.mark.parametrize("bounds", RANGES)
def test_arange_bounds_and_step_sign(bounds: tuple) -> None:
    _check(lambda lib: lib.arange(*bounds))
    _check(lambda lib: lib.arange(*bounds, dtype=lib.float64))


# NaN and ties: which value and which index wins
TIES = np.array([1.0, NAN, 3.0, NAN, 3.0, 1.0], np.float32)
EQUAL = np.array([[2.0, 5.0, 5.0], [1.0, 1.0, 0.0]], np.float32)
ORDERINGS = {
    "max": lambda lib, x: lib.max(x, -1),
    "min": lambda lib, x: lib.min(x, -1),
    "argmax": lambda lib, x: lib.argmax(x),
    "argmin": lambda lib, x: lib.argmin(x, 0),
    "median": lambda lib, x: lib.median(x, -1),
    "nanmedian": lambda lib, x: lib.nanmedian(x, -1),
    "sort stable": lambda lib, x: lib.sort(x, dim=-1, stable=True),
    "sort stable descending": lambda lib, x: lib.sort(x, dim=-1, stable=True, descending=True),
    "argsort stable": lambda lib, x: lib.argsort(x, dim=-1, stable=True),
    "topk 1": lambda lib, x: lib.topk(x, 1),
    "cummax": lambda lib, x: lib.cummax(x, -1),
    "cummin": lambda lib, x: lib.cummin(x, -1),
    "unique": lambda lib, x: lib.unique(x, return_inverse=True, return_counts=True),
    "amax": lambda lib, x: lib.amax(x, -1),
}


@pytest.mark.parametrize("data", [TIES, EQUAL], ids=["nan", "ties"])
@pytest.mark.parametrize("name", list(ORDERINGS))
def test_nan_and_ties(name: str, data: np.ndarray) -> None:
    _check(lambda lib: ORDERINGS[name](lib, lib.from_numpy(data.copy())))


EMPTY = np.zeros((0, 3), np.float32)
EMPTIES = {
    "sum": lambda lib, x: lib.sum(x, 0),
    "prod": lambda lib, x: lib.prod(x),
    "mean": lambda lib, x: lib.mean(x),
    "amax dim 0": lambda lib, x: lib.amax(x, 0),
    "amax dim 1": lambda lib, x: lib.amax(x, 1),
    "max": lambda lib, x: lib.max(x),
    "argmax dim 1": lambda lib, x: lib.argmax(x, 1),
    "std": lambda lib, x: lib.std(x, 0),
    "var correction 0": lambda lib, x: lib.var(x, 1, correction=0),
    "var of one correction 1": lambda lib, x: lib.var(x[:, :1].reshape(-1)[:1] if x.numel() else lib.ones(1)),
    "var of two correction 2": lambda lib, x: lib.var(lib.tensor([1.0, 2.0]), correction=2),
    "norm -1 over an empty dim": lambda lib, x: lib.norm(x, -1, 0),
    "norm -inf of empty": lambda lib, x: x.norm(-INF),
    "norm 0.5 over an empty dim": lambda lib, x: lib.norm(x, 0.5, 0),
    "norm p None": lambda lib, x: lib.norm(lib.ones(2, 3), None, 1),
    "sum dim ()": lambda lib, x: lib.sum(lib.ones(2, 3), dim=()),
    "mean dim ()": lambda lib, x: lib.mean(lib.ones(2, 3), dim=()),
    "sum int8 overflow": lambda lib, x: lib.sum(lib.full((3,), 100, dtype=lib.int8)),
    "cumsum int8 overflow": lambda lib, x: lib.cumsum(lib.full((3,), 100, dtype=lib.int8), 0),
    "prod uint8 overflow": lambda lib, x: lib.prod(lib.full((3,), 100, dtype=lib.uint8)),
}


@pytest.mark.parametrize("name", list(EMPTIES))
def test_empty_reductions_and_overflow(name: str) -> None:
    _check(lambda lib: EMPTIES[name](lib, lib.from_numpy(EMPTY.copy())))


PROMOTIONS = {
    "i64 + 2.5": lambda lib, x: x + 2.5,
    "u8 + -3": lambda lib, x: x.to(lib.uint8) + -3,
    "bool + True": lambda lib, x: (x > 0) + True,
    "i64 / 2": lambda lib, x: x / 2,
    "i64 // -2": lambda lib, x: x // -2,
    "i64 % -3": lambda lib, x: x % -3,
    "f32 // 0": lambda lib, x: x.float() // 0,
    "f32 % 0": lambda lib, x: x.float() % 0,
    "i64 // 0": lambda lib, x: x // 0,
    "i64 << 70": lambda lib, x: x << 70,
    "i8 >> 9": lambda lib, x: x.to(lib.int8) >> 9,
    "i64 ** -1": lambda lib, x: x**-1,
    "fill_ 1-d tensor": lambda lib, x: x.clone().fill_(lib.tensor([1, 2, 3, 4, 5])),
    "fill_ 1-element 1-d tensor": lambda lib, x: x.clone().fill_(lib.tensor([2])),
    "fill_ 0-d f64 tensor": lambda lib, x: x.clone().fill_(lib.tensor(2.7, dtype=lib.float64)),
    "tensor of 2**63": lambda lib, x: lib.tensor([1, 2**63]),
    "tensor of -2**63": lambda lib, x: lib.tensor([-(2**63)]),
    "where scalars": lambda lib, x: lib.where(x > 0, 1, 2.5),
    "clamp min > max": lambda lib, x: lib.clamp(x.float(), 1.0, -1.0),
    "clamp nan bound": lambda lib, x: lib.clamp(x.float(), min=NAN),
    "round decimals": lambda lib, x: lib.round(x.float() * 0.125 + 0.0625, decimals=1),
    "round halves": lambda lib, x: lib.round(x.float() + 0.5),
}


@pytest.mark.parametrize("name", list(PROMOTIONS))
def test_python_numbers_in_promotion(name: str) -> None:
    _check(lambda lib: PROMOTIONS[name](lib, lib.tensor([-7, -2, 0, 3, 5])))


SEARCHED = [[0.0, 1.0, NAN], [NAN], [NAN, NAN, 1.0], [0.0, NAN, 1.0, 1.0, NAN], [-INF, 0.0, INF, NAN]]


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("sequence", SEARCHED, ids=[str(s) for s in SEARCHED])
def test_searchsorted_in_a_sequence_holding_nan(sequence: list, right: bool) -> None:
    values = [-3.0, -0.0, 0.5, 1.0, 2.5, NAN, INF, -INF]
    _check(lambda lib: lib.searchsorted(lib.tensor(sequence), lib.tensor(values), right=right))
    _check(lambda lib: lib.bucketize(lib.tensor(values), lib.tensor(sequence), right=right))
    rows = [sequence, sequence[::-1]]
    _check(lambda lib: lib.searchsorted(lib.tensor(rows), lib.tensor([values, values]), right=right))


@pytest.mark.parametrize("weight", [0.3, 0.49, 0.5, 2.7, -1.3, 1.0, NAN])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_lerp_with_a_number_weight_to_the_bit(dtype: str, weight: float) -> None:
    """PyTorch's kernel: one fused multiply-add (f16 in f32), so every bit, infinities and NaN too."""
    rng = np.random.default_rng(0)
    start, end = (rng.standard_normal(1001).astype(dtype) for _ in range(2))
    start[:4], end[:4] = [INF, -INF, NAN, 0.0], [0.0, 1.0, 2.0, INF]
    _check(lambda lib: lib.lerp(lib.from_numpy(start.copy()), lib.from_numpy(end.copy()), weight))


def _written(key: Any) -> Callable[[Any], Any]:
    def call(lib: Any) -> Any:
        x = lib.arange(24.0).reshape(2, 3, 4)
        x[key] = -1.0
        return x

    return call


LIST_KEYS = [[[0, 1], [1, 0]], [0, slice(None), 1], [0, 1], [[1], 0], [None, 0], [Ellipsis, 1], [0, [2, 1]]]


@pytest.mark.parametrize("key", LIST_KEYS, ids=repr)
def test_a_list_key_holding_sequences_is_a_tuple(key: list) -> None:
    """PyTorch 2.13 reads x[[[0, 1], [1, 0]]] as x[[0, 1], [1, 0]] (a list holding a sequence, a slice, None
    or ...), with a deprecation warning; verigrad read it as one index tensor, another shape."""
    _check(lambda lib: lib.arange(24.0).reshape(2, 3, 4)[key])
    _check(_written(key))


@pytest.mark.parametrize(
    ("dim", "index"), [(2, [[[0]], [[3]]]), (1, [[[2, 0]]]), (0, [[[1], [0]]]), (-1, [[[3, 3]], [[0, 1]]])]
)
def test_gather_with_an_index_shorter_along_other_dims(dim: int, index: list) -> None:
    """PyTorch's gather takes index.size(d) <= input.size(d) for d != dim (verigrad refused a shorter one)."""
    _check(lambda lib: lib.arange(24.0).reshape(2, 3, 4).gather(dim, lib.tensor(index)))
    grads = []
    for lib in (torch, verigrad):
        x = lib.arange(24.0).reshape(2, 3, 4).requires_grad_()
        (
            x.gather(dim, lib.tensor(index)) * lib.arange(1.0, 1.0 + np.size(index)).reshape(np.shape(index))
        ).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(*grads)


def _in_place(write: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    def call(lib: Any) -> Any:
        x = lib.arange(24.0).reshape(2, 3, 4)
        write(lib, x)
        return x

    return call


IN_PLACE_OVERLAPS = {
    "add_ shifted": lambda lib, x: x[0, 1:].add_(x[0, :-1]),
    "+= shifted": lambda lib, x: x[0, 1:].__iadd__(x[0, :-1]),
    "copy_ shifted": lambda lib, x: x[0, 0, 1:].copy_(x[0, 0, :-1]),
    "mul_ other=": lambda lib, x: x[0, 0, 1:].mul_(other=x[0, 0, :-1]),
    "clamp_ bound": lambda lib, x: x[0, 1:].clamp_(x[0, :-1]),
    "lerp_": lambda lib, x: x[0, 1:].lerp_(x[0, :-1], 0.5),
    "halves": lambda lib, x: x.view(-1)[:12].add_(x.view(-1)[6:18]),
    "itself": lambda lib, x: x.mul_(x),
    "the same view": lambda lib, x: x[0].add_(x.view(2, 12)[0].view(3, 4)),
    "disjoint": lambda lib, x: x[0].add_(x[1]),
    "interleaved": lambda lib, x: x.view(-1)[::2].add_(x.view(-1)[1::2]),
    "columns": lambda lib, x: x[0, :, 0].add_(x[0, :, 1]),
    "expanded": lambda lib, x: lib.zeros(1, 3).expand(2, 3).add_(1),
}


@pytest.mark.parametrize("name", list(IN_PLACE_OVERLAPS))
def test_in_place_writes_from_overlapping_views(name: str) -> None:
    """PyTorch refuses an in-place op whose operand partly overlaps the tensor written (verigrad computed it
    as if the operand were a copy); the same elements, disjoint and interleaved views are taken."""
    _check(_in_place(IN_PLACE_OVERLAPS[name]))


def test_a_transposed_self_add_is_refused_not_answered() -> None:
    """PyTorch does not look at layouts with gaps, and its x[:3, :3].add_(x[:3, :3].t()) follows its order of
    writes; verigrad refuses it (the README's table)."""
    with pytest.raises(RuntimeError, match="single memory location"):
        _in_place(lambda lib, x: x[0, :3, :3].add_(x[0, :3, :3].t()))(verigrad)


def _shift_right(x):
    x[1:] = x[:-1]


def _shift_left(x):
    x[0:5] = x[1:]


def _same_elements(x):
    x[1:3] = x[1:3]


def _apart(x):
    x[0:2] = x[3:5]


@pytest.mark.parametrize(("write", "refused"), [(_shift_right, True), (_shift_left, True),
                                                (_same_elements, False), (_apart, False)])  # fmt: skip
def test_setitem_from_a_partly_overlapping_view_as_torch(write, refused) -> None:
    """x[1:] = x[:-1]: PyTorch refuses (its answer would follow its order of writes); verigrad gave the
    copy's answer silently. The same elements, or none shared, are written as PyTorch writes them."""
    theirs, ours = torch.arange(6.0), verigrad.arange(6.0)
    if refused:
        with pytest.raises(RuntimeError, match="single memory location"):
            write(theirs)
        with pytest.raises(RuntimeError, match="single memory location"):
            write(ours)
    else:
        write(theirs)
        write(ours)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
