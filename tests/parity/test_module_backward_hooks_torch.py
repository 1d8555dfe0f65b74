"""Full backward hooks where PyTorch's `BackwardHook` decides what they see: None in grad_output for an
output the loss does not use, zeros in grad_input for an argument that takes no gradient, a returned None
that leaves an input without a gradient, hooks not called for an output that is no tensor or tuple, and
the errors for a wrong count or a non-None return where no input takes a gradient."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import verigrad


def _seen(group) -> tuple:
    return tuple(None if g is None else g.detach().numpy().tolist() for g in group)


def _grad(t) -> list | None:
    return None if t.grad is None else t.grad.numpy().tolist()


def _case(lib, name: str) -> list:
    """Run one case; what the hooks saw and the gradients the inputs got."""
    nn, log = lib.nn, []

    class Two(nn.Module):  # two outputs from two inputs
        def forward(self, a, b):
            return a * 2, b * 3

    class Product(nn.Module):
        def forward(self, a, b):
            return a * b

    class AsList(nn.Module):
        def forward(self, a):
            return [a * 2]

    def record(m, grad_input, grad_output):
        log.append(("hook", _seen(grad_input), _seen(grad_output)))

    def record_pre(m, grad_output):
        log.append(("pre", _seen(grad_output)))

    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0, 5.0], requires_grad=True)
    if name == "unused_output":  # grad_output None where the output is not used
        m = Two()
        m.register_full_backward_pre_hook(record_pre)
        m.register_full_backward_hook(record)
        x, _ = m(a, b)
        x.sum().backward()
    elif name == "argument_without_grad":  # grad_input zeros for a tensor argument taking none
        m = Product()
        m.register_full_backward_hook(record)
        m(a, lib.tensor([3.0, 4.0])).sum().backward()
    elif name == "returned_none":  # a None returned in grad_input: that input gets no gradient
        m = Two()
        m.register_full_backward_hook(lambda m, gi, go: (None, gi[1] * 10))
        x, y = m(a, b)
        (x.sum() + y.sum()).backward()
    elif name == "pre_hook_none":  # a None returned in grad_output: zeros to the input
        m = Two()
        m.register_full_backward_pre_hook(lambda m, go: (None, go[1]))
        x, y = m(a, b)
        (x.sum() + y.sum()).backward()
    elif name == "list_output":  # a list is no tuple: the hooks are not called, with PyTorch's warning
        m = AsList()
        m.register_full_backward_hook(record)
        m.register_full_backward_pre_hook(record_pre)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m(a)[0].sum().backward()
        log.append([str(w.message)[:80] for w in caught])
    elif name == "kwargs_and_numbers":  # keyword tensors are not hooked, a number gives None
        m = Product()
        m.register_full_backward_hook(record)
        m(a, b=lib.tensor([2.0, 2.0], requires_grad=True)).sum().backward()

        class Scale(nn.Module):
            def forward(self, x, k):
                return x * k

        s = Scale()
        s.register_full_backward_hook(record)
        s(a, 3.0).sum().backward()
    log.append(("grads", _grad(a), _grad(b)))
    return log


CASES = ["unused_output", "argument_without_grad", "returned_none", "pre_hook_none", "list_output"]


@pytest.mark.parametrize("name", [*CASES, "kwargs_and_numbers"])
def test_backward_hooks_see_what_pytorchs_see(name) -> None:
    assert _case(verigrad, name) == _case(torch, name)


def test_the_cases_are_not_vacuous() -> None:
    seen = _case(torch, "unused_output")
    assert seen[0] == ("pre", ([1.0, 1.0], None))
    assert _case(torch, "argument_without_grad")[0][1][1] == [0.0, 0.0]
    assert _case(torch, "returned_none")[-1] == ("grads", None, [30.0, 30.0, 30.0])
    assert "module output should be a Tensor or a tuple" in _case(torch, "list_output")[0][0]


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_hooks_errors_as_pytorchs(lib) -> None:
    layer = lib.nn.Linear(3, 2)
    layer.register_full_backward_hook(lambda m, gi, go: (lib.ones(4, 3),))
    with pytest.raises(RuntimeError, match="no input requires gradient should always return None"):
        layer(lib.ones(4, 3)).sum().backward()
    layer = lib.nn.Linear(3, 2)
    layer.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        layer(lib.ones(4, 3, requires_grad=True)).sum().backward()


def test_a_hook_fires_once_per_backward_pass() -> None:
    calls = []
    layer = verigrad.nn.Linear(3, 2)
    layer.register_full_backward_hook(lambda m, gi, go: calls.append(len(gi)))
    x = verigrad.ones(4, 3, requires_grad=True)
    y = layer(x)
    y.sum().backward(retain_graph=True)
    (y * 2).sum().backward()
    assert calls == [1, 1]
    np.testing.assert_array_equal(x.grad.numpy(), 3 * layer.weight.sum(0).detach().numpy()[None].repeat(4, 0))
