"""The every-f32-input check (verigrad/backends/verification/sweep.py): which kernels it takes, ranges of
bit patterns held to the reference, a kernel wrong on one input caught with that input named, and the
command."""

from __future__ import annotations

import numpy as np
import pytest

from verigrad.backends import active, cpu
from verigrad.backends.kernel_table import Backend, Exactness
from verigrad.backends.verification.sweep import one_operand_ops, sweep, sweep_paths
from verigrad.cli import main
from verigrad.ops import REGISTRY

needs_cpu = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

HALF = 0x3F000000  # 0.5f
SPECIAL = [(0x7F7FF000, 0x7F801000), (0xFF7FF000, 0xFF801000), (0, 0x1000), (0x80000000, 0x80001000)]


# gelu_tanh's f32 kernel is registered only where the C library's tanh is NumPy's (its result cancels)
VECTORIZED = [
    op for op in ("sigmoid", "tanh", "exp", "silu", "gelu_tanh") if (op, "f32") in cpu.cpu.registered()
]


@needs_cpu
def test_the_one_operand_f32_kernels_are_swept_and_no_others():
    names = one_operand_ops(cpu.cpu)
    assert {"sigmoid", "tanh", "exp", "silu", "relu", "sigmoid_deriv", *VECTORIZED} <= set(names)
    assert not {"add", "matmul", "sum", "softmax", "maximum"} & set(names)


@needs_cpu
@pytest.mark.parametrize("op", VECTORIZED)
def test_vectorized_kernels_give_the_reference_bits_around_one_half_and_at_the_specials(op):
    """The patterns around 0.5f, the largest finite values, infinities, NaNs, zeros and subnormals, on
    each path the machine has."""
    ranges = [(HALF - (1 << 18), HALF + (1 << 18)), *SPECIAL]
    for start, stop in ranges:
        results = sweep_paths(cpu.cpu, op, None, start, stop, chunk=1 << 16)
        assert [r.path for r in results] == list(cpu.vector_paths())
        for result in results:
            assert result.passed, (result.path, result.first)
            assert result.inputs == stop - start and result.worst == 0


@needs_cpu
def test_paths_a_kernel_does_not_take_are_refused():
    with pytest.raises(
        ValueError, match=r"sigmoid's f32 kernel takes the paths \[.*'scalar'\] here, not \['sse'\]"
    ):
        sweep_paths(cpu.cpu, "sigmoid", ["sse"], 0, 10)
    assert [r.path for r in sweep_paths(cpu.cpu, "relu", None, 0, 10)] == [""]


def _one_bit_off_at(bits: int):
    def kernel(x: np.ndarray) -> np.ndarray:
        y = REGISTRY["sigmoid"].reference(x)
        y.view(np.uint32)[x.view(np.uint32) == bits] ^= 1
        return y

    return kernel


def _broken(bits: int = HALF) -> Backend:
    broken = Backend("broken-sigmoid", "sigmoid one bit off at one input")
    broken.register("sigmoid", _one_bit_off_at(bits), "f32")
    return broken


def test_a_kernel_wrong_on_one_input_is_caught_and_the_input_named():
    result = sweep(_broken(), "sigmoid", HALF - 1000, HALF + 1000, chunk=256)
    assert not result.passed and result.failures == 1 and result.inputs == 2000
    assert result.first.startswith("input 0.5 (0x3f000000): other bits than the reference (claimed exact)")
    assert sweep(_broken(), "sigmoid", HALF + 1, HALF + 1000).passed  # the wrong input not in range


def test_a_claim_of_ulps_is_held_in_ulps():
    loose = Backend("loose-sigmoid", "sigmoid one bit off at 0.5, claims 1 ulp")
    loose.register("sigmoid", _one_bit_off_at(HALF), "f32", Exactness(ulps=1))
    result = sweep(loose, "sigmoid", HALF - 10, HALF + 10)
    assert result.passed and result.worst == 1


def test_progress_counts_every_pattern_once():
    seen = []
    sweep(_broken(), "sigmoid", 5, 5 + 1000, chunk=300, progress=seen.append)
    assert seen == [300, 300, 300, 100]


def test_bad_arguments_are_refused_before_any_work():
    with pytest.raises(ValueError, match="no f32 kernel of a one-operand element-wise op named 'add'"):
        sweep(_broken(), "add")
    with pytest.raises(ValueError, match="0 <= start < stop <= 2"):
        sweep(_broken(), "sigmoid", 10, 10)
    with pytest.raises(ValueError, match="0 <= start < stop <= 2"):
        sweep(_broken(), "sigmoid", 0, (1 << 32) + 1)
    with pytest.raises(ValueError, match="chunk must be at least 1"):
        sweep(_broken(), "sigmoid", 0, 10, chunk=0)


def test_the_command_fails_on_a_wrong_kernel_and_names_its_input(capsys, monkeypatch):
    from verigrad.backends.verification import sweep as sweep_module

    monkeypatch.setitem(active._BACKENDS, "broken-sigmoid", _broken(0x1234))
    monkeypatch.setattr(sweep_module, "PATTERNS", 1 << 16)  # the command's range: [0, PATTERNS)
    monkeypatch.setattr(sweep_module, "CHUNK", 1 << 12)
    assert main(["verify", "--backend", "broken-sigmoid", "--every-f32"]) == 1
    out = capsys.readouterr().out
    assert "every f32 input, broken-sigmoid" in out and "65,536" in out and "fail" in out
    assert "FAIL sigmoid: 1 chunk(s) outside the claim; first: input 6.53e-42 (0x00001234)" in out


def test_the_command_refuses_an_op_it_cannot_sweep(capsys):
    assert main(["verify", "--backend", "reference", "--op", "sigmoid", "--every-f32"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("verigrad verify: error: reference has no f32 kernel of a one-operand")


def test_the_command_on_a_backend_without_such_kernels(capsys):
    assert main(["verify", "--backend", "reference", "--every-f32"]) == 0
    assert "reference has no f32 kernel of a one-operand element-wise op to sweep" in capsys.readouterr().out


def test_a_kernel_that_raises_fails_the_sweep_and_names_the_inputs():
    def kernel(x: np.ndarray) -> np.ndarray:
        if (x.view(np.uint32) == HALF).any():
            raise RuntimeError("no 0.5 here\nsecond line")
        return REGISTRY["sigmoid"].reference(x)

    raising = Backend("raising-sigmoid", "sigmoid that raises on a chunk holding 0.5")
    raising.register("sigmoid", kernel, "f32")
    seen = []
    result = sweep(raising, "sigmoid", HALF - 256, HALF + 256, chunk=128, progress=seen.append)
    assert not result.passed and result.failures == 1 and result.inputs == 512 and seen == [128] * 4
    assert result.first == "inputs 0x3f000000-0x3f00007f: the kernel raised RuntimeError: no 0.5 here"
