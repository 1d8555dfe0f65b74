"""verigrad.library.elementwise_kernel: a function in a typed subset of Python compiled to C by the fused
kernels' generator, verified against the reference built from the same expression, and refused with the
construct and its line when it leaves the subset. Kernels are defined inside fixtures and tests, under
names of their own (the registry is the process's)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import verigrad as vg
from verigrad import f32, f64
from verigrad.backends import cpu
from verigrad.backends.active import lookup
from verigrad.backends.cpu import fused
from verigrad.backends.verification import verify
from verigrad.backends.verification.sweep import sweep
from verigrad.errors import KernelSyntaxError
from verigrad.library import elementwise_kernel
from verigrad.ops import REGISTRY
from verigrad.testing import check_op

pytestmark = pytest.mark.skipif(not cpu.available(), reason="no C compiler: the cpu backend is not built")

# ruff: noqa: F821 (a kernel's functions are the subset's, never run as Python)


@pytest.fixture(scope="module")
def quick_gelu():
    @elementwise_kernel(name="vgtest_quick_gelu")
    def kernel(x: f32) -> f32:
        return x * sigmoid(1.702 * x)

    return kernel


def _by_hand(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(1.702 * x) with each op's reference, each result rounded to f32."""
    with np.errstate(all="ignore"):
        inner = (np.float32(1.702) * x).astype(np.float32)
        return (x * REGISTRY["sigmoid"].reference(inner)).astype(np.float32)


def _values(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(n) * 8).astype(np.float32)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 3e38]
    return x


def test_compiled_kernel_gives_the_references_bits(quick_gelu):
    assert quick_gelu.kernel is not None and lookup("cpu").native(quick_gelu.op, f32) is not None
    assert quick_gelu.op.__doc__ == "the user kernel vgtest_quick_gelu(x) = mul(%0, sigmoid(mul(1.702, %0)))"
    x = _values(10_000)
    with np.errstate(all="ignore"):
        want = quick_gelu.op.reference(x)
    np.testing.assert_array_equal(want, _by_hand(x), strict=True)
    with vg.backend("cpu"):
        got = quick_gelu(vg.from_numpy(x)).numpy()
    assert got.tobytes() == want.tobytes()


def test_same_bits_on_one_to_three_threads(quick_gelu):
    x = vg.from_numpy(_values(100_003))
    outs = []
    with vg.backend("cpu"):
        for n in (1, 2, 3):
            vg.set_threads(n)
            outs.append(quick_gelu(x).numpy().tobytes())
    vg.set_threads(1)
    assert outs[0] == outs[1] == outs[2]


def test_f32_activations_run_the_built_in_kernels_on_every_path(quick_gelu, small_chunks):
    """An f32 member with a vector path (sigmoid here) is computed by the built-in kernel a stage at a
    time, not by the scalar formula in double: the kernel's C calls it, and each path the machine has
    (AVX-512, AVX2, the routine), on 1-3 threads, gives the reference's bits."""
    group = quick_gelu.expression.group
    text = fused.function("NAME", group, ("f32", "f32"), fused.scalars(group))
    assert f"vg_vector[{fused.VECTOR_MEMBERS.index('sigmoid')}](M0, M1, n);" in text
    assert "d_sigmoid" not in text
    x = _values(20_003)
    want = quick_gelu.op.reference(x).tobytes()
    chosen = cpu.vector_path()
    try:
        with vg.backend("cpu"):
            for path in cpu.vector_paths():
                cpu.vector_path(path)
                for n in (1, 2, 3):
                    vg.set_threads(n)
                    assert quick_gelu(vg.from_numpy(x)).numpy().tobytes() == want, (path, n)
    finally:
        cpu.vector_path(chosen)


def test_check_op_and_verify_hold_it_like_a_built_in(quick_gelu):
    counts = check_op(quick_gelu)
    assert counts["gradient"] == 2 and counts["kernels"] == 1 and counts["symbolic"] == 2
    report = verify(lookup("cpu"), ["vgtest_quick_gelu"])
    assert [r.status for r in report.results] == ["pass"]


