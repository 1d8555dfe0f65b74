"""Devices, `.to`, the factories' PyTorch signatures and dtypes, the legacy constructors, and the
process-wide queries (`finfo`, `cuda`, `accelerator`, `backends`) against PyTorch's: the same program
text run with `torch` and with `verigrad` as the module gives the same shapes, dtypes and values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def dtype_name(dtype) -> str:
    """'float32' for torch.float32 and for verigrad.f32."""
    if isinstance(dtype, torch.dtype):
        return str(dtype).removeprefix("torch.")
    return "bfloat16" if dtype.name == "bf16" else dtype.np.name


def same(ours, theirs, exact: bool = True) -> None:
    assert isinstance(ours, verigrad.Tensor) and isinstance(theirs, torch.Tensor)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert dtype_name(ours.dtype) == dtype_name(theirs.dtype)
    assert ours.requires_grad == theirs.requires_grad
    if exact:
        np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())


# Each: a function of the module (torch or verigrad) making a tensor whose values do not depend on a
# random generator.
DETERMINISTIC = {
    "zeros sizes": lambda t: t.zeros(2, 3),
    "zeros tuple": lambda t: t.zeros((2, 3), dtype=t.float64),
    "zeros list": lambda t: t.zeros([4]),
    "zeros size=": lambda t: t.zeros(size=(2, 1)),
    "zeros device=cpu": lambda t: t.zeros(2, device="cpu"),
    "zeros device obj": lambda t: t.zeros(2, device=t.device("cpu", 0)),
    "zeros grad": lambda t: t.zeros(2, requires_grad=True),
    "ones": lambda t: t.ones(3, 2, dtype=t.int64, device=t.device("cpu")),
    "empty": lambda t: t.empty(2, 2).zero_(),
    "full int": lambda t: t.full((2,), 3),
    "full bool": lambda t: t.full((2, 2), True),
    "full float": lambda t: t.full((2,), 2.5),
    "full list size": lambda t: t.full([3], 7, dtype=t.float64, device="cpu"),
    "full grad": lambda t: t.full((2,), 1.5, requires_grad=True),
    "arange int": lambda t: t.arange(5),
    "arange float step": lambda t: t.arange(0, 1, 0.25),
    "arange float start": lambda t: t.arange(1.0, 4),
    "arange dtype": lambda t: t.arange(0, 6, 2, dtype=t.float64),
    "arange end=": lambda t: t.arange(start=2, end=7),
    "arange grad": lambda t: t.arange(3, dtype=t.float32, device="cpu", requires_grad=True),
    "linspace": lambda t: t.linspace(0, 1, 5, device="cpu"),
    "linspace f64 grad": lambda t: t.linspace(-1, 1, 3, dtype=t.float64, requires_grad=True),
    "logspace": lambda t: t.logspace(0, 2, 3, dtype=t.float64, device="cpu"),
    "eye": lambda t: t.eye(3, device="cpu"),
    "eye rect grad": lambda t: t.eye(2, 3, dtype=t.float64, requires_grad=True),
    "tensor device": lambda t: t.tensor([1, 2], device="cpu"),
    "tensor grad": lambda t: t.tensor(
        [1.0, 2.0], dtype=t.float64, device=t.device("cpu"), requires_grad=True
    ),
    "as_tensor": lambda t: t.as_tensor([1.5, 2.0], device="cpu"),
    "as_tensor f64 array": lambda t: t.as_tensor(np.array([1.5, 2.0])),
    "as_tensor cast": lambda t: t.as_tensor(np.array([1, 2]), dtype=t.float32),
    "zeros_like": lambda t: t.zeros_like(t.ones(2, 3, dtype=t.float64)),
    "ones_like dtype": lambda t: t.ones_like(t.zeros(2), dtype=t.int64, device="cpu"),
    "full_like": lambda t: t.full_like(t.zeros(2, dtype=t.int64), 4),
    "empty_like grad": lambda t: t.empty_like(t.zeros(2), requires_grad=True).detach().zero_(),
    "zeros_like grad": lambda t: t.zeros_like(t.zeros(2), requires_grad=True),
    "new_zeros device": lambda t: t.zeros(2, dtype=t.float64).new_zeros((2, 3), device="cpu"),
    "new_ones sizes": lambda t: t.zeros(1, dtype=t.int64).new_ones(2, 2, device=t.device("cpu")),
    "new_full grad": lambda t: t.zeros(1).new_full((2,), 1.5, requires_grad=True),
    "new_empty dtype": lambda t: t.zeros(1).new_empty(3, dtype=t.int64, device="cpu").zero_(),
    "new_tensor": lambda t: t.zeros(1, dtype=t.float64).new_tensor([1, 2], device=t.device("cpu")),
    "legacy Tensor(list)": lambda t: t.Tensor([1, 2, 3]),
    "legacy Tensor(nested)": lambda t: t.Tensor([[1.5, 2], [3, 4]]),
    "legacy Tensor(sizes)": lambda t: t.Tensor(2, 3).zero_(),
    "legacy Tensor()": lambda t: t.Tensor(),
    "legacy FloatTensor": lambda t: t.FloatTensor([1, 2]),
    "legacy LongTensor": lambda t: t.LongTensor([1.7, -2.5, 3]),
    "legacy DoubleTensor": lambda t: t.DoubleTensor([0.1]),
    "legacy BoolTensor": lambda t: t.BoolTensor([1, 0]),
    "legacy LongTensor(sizes)": lambda t: t.LongTensor(2).zero_(),
}


@pytest.mark.parametrize("make", DETERMINISTIC.values(), ids=DETERMINISTIC.keys())
def test_factories_as_pytorchs(make) -> None:
    same(make(verigrad), make(torch))


# Random factories: the shapes, dtypes and ranges are PyTorch's, the draws are verigrad's own.
RANDOM = {
    "rand sizes": lambda t: t.rand(2, 3),
    "rand tuple": lambda t: t.rand((4,), dtype=t.float64),
    "rand size= grad": lambda t: t.rand(size=(2,), requires_grad=True, device="cpu"),
    "randn": lambda t: t.randn(3, 1, device=t.device("cpu")),
    "rand f16": lambda t: t.rand(4, dtype=t.float16),
    "rand bf16 grad": lambda t: t.rand(2, 2, dtype=t.bfloat16, requires_grad=True),
    "randn f16": lambda t: t.randn(3, dtype=t.float16),
    "rand_like f16": lambda t: t.rand_like(t.zeros(2, dtype=t.float16)),
    "randn generator": lambda t: t.randn(5, generator=t.Generator().manual_seed(3)),
    "randint high size": lambda t: t.randint(10, (6,)),
    "randint low high size": lambda t: t.randint(-3, 4, (2, 3)),
    "randint size=": lambda t: t.randint(5, size=(3,)),
    "randint all named": lambda t: t.randint(low=2, high=5, size=(4,), device="cpu"),
    "randint low high size=": lambda t: t.randint(2, 5, size=(3,)),
    "randint low high=": lambda t: t.randint(2, high=5, size=(3,)),
    "randint float dtype": lambda t: t.randint(0, 10, (8,), dtype=t.float32, requires_grad=True),
    "randint i32": lambda t: t.randint(3, (2, 2), dtype=t.int32, generator=t.Generator().manual_seed(1)),
    "randint_like high": lambda t: t.randint_like(t.zeros(2, 2), 5),
    "randint_like low high": lambda t: t.randint_like(t.zeros(3, dtype=t.int64), 1, 4),
    "randperm": lambda t: t.randperm(7, device="cpu"),
    "randperm dtype": lambda t: t.randperm(4, dtype=t.int32),
    "rand_like": lambda t: t.rand_like(t.zeros(2, dtype=t.float64)),
    "randn_like dtype grad": lambda t: t.randn_like(t.zeros(3), dtype=t.float64, requires_grad=True),
}
RANGES = {
    "randint high size": (0, 10),
    "randint low high size": (-3, 4),
    "randint size=": (0, 5),
    "randint all named": (2, 5),
    "randint low high size=": (2, 5),
    "randint low high=": (2, 5),
    "randint float dtype": (0, 10),
    "randint i32": (0, 3),
    "randint_like high": (0, 5),
    "randint_like low high": (1, 4),
}


@pytest.mark.parametrize("name", RANDOM)
def test_random_factories_shapes_dtypes_and_ranges(name) -> None:
    ours, theirs = RANDOM[name](verigrad), RANDOM[name](torch)
    same(ours, theirs, exact=False)
    values = ours.detach().numpy()
    if name in RANGES:
        low, high = RANGES[name]
        assert values.min() >= low and values.max() < high and np.all(values == np.floor(values))
    if name.startswith("randperm"):
        assert sorted(values.tolist()) == list(range(len(values)))


def test_out_is_refused_and_devices_other_than_the_cpu_raise_what_pytorch_raises() -> None:
    for make in (
        lambda t: t.zeros(2, device="cuda"),
        lambda t: t.zeros(2).cuda(),
        lambda t: t.zeros(2).to("cuda"),
    ):
        with pytest.raises(AssertionError):  # PyTorch without CUDA: "Torch not compiled with CUDA enabled"
            make(torch)
        with pytest.raises(AssertionError, match="verigrad runs on the CPU"):
            make(verigrad)
    with pytest.raises(RuntimeError):  # PyTorch: "not linked with support for mps devices"
        torch.zeros(2).to("mps")
    with pytest.raises(RuntimeError, match="no 'mps' device"):
        verigrad.zeros(2).to("mps")
    with pytest.raises(TypeError, match="out= is not supported"):
        verigrad.zeros(2, out=verigrad.zeros(2))


def test_device_objects_as_pytorchs() -> None:
    for t in (torch, verigrad):
        cpu, cpu0 = t.device("cpu"), t.device("cpu", 0)
        assert (cpu.type, cpu.index, str(cpu), repr(cpu)) == ("cpu", None, "cpu", "device(type='cpu')")
        assert (cpu0.index, str(cpu0), repr(cpu0)) == (0, "cpu:0", "device(type='cpu', index=0)")
        assert (
            t.device("cpu:0") == cpu0 and cpu != cpu0 and t.device(cpu) == cpu and t.device(type="cpu") == cpu
        )
        assert {cpu: 1}[t.device("cpu")] == 1 and (
            cpu == "cpu"
        ) is False  # as PyTorch's: not equal to a string
        assert t.device("cuda").type == "cuda" and str(t.device("cuda", 1)) == "cuda:1"  # made, not used
        assert t.zeros(2).device == cpu and t.zeros(2).to(cpu0).device == cpu
        for bad in ("gpu", "cpu:x"):
            with pytest.raises(RuntimeError):
                t.device(bad)
        with pytest.raises(RuntimeError):
            t.device("cpu:0", 1)
        with pytest.raises(RuntimeError):
            t.device("cpu", -1)


TO_CALLS = {
    "dtype": lambda t, x: x.to(t.float64),
    "device": lambda t, x: x.to("cpu"),
    "device obj": lambda t, x: x.to(t.device("cpu")),
    "device dtype": lambda t, x: x.to("cpu", t.int64),
    "named": lambda t, x: x.to(device="cpu", dtype=t.float64),
    "other": lambda t, x: x.to(t.zeros(1, dtype=t.int32)),
    "non_blocking": lambda t, x: x.to("cpu", non_blocking=True),
    "copy": lambda t, x: x.to(t.float32, copy=True),
    "positional flags": lambda t, x: x.to("cpu", t.float64, False, True),
    "type": lambda t, x: x.type(t.float64),
    "type name": lambda t, x: x.type("torch.LongTensor"),
    "type legacy class": lambda t, x: x.type(t.IntTensor),
    "cpu": lambda t, x: x.cpu(),
    "double": lambda t, x: x.double(),
}


@pytest.mark.parametrize("call", TO_CALLS.values(), ids=TO_CALLS.keys())
def test_to_and_type_as_pytorchs(call) -> None:
    values = [1.5, -2.0, 3.0]
    ours_in, theirs_in = verigrad.tensor(values), torch.tensor(values)
    ours, theirs = call(verigrad, ours_in), call(torch, theirs_in)
    same(ours, theirs)
    assert (ours is ours_in) == (theirs is theirs_in)  # self when nothing changes, unless copy=True


def test_to_keeps_the_graph_and_type_names() -> None:
    for t in (torch, verigrad):
        x = t.tensor([1.0, 2.0], requires_grad=True)
        (x.to(t.float64) * 3).sum().backward()
        assert x.grad.tolist() == [3.0, 3.0] and x.grad.dtype == t.float32
        dtypes = (t.float32, t.float64, t.float16, t.bfloat16, t.int64, t.int32, t.uint8, t.bool)
        names = [t.zeros(1, dtype=d).type() for d in dtypes]
        kinds = ["Float", "Double", "Half", "BFloat16", "Long", "Int", "Byte", "Bool"]
        assert names == [f"torch.{kind}Tensor" for kind in kinds]
        assert [t.zeros(1).type(name).dtype for name in names] == list(dtypes)
        assert isinstance(t.zeros(1), t.FloatTensor) and not isinstance(t.zeros(1), t.LongTensor)
        assert isinstance(t.zeros(1), t.Tensor) and isinstance(t.Tensor([1]), t.Tensor)
        assert x.is_cuda is False and x.is_cpu is True and x.get_device() == -1 and x.is_pinned() is False
        with pytest.raises(RuntimeError):
            x.pin_memory()
        t.manual_seed(9)
        assert t.initial_seed() == 9


def test_generators_on_the_cpu_as_pytorchs() -> None:
    for t in (torch, verigrad):
        g = t.Generator(device="cpu").manual_seed(4)
        assert g.initial_seed() == 4 and g.device == t.device("cpu")
        assert t.Generator("cpu").manual_seed(2).initial_seed() == 2
        assert isinstance(g.seed(), int) and g.initial_seed() != 4


def test_module_to_as_pytorchs() -> None:
    for t, nn in ((torch, torch.nn), (verigrad, verigrad.nn)):
        model = nn.Linear(2, 2)
        assert model.to("cpu") is model and model.to(t.device("cpu")) is model
        assert model.to("cpu", t.float64).weight.dtype == t.float64
        assert model.to(t.zeros(1, dtype=t.float32)).weight.dtype == t.float32
        assert model.to(dtype=t.float64, device="cpu").bias.dtype == t.float64


def test_queries_as_pytorchs_without_an_accelerator() -> None:
    for t in (torch, verigrad):
        assert t.cuda.is_available() is False and t.cuda.device_count() == 0
        assert t.cuda.manual_seed(0) is None and t.cuda.manual_seed_all(0) is None
        assert t.cuda.empty_cache() is None and t.cuda.memory_allocated() == 0
        with pytest.raises(AssertionError):
            t.cuda.synchronize()
        assert t.accelerator.is_available() is False and t.accelerator.current_accelerator() is None
        assert t.accelerator.device_count() == 0
        assert t.backends.mps.is_available() is False
        assert (t.backends.cudnn.enabled, t.backends.cudnn.benchmark, t.backends.cudnn.deterministic) == (
            True,
            False,
            False,
        )
        t.backends.cudnn.deterministic, t.backends.cudnn.benchmark = True, True
        assert t.backends.cudnn.deterministic and t.backends.cudnn.benchmark
        t.backends.cudnn.deterministic, t.backends.cudnn.benchmark = False, False
        assert t.backends.cuda.matmul.allow_tf32 is False
        assert t.get_default_dtype() == t.float32 and t.get_default_device() == t.device("cpu")
        t.set_default_dtype(t.float32)
        t.set_default_device("cpu")
        if t is torch:  # PyTorch keeps a device mode for the rest of the process: take it away again
            t.set_default_device(None)
        t.use_deterministic_algorithms(True)
        assert t.are_deterministic_algorithms_enabled() is True
        t.use_deterministic_algorithms(False)
        assert t.are_deterministic_algorithms_enabled() is False
        with pytest.raises(TypeError):
            t.use_deterministic_algorithms("yes")
        for precision in ("high", "medium", "highest"):
            t.set_float32_matmul_precision(precision)
            assert t.get_float32_matmul_precision() == precision
        with pytest.warns(UserWarning):
            t.set_float32_matmul_precision("low")
        assert t.get_float32_matmul_precision() == "highest"
        with pytest.raises(TypeError):
            t.set_default_dtype(t.int64)
        x = t.zeros(2, 3)
        assert t.is_tensor(x) and not t.is_tensor([1]) and t.numel(x) == 6
        assert t.is_floating_point(x) and not t.is_floating_point(t.zeros(1, dtype=t.int64))
        with pytest.raises(TypeError):
            t.is_floating_point(1.0)


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_finfo(name) -> None:
    ours, theirs = verigrad.finfo(getattr(verigrad, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, field) == getattr(theirs, field), field


@pytest.mark.parametrize("name", ["int32", "int64", "uint8"])
def test_iinfo(name) -> None:
    ours, theirs = verigrad.iinfo(getattr(verigrad, name)), torch.iinfo(getattr(torch, name))
    for field in ("bits", "max", "min", "dtype"):
        assert getattr(ours, field) == getattr(theirs, field), field


def test_finfo_default_and_refusals() -> None:
    for t in (torch, verigrad):
        assert t.finfo().eps == t.finfo(t.float32).eps
        with pytest.raises(TypeError):
            t.finfo(t.int32)
        with pytest.raises(TypeError):
            t.iinfo(t.float32)
