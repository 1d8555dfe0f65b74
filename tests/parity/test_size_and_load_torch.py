"""`verigrad.Size` as `torch.Size`, and `verigrad.save` / `verigrad.load` with PyTorch's signatures and
checkpoints, in both directions (`torch.load(weights_only=True)` reads what verigrad writes)."""

from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np
import pytest
import torch
from test_torch_checkpoint_torch import (
    _assert_same,
    _assert_torch_equal,
    _our_checkpoint,
    _torch_checkpoint,
    _torch_value,
)

import verigrad
from verigrad import Size
from verigrad.io.map_location import MapLocationError
from verigrad.models import digits_cnn_torch

SHAPES = [(), (0,), (2, 3), (1, 4, 1), (2, 0, 3)]


def _size_ops(s: tuple) -> list:
    """What a program does with a shape; each result with its type's name, as torch.Size's and Size's
    answers must agree on both."""
    out = [s[1:], s[::-1], s[:0], s + (5,), (5,) + s, s * 2, 2 * s, s.numel(), len(s), list(s)]  # noqa: RUF005
    out.append(s == tuple(s))
    out += [s[0], s[-1]] if len(s) else []
    return [(type(v).__name__.replace("Size", "S"), tuple(v) if isinstance(v, tuple) else v) for v in out]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_size_behaves_as_torch_size(shape: tuple) -> None:
    ours, theirs = verigrad.zeros(shape).shape, torch.zeros(shape).shape
    assert _size_ops(ours) == _size_ops(theirs)
    assert repr(ours) == repr(theirs).replace("torch", "verigrad") and str(ours) == repr(ours)
    assert hash(ours) == hash(theirs) and ours == theirs and verigrad.zeros(shape).size() == theirs


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_size_is_a_shape_to_the_factories_as_in_torch(shape: tuple) -> None:
    x, t = verigrad.zeros(shape), torch.zeros(shape)
    for ours, theirs in [
        (verigrad.zeros(x.shape), torch.zeros(t.shape)),
        (verigrad.ones(x.shape), torch.ones(t.shape)),
        (verigrad.full(x.shape, 2.0), torch.full(t.shape, 2.0)),
        (x.new_empty(x.shape), t.new_empty(t.shape)),
        (x.new_zeros(x.shape), t.new_zeros(t.shape)),
        (x.reshape(x.shape), t.reshape(t.shape)),
    ]:
        assert ours.shape == theirs.shape and type(ours.shape) is Size
    assert verigrad.tensor(x.shape).tolist() == torch.tensor(t.shape).tolist()  # the numbers, as data


def test_size_constructor_and_pickle_as_torch() -> None:
    for arg in [[2, 3], (np.int64(4),), [], [-1]]:
        assert tuple(Size(arg)) == tuple(torch.Size(arg))
    for bad in [[2.0], 3]:
        with pytest.raises(TypeError):
            torch.Size(bad)
        with pytest.raises(TypeError):
            Size(bad)
    assert type(pickle.loads(pickle.dumps(Size([2, 3])))) is Size


@pytest.mark.parametrize("dim", [0, 1, -1, -2, 2, -3])
def test_size_of_a_dim_as_torch(dim: int) -> None:
    x, t = verigrad.zeros(2, 3), torch.zeros(2, 3)
    if -2 <= dim < 2:
        assert x.size(dim) == t.size(dim) and x.size(dim=dim) == t.size(dim=dim)
    else:
        with pytest.raises(IndexError):
            t.size(dim)
        with pytest.raises(IndexError):
            x.size(dim)


# save and load with PyTorch's arguments, through binary files ---------------------------------------


def _buffer(save: Any, obj: Any, **kwargs: Any) -> io.BytesIO:
    buffer = io.BytesIO()
    save(obj, buffer, **kwargs)
    buffer.seek(0)
    return buffer


