"""verigrad.trace: the printed program (golden text), symbolic shapes, the names of captured tensors,
updates written back, the verifier, and gradients (`grad`, `value_and_grad`) eagerly and traced."""

from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import pytest

import verigrad
from verigrad import DTypeError, ShapeError, dims, nn, spec, trace
from verigrad.cli.trainer import training_step
from verigrad.ir import IRError, Program
from verigrad.ir.program import Instr

B = dims("B")
H, W = dims("H W", multiple_of=4)

LINEAR_RELU = """\
program(%0 x: f32[B,4], %1 weight: f32[3,4], %2 bias: f32[3]) {
  %3: f32[4,3] = permute %1 (axes=(1,0))
  %4: f32[B,3] = matmul %0 %3
  %5: f32[B,3] = add %4 %2
  %6: f32[B,3] = relu %5
  return %6
}"""


def test_linear_relu_prints_in_under_ten_lines():
    layer = nn.Linear(4, 3)
    program = trace(lambda x: layer(x).relu(), spec([B, 4]))
    assert str(program) == LINEAR_RELU
    assert len(str(program).splitlines()) < 10
    assert program.verify() is program
    assert program.captured == [layer.weight, layer.bias]


def test_pooling_keeps_the_symbols():
    convs = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    with verigrad.no_grad():
        program = trace(convs, spec([B, 1, H, W]))
    text = str(program).splitlines()
    assert text[0] == "program(%0 x: f32[B,1,H,W], %1 0.weight: f32[16,1,3,3], %2 0.bias: f32[16]) {"
    assert text[1].startswith("  %3: f32[B,16,H,W] = conv2d %0 %1 (stride=1, padding=1)")
    assert text[5] == "  %7: f32[B,16,H/2,W/2] = max_pool2d %6 (kernel=2, stride=2)"  # the issue's own line
    assert text[-2:] == ["  return %7", "}"]
    program.verify()


def test_a_forward_program_keeps_composite_ops_whole():
    conv = nn.Conv2d(1, 2, 3, padding=1)
    forward = trace(conv, spec([B, 1, H, W]))  # the parameters require grad, but none is taken
    assert [i.name for i in forward.instrs] == ["conv2d", "reshape", "add"]
    backward = trace(verigrad.grad(lambda x: conv(x).sum()), spec([B, 1, H, W]))
    names = [i.name for i in backward.instrs]  # differentiated by conv2d's VJP: an op of its own
    assert "conv2d_input_grad" in names and "col2im" not in names
    backward.verify()


def test_training_step_program_names_parameters_and_optimizer_state():
    model = verigrad.models.digits_cnn()
    opt = verigrad.optim.Adam(model.parameters(), lr=1e-2)
    program = trace(training_step(model, opt, nn.CrossEntropyLoss()), spec([B, 1, 8, 8]), spec([B], "i64"))
    program.verify()
    names = [v.name for v in program.inputs]
    params = [n for n, _ in model.named_parameters()]
    assert names[:2] == ["x", "y"]
    assert set(params) <= set(names) and "opt.lr" in names and "opt.steps" in names
    for i in range(len(params)):
        assert {f"opt.{i}.step", f"opt.{i}.exp_avg", f"opt.{i}.exp_avg_sq"} <= set(names)
    # every parameter and every piece of optimizer state is written back; the learning rate and beta1
    # (settings a schedule changes) are read only
    assert (
        "opt.beta1" in names
        and program.captured[names.index("opt.beta1") - 2] is opt.param_groups[0].tensors["beta1"]
    )
    assert set(program.updates) == set(names[2:]) - {"opt.lr", "opt.beta1"}
    text = str(program)
    assert "\nbackward:\n" in text
    assert text.index("= cross_entropy") < text.index("backward:")
    assert re.search(r"\n  0\.weight <- %\d+\n", text)
    assert program.captured[names.index("opt.lr") - 2] is opt.param_groups[0].lr


def test_a_trace_leaves_no_traced_value_behind():
    model = nn.Linear(3, 2)
    opt = verigrad.optim.SGD(model.parameters(), lr=0.1)
    before = verigrad.ones(2, 3)
    model.weight.grad = before  # a gradient from an earlier eager step
    weights = model.weight.numpy().copy()
    trace(training_step(model, opt, nn.MSELoss()), spec([B, 3]), spec([B, 2]))
    assert model.weight.grad is before and model.bias.grad is None
    assert all(not p.is_abstract and p.is_leaf for p in model.parameters())
    np.testing.assert_array_equal(model.weight.numpy(), weights)  # tracing computes nothing
    assert opt.steps == 0 and opt.param_steps == [0, 0]