def test_every_f32_sweep_finds_it_by_name(quick_gelu):
    """A range of the 2^32 patterns here (the whole sweep: `verigrad verify --every-f32`)."""
    result = sweep("cpu", "vgtest_quick_gelu", start=0x7F000000, stop=0x80800000, chunk=1 << 22)
    assert result.passed and result.inputs == 0x01800000


def test_gradient_derived_from_the_expression_and_twice_differentiable(quick_gelu):
    with pytest.raises(vg.DTypeError, match="takes f32 or f64 operands, all of one dtype; got i64"):
        quick_gelu(vg.tensor([1, 2]))
    a = np.array([-1.5, 0.25, 2.0])
    x32 = vg.tensor(a.astype(np.float32), requires_grad=True)
    (g,) = vg.autograd.grad(quick_gelu(x32).sum(), x32, create_graph=True)
    s = 1 / (1 + np.exp(-1.702 * a))
    np.testing.assert_allclose(g.numpy(), s + 1.702 * a * s * (1 - s), rtol=1e-5)
    g.sum().backward()
    second = 1.702 * s * (1 - s) * (2 + 1.702 * a * (1 - 2 * s))
    np.testing.assert_allclose(x32.grad.numpy(), second, rtol=1e-4)


def test_two_operands_locals_comparisons_where_and_constants():
    @elementwise_kernel(name="vgtest_mix")
    def mix(x: f64, y: f64) -> f64:
        """A docstring is allowed."""
        t = -x * 0.5
        small = abs(y) < 2 and not x > 3
        return where(small, max(x, y) - exp(t), t / (1 + y * y) - (x if x >= 0 else -y) ** 2)

    assert mix.kernel is not None
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 5)) * 3, rng.standard_normal(5) * 3
    t = -x * 0.5
    small = (np.abs(y) < 2) & ~(x > 3)
    expected = np.where(small, np.maximum(x, y) - np.exp(t), t / (1 + y * y) - np.where(x >= 0, x, -y) ** 2)
    np.testing.assert_allclose(mix.op.reference(x, y), expected, rtol=1e-15)
    with vg.backend("cpu"):
        got = mix(vg.from_numpy(x), vg.from_numpy(y)).numpy()
    assert got.tobytes() == mix.op.reference(x, y).tobytes()
    counts = check_op(mix)
    assert counts["kernels"] == 1 and counts["gradient"] == 2


def test_nans_of_both_signs_give_the_same_bits_on_every_thread_count(small_chunks):
    """log(-1) is -NaN, so NaNs of both signs meet in the products and the sum: each element gets the
    first operand's NaN on 1-3 threads (registration, which verifies that, refused this kernel when the
    NaN an element got depended on where its block started)."""

    @elementwise_kernel(name="vgtest_nans")
    def nans(x: f64, y: f64) -> f64:
        return log(x) * exp(y) + log1p(y) * expm1(x)

    assert lookup("cpu").native(nans.op, f64) is not None
    rng = np.random.default_rng(2)
    signed = np.where(rng.random((2, 5001)) < 0.5, -np.nan, np.nan)
    x = vg.from_numpy(np.where(rng.random(5001) < 0.5, signed[0], -1.0))
    y = vg.from_numpy(np.where(rng.random(5001) < 0.5, signed[1], 1.0))
    outs = set()
    with vg.backend("cpu"):
        for n in (1, 2, 3):
            vg.set_threads(n)
            outs.add(nans(x, y).numpy().tobytes())
    assert len(outs) == 1


