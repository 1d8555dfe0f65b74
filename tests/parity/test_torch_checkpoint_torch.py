"""PyTorch's checkpoint format between verigrad and PyTorch, in both directions.

A file `verigrad.save` writes to a `.pt`, `.pth` or `.bin` name is read by `torch.load(weights_only=True)`
as equal tensors (same dtypes, shapes, bits, and shared storages where verigrad's arrays shared memory) in
the same containers; a file `torch.save` writes (a model's state_dict, an optimizer's state_dict, views
sharing a storage, bf16, parameters) is read by `verigrad.load` as equal values, and a model loads it.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from nested import assert_nested

import verigrad
from verigrad.data import load_digits
from verigrad.errors import WeightFileError
from verigrad.io import load, save
from verigrad.models import digits_cnn, digits_cnn_torch

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.25]
# verigrad dtype name -> torch's, for the dtypes verigrad holds
TORCH_DTYPES = {
    "f64": torch.float64,
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "u8": torch.uint8,
    "i8": torch.int8,
    "i16": torch.int16,
    "bool": torch.bool,
}


def _bits(a: np.ndarray) -> np.ndarray:
    """The stored bits, so that NaN, -0.0 and every other value compare exactly."""
    return a if a.dtype == np.bool_ else a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _torch_bits(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.detach().view(torch.int16).numpy().view(np.uint16)
    return _bits(t.detach().numpy())


def _our_bits(t: verigrad.Tensor) -> np.ndarray:
    if t.dtype.name == "bf16":
        return (t.numpy().view(np.uint32) >> 16).astype(np.uint16)
    return _bits(t.numpy())


def _same_leaf(ours: Any, theirs: Any, where: str) -> None:
    """A tensor of the same dtype, shape and bits, or an equal plain value."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, verigrad.Tensor), where
        assert ours.shape == tuple(theirs.shape), where
        assert TORCH_DTYPES[ours.dtype.name] == theirs.dtype, where
        np.testing.assert_array_equal(_our_bits(ours), _torch_bits(theirs), err_msg=where)
        assert ours.requires_grad == theirs.requires_grad, where
    else:
        assert type(ours) is type(theirs) and ours == theirs, where


def _assert_same(ours: Any, theirs: Any) -> None:
    """verigrad's value and torch's are the same, container by container (tests/nested.py)."""
    assert_nested(ours, theirs, _same_leaf)


def _our_checkpoint() -> dict[str, Any]:
    """Every dtype verigrad writes (arrays of int16 and int8 too), 0-d and empty tensors, special
    floats, and plain values in nested containers."""
    rng = np.random.default_rng(0)
    floats = np.concatenate([np.array(SPECIAL), rng.standard_normal(17)])
    return OrderedDict(
        f64=verigrad.tensor(floats.reshape(4, 6)),
        f32=verigrad.tensor(floats.astype(np.float32)),
        f16=verigrad.tensor(floats.astype(np.float16)),
        bf16=verigrad.tensor(floats.astype(np.float32)).to(verigrad.bf16),
        i64=verigrad.tensor(rng.integers(-(2**62), 2**62, (3, 2), dtype=np.int64)),
        i32=verigrad.tensor(rng.integers(-(2**31), 2**31 - 1, (5,), dtype=np.int32)),
        u8=verigrad.tensor(np.array([0, 7, 255], np.uint8)),
        mask=verigrad.tensor(rng.random((2, 3)) > 0.5),
        scalar=verigrad.tensor(np.float32(-0.375)),
        empty=verigrad.tensor(np.zeros((0, 3))),
        narrow=[np.array([-32768, 1, 32767], np.int16), np.array([-128, 0, 127], np.int8)],
        meta={"step": 7, "big": -(2**70), "lr": 1e-3, "name": "adamw", "betas": (0.9, 0.999), "x": None},
        flags=(True, False),
        parameter=verigrad.nn.Parameter(verigrad.ones(2)),
    )