def _torch_training_state() -> dict[str, Any]:
    """A model's and an Adam optimizer's state_dicts after a step, the checkpoint zoo of the other parity
    file, a Size and a non-contiguous view, as a training script saves them in one file."""
    torch.manual_seed(0)
    model = digits_cnn_torch(torch)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, 1, 8, 8)).square().mean().backward()
    optimizer.step()
    base = torch.arange(24.0, dtype=torch.float64).reshape(4, 6)
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "zoo": _torch_checkpoint(),
        "epoch": 3,
        "shape": base.shape,
        "views": [base, base[::2, 1::3], base.T],
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"map_location": "cpu"},
        {"map_location": {"cpu": "cpu", "cuda:0": "cpu"}},
        {"map_location": lambda storage, location: storage},
        {"weights_only": False},
        {"weights_only": True, "mmap": False},
        {"pickle_module": pickle, "weights_only": False},
        {"encoding": "latin1"},
    ],
    ids=["default", "cpu", "dict", "function", "not_weights_only", "mmap_false", "pickle", "encoding"],
)
def test_torch_training_state_loads_from_a_file_object_as_torch_loads_it(kwargs: dict) -> None:
    theirs = _torch_training_state()
    blob = _buffer(torch.save, theirs).getvalue()
    expected = torch.load(io.BytesIO(blob), **kwargs)
    ours = verigrad.load(io.BytesIO(blob), **kwargs)
    shape = expected.pop("shape")
    assert type(ours.pop("shape")) is Size and shape == (4, 6)
    _assert_same(ours, expected)
    view = ours["views"][1]
    assert view.stride() == expected["views"][1].stride() and not view.is_contiguous()
    ours["views"][0].numpy()[2, 4] = -1.0  # the views share the base's storage, as torch's do
    assert view.numpy()[1, 1] == -1.0 and ours["views"][2].numpy()[4, 2] == -1.0


def test_a_map_location_function_sees_the_locations_torch_gives_it() -> None:
    blob = _buffer(torch.save, {"a": torch.ones(2), "b": torch.zeros(3)}).getvalue()
    theirs: list = []
    ours: list = []
    torch.load(io.BytesIO(blob), map_location=lambda s, loc: theirs.append(loc) or s)
    verigrad.load(io.BytesIO(blob), map_location=lambda s, loc: ours.append(loc) or s)
    assert ours == theirs == ["cpu", "cpu"]


@pytest.mark.parametrize(
    "ours, theirs, kwargs",
    [
        (MapLocationError, Exception, {"map_location": "cuda"}),  # torch without CUDA raises too
        (RuntimeError, RuntimeError, {"pickle_module": pickle, "weights_only": True}),
        (ValueError, ValueError, {"mmap": True}),
    ],
    ids=["cuda", "pickle_module", "mmap"],
)
def test_load_refuses_where_torch_load_refuses(ours: type, theirs: type, kwargs: dict) -> None:
    blob = _buffer(torch.save, {"w": torch.ones(2)}).getvalue()
    with pytest.raises(theirs):
        torch.load(io.BytesIO(blob), **kwargs)
    with pytest.raises(ours):
        verigrad.load(io.BytesIO(blob), **kwargs)


@pytest.mark.parametrize("kwargs", [{}, {"pickle_protocol": 4}, {"_disable_byteorder_record": True}], ids=str)
def test_verigrad_saves_to_a_file_object_that_torch_loads_with_weights_only(kwargs: dict) -> None:
    base = np.arange(12.0).reshape(3, 4)
    ours = _our_checkpoint() | {"shape": verigrad.zeros(2, 3).shape, "views": [base, base[:, 1::2], base.T]}
    theirs = torch.load(_buffer(verigrad.save, ours, **kwargs), weights_only=True)
    assert type(theirs.pop("shape")) is torch.Size and type(ours.pop("shape")) is Size
    _assert_torch_equal(theirs, _torch_value(ours))
    views = theirs["views"]
    assert views[1].stride() == (4, 2) and views[2].stride() == (1, 4)
    assert views[1].untyped_storage().data_ptr() == views[0].untyped_storage().data_ptr()


def test_torch_training_state_goes_through_verigrad_and_back_unchanged() -> None:
    """torch.save -> verigrad.load -> verigrad.save -> torch.load(weights_only=True) gives what torch saved:
    the model's and the optimizer's state_dicts (int keys, 0-d steps, param_groups), every dtype, views;
    torch's optimizer and model load them."""
    theirs = _torch_training_state()
    ours = verigrad.load(_buffer(torch.save, theirs))
    back = torch.load(_buffer(verigrad.save, ours), weights_only=True)
    assert type(back.pop("shape")) is torch.Size and theirs.pop("shape") == (4, 6)
    _assert_torch_equal(back, theirs)
    model = digits_cnn_torch(torch)
    model.load_state_dict(back["model"])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    optimizer.load_state_dict(back["optimizer"])
    _assert_torch_equal(optimizer.state_dict(), theirs["optimizer"])
    views = back["views"]
    assert views[1].untyped_storage().data_ptr() == views[0].untyped_storage().data_ptr()


