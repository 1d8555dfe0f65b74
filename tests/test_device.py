"""Devices and PyTorch's process-wide switches, by hand: `verigrad.device`, `Tensor.device`, `.to`,
`.type`, the factories' `device=`, `out=`, `size=` and randint's forms, the legacy constructors, the
refusal of every device but the CPU, `cuda`, `accelerator`, `backends` flags, settings, finfo/iinfo."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

import verigrad
from verigrad import nn, settings
from verigrad.devices import NoDeviceError
from verigrad.shapes import Spec


# device objects ----------------------------------------------------------------------------------------
def test_device_objects() -> None:
    cpu, cpu0 = verigrad.device("cpu"), verigrad.device("cpu", 0)
    assert (cpu.type, cpu.index, str(cpu), repr(cpu)) == ("cpu", None, "cpu", "device(type='cpu')")
    assert (cpu0.type, cpu0.index, str(cpu0), repr(cpu0)) == (
        "cpu",
        0,
        "cpu:0",
        "device(type='cpu', index=0)",
    )
    assert verigrad.device("cpu:0") == cpu0 and verigrad.device(cpu0) == cpu0 and cpu != cpu0
    assert cpu == verigrad.device(type="cpu") and hash(cpu) == hash(verigrad.device("cpu"))
    assert cpu != "cpu" and len({cpu, verigrad.device("cpu"), cpu0}) == 2
    assert pickle.loads(pickle.dumps(cpu0)) == cpu0
    assert str(verigrad.device("cuda", 1)) == "cuda:1" and verigrad.device("mps").type == "mps"
    with pytest.raises(AttributeError):
        cpu.type = "cuda"  # read-only, as PyTorch's
    with verigrad.device("cpu") as entered:  # PyTorch's default-device block
        assert entered == cpu and verigrad.zeros(1).device == cpu
    with pytest.raises(NoDeviceError, match="with device"), verigrad.device("cuda"):
        pass


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("gpu",), RuntimeError, "expected one of"),
        (("cpu:x",), RuntimeError, "invalid device string"),
        (("cpu:0", 1), RuntimeError, "already holds an index"),
        (("cpu", -1), RuntimeError, "index must be a whole number"),
        ((0,), RuntimeError, "accelerator"),
        ((1.5,), TypeError, "device type as a string"),
    ],
)
def test_bad_devices_are_refused(args, error, message) -> None:
    with pytest.raises(error, match=message):
        verigrad.device(*args)


def test_devices_other_than_the_cpu_raise_what_pytorch_code_catches() -> None:
    """PyTorch raises AssertionError for CUDA and RuntimeError for MPS: NoDeviceError is both (and the
    ValueError verigrad raised before)."""
    assert issubclass(NoDeviceError, AssertionError) and issubclass(NoDeviceError, RuntimeError)
    calls = {
        "Tensor.cuda()": lambda: verigrad.zeros(2).cuda(),
        "Tensor.to: ": lambda: verigrad.zeros(2).to("cuda:1"),
        "zeros: ": lambda: verigrad.zeros(2, device="cuda"),
        "tensor: ": lambda: verigrad.tensor([1.0], device=verigrad.device("mps")),
        "Module.cuda()": lambda: nn.Linear(2, 2).cuda(),
        "Module.to: ": lambda: nn.Linear(2, 2).to("xpu"),
        "set_default_device: ": lambda: verigrad.set_default_device("cuda"),
        "verigrad.cuda.synchronize()": lambda: verigrad.cuda.synchronize(),
    }
    for where, call in calls.items():
        with pytest.raises(NoDeviceError, match="verigrad runs on the CPU") as caught:
            call()
        assert str(caught.value).startswith(where.rstrip())


def test_the_like_factories_name_themselves_in_their_refusals() -> None:
    x = verigrad.ones(2)
    for name, extra in (("zeros_like", ()), ("ones_like", ()), ("empty_like", ()), ("full_like", (3,)),
                        ("rand_like", ()), ("randn_like", ()), ("randint_like", (5,))):  # fmt: skip
        with pytest.raises(NoDeviceError, match=rf"^{name}: verigrad runs on the CPU"):
            getattr(verigrad, name)(x, *extra, device="cuda")
    with pytest.raises(ValueError, match=r"^randint_like: \[0, 5\) does not fit bool"):
        verigrad.randint_like(x, 5, dtype=verigrad.bool)


# Tensor.device, .to, .type -------------------------------------------------------------------------------
def test_tensor_device_and_to() -> None:
    x = verigrad.tensor([1.5, -2.0])
    assert x.device == verigrad.device("cpu") and x.device.type == "cpu" and x.cpu() is x
    assert x.is_cpu and not x.is_cuda and x.get_device() == -1 and not x.is_pinned()
    with pytest.raises(NoDeviceError, match=r"Tensor\.pin_memory"):
        x.pin_memory()
    assert x.to("cpu") is x and x.to(verigrad.device("cpu", 0)) is x and x.to("cpu", non_blocking=True) is x
    assert x.to(verigrad.f32) is x and x.to(x) is x and x.to(None) is x
    for y in (
        x.to("f64"),
        x.to("cpu", verigrad.f64),
        x.to(dtype="f64", device="cpu"),
        x.to(verigrad.zeros(1, dtype="f64")),
    ):
        assert y.dtype is verigrad.f64 and y.numpy().tolist() == [1.5, -2.0]
    copied = x.to("cpu", copy=True)
    assert copied is not x and copied.numpy().tolist() == [1.5, -2.0]
    copied.numpy()[0] = 7.0
    assert x.numpy()[0] == 1.5  # memory of its own
    assert x.to("cpu", verigrad.f32, False, True) is not x  # non_blocking, copy by position
    assert x.to("i64").numpy().tolist() == [1, -2]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {"memory": 1}, "unexpected keyword"),
        (("cpu", "f64", False, True, True), {}, "non_blocking and copy"),
        (("f64", "f32"), {}, "non_blocking and copy"),
    ],
)
def test_to_refuses_what_pytorch_refuses(args, kwargs, message) -> None:
    with pytest.raises(TypeError, match=message):
        verigrad.zeros(1).to(*args, **kwargs)


def test_to_records_the_cast_for_backward() -> None:
    x = verigrad.tensor([1.0, 2.0], requires_grad=True)
    (x.to("cpu", "f64") * verigrad.tensor([3.0, 4.0], dtype="f64")).sum().backward()
    assert x.grad.dtype is verigrad.f32 and x.grad.numpy().tolist() == [3.0, 4.0]


def test_type_names_and_casts() -> None:
    assert (
        verigrad.zeros(1).type() == "torch.FloatTensor"
        and verigrad.zeros(1, dtype="i64").type() == "torch.LongTensor"
    )
    assert verigrad.zeros(1, dtype="bool").type() == "torch.BoolTensor"
    assert verigrad.zeros(1, dtype="bf16").type() == "torch.BFloat16Tensor"
    assert verigrad.tensor([1.5]).type("torch.BFloat16Tensor").dtype is verigrad.bf16
    x = verigrad.tensor([1.7, -2.5])
    assert x.type("torch.LongTensor").numpy().tolist() == [1, -2]
    assert x.type(verigrad.DoubleTensor).dtype is verigrad.f64 and x.type(verigrad.f64).dtype is verigrad.f64
    assert x.type(verigrad.f32) is x
    with pytest.raises(ValueError, match=r"torch\.FloatTensor"):
        x.type("torch.CharTensor")


def test_default_generator_seeds() -> None:
    verigrad.manual_seed(12)
    assert verigrad.initial_seed() == 12
    new = verigrad.seed()
    assert verigrad.initial_seed() == new and 0 <= new < 2**63
    verigrad.manual_seed(0)


def test_generators_take_the_cpu() -> None:
    g = verigrad.Generator(device="cpu")
    assert (
        g.initial_seed() == 0
        and g.device == verigrad.device("cpu")
        and verigrad.Generator(7).initial_seed() == 7
    )
    assert verigrad.Generator(verigrad.device("cpu")).manual_seed(3).initial_seed() == 3
    np.testing.assert_array_equal(
        verigrad.rand(3, generator=verigrad.Generator("cpu").manual_seed(1)).numpy(),
        verigrad.rand(3, generator=verigrad.Generator(1)).numpy(),
    )
    with pytest.raises(NoDeviceError, match="Generator: verigrad runs on the CPU"):
        verigrad.Generator(device="cuda")


def test_module_to() -> None:
    model = nn.Linear(2, 3)
    weight = model.weight
    assert model.to("cpu") is model and model.to(verigrad.device("cpu")) is model and model.weight is weight
    assert model.to("cpu", "f64").weight.dtype is verigrad.f64 and model.weight is weight
    assert model.to(verigrad.zeros(1)).weight.dtype is verigrad.f32
    assert model.to(device="cpu", dtype=verigrad.f64, non_blocking=True).bias.dtype is verigrad.f64


# factories ------------------------------------------------------------------------------------------------
def test_factories_take_the_cpu_and_requires_grad() -> None:
    cpu = verigrad.device("cpu")
    made = [
        verigrad.zeros(2, device=cpu, requires_grad=True),
        verigrad.ones((2,), device="cpu:0", requires_grad=True),
        verigrad.empty([2], device="cpu", requires_grad=True),
        verigrad.full((2,), 1.5, device="cpu", requires_grad=True),
        verigrad.rand(2, device="cpu", requires_grad=True),
        verigrad.randn(size=(2,), device="cpu", requires_grad=True),
        verigrad.arange(2.0, device="cpu", requires_grad=True),
        verigrad.linspace(0, 1, 2, device="cpu", requires_grad=True),
        verigrad.logspace(0, 1, 2, device="cpu", requires_grad=True),
        verigrad.eye(2, device="cpu", requires_grad=True),
        verigrad.tensor([1.0, 2.0], device="cpu", requires_grad=True),
        verigrad.zeros_like(verigrad.ones(2), device="cpu", requires_grad=True),
        verigrad.ones_like(verigrad.ones(2), device="cpu", requires_grad=True),
        verigrad.full_like(verigrad.ones(2), 3.0, device="cpu", requires_grad=True),
        verigrad.empty_like(verigrad.ones(2), device="cpu", requires_grad=True),
        verigrad.rand_like(verigrad.ones(2), device="cpu", requires_grad=True),
        verigrad.randn_like(verigrad.ones(2), device="cpu", requires_grad=True),
        verigrad.randint(0, 5, (2,), dtype="f32", device="cpu", requires_grad=True),
        verigrad.randint_like(verigrad.ones(2), 5, device="cpu", requires_grad=True),
    ]
    assert all(t.requires_grad and t.device.type == "cpu" and t.is_leaf for t in made)
    assert (
        verigrad.randperm(3, device="cpu").device == cpu and verigrad.as_tensor([1], device=cpu).device == cpu
    )


def test_a_refused_device_draws_nothing() -> None:
    """The device is checked before any work: the default generator is not advanced."""
    verigrad.manual_seed(3)
    expected = verigrad.rand(4).numpy()
    verigrad.manual_seed(3)
    for call in (lambda: verigrad.rand(4, device="cuda"), lambda: verigrad.randint(5, (2,), device="cuda")):
        with pytest.raises(NoDeviceError):
            call()
    np.testing.assert_array_equal(verigrad.rand(4).numpy(), expected)


@pytest.mark.parametrize(
    "call",
    [
        lambda o: verigrad.zeros(2, out=o),
        lambda o: verigrad.ones(2, out=o),
        lambda o: verigrad.empty(2, out=o),
        lambda o: verigrad.full((2,), 1.0, out=o),
        lambda o: verigrad.rand(2, out=o),
        lambda o: verigrad.randn(2, out=o),
        lambda o: verigrad.randint(3, (2,), out=o),
        lambda o: verigrad.randperm(2, out=o),
        lambda o: verigrad.arange(2, out=o),
        lambda o: verigrad.linspace(0, 1, 2, out=o),
        lambda o: verigrad.logspace(0, 1, 2, out=o),
        lambda o: verigrad.eye(2, out=o),
    ],
)
def test_out_is_refused(call) -> None:
    with pytest.raises(TypeError, match="out= is not supported"):
        call(verigrad.zeros(2))


def test_shapes_given_every_way() -> None:
    for make in (verigrad.zeros, verigrad.ones, verigrad.empty, verigrad.rand, verigrad.randn):
        shapes = [make(2, 3).shape, make((2, 3)).shape, make([2, 3]).shape, make(size=(2, 3)).shape]
        assert shapes == [(2, 3)] * 4
        assert make(verigrad.zeros(2, 3).shape).shape == (2, 3) and make().shape == ()
        with pytest.raises(TypeError, match="given twice"):
            make(2, size=(2,))
    assert verigrad.zeros(2).numpy().tolist() == [0.0, 0.0] and verigrad.ones(
        2, dtype="i64"
    ).numpy().tolist() == [1, 1]


def test_half_precision_draws_stay_below_one() -> None:
    """f16 and bf16 uniforms are f32 draws cut to 11 and 8 significant bits (rounding could give 1.0)."""
    for dtype, bits in (("f16", 11), ("bf16", 8)):
        r = verigrad.rand(20000, dtype=dtype, generator=verigrad.Generator(0))
        values = r.numpy().astype(np.float64)
        assert r.dtype.name == dtype and values.min() >= 0 and values.max() == 1 - 2.0**-bits
        np.testing.assert_array_equal(values * 2**bits, np.floor(values * 2**bits))
    normal = verigrad.randn(1000, dtype="f16", generator=verigrad.Generator(1))
    assert normal.dtype is verigrad.f16 and abs(float(normal.numpy().astype(np.float64).mean())) < 0.1
    with pytest.raises(TypeError, match="random floats are made in f32 or f64, not i64"):
        verigrad.rand(2, dtype="i64")


def test_full_takes_its_dtype_from_the_fill_value() -> None:
    assert verigrad.full((2,), 3).dtype is verigrad.i64 and verigrad.full((2,), 3).numpy().tolist() == [3, 3]
    assert (
        verigrad.full((1,), True).dtype is verigrad.bool_ and verigrad.full((1,), 2.5).dtype is verigrad.f32
    )
    assert verigrad.full([2], 3, dtype="f64").dtype is verigrad.f64 and verigrad.full(2, 1.0).shape == (2,)
    assert verigrad.full_like(verigrad.zeros(2, dtype="i64"), 7).numpy().tolist() == [7, 7]


def test_randint_forms() -> None:
    assert verigrad.randint(2, 3, (4,)).numpy().tolist() == [2, 2, 2, 2]  # [2, 3) holds 2 only
    assert verigrad.randint(1, (2, 2)).numpy().tolist() == [[0, 0], [0, 0]]
    assert verigrad.randint(7, 8, size=(2,)).numpy().tolist() == [7, 7]
    assert verigrad.randint(low=-4, high=-3, size=[3]).numpy().tolist() == [-4, -4, -4]
    assert verigrad.randint(1, size=(1,)).numpy().tolist() == [0]
    f = verigrad.randint(5, 6, (2,), dtype=verigrad.f64)
    assert f.dtype is verigrad.f64 and f.numpy().tolist() == [5.0, 5.0]
    r = verigrad.randint(-3, 4, (500,), generator=verigrad.Generator(1)).numpy()
    assert r.dtype == np.int64 and set(r.tolist()) == set(range(-3, 4))
    same = verigrad.randint(10, (5,), generator=verigrad.Generator(2)).numpy()
    np.testing.assert_array_equal(same, verigrad.randint(10, (5,), generator=verigrad.Generator(2)).numpy())
    assert verigrad.randint_like(verigrad.zeros(3, dtype="i32"), 4, 5).numpy().tolist() == [4, 4, 4]
    assert verigrad.randint_like(verigrad.zeros(2), 1).dtype is verigrad.f32


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: verigrad.randint(5, 3), TypeError, "size must be a tuple"),
        (lambda: verigrad.randint(5), TypeError, r"randint\(high, size\) or randint\(low, high, size\)"),
        (lambda: verigrad.randint(3, 3, (2,)), ValueError, "low < high"),
        (lambda: verigrad.randint(1.5, (2,)), TypeError, "whole numbers"),
        (lambda: verigrad.randint(0, 2, (2,), dtype="bool"), ValueError, "does not fit bool"),
        (lambda: verigrad.randint(-1, 2, (2,), dtype="u8"), ValueError, "does not fit u8"),
        (lambda: verigrad.randint(1, 2, (2,), 4), TypeError, "got 4 positional"),
        (lambda: verigrad.randint(1, 2, (2,), high=3), TypeError, "by name"),
        (lambda: verigrad.randint_like(verigrad.zeros(1)), TypeError, r"randint_like\(high\)"),
    ],
)
def test_randint_refusals(call, error, message) -> None:
    with pytest.raises(error, match=message):
        call()


def test_arange_names_and_dtypes() -> None:
    assert verigrad.arange(start=1, end=4).numpy().tolist() == [1, 2, 3]
    assert verigrad.arange(5).dtype is verigrad.i64 and verigrad.arange(0, 1, 0.25).numpy().tolist() == [
        0,
        0.25,
        0.5,
        0.75,
    ]
    assert (
        verigrad.arange(0, 1, 0.25).dtype is verigrad.f32
        and verigrad.arange(3, dtype="f64").dtype is verigrad.f64
    )


def test_as_tensor_shares_memory_where_pytorchs_does() -> None:
    array = np.array([1.0, 2.0])
    shared = verigrad.as_tensor(array)
    array[0] = 9.0
    assert shared.dtype is verigrad.f64 and shared.numpy().tolist() == [9.0, 2.0]
    x = verigrad.ones(2)
    assert verigrad.as_tensor(x) is x and verigrad.as_tensor(x, dtype="f64").dtype is verigrad.f64
    assert (
        verigrad.as_tensor([1.5]).dtype is verigrad.f32
        and verigrad.as_tensor(np.ones(2), dtype="f32").dtype is verigrad.f32
    )


# legacy constructors ------------------------------------------------------------------------------------
def test_legacy_constructors() -> None:
    t = verigrad.Tensor([1, 2, 3])
    assert (
        isinstance(t, verigrad.Tensor) and t.dtype is verigrad.f32 and t.numpy().tolist() == [1.0, 2.0, 3.0]
    )
    assert verigrad.Tensor(2, 3).shape == (2, 3) and verigrad.Tensor(2, 3).numpy().sum() == 0
    assert verigrad.Tensor().shape == (0,) and verigrad.Tensor([]).shape == (0,)
    assert verigrad.Tensor(np.array([1, 2])).dtype is verigrad.f32
    assert verigrad.Tensor(2, 3, requires_grad=True).requires_grad
    source = verigrad.zeros(2)
    alias = verigrad.Tensor(source)
    alias.numpy()[0] = 5.0
    assert source.numpy().tolist() == [5.0, 0.0]  # PyTorch's: the same storage
    assert verigrad.LongTensor([1.7, -2.5]).numpy().tolist() == [1, -2]
    assert verigrad.DoubleTensor(2).dtype is verigrad.f64 and verigrad.BoolTensor(
        [1, 0]
    ).numpy().tolist() == [True, False]
    for cls, dtype in (
        (verigrad.FloatTensor, "f32"),
        (verigrad.IntTensor, "i32"),
        (verigrad.ByteTensor, "u8"),
    ):
        made = cls([1])
        assert isinstance(made, cls) and isinstance(made, verigrad.Tensor) and made.dtype.name == dtype
    assert not isinstance(verigrad.zeros(1), verigrad.LongTensor) and isinstance(
        verigrad.zeros(1), verigrad.FloatTensor
    )
    internal = verigrad.Tensor(Spec((2,), verigrad.f64), np.zeros(2))  # the internal form still works
    assert internal.dtype is verigrad.f64 and internal.shape == (2,)
    for bad in ((3.0,), ("ab",), ([1], 2)):
        with pytest.raises(TypeError, match="Tensor"):
            verigrad.Tensor(*bad)


# queries and settings -----------------------------------------------------------------------------------
def test_cuda_accelerator_and_backends_queries() -> None:
    assert verigrad.cuda.is_available() is False and verigrad.cuda.device_count() == 0
    assert verigrad.cuda.manual_seed(1) is None and verigrad.cuda.manual_seed_all(1) is None
    assert verigrad.cuda.is_initialized() is False and verigrad.cuda.memory_allocated() == 0
    assert verigrad.accelerator.is_available() is False and verigrad.accelerator.current_accelerator() is None
    assert verigrad.accelerator.device_count() == 0 and verigrad.backends.mps.is_available() is False
    with pytest.raises(NoDeviceError):
        verigrad.accelerator.current_device_index()
    with pytest.raises(NoDeviceError, match=r"verigrad\.cuda\.get_device_name\(\)"):
        verigrad.cuda.get_device_name(0)
    with verigrad.cuda.amp.autocast(enabled=False):  # disabled, as PyTorch's without CUDA (verigrad.amp)
        pass
    with pytest.raises(NoDeviceError, match=r"verigrad\.cuda\.nvtx\.range_push"):
        verigrad.cuda.nvtx.range_push("step")
    cudnn = verigrad.backends.cudnn
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (True, False, False)
    try:
        cudnn.benchmark, cudnn.deterministic, verigrad.backends.cuda.matmul.allow_tf32 = True, True, True
        assert cudnn.benchmark and cudnn.deterministic and verigrad.backends.cuda.matmul.allow_tf32
    finally:
        cudnn.benchmark, cudnn.deterministic, verigrad.backends.cuda.matmul.allow_tf32 = False, False, False


def test_settings() -> None:
    assert verigrad.get_default_dtype() is verigrad.f32 and verigrad.get_default_device() == verigrad.device(
        "cpu"
    )
    verigrad.set_default_dtype("f32")
    verigrad.set_default_device("cpu")
    verigrad.set_default_device(None)
    with pytest.raises(NotImplementedError, match="default dtype is always f32"):
        verigrad.set_default_dtype(verigrad.float64)
    with pytest.raises(TypeError, match="only floating dtypes"):
        verigrad.set_default_dtype("i64")
    verigrad.use_deterministic_algorithms(True, warn_only=True)
    assert (
        verigrad.are_deterministic_algorithms_enabled()
        and verigrad.is_deterministic_algorithms_warn_only_enabled()
    )
    verigrad.use_deterministic_algorithms(False)
    assert not verigrad.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError, match="must be a bool"):
        verigrad.use_deterministic_algorithms(1)
    verigrad.set_float32_matmul_precision("medium")
    assert verigrad.get_float32_matmul_precision() == "medium"
    verigrad.set_float32_matmul_precision("highest")
    with pytest.warns(UserWarning, match="'highest', 'high' or 'medium'"):
        verigrad.set_float32_matmul_precision("low")  # warned of and ignored, as PyTorch's
    assert verigrad.get_float32_matmul_precision() == "highest"


def test_set_printoptions_changes_the_repr() -> None:
    x = verigrad.tensor([1.123456789, 2.0], dtype="f64")
    try:
        verigrad.set_printoptions(precision=2)
        assert repr(x) == "tensor([1.12, 2.  ], dtype=f64)"
        verigrad.set_printoptions(threshold=3, edgeitems=1)
        assert "..." in repr(verigrad.arange(10))
        verigrad.set_printoptions(profile="default")
        assert repr(x) == "tensor([1.1235, 2.    ], dtype=f64)"
        with pytest.raises(ValueError, match="profile"):
            verigrad.set_printoptions(profile="long")
        with pytest.raises(ValueError, match="precision"):
            verigrad.set_printoptions(precision=-1)
    finally:
        settings.PRINT_OPTIONS.clear()


def test_tensor_predicates() -> None:
    x = verigrad.zeros(2, 3)
    assert verigrad.is_tensor(x) and not verigrad.is_tensor(np.zeros(2)) and verigrad.numel(x) == 6
    assert verigrad.is_floating_point(x) and not verigrad.is_floating_point(verigrad.zeros(1, dtype="i64"))
    for call in (verigrad.is_floating_point, verigrad.numel):
        with pytest.raises(TypeError, match="takes a Tensor"):
            call([1.0])


def test_finfo_and_iinfo_by_hand() -> None:
    f32, f64, bf16, f16 = (
        verigrad.finfo(d) for d in (verigrad.f32, verigrad.f64, verigrad.bf16, verigrad.f16)
    )
    assert (f32.bits, f32.eps, f32.resolution, f32.dtype) == (32, 2.0**-23, 1e-06, "float32")
    assert f32.max == float(np.float32(3.4028235e38)) and f32.min == -f32.max and f32.tiny == 2.0**-126
    assert (f64.eps, f64.tiny, f64.resolution) == (2.0**-52, 2.0**-1022, 1e-15)
    assert (bf16.bits, bf16.eps, bf16.tiny, bf16.resolution) == (16, 2.0**-7, 2.0**-126, 0.01)
    assert bf16.max == (2 - 2.0**-7) * 2.0**127 and bf16.smallest_normal == bf16.tiny
    assert (f16.max, f16.eps, f16.tiny) == (65504.0, 2.0**-10, 2.0**-14)
    assert verigrad.finfo() == f32 and verigrad.finfo("float32") == f32
    assert (verigrad.iinfo("u8").min, verigrad.iinfo("u8").max) == (0, 255)
    i32 = verigrad.iinfo(verigrad.int32)
    assert (i32.bits, i32.min, i32.max, i32.dtype) == (32, -(2**31), 2**31 - 1, "int32")
    assert verigrad.iinfo("i64").max == 2**63 - 1
    with pytest.raises(TypeError, match="use iinfo"):
        verigrad.finfo("i32")
    with pytest.raises(TypeError, match="use finfo"):
        verigrad.iinfo("bool")


def test_import_verigrad_gives_the_submodules_pytorch_gives() -> None:
    code = (
        "import verigrad; print(verigrad.nn.functional.relu.__name__, verigrad.nn.init.zeros_.__name__,"
        " verigrad.optim.lr_scheduler.StepLR.__name__, verigrad.utils.data.DataLoader.__name__,"
        " verigrad.accelerator.is_available())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["relu", "zeros_", "StepLR", "DataLoader", "False"]