def _torch_value(value: Any) -> Any:
    """The value torch.load should give for one written by verigrad."""
    if isinstance(value, verigrad.Tensor):
        if value.dtype.name == "bf16":
            return torch.from_numpy(_our_bits(value).view(np.int16)).view(torch.bfloat16)  # the same bits
        return torch.from_numpy(value.numpy().copy()).requires_grad_(value.requires_grad)
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, dict):
        return type(value)((k, _torch_value(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return type(value)(_torch_value(v) for v in value)
    return value


def _torch_leaf(got: Any, want: Any, where: str) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape, where
        assert got.requires_grad == want.requires_grad, where
        np.testing.assert_array_equal(_torch_bits(got), _torch_bits(want), err_msg=where)
    else:
        assert type(got) is type(want) and got == want, where


def _assert_torch_equal(got: Any, want: Any) -> None:
    assert_nested(got, want, _torch_leaf)


@pytest.mark.parametrize("suffix", [".pt", ".pth", ".bin"])
def test_verigrad_checkpoint_reads_in_torch_with_weights_only(tmp_path: Path, suffix: str) -> None:
    ours = _our_checkpoint()
    path = save(ours, tmp_path / f"ours{suffix}")
    theirs = torch.load(path, weights_only=True)
    _assert_torch_equal(theirs, _torch_value(ours))
    _assert_torch_equal(torch.load(path, weights_only=True, mmap=True), _torch_value(ours))


def test_verigrad_views_share_one_storage_in_torch(tmp_path: Path) -> None:
    base = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    tied = verigrad.ones(2, 2)
    path = save(
        {"base": base, "t": base.T, "slice": base[1:, 2:], "embed": tied, "head": tied}, tmp_path / "v.pt"
    )
    theirs = torch.load(path, weights_only=True)
    assert theirs["t"].stride() == (1, 4) and theirs["slice"].storage_offset() == 6
    assert theirs["embed"] is theirs["head"]  # one tensor, as torch.save of a tied weight gives
    theirs["base"][2, 3] = -1.0
    assert theirs["t"][3, 2] == -1.0 and theirs["slice"][1, 1] == -1.0
    np.testing.assert_array_equal(theirs["slice"].numpy(), [[6.0, 7.0], [10.0, -1.0]])


def _torch_checkpoint() -> dict[str, Any]:
    """What torch.save holds in practice: views sharing a storage, bf16, narrow integers, a parameter,
    devices, dtypes and sizes, in OrderedDicts, lists and tuples."""
    torch.manual_seed(0)
    base = torch.randn(4, 6)
    bf16 = torch.tensor([*SPECIAL, 3.140625, -1e30, 1e-30], dtype=torch.float32).to(torch.bfloat16)
    return OrderedDict(
        base=base,
        transposed=base.T,
        slice=base[1:3, 2:5],
        column=base[:, 1],
        bf16=bf16.reshape(2, 5),
        bf16_view=bf16[3:],
        f16=torch.tensor(SPECIAL, dtype=torch.float16),
        i64=torch.tensor([2**62, -1]),
        i16=torch.tensor([-32768, 32767], dtype=torch.int16),
        i8=torch.tensor([-128, 127], dtype=torch.int8),
        u8=torch.tensor([0, 255], dtype=torch.uint8),
        mask=torch.tensor([[True, False]]),
        scalar=torch.tensor(2.5, dtype=torch.float64),
        parameter=torch.nn.Parameter(torch.ones(3)),
        plain=[1, -(2**70), 0.5, "text", None, (True, False), {3: "three"}],
    )


def test_torch_checkpoint_reads_in_verigrad(tmp_path: Path) -> None:
    theirs = _torch_checkpoint()
    torch.save(theirs, tmp_path / "theirs.pt")
    ours = load(tmp_path / "theirs.pt")
    _assert_same(ours, theirs)
    assert ours["transposed"].stride() == (1, 6) and ours["slice"].stride() == (6, 1)
    ours["base"].numpy()[2, 4] = 100.0  # the views share the loaded storage, as torch.load's do
    assert ours["transposed"].numpy()[4, 2] == 100.0 and ours["slice"].numpy()[1, 2] == 100.0
    np.testing.assert_array_equal(ours["bf16"].float().numpy(), theirs["bf16"].float().numpy())


def test_torch_devices_dtypes_sizes_and_bytes_read_as_verigrads(tmp_path: Path) -> None:
    torch.save(
        [torch.device("cpu"), torch.float32, torch.Size([2, 3]), b"\x00\xff", {1, 2}], tmp_path / "m.pt"
    )
    assert torch.load(tmp_path / "m.pt", weights_only=True)  # all of which weights_only admits
    loaded = load(tmp_path / "m.pt")
    assert loaded == [verigrad.device("cpu"), verigrad.float32, (2, 3), b"\x00\xff", {1, 2}]
    assert isinstance(loaded[2], verigrad.Size)


def test_torch_model_checkpoint_loads_into_the_verigrad_model(tmp_path: Path) -> None:
    """A torch CNN's state_dict, as a `pytorch_model.bin`, loads into digits_cnn(): the same logits."""
    torch.manual_seed(0)
    theirs = digits_cnn_torch(torch)
    torch.save(theirs.state_dict(), tmp_path / "pytorch_model.bin")
    ours = digits_cnn()
    ours.load_state_dict(load(tmp_path / "pytorch_model.bin"))
    images, _ = load_digits()
    x = images[:64].astype(np.float32)
    with verigrad.no_grad(), torch.no_grad():
        logits, expected = ours(verigrad.from_numpy(x.copy())).numpy(), theirs(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)


def test_verigrad_model_checkpoint_loads_into_the_torch_model(tmp_path: Path) -> None:
    verigrad.manual_seed(3)
    ours = digits_cnn()
    path = save(ours.state_dict(), tmp_path / "cnn.pth")
    theirs = digits_cnn_torch(torch)
    theirs.load_state_dict(torch.load(path, weights_only=True), strict=True)
    for name, t in theirs.state_dict().items():
        np.testing.assert_array_equal(_torch_bits(t), _our_bits(ours.state_dict()[name]), name)


def test_torch_optimizer_state_reads_in_verigrad(tmp_path: Path) -> None:
    """An AdamW state_dict after two steps: int keys, 0-d step tensors, moments, and param_groups of
    floats, tuples, bools, None and lists of ints."""
    torch.manual_seed(0)
    model = digits_cnn_torch(torch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        model(torch.randn(4, 1, 8, 8)).square().mean().backward()
        optimizer.step()
    theirs = optimizer.state_dict()
    torch.save(theirs, tmp_path / "optimizer.pt")
    _assert_same(load(tmp_path / "optimizer.pt"), theirs)


def test_a_tensor_with_python_attributes_reads_as_the_tensor(tmp_path: Path) -> None:
    t = torch.arange(3.0)
    t.note = "kept by torch"  # pickled through _rebuild_from_type_v2
    torch.save({"t": t}, tmp_path / "a.pt")
    np.testing.assert_array_equal(load(tmp_path / "a.pt")["t"].numpy(), [0.0, 1.0, 2.0])


class Custom:
    """A class a checkpoint may not name."""

    def __init__(self) -> None:
        self.value = 1


def test_what_torch_weights_only_refuses_verigrad_refuses_naming_it(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2), "custom": Custom()}, tmp_path / "c.pt")
    with pytest.raises(Exception, match="Custom"):
        torch.load(tmp_path / "c.pt", weights_only=True)
    with pytest.raises(WeightFileError, match=rf"asks for {__name__}\.Custom") as info:
        load(tmp_path / "c.pt")
    assert str(tmp_path / "c.pt") in str(info.value)


def test_the_legacy_format_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2)}, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(WeightFileError, match=r"legacy format .*_use_new_zipfile_serialization=False"):
        load(tmp_path / "old.pt")


def test_a_gpt2_pytorch_model_bin_with_tied_weights_reads_in_verigrad(tmp_path: Path) -> None:
    """A transformers GPT-2's state_dict saved as pytorch_model.bin (as save_pretrained wrote it before
    safetensors): every tensor reads with torch's values, and the tied embedding and head stay one."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16, n_positions=8)
    torch.manual_seed(0)
    theirs = transformers.GPT2LMHeadModel(config).state_dict()
    torch.save(theirs, tmp_path / "pytorch_model.bin")
    ours = load(tmp_path / "pytorch_model.bin")
    _assert_same(ours, theirs)
    assert theirs["lm_head.weight"].data_ptr() == theirs["transformer.wte.weight"].data_ptr()
    ours["lm_head.weight"].numpy()[0, 0] = 123.0
    assert ours["transformer.wte.weight"].numpy()[0, 0] == 123.0
