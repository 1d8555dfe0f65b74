"""Autograd's rules against hand-computed values: only float results carry history, a graph is freed by
backward unless retained, `verigrad.autograd.grad` is PyTorch's (a tuple of gradients) while
`verigrad.grad` is JAX's transform, gradients at NaN and singular points, and the arguments refused
(argmax of bool, a bool dim, an integer divisor of zero). PyTorch's own answers:
tests/parity/test_autograd_rules_torch.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad import nn
from verigrad.ir import trace
from verigrad.shapes import spec

NAN = math.nan


def _leaf(values, dtype: str = "f64") -> verigrad.Tensor:
    return verigrad.tensor(values, dtype=dtype, requires_grad=True)


def _same(t: verigrad.Tensor | None, want: list) -> None:
    assert t is not None
    np.testing.assert_array_equal(t.numpy(), np.array(want, dtype=t.numpy().dtype))


# 1. only a float result has a gradient ------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.long(),
        lambda x: x.int(),
        lambda x: x.to(dtype=verigrad.int64),
        lambda x: x.bool(),
        lambda x: x > 0,
        lambda x: x == x,
        lambda x: x.argmax(),
        lambda x: x.argmin(0),
        lambda x: x.isnan(),
        lambda x: x.max(0).indices,
    ],
)
def test_a_non_float_result_records_no_history(fn) -> None:
    y = fn(_leaf([1.5, -2.0, 3.0]))
    assert not y.dtype.is_float
    assert y.requires_grad is False and y.grad_fn is None


def test_a_float_result_of_an_integer_cast_is_a_constant() -> None:
    x = _leaf([1.5, -2.7])
    y = x.long().double() * x  # the cast back to float starts from a constant
    y.sum().backward()
    _same(x.grad, [1.0, -2.0])


def test_a_traced_integer_result_records_no_history() -> None:
    w = _leaf([1.0, 2.0], "f32")
    seen = []

    def f(x):
        seen.append((x * w).long().requires_grad)
        return (x * w).sum()

    trace(f, spec([2]))
    assert seen == [False]


# 2. retain_graph ---------------------------------------------------------------------------------------
def test_a_second_backward_through_a_freed_graph_raises() -> None:
    x = _leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    _same(x.grad, [2.0, 4.0])  # the refused pass added nothing


def test_a_shared_part_of_a_freed_graph_raises_too() -> None:
    x = _leaf([1.0, 2.0])
    h = x.exp()
    (h * 2).sum().backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        (h * 3).sum().backward()


def test_a_node_that_saved_nothing_runs_again_one_that_saved_a_value_raises() -> None:
    """As PyTorch's: add and sum save no tensor, so a second pass through them runs; mul saved x."""
    x = _leaf([1.0, 2.0])
    y = (x + 1).sum()
    y.backward()
    y.backward()
    _same(x.grad, [2.0, 2.0])
    z = (x * x).sum()
    z.backward()
    with pytest.raises(RuntimeError, match="second time"):
        z.backward()


def test_retain_graph_keeps_it_for_one_more_pass() -> None:
    x = _leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    _same(x.grad, [4.0, 8.0])
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_create_graph_retains_the_graph() -> None:
    x = _leaf([1.0, 2.0])
    y = (x**3).sum()
    y.backward(create_graph=True)  # 3 x^2
    (g,) = verigrad.autograd.grad(x.grad.sum(), x)  # 6 x, through the retained graph
    _same(g, [6.0, 12.0])
    y.backward()  # retained: accumulates once more
    _same(x.grad.detach(), [6.0, 24.0])


def test_backward_takes_pytorchs_positional_order() -> None:
    x = _leaf([1.0, 2.0])
    y = x * 3
    y.backward(verigrad.tensor([1.0, 2.0], dtype="f64"), True)  # gradient, retain_graph
    y.backward(verigrad.tensor([1.0, 1.0], dtype="f64"))
    _same(x.grad, [6.0, 9.0])


def test_autograd_backward_sums_several_roots_and_limits_to_inputs() -> None:
    x, w = _leaf([1.0, 2.0]), _leaf([3.0])
    verigrad.autograd.backward([(x * x).sum(), x * w], [None, verigrad.tensor([1.0, 10.0], dtype="f64")])
    _same(x.grad, [2.0 + 3.0, 4.0 + 30.0])
    _same(w.grad, [21.0])
    x.grad = w.grad = None
    verigrad.autograd.backward((x * w).sum(), inputs=[w])
    assert x.grad is None
    _same(w.grad, [3.0])


