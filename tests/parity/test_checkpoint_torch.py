"""Checkpoints between verigrad and PyTorch, through safetensors files, in both directions.

A file written by `verigrad.io.save` is read by `safetensors.torch.load_file` with the same names,
shapes, dtypes and bits; a file written by `safetensors.torch.save_file` is read by `verigrad.io.load`
likewise, and loads into a model with `load_state_dict`, which then computes what the torch model
computes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import verigrad
from verigrad.data import load_digits
from verigrad.errors import WeightFileError
from verigrad.io import load, save
from verigrad.models import digits_cnn, digits_cnn_torch

# verigrad dtype name -> the torch dtype a safetensors file of it holds
TORCH_DTYPES = {
    "f64": torch.float64,
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "bool": torch.bool,
}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.25]


def torch_cnn(dtype: torch.dtype) -> torch.nn.Sequential:
    """digits_cnn() for 8x8 images in PyTorch, with the same layer indices (so the same state names)."""
    return digits_cnn_torch(torch).to(dtype)


def _arrays() -> dict[str, np.ndarray]:
    """One array per dtype verigrad saves, of assorted shapes (0-d and empty included), floats with
    signed zeros, infinities and NaN."""
    rng = np.random.default_rng(0)
    out: dict[str, np.ndarray] = {}
    for name, dtype in [("f64", np.float64), ("f32", np.float32), ("f16", np.float16)]:
        values = np.concatenate([np.array(SPECIAL), rng.standard_normal(17)]).astype(dtype)
        out[f"floats.{name}"] = values.reshape(4, 6)
        out[f"scalar.{name}"] = np.array(rng.standard_normal(), dtype=dtype)
        out[f"empty.{name}"] = np.zeros((0, 3), dtype=dtype)
    out["ints.i64"] = rng.integers(-(2**62), 2**62, (3, 2, 2), dtype=np.int64)
    out["ints.i32"] = rng.integers(-(2**31), 2**31 - 1, (5,), dtype=np.int32)
    out["mask.bool"] = rng.random((2, 3)) > 0.5
    out["scalar.i64"] = np.array(7, dtype=np.int64)
    return out


def _bits(a: np.ndarray) -> np.ndarray:
    """The stored bits, so that NaN, -0.0 and every other value compare exactly."""
    if a.dtype == np.bool_:
        return a
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _torch_numpy_bits(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return _bits(t.numpy())


def _our_bits(t: verigrad.Tensor) -> np.ndarray:
    if t.dtype.name == "bf16":  # its f32 value holds the bf16 bits in the upper half
        return (t.numpy().view(np.uint32) >> 16).astype(np.uint16)
    return _bits(t.numpy())


def test_verigrad_file_reads_in_torch_with_same_names_shapes_dtypes_and_bits(tmp_path: Path) -> None:
    arrays = _arrays()
    tensors = {name: verigrad.tensor(a) for name, a in arrays.items()}
    assert {name: t.dtype.name for name, t in tensors.items()} == {n: n.split(".")[1] for n in arrays}
    path = save(tensors, tmp_path / "ours.safetensors", metadata={"written_by": "verigrad"})

    theirs = load_file(str(path))
    assert sorted(theirs) == sorted(arrays)
    for name, t in tensors.items():
        got = theirs[name]
        assert tuple(got.shape) == t.shape, name
        assert got.dtype == TORCH_DTYPES[t.dtype.name], name
        np.testing.assert_array_equal(_torch_numpy_bits(got), _bits(arrays[name]), err_msg=name)
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"written_by": "verigrad"}


def test_torch_file_reads_in_verigrad_with_same_names_shapes_dtypes_and_bits(tmp_path: Path) -> None:
    theirs = {name: torch.from_numpy(a.copy()) for name, a in _arrays().items()}
    bf16 = torch.tensor([*SPECIAL, 3.140625, -1e30, 1e-30], dtype=torch.float32).to(torch.bfloat16)
    theirs["floats.bf16"] = bf16.reshape(2, 5)
    theirs["scalar.bf16"] = torch.tensor(-0.375, dtype=torch.bfloat16)
    theirs["transposed.f32"] = torch.randn(3, 4, dtype=torch.float32).T.contiguous()
    save_file(theirs, str(tmp_path / "theirs.safetensors"))

    ours = load(tmp_path / "theirs.safetensors")
    assert sorted(ours) == sorted(theirs)
    for name, t in theirs.items():
        got = ours[name]
        assert isinstance(got, verigrad.Tensor)
        assert got.shape == tuple(t.shape), name
        assert TORCH_DTYPES[got.dtype.name] == t.dtype, name
        np.testing.assert_array_equal(_our_bits(got), _torch_numpy_bits(t), err_msg=name)
    # bf16 tensors are usable once cast, with torch's values
    np.testing.assert_array_equal(ours["floats.bf16"].float().numpy(), bf16.reshape(2, 5).float().numpy())


def test_loaded_tensors_do_not_share_memory_with_the_file_bytes(tmp_path: Path) -> None:
    """Loaded tensors are ordinary, writable tensors: an optimizer can update them in place."""
    save_file({"w": torch.ones(3, dtype=torch.float64)}, str(tmp_path / "w.safetensors"))
    w = load(tmp_path / "w.safetensors")["w"]
    w.assign(w * 2.0)
    np.testing.assert_array_equal(w.numpy(), [2.0, 2.0, 2.0])


def test_narrow_torch_integers_keep_their_dtypes(tmp_path: Path) -> None:
    """uint8, int8 and int16 load as u8, i8 and i16 with their values."""
    theirs = {
        "u8": torch.tensor([0, 7, 255], dtype=torch.uint8),
        "i8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "i16": torch.tensor([-32768, 1, 32767], dtype=torch.int16),
    }
    save_file(theirs, str(tmp_path / "narrow.safetensors"))
    ours = load(tmp_path / "narrow.safetensors")
    for name, t in theirs.items():
        want = name
        assert ours[name].dtype.name == want, name
        np.testing.assert_array_equal(ours[name].numpy(), t.numpy().astype(ours[name].dtype.np), err_msg=name)


def test_a_dtype_verigrad_cannot_hold_is_a_weight_file_error_naming_the_tensor(tmp_path: Path) -> None:
    save_file(
        {"ok": torch.zeros(2), "scales": torch.zeros(4, dtype=torch.float8_e4m3fn)},
        str(tmp_path / "fp8.safetensors"),
    )
    with pytest.raises(WeightFileError, match=r"'scales' is F8_E4M3"):
        load(tmp_path / "fp8.safetensors")


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_torch_model_checkpoint_loads_into_the_verigrad_model(dtype: str, tmp_path: Path) -> None:
    """A torch CNN's state_dict, saved by safetensors.torch, loads into digits_cnn(); both then give
    the same logits on the digits."""
    torch.manual_seed(0)
    theirs = torch_cnn({"f64": torch.float64, "f32": torch.float32}[dtype])
    save_file(theirs.state_dict(), str(tmp_path / "cnn.safetensors"))

    ours = digits_cnn(dtype=dtype)
    ours.load_state_dict(load(tmp_path / "cnn.safetensors"))
    for name, t in ours.state_dict().items():
        np.testing.assert_array_equal(_our_bits(t), _torch_numpy_bits(theirs.state_dict()[name]), name)

    images, _ = load_digits()
    x = images[:64].astype(dtype.replace("f", "float"))
    with verigrad.no_grad(), torch.no_grad():
        logits, expected = ours(verigrad.from_numpy(x.copy())).numpy(), theirs(torch.from_numpy(x)).numpy()
    tol = {"f64": 1e-12, "f32": 1e-5}[dtype]
    np.testing.assert_allclose(logits, expected, rtol=tol, atol=tol)


def test_verigrad_model_checkpoint_loads_into_the_torch_model(tmp_path: Path) -> None:
    """The other way: digits_cnn()'s state_dict saved by verigrad loads strictly into the torch CNN."""
    verigrad.manual_seed(3)
    ours = digits_cnn()
    path = save(ours.state_dict(), tmp_path / "cnn.safetensors")
    theirs = torch_cnn(torch.float32)
    theirs.load_state_dict(load_file(str(path)), strict=True)
    for name, t in theirs.state_dict().items():
        np.testing.assert_array_equal(_torch_numpy_bits(t), _our_bits(ours.state_dict()[name]), name)


def test_torch_checkpoint_of_another_dtype_is_cast_as_pytorch_casts(tmp_path: Path) -> None:
    """An f64 checkpoint loads into an f32 model as into PyTorch's: each value rounded to f32."""
    state = torch_cnn(torch.float64).state_dict()
    save_file(state, str(tmp_path / "f64.safetensors"))
    model, theirs = digits_cnn(dtype="f32"), torch_cnn(torch.float32)
    model.load_state_dict(load(tmp_path / "f64.safetensors"))
    theirs.load_state_dict(state)
    for name, t in theirs.state_dict().items():
        np.testing.assert_array_equal(model.state_dict()[name].numpy(), t.numpy(), name)
