"""Names moved to modules of their own stay where programs import them from."""

from __future__ import annotations

import importlib
import sys

import verigrad
from verigrad import autograd, autograd_functional, tensor_methods, tensor_methods_in_place
from verigrad.backends.cpu import fused, fused_source


def test_autograd_transforms_stay_importable_from_autograd():
    for name in autograd_functional.__all__:
        assert getattr(autograd, name) is getattr(autograd_functional, name), name
    for name in ("jacobian", "hessian", "vjp", "jvp", "vhp", "hvp"):
        assert getattr(autograd.functional, name) is getattr(autograd_functional, name), name
    assert verigrad.grad is autograd_functional.grad_transform
    assert verigrad.value_and_grad is autograd_functional.value_and_grad


def test_namespace_modules_are_registered_and_hold_their_names():
    for path, names in {
        "func": ("functional_call", "grad", "grad_and_value", "vmap"),
        "random": ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng"),
        "compiler": ("is_compiling", "is_dynamo_compiling", "disable", "allow_in_graph", "reset", "compile"),
        "autograd.functional": ("jacobian", "hvp"),
    }.items():
        module = importlib.import_module(f"verigrad.{path}")
        assert sys.modules[f"verigrad.{path}"] is module and module.__name__ == f"verigrad.{path}"
        assert all(hasattr(module, name) for name in names), path
    assert verigrad.vmap is verigrad.func.vmap
    assert verigrad.default_generator is verigrad.random.default_generator


def test_in_place_methods_are_bound_from_their_module():
    # with the C eager calls bound (as once any test has run the cpu backend), the aliases follow them
    verigrad.eager.install_c_calls()
    for name in tensor_methods_in_place.IN_PLACE:
        assert hasattr(verigrad.Tensor, f"{name}_"), name
    for alias, name in tensor_methods_in_place.ALIASES.items():
        assert getattr(verigrad.Tensor, alias) is getattr(verigrad.Tensor, name), alias
    assert tensor_methods.ADAPTED is tensor_methods_in_place.ADAPTED
    assert verigrad.Tensor.add_ is tensor_methods_in_place.add_
    x = verigrad.tensor([1.0, 2.0])
    x += 1
    x.mul_(2).clamp_(max=5.0)
    assert x.tolist() == [4.0, 5.0]


def test_fused_kernel_generator_stays_importable_from_fused():
    for name in fused_source.__all__:
        assert getattr(fused, name) is getattr(fused_source, name), name
    assert set(fused_source.__all__) <= set(fused.__all__)