def test_backward_refuses_what_pytorch_refuses() -> None:
    x = _leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        x.detach().sum().backward()
    with pytest.raises(RuntimeError, match="2 gradients for 1 tensors"):
        verigrad.autograd.backward((x * 2).sum(), [None, None])


def test_an_optimizer_closure_and_the_transform_run_many_times() -> None:
    layer = nn.Linear(2, 1).double()
    x = verigrad.tensor([[1.0, 2.0], [3.0, -1.0]], dtype="f64")
    opt = verigrad.optim.LBFGS(layer.parameters(), max_iter=5)

    def closure():
        opt.zero_grad()
        loss = layer(x).pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    opt.step(closure)
    f = verigrad.grad(lambda a: (a * a * a).sum())
    _same(f(verigrad.tensor([1.0, 2.0], dtype="f64")), [3.0, 12.0])
    _same(f(verigrad.tensor([1.0, 2.0], dtype="f64")), [3.0, 12.0])


# 3. verigrad.autograd.grad is PyTorch's -----------------------------------------------------------------
def test_autograd_grad_returns_a_tuple_and_leaves_grad_alone() -> None:
    x = _leaf([1.0, 2.0])
    out = verigrad.autograd.grad((x * x).sum(), x)
    assert isinstance(out, tuple) and len(out) == 1
    _same(out[0], [2.0, 4.0])
    assert x.grad is None and not out[0].requires_grad


def test_autograd_grad_through_an_intermediate_input_is_the_total_derivative() -> None:
    x = _leaf([1.0, 2.0])
    h = x * 2
    gx, gh = verigrad.autograd.grad((h * h).sum() + x.sum(), [x, h])
    _same(gx, [9.0, 17.0])  # 8 x + 1: through h too
    _same(gh, [4.0, 8.0])


def test_autograd_grad_unused_inputs() -> None:
    x, unused = _leaf([1.0, 2.0]), _leaf([5.0])
    with pytest.raises(RuntimeError, match="index 1 appears to not have been used"):
        verigrad.autograd.grad((x * 2).sum(), [x, unused])
    gx, gu = verigrad.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    _same(gx, [2.0, 2.0])
    assert gu is None
    _, gu = verigrad.autograd.grad((x * 2).sum(), [x, unused], materialize_grads=True)
    _same(gu, [0.0])
    with pytest.raises(ValueError, match="allow_unused"):
        verigrad.autograd.grad((x * 2).sum(), [x], allow_unused=False, materialize_grads=True)


def test_autograd_grad_create_graph_gives_higher_derivatives() -> None:
    x = _leaf([1.0, 2.0])
    (g,) = verigrad.autograd.grad((x**3).sum(), x, create_graph=True)
    _same(g.detach(), [3.0, 12.0])
    assert g.requires_grad
    (g2,) = verigrad.autograd.grad(g.sum(), x)
    _same(g2, [6.0, 12.0])


def test_autograd_grad_seeds_and_refusals() -> None:
    x = _leaf([1.0, 2.0])
    (g,) = verigrad.autograd.grad(x * x, x, grad_outputs=verigrad.tensor([1.0, 10.0], dtype="f64"))
    _same(g, [2.0, 40.0])
    with pytest.raises(RuntimeError, match="does not require grad"):
        verigrad.autograd.grad((x * 2).sum(), verigrad.ones(2))
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        verigrad.autograd.grad(x * 2, x)
    y = (x * x).sum()
    verigrad.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="second time"):
        verigrad.autograd.grad(y, x)
    with pytest.raises(NotImplementedError, match="is_grads_batched"):
        verigrad.autograd.grad((x * 2).sum(), x, is_grads_batched=True)


def test_verigrad_grad_is_the_function_transform() -> None:
    dfdx = verigrad.grad(lambda a: (a * a).sum())
    _same(dfdx(verigrad.tensor([1.0, 3.0], dtype="f64")), [2.0, 6.0])
    _same(verigrad.value_and_grad(lambda a: (a * a).sum())(verigrad.tensor([2.0], dtype="f64"))[1], [4.0])


# 4. gradients at NaN and singular points -----------------------------------------------------------------
def test_maximum_and_minimum_give_both_operands_the_gradient_at_a_nan() -> None:
    for fn in (verigrad.maximum, verigrad.minimum):
        x, y = _leaf([NAN, 1.0, 2.0, 0.0]), _leaf([1.0, NAN, 2.0, 5.0])
        fn(x, y).sum().backward()
        small, large = ([0.0], [1.0]) if fn is verigrad.maximum else ([1.0], [0.0])
        _same(x.grad, [1.0, 1.0, 0.5, *small])
        _same(y.grad, [1.0, 1.0, 0.5, *large])


