"""Integer convolutions against PyTorch's CPU kernels: the same bits for every integer dtype PyTorch
convolves (sums past 2^53 and sums that wrap), and the same answer or refusal for every mix of input,
weight and bias dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

DTYPES = ["int8", "uint8", "int16", "int32", "int64"]
SHAPES = {1: ((2, 4, 9), (6, 2, 3)), 2: ((2, 4, 6, 7), (6, 2, 3, 2)), 3: ((2, 4, 4, 5, 6), (6, 2, 2, 3, 2))}
WINDOWS = [{}, {"stride": 2, "padding": 1}, {"padding": "same"}, {"stride": 3, "padding": "valid"}]


def _both(fn_name: str, arrays: list, **kwargs):
    ours = getattr(verigrad.nn.functional, fn_name)(*(verigrad.from_numpy(a) for a in arrays), **kwargs)
    theirs = getattr(torch.nn.functional, fn_name)(*(torch.from_numpy(a) for a in arrays), **kwargs)
    return ours, theirs


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("window", [*WINDOWS, {"dilation": 2, "padding": 1}])
def test_integer_convolutions_give_pytorchs_bits(dtype: str, dims: int, window: dict) -> None:
    if "dilation" in window and dtype != "int64":
        window = {"padding": 1}  # PyTorch dilates i64 only (test_refusals_match)
    rng = np.random.default_rng(dims)
    info = np.iinfo(dtype)
    xs, ws = SHAPES[dims]
    x = rng.integers(info.min, info.max, xs, endpoint=True).astype(dtype)
    w = rng.integers(info.min, info.max, ws, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, ws[0], endpoint=True).astype(dtype)
    ours, theirs = _both(f"conv{dims}d", [x, w, b], groups=2, **window)
    assert ours.dtype.name == verigrad.from_numpy(x).dtype.name and theirs.dtype == torch.from_numpy(x).dtype
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize(
    ("fn_name", "x", "w", "want"),
    [
        ("conv3d", ((1, 1, 1, 3, 3), 2**25 + 1), ((1, 1, 1, 2, 2), 2**30 + 1), 144115192505040900),
        ("conv2d", ((1, 1, 3, 3), 2**40), ((1, 1, 2, 2), 2**30), 0),
        ("conv1d", ((1, 3, 2), 2**40 + 1), ((1, 3, 2), 2**23 + 1), 6 * (2**40 + 1) * (2**23 + 1) % 2**64),
    ],
)
def test_the_found_cases(fn_name: str, x: tuple, w: tuple, want: int) -> None:
    ours, theirs = _both(fn_name, [np.full(*x, dtype=np.int64), np.full(*w, dtype=np.int64)])
    assert ours.reshape(-1).tolist()[0] == theirs.reshape(-1).tolist()[0] == np.int64(np.uint64(want))


# bf16 is left out: verigrad's bf16 tensors are only loaded, moved and cast (any arithmetic raises)
ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
MIXES = [(x, x, b) for x in ALL for b in [None, *ALL]] + [(x, w, None) for x in ALL for w in ALL if w != x]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize(
    "name", ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
)
def test_dtype_mixes_answer_or_refuse_as_pytorch(name: str) -> None:
    """Each (input, weight, bias) dtype mix: PyTorch's answer (the same dtype and values) or a refusal."""
    dims = int(name[-2])
    shape_x, shape_w = (1, 2, *(3,) * dims), (2, 2, *(2,) * dims)
    differ = []
    for xd, wd, bd in MIXES:
        xs = torch.ones(shape_x, dtype=getattr(torch, xd))
        ws = torch.ones(shape_w, dtype=getattr(torch, wd))
        bs = None if bd is None else torch.ones(2, dtype=getattr(torch, bd))
        try:
            theirs = getattr(torch.nn.functional, name)(xs, ws, bs)
        except (RuntimeError, NotImplementedError):
            theirs = None
        args = [verigrad.ones(*t.shape, dtype=getattr(verigrad, str(t.dtype)[6:])) for t in (xs, ws)]
        bias = None if bs is None else verigrad.ones(2, dtype=getattr(verigrad, bd))
        try:
            ours = getattr(verigrad.nn.functional, name)(*args, bias)
        except (TypeError, ValueError, NotImplementedError):
            ours = None
        if (ours is None) != (theirs is None):
            differ.append((xd, wd, bd, "raises" if ours is None else "answers"))
        elif ours is not None:
            if ours.dtype is not getattr(verigrad, str(theirs.dtype)[6:]):
                differ.append((xd, wd, bd, f"dtype {ours.dtype.name} != {theirs.dtype}"))
            elif not np.array_equal(ours.float().numpy(), theirs.float().numpy()):
                differ.append((xd, wd, bd, "values"))
    assert differ == [], differ
