"""DLPack both ways between verigrad and PyTorch: no copy, so a write through one is seen in the other,
for contiguous and transposed (strided) tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

DTYPES = {
    "f32": (np.float32, torch.float32),
    "f64": (np.float64, torch.float64),
    "i64": (np.int64, torch.int64),
}
LAYOUTS = ["contiguous", "transposed"]


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _verigrad_tensor(dtype: str, layout: str) -> verigrad.Tensor:
    x = verigrad.from_numpy(np.arange(12, dtype=DTYPES[dtype][0]).reshape(3, 4))
    return x.T if layout == "transposed" else x


def _torch_tensor(dtype: str, layout: str) -> torch.Tensor:
    t = torch.arange(12, dtype=DTYPES[dtype][1]).reshape(3, 4)
    return t.T if layout == "transposed" else t


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_torch_from_dlpack_shares_verigrad_memory(dtype: str, layout: str) -> None:
    x = _verigrad_tensor(dtype, layout)
    t = torch.from_dlpack(x)
    assert t.dtype is DTYPES[dtype][1]
    assert tuple(t.shape) == x.shape
    assert t.stride() == x.stride()
    assert x.is_contiguous() == (layout == "contiguous") == t.is_contiguous()
    assert t.data_ptr() == _address(x.numpy())
    np.testing.assert_array_equal(t.numpy(), x.numpy(), strict=True)

    t[0, 1] = 100  # a write through torch is seen by verigrad
    assert x.numpy()[0, 1] == 100
    with verigrad.no_grad():  # and a write through verigrad is seen by torch
        x.assign(x * 2)
    np.testing.assert_array_equal(t.numpy(), x.numpy(), strict=True)
    assert t[0, 1].item() == 200


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_verigrad_from_dlpack_shares_torch_memory(dtype: str, layout: str) -> None:
    t = _torch_tensor(dtype, layout)
    x = verigrad.from_dlpack(t)
    assert x.dtype.name == dtype
    assert x.shape == tuple(t.shape)
    assert x.stride() == t.stride()
    assert x.is_contiguous() == (layout == "contiguous") == t.is_contiguous()
    assert _address(x.numpy()) == t.data_ptr()
    np.testing.assert_array_equal(x.numpy(), t.numpy(), strict=True)

    t.add_(1)  # a write through torch is seen by verigrad
    np.testing.assert_array_equal(x.numpy(), t.numpy(), strict=True)
    with verigrad.no_grad():  # and a write through verigrad is seen by torch
        x[1].assign(-7)
    assert (t[1] == -7).all()
    np.testing.assert_array_equal(x.numpy(), t.numpy(), strict=True)

    # ops read the strided memory correctly
    np.testing.assert_array_equal((x * 3 + 1).numpy(), (t * 3 + 1).numpy(), strict=True)
    np.testing.assert_array_equal(x.sum(axis=0).numpy(), t.sum(dim=0).numpy(), strict=True)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_round_trip_keeps_one_buffer(dtype: str) -> None:
    x = _verigrad_tensor(dtype, "transposed")
    back = verigrad.from_dlpack(torch.from_dlpack(x))
    assert _address(back.numpy()) == _address(x.numpy())
    assert back.stride() == x.stride() and back.dtype is x.dtype
    with verigrad.no_grad():
        back.assign(5)
    assert (x.numpy() == 5).all()
