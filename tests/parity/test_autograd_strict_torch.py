"""What PyTorch refuses in autograd and tensor state, against torch 2.13: the version counter (`_version`)
and the backward that reads a value written in place since it was saved (an op's saved output, a `.grad`
accumulated into), `requires_grad` and `.grad` set where they cannot be, `detach_()` of a view, the
warning of a non-leaf's `.grad`, the hooks, metadata and context of a graph's nodes, and
autograd.functional's strict mode with create_graph. Each case compares the values (dtype, shape), the
type of the error raised and the categories of the warnings."""

from __future__ import annotations

import copy
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad


def _plain(result: Any) -> Any:
    """A result as NumPy arrays, Python values and None (tuples and lists as tuples)."""
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
    return result, sorted({w.category.__name__ for w in seen})


def _same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), f"verigrad {ours!r}, torch {theirs!r}"
        for a, b in zip(ours, theirs):
            _same(a, b)
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), f"verigrad {ours!r}, torch {theirs!r}"
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=0)  # libm's sin and cos: an ulp
    else:
        assert ours == theirs, f"verigrad {ours!r}, torch {theirs!r}"


CASES: dict[str, Callable[[Any], Any]] = {}


def case(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    CASES[fn.__name__] = fn
    return fn


def x(lib: Any, requires_grad: bool = True) -> Any:
    return lib.tensor([0.5, -1.0, 2.0], requires_grad=requires_grad)


# the version counter ------------------------------------------------------------------------------
@case
def version_of_in_place_writes_shared_by_views(lib):
    a = lib.ones(3)
    before = a._version
    a.add_(1)
    a[0] = 2
    b = a[1:]
    b.mul_(2)
    return before, a._version, b._version


@case
def version_of_out_copy_and_zero(lib):
    a = lib.ones(3)
    lib.add(a, a, out=a)
    a.copy_(lib.zeros(3))
    a.zero_()
    return a._version


@case
def version_of_a_grad_accumulated_into(lib):
    a = x(lib)
    (a * 2).sum().backward()
    g = a.grad
    before = g._version
    (a * 2).sum().backward()
    return before, g._version, a.grad is g


# a value saved for backward and written in place since --------------------------------------------
def _output_written(op: str, under_no_grad: bool) -> Callable[[Any], Any]:
    def call(lib):
        a = x(lib)
        y = getattr(a, op)()
        z = y * 1
        if under_no_grad:
            with lib.no_grad():
                y.add_(1)
        else:
            y.add_(1)
        z.sum().backward()
        return a.grad

    return call


for _op in (
    "exp",
    "relu",
    "sigmoid",
    "tanh",
    "sqrt",
    "tan",
    "sin",
    "log",
    "abs",
    "floor",
):  # sin...: the input
    for _quiet in (False, True):
        CASES[f"{_op}_output_written{'_under_no_grad' if _quiet else ''}"] = _output_written(_op, _quiet)


@case
def output_written_where_no_backward_reads_it(lib):
    a = x(lib)
    y = a * 2
    y.add_(1)
    y.sum().backward()
    return a.grad


@case
def grad_accumulated_into_after_an_op_saved_it(lib):
    a = x(lib)
    (a * 2).sum().backward()
    y = a * a.grad
    (a * 2).sum().backward()  # .grad += g: the value y's node saved changed
    y.sum().backward()
    return a.grad


@case
def grad_accumulated_into_before_an_op_saved_it(lib):
    a = x(lib)
    (a * 2).sum().backward()
    (a * 2).sum().backward()
    y = a * a.grad.clone()
    y.sum().backward()
    return a.grad


@case
def numerator_written_after_a_division_by_a_constant(lib):
    a = x(lib)
    b = a * 1
    y = b / (lib.ones(3) * 2)  # x / y saves y alone where y takes no gradient
    b.add_(1)
    y.sum().backward()
    return a.grad


@case
def denominator_written_after_a_division(lib):
    a = x(lib)
    c = lib.ones(3) * 2
    y = a / c
    c.add_(1)
    y.sum().backward()
    return a.grad


def _twice(make: Callable[[Any, Any], Any]) -> Callable[[Any], Any]:
    def call(lib):
        a = x(lib)
        y = make(lib, a)
        y.backward()
        y.backward()  # a node that saved nothing runs again; one that saved a value raises
        return a.grad

    return call


CASES["second_backward_through_a_sum"] = _twice(lambda lib, a: a.sum())
CASES["second_backward_through_an_add"] = _twice(lambda lib, a: (a + 1).sum())
CASES["second_backward_through_a_reshape"] = _twice(lambda lib, a: a.reshape(3, 1).mean())
CASES["second_backward_through_a_product_by_a_constant"] = _twice(lambda lib, a: (a * 2).sum())
CASES["second_backward_through_an_exp"] = _twice(lambda lib, a: a.exp().sum())


# requires_grad ------------------------------------------------------------------------------------
@case
def requires_grad_true_set_on_a_non_leaf(lib):
    b = x(lib) * 2
    b.requires_grad = True
    return b


@case
def requires_grad_false_set_on_a_non_leaf(lib):
    b = x(lib) * 2
    b.requires_grad = False
    return b


@case
def requires_grad_false_asked_of_a_non_leaf(lib):
    return (x(lib) * 2).requires_grad_(False)


@case
def requires_grad_true_asked_of_a_non_leaf(lib):
    return (x(lib) * 2).requires_grad_(True).requires_grad


@case
def requires_grad_set_on_an_integer_tensor(lib):
    a = lib.tensor([1, 2])
    a.requires_grad = True
    return a


@case
def requires_grad_asked_of_an_integer_tensor(lib):
    return lib.tensor([1, 2]).requires_grad_()


@case
def integer_factory_requiring_grad(lib):
    return lib.zeros(2, dtype=lib.int64, requires_grad=True)


@case
def requires_grad_set_on_a_detached_leaf(lib):
    d = (x(lib) * 2).detach()
    d.requires_grad = True
    return d.requires_grad, d.is_leaf


@case
def data_of_an_integer_tensor_set_on_one_requiring_grad(lib):
    a = x(lib)
    a.data = lib.zeros(3, dtype=lib.int64)
    return a


@case
def shape_changed_in_place_on_a_leaf_requiring_grad(lib):
    a = lib.ones(2, 3, requires_grad=True)
    a.t_()
    return a


@case
def shape_changed_in_place_on_a_leaf_under_no_grad(lib):
    a = lib.ones(2, 3, requires_grad=True)
    with lib.no_grad():
        a.unsqueeze_(0)
    (a * 2).sum().backward()
    return a.grad, a.is_leaf


# .grad -------------------------------------------------------------------------------------------
@case
def grad_set_of_another_shape(lib):
    a = x(lib)
    a.grad = lib.zeros(2)
    return a.grad


@case
def grad_set_of_another_dtype(lib):
    a = x(lib)
    a.grad = lib.zeros(3, dtype=lib.float64)
    return a.grad


@case
def grad_set_of_an_integer_dtype(lib):
    a = x(lib)
    a.grad = lib.zeros(3, dtype=lib.int64)
    return a.grad


@case
def grad_set_to_a_list(lib):
    a = x(lib)
    a.grad = [1.0, 2.0, 3.0]
    return a.grad


@case
def grad_set_to_the_tensor_itself(lib):
    a = x(lib)
    a.grad = a
    return a.grad is a


@case
def grad_set_then_deleted(lib):
    a = x(lib)
    a.grad = lib.ones(3)
    del a.grad
    return a.grad


@case
def grad_of_a_non_leaf_read(lib):
    b = x(lib) * 2
    b.sum().backward()
    return b.grad


@case
def grad_of_a_retained_non_leaf_read(lib):
    b = x(lib) * 2
    b.retain_grad()
    b.sum().backward()
    return b.grad


@case
def deepcopy_of_a_non_leaf(lib):
    return copy.deepcopy(x(lib) * 2)


@case
def deepcopy_of_a_leaf_with_its_grad(lib):
    a = x(lib)
    (a * 2).sum().backward()
    c = copy.deepcopy(a)
    return c, c.grad, c.requires_grad, c.grad is a.grad


@case
def pickle_of_a_non_leaf(lib):
    b = pickle.loads(pickle.dumps(x(lib) * 2))
    return b, b.requires_grad, b.is_leaf


@case
def backward_with_create_graph(lib):
    a = x(lib)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # once per process: see the test below
        (a * 2).sum().backward(create_graph=True)
    return a.grad


@case
def autograd_grad_with_create_graph_does_not_warn(lib):
    a = x(lib)
    return lib.autograd.grad((a.exp()).sum(), a, create_graph=True)


# detach_ ------------------------------------------------------------------------------------------
@case
def detach_in_place_of_a_view_with_history(lib):
    return x(lib)[1:].detach_()


@case
def detach_in_place_of_a_view_without_history(lib):
    return lib.ones(3)[1:].detach_()


@case
def detach_in_place_of_a_non_leaf(lib):
    b = x(lib) * 2
    b.detach_()
    return b, b.requires_grad, b.grad_fn is None


# the graph's nodes --------------------------------------------------------------------------------
@case
def node_hooks_run_around_its_backward(lib):
    a = x(lib)
    b = a * 2
    seen = []
    b.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(("hook", len(grad_outputs))))
    b.grad_fn.register_prehook(lambda grad_outputs: seen.append(("prehook", len(grad_outputs))))
    b.sum().backward()
    return tuple(seen), a.grad


