"""The differences the dtype sweep (tools/dtype_sweep.py) found, each against torch 2.13 on the same call:
the result's dtype, shape and bits, or both refusing. Written once against a library (`lib` is torch or
verigrad under torch's names)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

NAN, INF = math.nan, math.inf


def _outcome(call: Callable[[Any], Any], lib: Any) -> Any:
    """What call(lib) gives: a tuple of (dtype name, shape, f64 or i64 values) per tensor, or "raises"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call(lib)
    except Exception:  # the kind of error differs between the libraries; raising or not must not
        return "raises"
    results = result if isinstance(result, tuple | list) else (result,)
    out = []
    for r in results:
        name = str(r.dtype).replace("torch.", "")
        values = r.detach().double() if r.dtype.is_floating_point else r.detach()
        out.append((verigrad.dtypes.as_dtype(name).name, tuple(r.shape), np.asarray(values.numpy())))
    return tuple(out)


def _check(call: Callable[[Any], Any]) -> None:
    ours, theirs = _outcome(call, verigrad), _outcome(call, torch)
    assert isinstance(ours, str) == isinstance(theirs, str), f"verigrad: {ours!r}, torch: {theirs!r}"
    if isinstance(theirs, str):
        return
    for (od, os_, ov), (td, ts, tv) in zip(ours, theirs, strict=True):
        assert (od, os_) == (td, ts), f"verigrad {od}{os_}, torch {td}{ts}"
        np.testing.assert_array_equal(ov, tv)


U8 = lambda lib: lib.tensor([0, 1, 2, 3, 200, 255], dtype=lib.uint8)
I64 = lambda lib: lib.tensor([-3, -1, 0, 1, 2, 7])