def test_accumulating_into_an_eager_gradient_is_refused():
    layer = nn.Linear(3, 2)
    layer.weight.grad = verigrad.ones(2, 3)

    def step(x):
        layer(x).sum().backward()  # no zero_grad: would add the same eager gradient on every call
        return layer.weight.grad

    with pytest.raises(RuntimeError, match="already holds a gradient from outside the traced function"):
        trace(step, spec([B, 3]))
    layer.weight.grad = None
    program = trace(step, spec([B, 3]))
    assert layer.weight.grad is None and len(program.outputs) == 1


# names of captured tensors ------------------------------------------------------------------------
def _input_names(program: Program) -> list[str]:
    return [v.name for v in program.inputs]


def test_two_modules_with_the_same_parameter_names_are_told_apart():
    enc, dec = nn.Linear(4, 4), nn.Linear(4, 4)
    program = trace(lambda x: dec(enc(x).relu()), spec([B, 4]))
    assert _input_names(program) == ["x", "enc.weight", "enc.bias", "dec.weight", "dec.bias"]


def test_names_through_a_bound_method():
    class Trainer:
        def __init__(self):
            self.model = nn.Sequential(nn.Linear(4, 3))
            self.opt = verigrad.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)

        def step(self, x, y):
            return training_step(self.model, self.opt, nn.CrossEntropyLoss())(x, y)

    trainer = Trainer()
    program = trace(trainer.step, spec([B, 4]), spec([B], "i64"))
    names = _input_names(program)
    assert names[:4] == ["x", "y", "0.weight", "0.bias"]
    assert {"opt.lr", "opt.0.momentum_buffer", "opt.1.momentum_buffer"} <= set(names)


def test_names_through_nested_closures_defaults_and_partials():
    model = nn.Linear(2, 2)
    scale = verigrad.tensor([2.0, 3.0])

    def make():
        def forward(x):
            return model(x) * scale

        def outer(x):
            return forward(x).sum()

        return outer

    assert _input_names(trace(make(), spec([B, 2]))) == ["x", "weight", "bias", "scale"]

    shift = verigrad.tensor([1.0, -1.0])

    def with_default(x, offset=shift):
        return x + offset

    assert _input_names(trace(with_default, spec([B, 2]))) == ["x", "offset"]
    partial = functools.partial(lambda x, bias: x - bias, bias=shift)
    assert _input_names(trace(partial, spec([B, 2]))) == ["x", "bias"]


def test_names_of_a_plain_object_a_module_call_and_the_unnamed():
    @dataclasses.dataclass
    class Affine:
        w: verigrad.Tensor
        b: verigrad.Tensor

        def __call__(self, x):
            return x @ self.w + self.b

    model = Affine(verigrad.ones(2, 3), verigrad.zeros(3))
    assert _input_names(trace(lambda x: model(x), spec([B, 2]))) == ["x", "model.w", "model.b"]
    assert _input_names(trace(model, spec([B, 2]))) == ["x", "w", "b"]
    layer = nn.Linear(2, 2)
    assert _input_names(trace(layer, spec([B, 2]))) == ["x", "weight", "bias"]
    hidden = {(0, 1): verigrad.ones(2)}  # not reachable by name
    assert _input_names(trace(lambda x: x * hidden[(0, 1)], spec([B, 2]))) == ["x", "c0"]


def test_input_names_stay_unique():
    a, b = verigrad.ones(2), verigrad.zeros(2)
    program = trace(lambda x: x * a + b, spec([2]), names={id(a): "x", id(b): "x"})
    assert _input_names(program) == ["x", "x_1", "x_2"]


def test_updates_of_captured_tensors_are_outputs_by_name():
    count = verigrad.tensor(np.array(0.0))
    total = verigrad.zeros(3)

    def accumulate(x):
        count.assign(count + 1)
        total.assign(total + x)
        total.assign(total * 2)  # the last value is the one written back
        return total

    program = trace(accumulate, spec([3]))
    program.verify()
    assert list(program.updates) == ["count", "total"]
    assert program.updates["total"] is program.outputs[0] is program.instrs[-1].out
    assert str(program) == (
        "program(%0 x: f32[3], %1 count: f64[], %2 total: f32[3]) {\n"
        "  %3: f64[] = const 1.0\n"
        "  %4: f64[] = add %1 %3\n"
        "  %5: f32[3] = add %2 %0\n"
        "  %6: f32[] = const 2.0\n"
        "  %7: f32[3] = mul %5 %6\n"
        "  return %7\n"
        "  count <- %4\n"
        "  total <- %7\n"
        "}"
    )