@case
def node_prehook_replaces_the_gradient(lib):
    a = x(lib)
    b = a * 2
    b.grad_fn.register_prehook(lambda grad_outputs: (grad_outputs[0] * 10,))
    b.sum().backward()
    return a.grad


@case
def node_hook_replaces_the_inputs_gradients(lib):
    a = x(lib)
    b = a.exp()
    b.grad_fn.register_hook(lambda grad_inputs, grad_outputs: (grad_inputs[0] + 1,))
    b.sum().backward()
    return a.grad


@case
def node_hook_removed(lib):
    a = x(lib)
    b = a * 2
    handle = b.grad_fn.register_prehook(lambda grad_outputs: (grad_outputs[0] * 10,))
    handle.remove()
    b.sum().backward()
    return a.grad


@case
def node_metadata(lib):
    b = x(lib) * 2
    b.grad_fn.metadata["step"] = 3
    return b.grad_fn.metadata["step"], len(b.grad_fn.metadata)


def _doubling(lib: Any) -> Any:
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t, scale):
            ctx.scale = 2.0
            ctx.save_for_backward(t)
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale, None

    return Double


@case
def function_node_is_its_context(lib):
    y = _doubling(lib).apply(x(lib), x(lib, False))
    node = y.grad_fn
    return node.needs_input_grad, node.scale, len(node.saved_tensors)


