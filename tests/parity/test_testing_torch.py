"""torch.testing.assert_close and make_tensor as PyTorch's: the same pairs pass and fail (the same
exception type), with PyTorch's default tolerances per dtype."""

import numpy as np
import pytest
import torch

import verigrad as vg


def _cases(lib):
    nan = float("nan")
    return [
        (lib.ones(3), lib.ones(3), {}),
        (lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0 + 1e-6]), {}),  # within f32's rtol 1.3e-6
        (lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0 + 1e-4]), {}),
        (lib.tensor([1.0], dtype=lib.float64), lib.tensor([1.0 + 1e-8], dtype=lib.float64), {}),
        (lib.tensor([1.0], dtype=lib.float64), lib.tensor([1.0 + 1e-6], dtype=lib.float64), {}),
        (lib.tensor([1.0]), lib.tensor([1.0], dtype=lib.float64), {}),
        (lib.tensor([1.0]), lib.tensor([1.0], dtype=lib.float64), {"check_dtype": False}),
        (lib.ones(2), lib.ones(3), {}),
        (lib.tensor([nan]), lib.tensor([nan]), {}),
        (lib.tensor([nan]), lib.tensor([nan]), {"equal_nan": True}),
        (lib.tensor([1, 2]), lib.tensor([1, 2]), {}),
        (lib.tensor([1, 2]), lib.tensor([1, 3]), {}),
        (lib.tensor([1.0]), lib.tensor([1.5]), {"rtol": 0.0, "atol": 0.6}),
        (1.0, 1.0 + 1e-9, {}),
        (1.0, 1.1, {}),
        (lib.tensor([1.0]), 1.0, {}),
        ([lib.ones(2), lib.zeros(1)], [lib.ones(2), lib.zeros(1)], {}),
        ({"a": lib.ones(2)}, {"a": lib.ones(2) * 2}, {}),
        (lib.tensor([float("inf")]), lib.tensor([float("inf")]), {}),
        (lib.tensor([float("inf")]), lib.tensor([-float("inf")]), {}),
    ]


def _outcome(lib, a, b, kw):
    try:
        lib.testing.assert_close(a, b, **kw)
    except AssertionError:
        return "AssertionError"
    except (TypeError, ValueError) as e:
        return type(e).__name__
    return "pass"


@pytest.mark.parametrize("case", range(len(_cases(torch))))
def test_assert_close_passes_and_fails_as_torch(case):
    a, b, kw = _cases(torch)[case]
    va, vb, vkw = _cases(vg)[case]
    assert _outcome(vg, va, vb, vkw) == _outcome(torch, a, b, kw)


def test_make_tensor_ranges_and_dtypes():
    vg.manual_seed(0)
    ranges = [(vg.float32, -2, 3), (vg.int64, -5, 5), (vg.uint8, None, None), (vg.bool, None, None)]
    for dtype, low, high in ranges:
        x = vg.testing.make_tensor((40, 5), dtype=dtype, device="cpu", low=low, high=high)
        assert x.shape == (40, 5) and x.dtype == dtype
        values = x.numpy().astype(np.float64)
        if dtype == vg.float32:
            assert values.min() >= -2 and values.max() < 3
        if dtype == vg.int64:
            assert values.min() >= -5 and values.max() < 5
    y = vg.testing.make_tensor(3, dtype=vg.float64, requires_grad=True, exclude_zero=True)
    assert y.requires_grad and (y.detach().numpy() != 0).all()
