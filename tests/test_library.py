"""verigrad.library.custom_op: a user's function as an op of the registry (eager, traced, compiled,
differentiated). Each test defines its ops inside it, under names of its own (the registry is the
process's)."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad import Tensor
from verigrad.backends.active import lookup
from verigrad.backends.kernel_table import ulp
from verigrad.library import KernelRefused, custom_op, register_kernel
from verigrad.ops import Sample


def _numpy_sin(name: str):
    """sin(x) * k computed in NumPy, with its fake and its autograd registered; counts its runs."""

    @custom_op(name, mutates_args=())
    def op(x: Tensor, k: float) -> Tensor:
        op.runs += 1
        return vg.tensor(np.sin(x.numpy()) * np.float32(k))

    op.runs = 0

    @op.register_fake
    def _(x, k):
        return vg.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.k = inputs[1]

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * ctx.k, None

    op.register_autograd(backward, setup_context=setup_context)
    return op


def test_eager_call_and_gradient():
    op = _numpy_sin("vgtest::sin_eager")
    x = vg.tensor([0.5, 1.0], requires_grad=True)
    y = op(x, 2.0)
    np.testing.assert_array_equal(y.numpy(), (np.sin(np.float32([0.5, 1.0])) * 2).astype(np.float32))
    assert vg.REGISTRY["vgtest::sin_eager"] is op.op and y.grad_fn.op is op.op
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos([0.5, 1.0]), rtol=1e-6)


def test_spec_from_the_fake_before_any_work():
    op = _numpy_sin("vgtest::sin_check")
    with vg.abstract():
        y = op(vg.Tensor(vg.spec((3, 4), vg.f32), None), 1.0)
    assert y.shape == (3, 4) and op.runs == 0


def test_traced_and_compiled_as_one_instruction_with_the_eager_bits():
    op = _numpy_sin("vgtest::sin_compiled")

    def run(compiled):
        w = vg.tensor([0.5, 1.0, -2.0], requires_grad=True)

        def step(a):
            loss = op(w * a, 3.0).sum()
            loss.backward()
            with vg.no_grad():
                w.sub_(0.1 * w.grad)
            w.grad = None
            return loss

        f = vg.compile(step) if compiled else step
        losses = [f(vg.tensor([1.0, 2.0, 0.5])).numpy().copy() for _ in range(10)]
        return losses, w.detach().numpy()

    text = str(vg.trace(lambda a: op(a, 3.0), vg.spec((3,), vg.f32)))
    assert "= vgtest::sin_compiled %0 (k=3.0)" in text
    eager = run(False)
    before = op.runs
    compiled = run(True)
    assert op.runs - before == 10  # the NumPy code ran at each call (it cannot be traced: it reads values)
    assert [a.tobytes() for a in eager[0]] == [b.tobytes() for b in compiled[0]]
    assert eager[1].tobytes() == compiled[1].tobytes()


def test_without_fake_eager_works_and_a_trace_names_register_fake():
    @custom_op("vgtest::double_nofake", mutates_args=())
    def double(x: Tensor) -> Tensor:
        return x * 2

    x = vg.tensor([1.0, 2.0], requires_grad=True)
    y = double(x)
    assert y.numpy().tolist() == [2.0, 4.0] and y.requires_grad
    with pytest.raises(
        RuntimeError, match=r"no autograd formula was registered\. Please use register_autograd"
    ):
        y.sum().backward()
    with pytest.raises(
        TypeError, match=r"vgtest::double_nofake has no fake .* @double_nofake\.register_fake"
    ):
        vg.trace(double, vg.spec((2,), vg.f32))


def test_errors():
    with pytest.raises(ValueError, match="parameter x must have a type annotation"):

        @custom_op("vgtest::bad_hints", mutates_args=())
        def bad(x):
            return x

    with pytest.raises(NotImplementedError, match=r"mutates_args=.*mutate no argument"):
        custom_op("vgtest::mutates", mutates_args=("x",))
    with pytest.raises(ValueError, match="'namespace::name'"):
        custom_op("plain", mutates_args=())

    @custom_op("vgtest::typed", mutates_args=())
    def typed(x: Tensor, k: float) -> Tensor:
        return x * k

    with pytest.raises(TypeError, match="vgtest::typed: argument x must be a Tensor, got float"):
        typed(1.0, 2.0)
    with pytest.raises(ValueError, match="op vgtest::typed is defined twice"):
        custom_op("vgtest::typed", typed.fn, mutates_args=())


def test_string_annotations_naming_a_local_tensor_type():
    def ported(x, k):
        return x * k

    # a ported file under `from __future__ import annotations`, its `torch` a name of another scope
    ported.__annotations__ = {"x": "torch.Tensor", "k": "float", "return": "torch.Tensor"}
    ported = custom_op("vgtest::ported", ported, mutates_args=())
    assert ported(vg.tensor([1.0]), 3.0).numpy().tolist() == [3.0]


def test_opcheck_passes_a_well_registered_op():
    op = _numpy_sin("vgtest::sin_opcheck")
    x = vg.tensor(np.linspace(-1, 1, 5, dtype=np.float32), requires_grad=True)
    assert vg.library.opcheck(op, (x, 2.0)) == dict.fromkeys(
        ["test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"],
        "SUCCESS",
    )


def test_opcheck_finds_what_is_wrong():
    @custom_op("vgtest::bad_fake", mutates_args=())
    def bad(x: Tensor) -> Tensor:
        return x.sum(0)

    @bad.register_fake
    def _(x):
        return vg.empty_like(x)  # wrong: the op reduces axis 0

    @custom_op("vgtest::writes", mutates_args=())
    def writes(x: Tensor) -> Tensor:
        x.payload[0] = 7.0
        return x * 1

    @custom_op("vgtest::returns_input", mutates_args=())
    def same(x: Tensor) -> Tensor:
        return x

    x = vg.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    found = vg.library.opcheck(bad, (x,), raise_exception=False)
    assert "the fake gives f32[2, 3]" in str(found["test_faketensor"])
    assert "no autograd formula" in str(found["test_autograd_registration"])
    with pytest.raises(vg.library.OpCheckError, match=r"vgtest::writes.*wrote into its argument x"):
        vg.library.opcheck(writes, (vg.tensor([1.0, 2.0]),), test_utils="test_schema")
    with pytest.raises(vg.library.OpCheckError, match="returned its argument x or a view of it"):
        vg.library.opcheck(same, (vg.tensor([1.0]),), test_utils=["test_schema"])


# register_kernel: a user's kernel on the cpu backend, verified before it is registered -------------
def _cube(name: str):
    """x * x * x in the input's dtype (NumPy), with a fake; the op's own samples are none."""

    @custom_op(name, mutates_args=())
    def op(x: Tensor) -> Tensor:
        a = x.numpy()
        return vg.from_numpy(a * a * a)

    op.register_fake(lambda x: vg.empty_like(x))
    return op


CUBE_SAMPLES = [Sample((np.linspace(-3, 3, 10),))]


def test_register_kernel_verifies_then_runs_the_kernel():
    op = _cube("vgtest::cube_kernel")
    calls = []

    def kernel(x):
        calls.append(x.shape)
        return x * x * x

    register_kernel(op, "f32", kernel, samples=CUBE_SAMPLES)
    assert calls  # run on the verification's cases
    assert lookup("cpu").native(op.op, vg.f32) is kernel
    calls.clear()
    x = vg.tensor([1.5, -2.0])
    with vg.backend("cpu"):
        np.testing.assert_array_equal(op(x).numpy(), np.float32([1.5, -2.0]) ** 3)
    assert calls == [(2,)]


def test_register_kernel_refuses_a_kernel_off_by_one_ulp_naming_the_case():
    op = _cube("vgtest::cube_ulp")

    def kernel(x):
        return np.nextafter(x * x * x, np.inf).astype(x.dtype)

    refused = r"vgtest::cube_ulp, f32.*sample 0, f32.*other bits than the reference"
    with pytest.raises(KernelRefused, match=refused):
        register_kernel(op, "f32", kernel, samples=CUBE_SAMPLES)
    assert lookup("cpu").native(op.op, vg.f32) is None
    register_kernel(op, "f32", kernel, ulp(1), samples=CUBE_SAMPLES)  # as stated, it is accepted
    assert lookup("cpu").exactness("vgtest::cube_ulp", "f32") == ulp(1)


def test_register_kernel_refuses_a_kernel_that_differs_on_special_values():
    """NaN in, a number out: the verification's special values (not the sample's) find it."""
    op = _cube("vgtest::cube_nan")
    with pytest.raises(KernelRefused, match="vgtest::cube_nan, f64"):
        register_kernel(op, "f64", lambda x: np.nan_to_num(x * x * x), samples=CUBE_SAMPLES)


def test_register_kernel_errors():
    op = _cube("vgtest::cube_errors")
    with pytest.raises(ValueError, match="no samples to verify the kernel on"):
        register_kernel(op, "f32", lambda x: x * x * x)
    with pytest.raises(ValueError, match="'vgtest::nothing' is not an op of the registry"):
        register_kernel("vgtest::nothing", "f32", lambda x: x)
    with pytest.raises(TypeError, match="exactness must be an Exactness"):
        register_kernel(op, "f32", lambda x: x * x * x, 1e-6, samples=CUBE_SAMPLES)
