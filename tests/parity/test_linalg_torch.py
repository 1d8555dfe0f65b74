"""Matrix products' dtypes and verigrad.linalg (and the top-level linear algebra names) against PyTorch's:
values, dtypes, shapes and f64 gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F

RNG = np.random.default_rng(23)


@pytest.mark.parametrize(
    "call",
    [
        lambda t, a, b: a @ b,
        lambda t, a, b: t.mm(a, b),
        lambda t, a, b: t.matmul(a, b),
        lambda t, a, b: t.bmm(a[None], b[None]),
        lambda t, a, b: t.nn.functional.linear(a, b),
        lambda t, a, b: a[0] @ b[0],
    ],
)
def test_products_of_two_dtypes_raise_as_torch(call) -> None:
    with pytest.raises(RuntimeError):
        call(torch, torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64))
    with pytest.raises(verigrad.DTypeError, match="same dtype"):
        call(verigrad, verigrad.ones(2, 2), verigrad.ones(2, 2, dtype="f64"))
    with pytest.raises(verigrad.DTypeError, match="same dtype"):
        call(verigrad, verigrad.ones(2, 2, dtype="i32"), verigrad.ones(2, 2, dtype="i64"))


@pytest.mark.parametrize("dtype", ["i64", "i32", "u8", "f32", "f64"])
def test_products_of_one_dtype_keep_it(dtype) -> None:
    a = RNG.integers(0, 4, (2, 3, 4))
    b = RNG.integers(0, 4, (4, 5))
    tdt = {
        "i64": torch.int64,
        "i32": torch.int32,
        "u8": torch.uint8,
        "f32": torch.float32,
        "f64": torch.float64,
    }
    expected = torch.from_numpy(a).to(tdt[dtype]) @ torch.from_numpy(b).to(tdt[dtype])
    out = verigrad.tensor(a, dtype=dtype) @ verigrad.tensor(b, dtype=dtype)
    assert out.dtype.name == dtype and out.shape == tuple(expected.shape)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_bool_products_raise_as_torch() -> None:
    with pytest.raises(NotImplementedError):
        torch.ones(2, 2, dtype=torch.bool) @ torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(verigrad.DTypeError, match="bool"):
        verigrad.ones(2, 2, dtype="bool") @ verigrad.ones(2, 2, dtype="bool")


def test_linear_in_f64() -> None:
    x, w, b = RNG.standard_normal((3, 4)), RNG.standard_normal((5, 4)), RNG.standard_normal(5)
    _check(
        {"x": x, "w": w, "b": b},
        lambda x, w, b: F.linear(x, w, b),
        lambda x, w, b: torch.nn.functional.linear(x, w, b),
    )
