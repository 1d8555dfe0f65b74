"""autograd's API as an outside program meets it, against torch 2.13: autograd.grad's flags, backward's
inputs and accumulation, tensor hooks, grad modes (as functions, context managers and decorators, of
generator functions too), anomaly detection, autograd.Function's ctx, and autograd.functional's
jacobian / hessian / vjp / jvp / hvp with their v, strict and strategy rules. Each case compares the
values (dtype, shape, None or not), the type of the error raised and the categories of the warnings."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad


def _plain(result: Any) -> Any:
    """A result as NumPy arrays, Python values and None (tuples kept)."""
    if isinstance(result, tuple | list):
        return tuple(_plain(r) for r in result)
    if hasattr(result, "detach"):
        return result.detach().numpy()
    return result


def _outcome(call: Callable[[Any], Any], lib: Any) -> tuple[Any, list[str]]:
    """What `call(lib)` gives (or the type of what it raises) and the warnings' categories."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            result = _plain(call(lib))
        except Exception as e:
            result = ("raises", type(e).__name__)
        finally:
            lib.set_grad_enabled(True)
    return result, sorted({w.category.__name__ for w in seen})


def _same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), f"verigrad {ours!r}, torch {theirs!r}"
        for a, b in zip(ours, theirs):
            _same(a, b)
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), f"verigrad {ours!r}, torch {theirs!r}"
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=0)
    else:
        assert ours == theirs, f"verigrad {ours!r}, torch {theirs!r}"


CASES: dict[str, Callable[[Any], Any]] = {}


