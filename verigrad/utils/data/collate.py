"""PyTorch's `default_collate` (a list of samples into a batch) and `default_convert` (one sample's NumPy
arrays into tensors, for a DataLoader that does not batch)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from ...ops import stack
from ...ops.creation import as_tensor, tensor
from ...tensor import Tensor

_REFUSED = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _numpy_text(array: np.ndarray | np.generic) -> bool:
    """PyTorch's test for arrays left unconverted: strings, bytes and objects (any other dtype is converted,
    so one verigrad lacks, such as complex, raises rather than passing through as NumPy)."""
    return array.dtype.kind in "SaUO"


def _same_mapping(like: Mapping, values: dict) -> Any:
    """`values` in a mapping of `like`'s type (a copy of it updated, as PyTorch's), else a dict."""
    try:
        if isinstance(like, MutableMapping):
            clone = copy.copy(like)
            clone.update(values)
            return clone
        return type(like)(values)  # type: ignore[call-arg]
    except TypeError:
        return values


def default_collate(batch: Sequence[Any]) -> Any:
    """Samples into a batch, as PyTorch's: tensors stacked, NumPy arrays and scalars made tensors and
    stacked, Python floats an f64 tensor, ints i64, bools bool; strings left as they are; dicts collated
    key by key, named tuples field by field, other sequences position by position (a list of batches)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray | np.generic) and not isinstance(elem, np.str_ | np.bytes_):
        if _numpy_text(elem):
            raise TypeError(_REFUSED.format(elem.dtype))
        if isinstance(elem, np.generic) or elem.ndim == 0:
            return as_tensor(np.asarray(batch))
        return default_collate([as_tensor(b) for b in batch])
    if isinstance(elem, float):
        return tensor(batch, dtype="f64")
    if isinstance(elem, int):  # bools too: a bool tensor for bools, i64 for ints
        return tensor(batch)
    if isinstance(elem, str | bytes):
        return batch
    if isinstance(elem, Mapping):
        return _same_mapping(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(field) for field in zip(*batch)))
    if isinstance(elem, Sequence):
        if len({len(sample) for sample in batch}) != 1:
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(field) for field in zip(*batch)]  # tuples: strings stay tuples
        if isinstance(elem, tuple):
            return fields  # PyTorch's: a list of batches for tuple samples
        try:
            return type(elem)(fields)  # type: ignore[call-arg]
        except TypeError:
            return fields
    raise TypeError(_REFUSED.format(type(elem)))


def default_convert(data: Any) -> Any:
    """One sample with its NumPy arrays and scalars made tensors (containers walked), the rest as is."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray | np.generic):
        return data if _numpy_text(data) else as_tensor(data)
    if isinstance(data, Mapping):
        return _same_mapping(data, {key: default_convert(value) for key, value in data.items()})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        try:
            return type(data)([default_convert(d) for d in data])  # type: ignore[call-arg]
        except TypeError:
            return [default_convert(d) for d in data]
    return data
