"""How a kernel's result is held to the reference's: the same bits (EXACT; NaN meets NaN, whatever its
sign and payload), within `ulps`, or within `rtol * |reference| + atol` (infinities equal); and how a
difference is shown."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernel_table import Exactness
from .cases import Case


@dataclass
class Verdict:
    ulps: int | None = None  # float results: the largest difference in ulps
    error: float | None = None  # tolerance claims: the largest |error| / allowed error
    message: str = ""  # empty when the result meets the claim
    index: tuple[int, ...] | None = None  # where it failed first


def compare(actual: np.ndarray, expected: np.ndarray, exactness: Exactness) -> Verdict:
    """Hold `actual` to `expected` (same shape and dtype; bf16 as its uint16 bits) at `exactness`."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return Verdict(
            message=f"{actual.dtype}{list(actual.shape)} where the reference gives "
            f"{expected.dtype}{list(expected.shape)}"
        )
    flat_a, flat_e = np.ascontiguousarray(actual).reshape(-1), np.ascontiguousarray(expected).reshape(-1)
    floats = actual.dtype.kind == "f" or actual.dtype == _BF16
    if flat_a.tobytes() == flat_e.tobytes():  # the same bits: the common case, at once
        if not floats:
            return Verdict()
        return Verdict(ulps=0) if exactness.is_exact or exactness.ulps else Verdict(error=0.0)
    if not floats:  # ints and bool: the very values
        bad = np.flatnonzero(flat_a != flat_e)
        return _failed(actual, expected, bad[0], "other values than the reference", None)
    a, r = _values(flat_a), _values(flat_e)
    nan_a, nan_r = np.isnan(a), np.isnan(r)
    bad = np.flatnonzero(nan_a != nan_r)
    if len(bad):
        return _failed(actual, expected, bad[0], "NaN where the reference has a number, or the reverse", 0)
    diff = np.abs(_ordered(flat_a) - _ordered(flat_e))
    diff[nan_r] = 0
    ulps = int(diff.max())
    if exactness.is_exact:
        width = _UINT[actual.itemsize]
        bad = np.flatnonzero((flat_a.view(width) != flat_e.view(width)) & ~nan_r)
        if len(bad):
            return _failed(actual, expected, bad[0], "other bits than the reference (claimed exact)", ulps)
        return Verdict(ulps=0)
    if exactness.ulps:
        bad = np.flatnonzero(diff > exactness.ulps)
        if len(bad):
            i = bad[np.argmax(diff[bad])]
            return _failed(actual, expected, i, f"{ulps} ulps from the reference (claimed {exactness})", ulps)
        return Verdict(ulps=ulps)
    inf = np.isinf(a) | np.isinf(r)
    bad = np.flatnonzero(inf & ~nan_r & (a != r))
    if len(bad):
        what = f"an infinity the reference does not give ({exactness})"
        return _failed(actual, expected, bad[0], what, None)
    finite = ~nan_r & ~inf
    a64, r64 = a[finite].astype(np.float64), r[finite].astype(np.float64)
    allowed = exactness.rtol * np.abs(r64) + exactness.atol
    err = np.abs(a64 - r64)
    ratio = np.divide(err, allowed, out=np.where(err > 0, np.inf, 0.0), where=allowed > 0)
    worst = float(ratio.max()) if ratio.size else 0.0
    if worst > 1:
        i = np.flatnonzero(finite)[np.argmax(ratio)]
        return _failed(actual, expected, i, f"error {worst:.3g} times the claimed {exactness}", None, worst)
    return Verdict(error=worst)


def _failed(
    actual: np.ndarray,
    expected: np.ndarray,
    flat: int,
    what: str,
    ulps: int | None,
    error: float | None = None,
) -> Verdict:
    index = tuple(int(i) for i in np.unravel_index(int(flat), actual.shape)) if actual.ndim else ()
    got, want = _show(actual, index), _show(expected, index)
    return Verdict(ulps, error, f"{what}: at {list(index)} kernel {got}, reference {want}", index)


_BF16 = np.dtype(np.uint16)  # how bf16 is stored (verigrad has no uint16 dtype)
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def _values(a: np.ndarray) -> np.ndarray:
    """The float values (bf16's uint16 bits widened to the f32 they stand for)."""
    if a.dtype == _BF16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a


def _ordered(a: np.ndarray) -> np.ndarray:
    """The float bits as integers ordered like the floats, so a difference counts ulps."""
    ints = a.view(_INT[a.itemsize]).astype(np.int64)
    magnitude = ints & np.iinfo(_INT[a.itemsize]).max
    return np.where(ints < 0, -magnitude, magnitude)


def _show(a: np.ndarray, index: tuple[int, ...]) -> str:
    value = a[index]
    if a.dtype == _BF16:
        return f"{float(_values(np.asarray(value))):.9g} (bf16 0x{int(value):04x})"
    if a.dtype.kind == "f":
        return f"{float(value)!r} (0x{int(np.asarray(value).view(_UINT[a.itemsize])):0{2 * a.itemsize}x})"
    return repr(value.item())


def inputs_at(case: Case, index: tuple[int, ...] | None) -> str:
    """The inputs at a failing index, for an op whose inputs have the result's shape (element-wise)."""
    if index is None or not case.arrays or any(a.shape != case.out.shape for a in case.arrays):
        return ""
    return "; inputs there: " + ", ".join(_show(a, index) for a in case.arrays)


def first_difference(actual: np.ndarray, first: np.ndarray) -> str:
    """Where two results of the same shape and dtype first differ in their bits."""
    if actual.shape != first.shape or actual.dtype != first.dtype or actual.size == 0:
        return f": {actual.dtype}{list(actual.shape)} against {first.dtype}{list(first.shape)}"
    width = _UINT[actual.itemsize]
    flat = np.flatnonzero(np.ascontiguousarray(actual).view(width) != np.ascontiguousarray(first).view(width))
    index = tuple(int(i) for i in np.unravel_index(int(flat[0]), actual.shape)) if actual.ndim else ()
    return f": at {list(index)} {_show(actual, index)} against {_show(first, index)}"


def bits(a: np.ndarray | None) -> bytes:
    return b"" if a is None else np.ascontiguousarray(a).tobytes()


def one_line(e: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
