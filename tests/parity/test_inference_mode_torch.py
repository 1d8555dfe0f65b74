"""inference_mode as PyTorch's guard: grad mode off inside and `is_inference_mode_enabled()` True;
`inference_mode(False)` turns grad mode on, even inside no_grad or inference_mode (an evaluation helper
written `with torch.inference_mode(not train):` records history when training); as a decorator too, and
each thread its own."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

import verigrad


def _modes(lib: Any) -> list[bool]:
    x = lib.ones(2, requires_grad=True)
    seen = [lib.is_inference_mode_enabled(), lib.is_grad_enabled()]
    with lib.no_grad(), lib.inference_mode(False):
        seen += [(x * 2).requires_grad, lib.is_grad_enabled(), lib.is_inference_mode_enabled()]
    with lib.inference_mode():
        seen += [lib.is_inference_mode_enabled(), lib.is_grad_enabled(), (x * 2).requires_grad]
        with lib.inference_mode(False):
            seen += [(x * 2).requires_grad, lib.is_inference_mode_enabled()]
        seen += [lib.is_inference_mode_enabled(), lib.is_grad_enabled()]
    with lib.inference_mode(mode=True), lib.enable_grad():
        seen += [lib.is_inference_mode_enabled(), lib.is_grad_enabled()]

    @lib.inference_mode
    def bare() -> list[bool]:
        return [lib.is_inference_mode_enabled(), lib.is_grad_enabled()]

    @lib.inference_mode(False)
    def off() -> list[bool]:
        return [lib.is_inference_mode_enabled(), lib.is_grad_enabled()]

    with lib.no_grad():
        seen += bare() + off()
    return [*seen, lib.is_inference_mode_enabled(), lib.is_grad_enabled()]


def test_grad_and_inference_modes_are_pytorchs() -> None:
    assert _modes(verigrad) == _modes(torch)


@pytest.mark.parametrize("lib", [torch, verigrad], ids=["torch", "verigrad"])
def test_inference_mode_is_each_threads_own(lib: Any) -> None:
    inside, seen = threading.Event(), []

    def other() -> None:
        inside.wait()
        seen.append(lib.is_inference_mode_enabled())

    thread = threading.Thread(target=other)
    thread.start()
    with lib.inference_mode():
        inside.set()
        thread.join()
    assert seen == [False]