# errors ---------------------------------------------------------------------------------------------
def test_a_shape_error_while_tracing_points_at_the_users_line():
    w = verigrad.ones(5, 3)

    def bad(x):
        return x @ w  # the line the error must name

    line = bad.__code__.co_firstlineno + 1
    with pytest.raises(ShapeError) as info:
        trace(bad, spec([B, 4]))
    message = str(info.value)
    assert f"{__file__}:{line}" in message and "matmul(f32[B, 4], f32[5, 3])" in message


def test_trace_refuses_what_is_not_a_spec():
    with pytest.raises(TypeError, match=r"argument 0 of trace must be a verigrad\.spec"):
        trace(lambda x: x, [2, 3])


def test_the_verifier_finds_broken_programs():
    program = trace(lambda x: (x * 2).relu(), spec([B, 3]))
    mul, relu = program.instrs[1], program.instrs[2]
    swapped = program.copy([program.instrs[0], relu, mul])
    with pytest.raises(IRError, match="uses %2 before it is defined"):
        swapped.verify()
    wrong = program.copy(
        [*program.instrs[:2], Instr(relu.op, relu.args, {}, program.new_value(verigrad.Spec((B, 4))))]
    )
    wrong.outputs = [wrong.instrs[-1].out]
    with pytest.raises(IRError, match="the op's rules give f32\\[B,3\\]"):
        wrong.verify()
    twice = program.copy([*program.instrs, program.instrs[-1]])
    with pytest.raises(IRError, match="defines %3 a second time"):
        twice.verify()


# gradients ------------------------------------------------------------------------------------------
def _f(x, w):
    return ((x @ w).tanh() * x.sum(axis=1, keepdim=True)).mean() + (w * w).sum()


def _finite_difference(f, args, i, eps=1e-6):
    base = [a.numpy().copy() for a in args]
    out = np.zeros_like(base[i])
    for idx in np.ndindex(*base[i].shape):
        plus = [b.copy() for b in base]
        minus = [b.copy() for b in base]
        plus[i][idx] += eps
        minus[i][idx] -= eps
        up = float(f(*map(verigrad.tensor, plus)))
        down = float(f(*map(verigrad.tensor, minus)))
        out[idx] = (up - down) / (2 * eps)
    return out


