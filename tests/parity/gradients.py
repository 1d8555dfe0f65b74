"""The parity suite's check of a program written once per framework: forward values and the gradient
of sum(out * cotangent) for every input, in f64."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

import verigrad

RTOL = ATOL = 1e-12


def _leaves(arrays: dict[str, np.ndarray]) -> tuple[dict, dict]:
    ours = {k: verigrad.from_numpy(a.copy()).requires_grad_(True) for k, a in arrays.items()}
    theirs = {k: torch.from_numpy(a.copy()).requires_grad_(True) for k, a in arrays.items()}
    return ours, theirs


def check_values_and_gradients(
    arrays: dict[str, np.ndarray],
    ours_fn: Callable[..., verigrad.Tensor],
    theirs_fn: Callable[..., torch.Tensor],
) -> None:
    """Forward values and the gradient of sum(out * cotangent) for every input, in f64."""
    ours, theirs = _leaves(arrays)
    out, expected = ours_fn(**ours), theirs_fn(**theirs)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=RTOL, atol=ATOL)
    assert out.dtype.name == "f64" and out.shape == tuple(expected.shape)

    cotangent = np.random.default_rng(7).standard_normal(out.numpy().shape)
    out.backward(verigrad.from_numpy(cotangent.copy()))
    expected.backward(torch.from_numpy(cotangent.copy()))
    for k in arrays:
        assert ours[k].grad is not None, f"no gradient reached {k}"
        np.testing.assert_allclose(
            ours[k].grad.numpy(), theirs[k].grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=f"d/d{k}"
        )