@case
def function_node_apply_runs_its_backward(lib):
    y = _doubling(lib).apply(x(lib), x(lib, False))
    return y.grad_fn.apply(lib.ones(3))


@case
def node_without_the_attribute(lib):
    return (x(lib) * 2).grad_fn.no_such_field


# autograd.functional, strict with create_graph ---------------------------------------------------
@case
def jacobian_strict_create_graph_of_a_linear_function(lib):
    return lib.autograd.functional.jacobian(lambda t: t * 2, x(lib, False), strict=True, create_graph=True)


@case
def jacobian_strict_create_graph_of_a_square(lib):
    return lib.autograd.functional.jacobian(lambda t: t**2, x(lib, False), strict=True, create_graph=True)


@case
def vjp_strict_create_graph_of_a_linear_function(lib):
    f = lib.autograd.functional
    return f.vjp(lambda t: t * 2, x(lib, False), lib.ones(3), strict=True, create_graph=True)


@case
def jvp_strict_create_graph_of_a_linear_function(lib):
    f = lib.autograd.functional
    return f.jvp(lambda t: t * 2, x(lib, False), lib.ones(3), strict=True, create_graph=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_as_torch(name: str) -> None:
    ours, theirs = _outcome(CASES[name], verigrad), _outcome(CASES[name], torch)
    assert ours[1] == theirs[1], f"warnings: verigrad {ours[1]}, torch {theirs[1]}"
    _same(ours[0], theirs[0])


ONCE = """
import warnings
import {lib}
warnings.simplefilter("always")
for _ in range(3):
    a = {lib}.ones(3, requires_grad=True)
    (a * 2).sum().backward(create_graph=True)
"""


@pytest.mark.parametrize("lib", ["verigrad", "torch"])
def test_backward_with_create_graph_warns_of_the_cycle_once_a_process(lib: str) -> None:
    """PyTorch warns of the reference cycle once in a process (whatever the warnings filter); so does
    verigrad. A fresh process each, since another test may have had the warning already."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", ONCE.format(lib=lib)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("create a reference cycle") == 1, run.stderr