def test_grad_matches_finite_differences(rng):
    x = verigrad.tensor(rng.standard_normal((4, 3)))  # f64: what gradient checks use
    w = verigrad.tensor(rng.standard_normal((3, 2)))
    gx, gw = verigrad.grad(_f, argnums=(0, 1))(x, w)
    assert gx.dtype is verigrad.f64 and gx.shape == (4, 3) and gw.shape == (3, 2)
    np.testing.assert_allclose(gx.numpy(), _finite_difference(_f, [x, w], 0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw.numpy(), _finite_difference(_f, [x, w], 1), rtol=1e-6, atol=1e-8)


def test_grad_is_the_tape_and_leaves_grad_alone(rng):
    x = verigrad.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    w = verigrad.tensor(rng.standard_normal((3, 2)).astype(np.float32))
    gw = verigrad.grad(_f, argnums=1)(x, w)  # an int argnums: one gradient, not a tuple
    assert isinstance(gw, verigrad.Tensor) and not gw.requires_grad
    assert x.grad is None and w.grad is None and not w.requires_grad
    leaf_x, leaf_w = x.detach().requires_grad_(), w.detach().requires_grad_()
    _f(leaf_x, leaf_w).backward()
    assert gw.numpy().tobytes() == leaf_w.grad.numpy().tobytes()
    value, (gx, gw2) = verigrad.value_and_grad(_f, argnums=(0, -1))(x, w)
    assert value.numpy().tobytes() == _f(x, w).numpy().tobytes()
    assert gx.numpy().tobytes() == leaf_x.grad.numpy().tobytes()
    assert gw2.numpy().tobytes() == gw.numpy().tobytes()


def test_grad_treats_parameters_as_constants():
    layer = nn.Linear(3, 1)
    x = verigrad.ones(2, 3)
    g = verigrad.grad(lambda x: layer(x).sum())(x)
    np.testing.assert_array_equal(g.numpy(), np.repeat(layer.weight.numpy(), 2, axis=0))
    assert layer.weight.grad is None and layer.bias.grad is None


def test_grad_details():
    x = verigrad.tensor([1.0, 2.0, 3.0])
    unused = verigrad.grad(lambda a, b: (a * a).sum(), argnums=1)(x, x)
    np.testing.assert_array_equal(unused.numpy(), [0, 0, 0])
    second = verigrad.grad(lambda a: verigrad.grad(lambda b: (b * b * b).sum())(a).sum())(x)
    np.testing.assert_array_equal(second.numpy(), [6, 12, 18])  # d/dx sum(3x^2) = 6x
    (value, aux), g = verigrad.value_and_grad(lambda a: ((a * a).sum(), a + 1), has_aux=True)(x)
    assert float(value) == 14 and aux.tolist() == [2, 3, 4] and g.tolist() == [2, 4, 6]
    g, aux = verigrad.grad(lambda a: ((a * 2).sum(), "aux"), has_aux=True)(x)
    assert g.tolist() == [2, 2, 2] and aux == "aux"
    assert verigrad.grad(lambda a: (a * 3).sum())(np.array([1.0, 2.0])).tolist() == [3, 3]


@pytest.mark.parametrize(
    ("fn", "args", "argnums", "error", "match"),
    [
        (lambda a: a * 2, (verigrad.ones(3),), 0, TypeError, "single floating value"),
        (lambda a: a.sum(), (verigrad.tensor([1, 2]),), 0, TypeError, "argument 0 is i64"),
        (lambda a: a.sum(), (verigrad.ones(3),), 1, ValueError, "argnums 1 is out of range"),
        (lambda a: a.sum(), (verigrad.ones(3),), (0, 0), ValueError, "repeats"),
        (lambda a: a.sum(), (verigrad.ones(3),), "0", TypeError, "argnums must be"),
        (lambda a: "x", (verigrad.ones(3),), 0, TypeError, "return a tensor"),
    ],
)
def test_grad_errors(fn, args, argnums, error, match):
    with pytest.raises(error, match=match):
        verigrad.grad(fn, argnums=argnums)(*args)


def test_has_aux_needs_a_pair():
    with pytest.raises(TypeError, match="must return a pair"):
        verigrad.grad(lambda a: a.sum(), has_aux=True)(verigrad.ones(3))


def test_grad_traced_prints_a_backward_section_and_runs_like_the_tape(rng):
    n, din = dims("n din")
    program = trace(verigrad.grad(_f, argnums=(0, 1)), spec([n, din]), spec([din, 2]))
    program.verify()
    text = str(program)
    forward, backward = text.split("\nbackward:\n")
    assert "= tanh" in forward and "= tanh_deriv" in backward and "= full" in backward
    assert len(program.outputs) == 2
    assert [v.spec for v in program.outputs] == [spec([n, din]), spec([din, 2])]
    x = verigrad.tensor(rng.standard_normal((5, 3)).astype(np.float32))
    w = verigrad.tensor(rng.standard_normal((3, 2)).astype(np.float32))
    eager = verigrad.grad(_f, argnums=(0, 1))(x, w)
    compiled = verigrad.compile(verigrad.grad(_f, argnums=(0, 1)))(x, w)
    for a, b in zip(eager, compiled):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_traced_gradients_are_the_forward_then_the_tapes_vjps():
    layer = nn.Linear(3, 2)

    def f(x, w):
        return (layer(x @ w).relu() * 2).sum()

    specs = (spec([B, 3]), spec([3, 3]))
    forward = str(trace(f, *specs)).split("\n  return")[0]
    for argnums in (0, (0, 1), 1):
        program = trace(verigrad.grad(f, argnums=argnums), *specs).verify()
        assert str(program).startswith(forward + "\nbackward:\n")
        nums = (argnums,) if isinstance(argnums, int) else argnums
        assert [v.spec for v in program.outputs] == [specs[i] for i in nums]
    grads = trace(verigrad.grad(f, argnums=1), *specs)
    with_value = trace(verigrad.value_and_grad(f, argnums=1), *specs).verify()
    (value,) = trace(f, *specs).outputs
    (g,) = grads.outputs
    assert str(with_value) == str(grads).replace(f"return %{g.id}", f"return %{value.id}, %{g.id}")
    with pytest.raises(TypeError, match="single floating value"):
        trace(verigrad.grad(lambda x: x * 2), spec([3]))


def test_dtype_errors_while_tracing_are_dtype_errors():
    with pytest.raises(DTypeError):
        trace(lambda x: x.sqrt() & x, spec([3]))