def test_clamp_gives_a_nan_no_gradient() -> None:
    x = _leaf([NAN, 0.5, 3.0, -3.0])
    out = x.clamp(-1.0, 1.0)
    assert math.isnan(out[0].item())
    out.sum().backward()
    _same(x.grad, [0.0, 1.0, 0.0, 0.0])


def test_max_of_all_shares_the_gradient_among_the_nans_and_amax_gives_nan() -> None:
    for name in ("max", "min"):
        x = _leaf([[NAN, 1.0, 3.0], [3.0, NAN, 0.0]])
        getattr(x, name)().backward()
        _same(x.grad, [[0.5, 0.0, 0.0], [0.0, 0.5, 0.0]])
        x = _leaf([[NAN, 1.0], [3.0, 3.0]])
        getattr(x, "a" + name)().backward()
        assert np.isnan(x.grad.numpy()).all()
    x = _leaf([[1.0, 3.0], [3.0, 2.0]])
    x.max().backward()
    _same(x.grad, [[0.0, 0.5], [0.5, 0.0]])


def test_atan2_at_the_origin_has_signed_zero_gradients() -> None:
    y, x = _leaf([0.0, -0.0, 0.0, 1.0]), _leaf([0.0, 0.0, -0.0, 0.0])
    verigrad.atan2(y, x).sum().backward()
    _same(y.grad, [0.0, 0.0, -0.0, 0.0])
    _same(x.grad, [-0.0, 0.0, -0.0, -1.0])
    assert list(np.signbit(y.grad.numpy())) == [False, False, True, False]
    assert list(np.signbit(x.grad.numpy())) == [True, False, True, True]


def test_pow_exponent_gradient_is_formed_in_the_result_dtype() -> None:
    base, exponent = _leaf([1.3, 2.7], "f32"), _leaf([0.3, 1.1])
    out = base**exponent
    assert out.dtype == verigrad.f64
    out.sum().backward()
    log_in_f64 = np.log(np.array([1.3, 2.7], dtype=np.float32).astype(np.float64))
    np.testing.assert_array_equal(exponent.grad.numpy(), out.detach().numpy() * log_in_f64)
    assert base.grad.dtype == verigrad.f32


# 5. arguments refused -------------------------------------------------------------------------------------
def test_argmax_and_argmin_refuse_bool_but_max_along_a_dim_takes_it() -> None:
    m = verigrad.tensor([[True, False], [False, True]])
    for fn in (lambda: m.argmax(), lambda: m.argmin(1), lambda: verigrad.argmax(m, 0)):
        with pytest.raises(TypeError, match="does not support bool"):
            fn()
    _same(m.max(0).indices, [0, 1])
    _same(m.min(1).indices, [1, 0])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.sum(dim=True),
        lambda x: x.sum(axis=True),
        lambda x: x.amax(dim=True),
        lambda x: x.prod(True),
        lambda x: x.argmax(dim=True),
        lambda x: x.logsumexp(True),
        lambda x: x.std(dim=False),
    ],
)
def test_a_bool_is_no_dim(fn) -> None:
    with pytest.raises(TypeError, match="not the bool"):
        fn(verigrad.ones(2, 3))


def test_a_bool_inside_a_tuple_of_dims_is_an_int_as_in_pytorch() -> None:
    assert verigrad.ones(2, 3).sum((0, True)).item() == 6.0


# 6. an integer divisor of zero ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda: verigrad.tensor([3, 4]) % 0,
        lambda: verigrad.tensor([3, 4]) % verigrad.tensor([1, 0]),
        lambda: 5 % verigrad.tensor([0, 1]),
        lambda: verigrad.fmod(verigrad.tensor([3, 4], dtype="i32"), 0),
    ],
)
def test_an_integer_remainder_by_zero_raises(fn) -> None:
    with pytest.raises(ZeroDivisionError, match="integer division"):
        fn()


def test_a_float_remainder_by_zero_is_nan_and_integers_by_nonzero_are_pythons() -> None:
    assert np.isnan((verigrad.tensor([3.0, -4.0]) % 0).numpy()).all()
    _same(verigrad.tensor([3, -4]) % 3, [0, 2])
    _same(verigrad.fmod(verigrad.tensor([3, -4]), 3), [0, -1])