def case(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    CASES[fn.__name__] = fn
    return fn


def x(lib: Any, requires_grad: bool = True) -> Any:
    return lib.tensor([0.5, -1.0, 2.0], requires_grad=requires_grad)


# autograd.grad and backward ----------------------------------------------------------------------
@case
def grad_unused(lib):
    a, b = x(lib), x(lib)
    return lib.autograd.grad((a * 2).sum(), (a, b), allow_unused=True)


@case
def grad_unused_raises(lib):
    a, b = x(lib), x(lib)
    return lib.autograd.grad((a * 2).sum(), (a, b))


@case
def grad_materialized(lib):
    a, b = x(lib), x(lib)
    return lib.autograd.grad((a * 2).sum(), (a, b), materialize_grads=True)


@case
def grad_materialized_not_allowed(lib):
    a, b = x(lib), x(lib)
    return lib.autograd.grad((a * 2).sum(), (a, b), allow_unused=False, materialize_grads=True)


@case
def grad_graph_freed(lib):
    a = x(lib)
    y = (a.tanh() * a).sum()
    lib.autograd.grad(y, a)
    return lib.autograd.grad(y, a)


@case
def grad_graph_retained(lib):
    a = x(lib)
    y = (a.tanh() * a).sum()
    lib.autograd.grad(y, a, retain_graph=True)
    return lib.autograd.grad(y, a)


@case
def grad_only_inputs_false_warns(lib):
    a = x(lib)
    return lib.autograd.grad((a * 2).sum(), a, only_inputs=False)


@case
def grad_outputs_wrong_shape(lib):
    a = x(lib)
    return lib.autograd.grad(a * 2, a, grad_outputs=lib.ones(2))


@case
def grad_of_non_scalar_without_grad_outputs(lib):
    a = x(lib)
    return lib.autograd.grad(a * 2, a)


@case
def grad_input_without_grad(lib):
    a, b = x(lib), x(lib, False)
    return lib.autograd.grad((a * b).sum(), (a, b))


@case
def grad_leaves_dot_grad_alone(lib):
    a = x(lib)
    lib.autograd.grad((a * a).sum(), a)
    return a.grad


def _double(lib, f, *inputs):
    g = lib.autograd.grad(f(*inputs), inputs, create_graph=True)
    return g, lib.autograd.grad(sum((gi * gi).sum() for gi in g), inputs)


@case
def double_backward_tanh_softmax_layer_norm(lib):
    w = lib.tensor([1.0, 2.0, 3.0])
    f = lambda a: ((a.tanh() + a.softmax(0) + lib.nn.functional.layer_norm(a, (3,))) * w).sum()
    return _double(lib, f, x(lib))


@case
def double_backward_matmul_norm_where_max(lib):
    a = lib.tensor([[1.0, 2.0], [3.0, -4.0]], requires_grad=True)
    f = lambda a: (a @ a).norm() + lib.where(a > 0, a * a, a * a * a).sum() + a.max() ** 2
    return _double(lib, f, a)


@case
def no_graph_without_create_graph(lib):
    a = x(lib)
    (g,) = lib.autograd.grad(a.tanh().sum(), a)
    return g.requires_grad, lib.autograd.grad(g.sum(), a)


@case
def backward_accumulates(lib):
    a = x(lib)
    (a * a).sum().backward()
    (a * 3).sum().backward()
    return a.grad


@case
def grads_share_no_memory_with_the_seed_or_each_other(lib):
    a, b = x(lib), x(lib)
    seed = lib.ones(3)
    (a + b).backward(seed)
    a.grad.mul_(2)  # as clip_grad_norm_ scales each .grad in place
    return a.grad, b.grad, seed


@case
def scalar_grads_share_no_memory(lib):
    a, b = lib.tensor(1.0, requires_grad=True), lib.tensor(3.0, requires_grad=True)
    (a + b).backward()
    a.grad.mul_(2)
    return a.grad, b.grad


@case
def backward_inputs_grads_share_no_memory(lib):
    a, b = x(lib), x(lib)
    seed = lib.ones(3)
    (a.view(3) + b).backward(seed, inputs=[a, b])
    b.grad.zero_()
    return a.grad, b.grad, seed


@case
def backward_accumulates_into_the_same_grad(lib):
    a = x(lib)
    (a * a).sum().backward()
    held = a.grad
    (a * 3).sum().backward()
    return held is a.grad, held


@case
def backward_accumulates_into_an_assigned_grad(lib):
    a, b = x(lib), x(lib)
    a.grad = lib.ones(3)
    b.grad = held = lib.zeros(3)  # zero_grad(set_to_none=False) keeps such a tensor
    (a * b * 3).sum().backward()
    return a.grad, held is b.grad, held


@case
def backward_inputs(lib):
    a, b = x(lib), x(lib)
    (a * b).sum().backward(inputs=[a])
    return a.grad, b.grad


@case
def backward_empty_inputs(lib):
    a = x(lib)
    (a * a).sum().backward(inputs=[])


@case
def backward_non_leaf_input(lib):
    a = x(lib)
    c = a * 2
    (c * c).sum().backward(inputs=[c])
    return a.grad, c.grad


@case
def retain_grad(lib):
    a = x(lib)
    b = a * 2
    b.retain_grad()
    y = (b * b).sum()
    y.backward(retain_graph=True)
    y.backward()
    return b.grad, b.retains_grad, a.retains_grad


@case
def retain_grad_without_requires_grad(lib):
    x(lib, False).retain_grad()


# hooks ---------------------------------------------------------------------------------------------
@case
def hooks_in_order_and_retain_grad_last(lib):
    a = x(lib)
    b = a * 2
    seen = []
    b.retain_grad()
    b.register_hook(lambda g: seen.append(1))
    b.register_hook(lambda g: g * 3)
    b.register_hook(lambda g: seen.append(float(g[0])))
    (b * b).sum().backward()
    return a.grad, b.grad, tuple(seen)


@case
def hook_on_leaf_and_removed(lib):
    a, b = x(lib), x(lib)
    a.register_hook(lambda g: g * 10)
    handle = b.register_hook(lambda g: g * 10)
    handle.remove()
    handle.remove()
    (a * b).sum().backward()
    return a.grad, b.grad


@case
def hook_without_requires_grad(lib):
    x(lib, False).register_hook(lambda g: g)


@case
def post_accumulate_grad_hook(lib):
    a = x(lib)
    seen = []
    a.register_post_accumulate_grad_hook(lambda t: seen.append(float(t.grad.sum())))
    (a * a).sum().backward()
    (a * a).sum().backward()
    lib.autograd.grad((a * a).sum(), a)
    return tuple(seen)


@case
def post_accumulate_grad_hook_returning_a_value(lib):
    a = x(lib)
    a.register_post_accumulate_grad_hook(lambda t: t * 0)
    (a * a).sum().backward()
    return a.grad


@case
def post_accumulate_grad_hook_on_non_leaf(lib):
    (x(lib) * 2).register_post_accumulate_grad_hook(lambda t: None)


# grad modes ----------------------------------------------------------------------------------------
@case
def set_grad_enabled_as_function(lib):
    lib.set_grad_enabled(False)
    off = (x(lib) * 2).requires_grad, lib.is_grad_enabled()
    lib.set_grad_enabled(True)
    return off, (x(lib) * 2).requires_grad


@case
def set_grad_enabled_decorates(lib):
    @lib.set_grad_enabled(False)
    def f(a):
        return (a * 2).requires_grad

    return f(x(lib)), lib.is_grad_enabled()


@case
def set_grad_enabled_takes_a_bool_only(lib):
    lib.set_grad_enabled("yes")


@case
def set_grad_enabled_takes_no_int(lib):
    lib.set_grad_enabled(1)


@case
def set_grad_enabled_clone(lib):
    mode = lib.set_grad_enabled(False)
    mode.clone()
    return lib.is_grad_enabled()


@case
def enable_grad_inside_no_grad(lib):
    a = x(lib)

    @lib.enable_grad
    def f():
        return (a * 2).requires_grad

    with lib.no_grad():
        with lib.enable_grad():
            inner = (a * 2).requires_grad
        return inner, f(), (a * 2).requires_grad


def _generator_modes(lib, decorate):
    @decorate
    def steps(a):
        yield (a * 2).requires_grad
        yield lib.is_grad_enabled()

    gen = steps(x(lib))
    first = next(gen)
    between = lib.is_grad_enabled()
    return first, between, next(gen)


@case
def no_grad_decorates_a_generator(lib):
    return _generator_modes(lib, lib.no_grad())


@case
def bare_no_grad_decorates_a_generator(lib):
    return _generator_modes(lib, lib.no_grad)


@case
def inference_mode_decorates_a_generator(lib):
    return _generator_modes(lib, lib.inference_mode())


@case
def enable_grad_decorates_a_generator(lib):
    with lib.no_grad():
        return _generator_modes(lib, lib.enable_grad())


@case
def set_grad_enabled_decorates_a_generator(lib):
    return _generator_modes(lib, lib.set_grad_enabled(False))


@case
def detect_anomaly_warns(lib):
    a = lib.tensor([0.0, 1.0], requires_grad=True)
    with lib.autograd.detect_anomaly(check_nan=False):
        a.sqrt().sum().backward()
    return a.grad


@case
def set_detect_anomaly_raises_on_nan(lib):
    a = lib.tensor([0.0, 1.0], requires_grad=True)
    before = lib.is_anomaly_enabled()
    with lib.autograd.set_detect_anomaly(True):
        inside = lib.is_anomaly_enabled()
        try:
            (a.sqrt() * 0).sum().backward()
        except RuntimeError:
            return before, inside, "raised"
    return before, inside


# autograd.Function ---------------------------------------------------------------------------------
@case
def function_ctx(lib):
    class Scaled(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, k):
            ctx.save_for_backward(a, None)
            ctx.k = k
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            a, nothing = ctx.saved_tensors
            Scaled.seen = ctx.needs_input_grad, nothing
            return g * ctx.k, g * a * ctx.k, None

    a, b = x(lib), x(lib, False)
    y = Scaled.apply(a, b, 3.0)
    y.sum().backward()
    return y, a.grad, Scaled.seen


@case
def function_setup_context_and_none_grads(lib):
    class Mul(lib.autograd.Function):
        @staticmethod
        def forward(a, b):
            return a * b

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            return None, g * ctx.saved_tensors[0]

    a, b = x(lib), x(lib)
    Mul.apply(a, b).sum().backward()
    return a.grad, b.grad


@case
def function_materialize_grads(lib):
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, materialize):
            ctx.set_materialize_grads(materialize)
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            Two.seen += ((g1 is None, g2 is None),)
            return g1 * 2 if g2 is None else g1 * 2 + g2 * 3, None

    Two.seen = ()
    for materialize in (True, False):
        a = x(lib)
        Two.apply(a, materialize)[0].sum().backward()
    return Two.seen, a.grad


