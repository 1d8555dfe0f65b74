"""Setup for the parity suite (verigrad against PyTorch). Run it by naming it:
`python -m pytest -q tests/parity`."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _torch_state():
    """PyTorch on one thread with its default dtype, so its reductions sum in one fixed order."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def smollm2_gguf():
    """The real SmolLM2-135M-Instruct GGUF, from verigrad's cache (fetched there once if missing; CI runs
    `verigrad fetch smollm2` before this suite)."""
    from verigrad.models.fetch import fetch

    return fetch("smollm2", quiet=True)