def _refused(source_fn, match: str) -> None:
    with pytest.raises(KernelSyntaxError, match=match):
        elementwise_kernel(source_fn)
    assert source_fn.__name__ not in REGISTRY


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_constructs_outside_the_subset_are_refused_with_their_line():
    def vgtest_loop(x: f32) -> f32:
        for _ in range(3):
            x = x * 2
        return x

    _refused(vgtest_loop, f"vgtest_loop: a for loop at line {_line(vgtest_loop, 'for _')}")

    def vgtest_unknown(x: f32) -> f32:
        return erf(x)

    _refused(vgtest_unknown, f"a call of the unknown function 'erf' at line {_line(vgtest_unknown, 'erf(')}")

    def vgtest_attribute(x: f32) -> f32:
        return np.exp(x)

    _refused(vgtest_attribute, r"a call of 'np.exp' \(call the functions by their bare name\) at line")

    def vgtest_field(x: f32) -> f32:
        return x.real * 2

    _refused(vgtest_field, f"the attribute access 'x.real' at line {_line(vgtest_field, 'x.real')}")

    def vgtest_untyped(x, y: f32) -> f32:
        return x + y

    _refused(vgtest_untyped, "argument x has no annotation; annotate it f32 or f64")

    def vgtest_int(x: int) -> f32:
        return x + 1

    _refused(vgtest_int, "argument x has the annotation 'int'; annotate it f32 or f64")

    def vgtest_bool_result(x: f32) -> f32:
        return x > 0

    _refused(vgtest_bool_result, "the expression gives bool, the function is annotated -> f32")

    def vgtest_if(x: f32) -> f32:
        if x > 0:
            return x
        return -x

    _refused(vgtest_if, f"an if statement at line {_line(vgtest_if, 'if x > 0')}")

    def vgtest_chain(x: f32) -> f32:
        return where(0 < x < 1, x, 0.0)

    _refused(vgtest_chain, "the comparison '0 < x < 1'")

    def vgtest_string(x: f32) -> f32:
        return x * "2"

    _refused(vgtest_string, "the constant '2' \\(only int and float numbers\\)")

    def vgtest_unbound(x: f32) -> f32:
        return x * z

    _refused(vgtest_unbound, "the name 'z', neither an argument nor a local")

    def vgtest_mixed(x: f32, y: f64) -> f64:
        return x * y

    _refused(vgtest_mixed, "arguments of f32, f64 returning f64")


def test_a_name_of_the_registry_is_refused():
    with pytest.raises(ValueError, match="an op named 'exp' exists already"):

        @elementwise_kernel(name="exp")
        def _(x: f32) -> f32:
            return x * 2


def test_verify_imports_a_users_file_and_finds_its_kernel(tmp_path, capsys):
    import argparse

    from verigrad.cli.backend_commands import run_verify

    path = tmp_path / "vgtest_kernels_file.py"
    path.write_text(
        "from verigrad import f32\nfrom verigrad.library import elementwise_kernel\n\n\n"
        "@elementwise_kernel\ndef vgtest_from_file(x: f32) -> f32:\n    return tanh(x) * 0.5 + 0.5\n"
    )
    args = argparse.Namespace(imports=[str(path)], backend="cpu", op="vgtest_from_file", every_f32=False)
    assert run_verify(args) == 0
    out = capsys.readouterr().out
    assert "vgtest_from_file: f32 exact" in out and "all verified" in out
    with pytest.raises(SystemExit, match="no such file"):
        run_verify(argparse.Namespace(**{**vars(args), "imports": [str(tmp_path / "none.py")]}))


def test_traced_and_compiled_as_one_instruction_with_the_eager_bits(quick_gelu):
    def step(x):
        return (quick_gelu(x) * 2).sum()

    x = vg.from_numpy(_values(1000)[8:])
    with vg.backend("cpu"):
        program = vg.trace(step, vg.spec(("n",), "f32"))
        assert "vgtest_quick_gelu %0" in str(program)
        eager, compiled = step(x), vg.compile(step)(x)
        assert eager.numpy().tobytes() == compiled.numpy().tobytes()
        grads = vg.grad(step)
        assert grads(x).numpy().tobytes() == vg.compile(grads)(x).numpy().tobytes()