# Module.half() / bfloat16() / to(dtype) and Tensor.to ----------------------------------------------


def _pair() -> tuple[verigrad.nn.Module, torch.nn.Module]:
    """The same Linear + BatchNorm1d in both, with the same f32 weights, buffers and gradients (values that
    round up, down and to even in both half formats, and special values)."""
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [[1 / 3, -2 / 3, 65504.0, 1e-8, -0.0, np.inf, np.nan, 1 + 2**-11], rng.standard_normal(32)]
    )
    ours = verigrad.nn.Sequential(verigrad.nn.Linear(8, 5), verigrad.nn.BatchNorm1d(5))
    theirs = torch.nn.Sequential(torch.nn.Linear(8, 5), torch.nn.BatchNorm1d(5))
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        data = values[: p.numel()].reshape(tuple(p.shape)).astype(np.float32)
        grad = np.roll(values, 3)[: p.numel()].reshape(tuple(p.shape)).astype(np.float32)
        p.data.copy_(verigrad.tensor(data))
        p.grad = verigrad.tensor(grad)
        q.data.copy_(torch.from_numpy(data))
        q.grad = torch.from_numpy(grad)
    ours[1].running_var.copy_(verigrad.tensor(values[:5].astype(np.float32)))
    theirs[1].running_var.copy_(torch.from_numpy(values[:5].astype(np.float32)))
    return ours, theirs


def _float_bits(t: Any) -> np.ndarray:
    """The stored bits, every NaN as one pattern (PyTorch's bf16 cast of NaN gives 0xFFFF on some paths and
    0x7FC0 on others: NaN either way)."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        nan, t = t.isnan().numpy(), t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
        bits = t.numpy().view(f"u{t.element_size()}")
    else:
        nan, bits = np.isnan(t.float().numpy()), (t.payload if t.dtype.name == "bf16" else t.numpy())
        bits = bits.view(f"u{t.dtype.itemsize}")
    return np.where(nan, 0, bits)


@pytest.mark.parametrize(
    "cast",
    [
        lambda m, lib: m.half(),
        lambda m, lib: m.bfloat16(),
        lambda m, lib: m.to(lib.float16),
        lambda m, lib: m.to(lib.bfloat16),
        lambda m, lib: m.half().float(),
        lambda m, lib: m.bfloat16().double(),
    ],
    ids=["half", "bfloat16", "to_f16", "to_bf16", "half_float", "bf16_double"],
)
def test_module_casts_parameters_buffers_and_grads_as_torch(cast: Any) -> None:
    ours, theirs = _pair()
    kept = [(p, p.grad) for p in ours.parameters()]
    assert cast(ours, verigrad) is ours and cast(theirs, torch) is theirs
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        assert q.dtype == {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}.get(
            p.dtype.name, torch.float64
        )
        np.testing.assert_array_equal(_float_bits(p), _float_bits(q), err_msg=name)
        np.testing.assert_array_equal(_float_bits(p.grad), _float_bits(q.grad), err_msg=name)
        assert p.grad.dtype is p.dtype and p.requires_grad == q.requires_grad
    assert all(p is q and p.grad is g for (p, g), q in zip(kept, ours.parameters(), strict=True))
    np.testing.assert_array_equal(_float_bits(ours[1].running_var), _float_bits(theirs[1].running_var))


@pytest.mark.parametrize("dtype, method", [("float16", "half"), ("bfloat16", "bfloat16")])
def test_tensor_to_and_cast_methods_round_as_torch(dtype: str, method: str) -> None:
    values = np.array([1 / 3, -2 / 3, 65504.0, 70000.0, 1e-8, 1 + 2**-11, 1 + 3 * 2**-11, np.nan], np.float32)
    x, t = verigrad.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    for ours, theirs in [(x.to(getattr(verigrad, dtype)), t.to(getattr(torch, dtype))),
                         (getattr(x, method)(), getattr(t, method)())]:  # fmt: skip
        np.testing.assert_array_equal(_float_bits(ours), _float_bits(theirs))
        assert ours.requires_grad and theirs.requires_grad
    x.to(getattr(verigrad, dtype)).float().sum().backward()
    t.to(getattr(torch, dtype)).float().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
