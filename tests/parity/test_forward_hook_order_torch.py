"""Forward hooks and pre-hooks registered with `prepend=True` run before those registered earlier, as
PyTorch's; the others in the order registered."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import verigrad


def _order(lib: Any) -> list[str]:
    layer, log = lib.nn.Linear(3, 2), []
    layer.register_forward_hook(lambda m, i, o: log.append("hook a"))
    layer.register_forward_hook(lambda m, i, o: log.append("hook b, prepended"), prepend=True)
    layer.register_forward_hook(lambda m, i, k, o: log.append("hook c, kwargs"), with_kwargs=True)
    layer.register_forward_pre_hook(lambda m, i: log.append("pre a"))
    layer.register_forward_pre_hook(lambda m, i: log.append("pre b, prepended"), prepend=True)
    handle = layer.register_forward_pre_hook(
        lambda m, i, k: log.append("pre c"), prepend=True, with_kwargs=True
    )
    layer(lib.ones(1, 3))
    handle.remove()
    layer(lib.ones(1, 3))
    return log


@pytest.mark.filterwarnings("ignore")
def test_prepended_hooks_run_first_as_in_pytorch() -> None:
    assert _order(verigrad) == _order(torch)
    assert _order(verigrad)[:3] == ["pre c", "pre b, prepended", "pre a"]