CASES: dict[str, Callable[[Any], Any]] = {
    # searchsorted compares in the result type of the sequence and the values
    "searchsorted i64 2.5": lambda lib: lib.searchsorted(I64(lib), 2.5),
    "searchsorted i64 [2.5] f32": lambda lib: lib.searchsorted(I64(lib), lib.tensor([2.5, -0.5])),
    "searchsorted u8 -2": lambda lib: lib.searchsorted(U8(lib), -2),
    "searchsorted u8 0-d i8": lambda lib: lib.searchsorted(U8(lib), lib.tensor(-2, dtype=lib.int8)),
    "searchsorted u8 [i8]": lambda lib: lib.searchsorted(U8(lib), lib.tensor([-2, 3], dtype=lib.int8)),
    "searchsorted f32 [f64]": lambda lib: lib.searchsorted(
        lib.tensor([1.0, 1.0000001, 2.0]), lib.tensor([1.00000001], dtype=lib.float64)
    ),
    "searchsorted right i64 2.5": lambda lib: lib.searchsorted(I64(lib), 2.5, right=True),
    "searchsorted bool": lambda lib: lib.searchsorted(lib.tensor([False, True]), lib.tensor([True])),
    "bucketize 2.5 i64": lambda lib: lib.bucketize(lib.tensor([2.5, 7.5]), I64(lib)),
    # gradient of a uniform spacing: (f[i+1] - f[i-1]) / h / 2, f[i] unread (inf next to a number)
    "gradient f32 inf": lambda lib: lib.gradient(lib.tensor([-2.5, -0.5, 0.0, 1.5, NAN, INF])),
    "gradient f64 inf spacing 3": lambda lib: lib.gradient(
        lib.tensor([1.0, INF, 2.0, -INF, 3.0], dtype=lib.float64), spacing=3.0
    ),
    "gradient f32 spacing 0.7": lambda lib: lib.gradient(lib.tensor([0.1, 2.3, -4.7, 1e3, 5.0]), spacing=0.7),
    "gradient f32 edge 2": lambda lib: lib.gradient(
        lib.tensor([[0.1, 2.3, -4.7], [1e3, 5.0, 7.0]]), spacing=0.3, edge_order=2
    ),
    "gradient f16": lambda lib: lib.gradient(lib.tensor([0.1, 2.3, -4.7, 60.0, 5.0], dtype=lib.float16)),
    "gradient i8 wraps": lambda lib: lib.gradient(lib.tensor([-128, 0, 127, 1], dtype=lib.int8)),
    "gradient u8": lambda lib: lib.gradient(lib.tensor([1, 2, 3], dtype=lib.uint8)),
    # logaddexp2: promoted first (an f16 operand is not scaled in f16), f16 computed in f32
    "logaddexp2 f32 f16": lambda lib: lib.logaddexp2(
        lib.tensor([-2.5, -0.5, 0.0, 1.5]), lib.tensor([-2.5, -0.5, 0.0, 1.5], dtype=lib.float16)
    ),
    "logaddexp2 f16": lambda lib: lib.logaddexp2(
        lib.tensor([-2.5, 0.3, 7.1, 1.5], dtype=lib.float16),
        lib.tensor([3.3, -0.7, 6.9, 1.5], dtype=lib.float16),
    ),
    "logaddexp2 bool f64": lambda lib: lib.logaddexp2(
        lib.tensor([True, False]), lib.tensor([1.0, 2.0], dtype=lib.float64)
    ),
    # a 0-d operand beside a tensor with dimensions is weak
    "igamma f32 0-d f64": lambda lib: lib.igamma(lib.tensor([1.0, 2.0]), lib.tensor(1.5, dtype=lib.float64)),
    "igammac 0-d f64 f16": lambda lib: lib.igammac(
        lib.tensor(1.5, dtype=lib.float64), lib.tensor([1.0, 2.0], dtype=lib.float16)
    ),
    "block_diag u8 0-d i64": lambda lib: lib.block_diag(lib.tensor([1, 2], dtype=lib.uint8), lib.tensor(3)),
    "block_diag f32 0-d f64": lambda lib: lib.block_diag(
        lib.tensor([[1.5]]), lib.tensor(2.5, dtype=lib.float64)
    ),
    "block_diag 0-d u8 0-d i8": lambda lib: lib.block_diag(
        lib.tensor(3, dtype=lib.uint8), lib.tensor(-2, dtype=lib.int8)
    ),
    "block_diag i32 0-d f64": lambda lib: lib.block_diag(
        lib.tensor([1], dtype=lib.int32), lib.tensor(2.5, dtype=lib.float64)
    ),
    # float-only element-wise ops: an integer or bool operand beside a float one is promoted
    **{
        f"{name} {label}": (lambda name, a, b: lambda lib: getattr(lib, name)(a(lib), b(lib)))(name, a, b)
        for name in ("hypot", "logaddexp", "nextafter", "igamma", "igammac")
        for label, a, b in (
            (
                "bool f64",
                lambda lib: lib.tensor([True, False]),
                lambda lib: lib.tensor([2.0, 0.5], dtype=lib.float64),
            ),
            (
                "i64 f16",
                lambda lib: lib.tensor([3, 2]),
                lambda lib: lib.tensor([2.0, 0.7], dtype=lib.float16),
            ),
            ("0-d i64 f16", lambda lib: lib.tensor(3), lambda lib: lib.tensor([2.0, 0.7], dtype=lib.float16)),
            (
                "f32 0-d f64",
                lambda lib: lib.tensor([1.0, 0.5]),
                lambda lib: lib.tensor(2.0, dtype=lib.float64),
            ),
            ("i64 i64", lambda lib: lib.tensor([1, 3]), lambda lib: lib.tensor([2, 1])),
        )
    },
    # bf16 kept
    "unique bf16": lambda lib: lib.unique(
        lib.tensor([1.5, 2.0, 1.5, NAN]).to(lib.bfloat16), return_inverse=True, return_counts=True
    ),
    "unique_consecutive bf16": lambda lib: lib.unique_consecutive(
        lib.tensor([1.5, 1.5, 2.0]).to(lib.bfloat16)
    ),
    "nan_to_num bf16": lambda lib: lib.nan_to_num(lib.tensor([NAN, INF, -INF, 1.5]).to(lib.bfloat16)),
    "nan_to_num bf16 posinf": lambda lib: lib.nan_to_num(
        lib.tensor([NAN, INF, -INF]).to(lib.bfloat16), nan=0.1, posinf=1e10, neginf=-3.3e38
    ),
    # isclose and allclose of two dtypes raise in PyTorch ("Float did not match Double")
    "isclose f32 0-d f64": lambda lib: lib.isclose(lib.tensor([1.0]), lib.tensor(1.0, dtype=lib.float64)),
    "isclose i64 f32": lambda lib: lib.isclose(lib.tensor([1]), lib.tensor([1.0])),
    "allclose i64 f32": lambda lib: lib.tensor([lib.allclose(lib.tensor([1]), lib.tensor([1.0]))]),
    "allclose f32 f16": lambda lib: lib.tensor(
        [lib.tensor([1.0]).allclose(lib.tensor([1.0], dtype=lib.float16))]
    ),
    # what PyTorch refuses: bool in isin, cov and the trapezoidal rules, a mask or split of another dtype,
    # numbers where its signature takes tensors
    "isin bool": lambda lib: lib.isin(lib.tensor([True, False]), lib.tensor([True])),
    "isin i64 bool": lambda lib: lib.isin(lib.tensor([1, 0]), lib.tensor([True])),
    "cov bool": lambda lib: lib.cov(lib.tensor([True, False, True])),
    "cov bool fweights": lambda lib: lib.cov(lib.tensor([1.0, 2.0]), fweights=lib.tensor([True, True])),
    "trapezoid bool": lambda lib: lib.trapezoid(lib.tensor([True, False])),
    "trapezoid x bool": lambda lib: lib.trapezoid(lib.tensor([1.0, 2.0]), lib.tensor([True, False])),
    "cumulative_trapezoid bool": lambda lib: lib.cumulative_trapezoid(lib.tensor([True, False])),
    "bincount bool": lambda lib: lib.bincount(lib.tensor([True, False, True])),
    "masked_select u8 mask": lambda lib: lib.masked_select(
        lib.tensor([1, 2]), lib.tensor([1, 0], dtype=lib.uint8)
    ),
    "masked_select i64 mask": lambda lib: lib.tensor([1, 2]).masked_select(lib.tensor([1, 0])),
    "tensor_split i32 indices": lambda lib: lib.tensor_split(lib.arange(5), lib.tensor([1], dtype=lib.int32)),
    "tensor_split f32 indices": lambda lib: lib.arange(5).tensor_split(lib.tensor([1.0])),
    "tensor_split i64 indices": lambda lib: lib.tensor_split(lib.arange(5), lib.tensor([1, 3])),
    "gcd number": lambda lib: lib.gcd(lib.tensor([4, 6]), 2),
    "lcm method number": lambda lib: lib.tensor([4, 6]).lcm(3),
    "gcd tensors": lambda lib: lib.gcd(lib.tensor([4, 6]), lib.tensor([6, -4])),
    "equal number": lambda lib: lib.tensor([lib.equal(lib.tensor([2]), 2)]),
    "allclose method number": lambda lib: lib.tensor([lib.tensor([2.0]).allclose(2.0)]),
    "isclose f32": lambda lib: lib.isclose(
        lib.tensor([1.0, NAN]), lib.tensor([1.0 + 1e-7, NAN]), equal_nan=True
    ),
}