@case
def function_mark_non_differentiable(lib):
    class Sort(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            v, i = a.sort()
            ctx.mark_non_differentiable(i)
            ctx.save_for_backward(i)
            return v, i

        @staticmethod
        def backward(ctx, gv, gi):
            (i,) = ctx.saved_tensors
            return lib.zeros_like(gv).scatter(0, i, gv)

    a = x(lib)
    v, i = Sort.apply(a)
    (v * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
    return v.requires_grad, i.requires_grad, a.grad


@case
def function_mark_dirty(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = x(lib)
    b = a * 1
    c = Double.apply(b)
    c.sum().backward()
    return c is b, a.grad


@case
def function_dirty_input_not_returned(lib):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g * 2

    Double.apply(x(lib) * 1)


@case
def function_gradchecks(lib):
    class Sin(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a.sin()

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0].cos()

    class Wrong(Sin):
        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0].detach().cos()

    a = lib.tensor([0.5, 1.0], dtype=lib.float64, requires_grad=True)
    checks = lib.autograd.gradcheck(Sin.apply, (a,)), lib.autograd.gradgradcheck(Sin.apply, (a,))
    return (*checks, lib.autograd.gradgradcheck(Wrong.apply, (a,), raise_exception=False))


# autograd.functional -------------------------------------------------------------------------------
def _f(lib):
    return lib.autograd.functional


@case
def jacobian_of_tuples(lib):
    return _f(lib).jacobian(lambda a, b: (a * b, a.sum() * b), (x(lib, False), x(lib, False) * 2))


@case
def jacobian_of_list_inputs(lib):
    return _f(lib).jacobian(lambda a, b: a * b, [x(lib, False), x(lib, False)])


@case
def jacobian_of_a_number_input(lib):
    return _f(lib).jacobian(lambda a, k: a * k, (x(lib, False), 2.0))


@case
def jacobian_of_a_function_returning_a_number(lib):
    return _f(lib).jacobian(lambda a: 3.0, x(lib, False))


@case
def vjp_of_list_v(lib):
    return _f(lib).vjp(lambda a: a.exp(), x(lib, False), [lib.ones(3)])


@case
def jacobian_strict_and_vectorize(lib):
    return _f(lib).jacobian(lambda a: a * 2, x(lib, False), strict=True, vectorize=True)


@case
def hessian_of_a_linear_function(lib):
    return _f(lib).hessian(lambda a: (a * 2).sum(), x(lib, False))


@case
def vjp_of_a_constant(lib):
    return _f(lib).vjp(lambda a: lib.ones(3), x(lib, False), lib.ones(3))


@case
def vjp_of_v_of_the_wrong_length(lib):
    return _f(lib).vjp(lambda a: (a, a * 2), x(lib, False), (lib.ones(3),))


@case
def jacobian_strict_unused_input(lib):
    return _f(lib).jacobian(lambda a, b: a.exp(), (x(lib, False), x(lib, False)), strict=True)


@case
def jacobian_unused_input(lib):
    return _f(lib).jacobian(lambda a, b: a.exp(), (x(lib, False), x(lib, False)))


@case
def jacobian_forward_mode_needs_vectorize(lib):
    return _f(lib).jacobian(lambda a: a.exp(), x(lib, False), strategy="forward-mode")


@case
def hessian_forward_outer_needs_vectorize(lib):
    f = lambda a: (a**3).sum()
    return _f(lib).hessian(f, x(lib, False), outer_jacobian_strategy="forward-mode")


@case
def hessian_of_two(lib):
    return _f(lib).hessian(lambda a, b: (a * a * b).sum(), (x(lib, False), x(lib, False)))


@case
def vjp_without_v_of_a_scalar(lib):
    return _f(lib).vjp(lambda a: a.exp().sum(), x(lib, False))


@case
def vjp_without_v_of_a_vector(lib):
    return _f(lib).vjp(lambda a: a.exp(), x(lib, False))


@case
def vjp_strict_unused_input(lib):
    return _f(lib).vjp(lambda a, b: a.exp(), (x(lib, False), x(lib, False)), lib.ones(3), strict=True)


@case
def jvp_without_v_of_one_element(lib):
    return _f(lib).jvp(lambda a: a.exp(), lib.tensor(0.5))


@case
def jvp_without_v_of_a_vector(lib):
    return _f(lib).jvp(lambda a: a.exp(), x(lib, False))


@case
def hvp_vhp(lib):
    f = lambda a: (a**3).sum()
    v = lib.tensor([1.0, 2.0, 3.0])
    return _f(lib).hvp(f, x(lib, False), v), _f(lib).vhp(f, x(lib, False), v)


@case
def hvp_without_v_of_a_vector(lib):
    return _f(lib).hvp(lambda a: (a**3).sum(), x(lib, False))


@case
def hvp_strict_unused_input(lib):
    f = lambda a, b: (a**3).sum()
    return _f(lib).hvp(f, (x(lib, False), x(lib, False)), (lib.ones(3), lib.ones(3)), strict=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_autograd_api_as_torch(name: str) -> None:
    (ours, our_warnings), (theirs, their_warnings) = (_outcome(CASES[name], lib) for lib in (verigrad, torch))
    _same(ours, theirs)
    assert our_warnings == their_warnings