@pytest.mark.parametrize("label", list(CASES))
def test_as_pytorch(label: str) -> None:
    _check(CASES[label])


def test_logaddexp2_f16_bits_as_pytorchs() -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(4000).astype(np.float16) * 4 for _ in range(2))
    ours = verigrad.logaddexp2(verigrad.tensor(a), verigrad.tensor(b)).numpy()
    theirs = torch.logaddexp2(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.testing.assert_array_equal(ours.view(np.uint16), theirs.view(np.uint16))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64"])
@pytest.mark.parametrize(
    "kwargs", [{}, {"spacing": 3}, {"spacing": 0.7, "edge_order": 2}, {"dim": 1}, {"spacing": [2, 0.3]}]
)
def test_gradient_bits_as_pytorchs(dtype: str, kwargs: dict) -> None:
    a = (np.random.default_rng(1).standard_normal((5, 7)) * 50).astype(dtype)
    ours = verigrad.gradient(verigrad.tensor(a), **kwargs)
    theirs = torch.gradient(torch.from_numpy(a), **kwargs)
    for o, t in zip(ours, theirs, strict=True):
        assert o.dtype.name == verigrad.dtypes.as_dtype(str(t.dtype).replace("torch.", "")).name
        np.testing.assert_array_equal(o.numpy(), t.numpy())
