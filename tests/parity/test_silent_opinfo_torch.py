"""PyTorch's OpInfo suite, every sample in every dtype, on the ops whose silent differences were fixed
(tools/opinfo_sweep.py): each call must agree (values, dtype, shape and gradients), none may differ
silently or raise where PyTorch answers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import opinfo_sweep

import verigrad

OPS = (
    "polygamma",  # at the poles: trigamma's large finite values, (-1)^(n+1) inf for n >= 2
    "special.polygamma",
    "linalg.lstsq",  # differentiable (empty) residuals with PyTorch's gradient; no gradient for S
    "linalg.pinv",  # PyTorch's pinv_backward at singular inputs (repeated singular values)
    "nn.functional.local_response_norm",  # an integer input's window mean truncated; an empty input
    "nn.functional.feature_alpha_dropout.without_train",  # any shape outside training
    "gather",  # an empty index of any dtype and shape; a 0-d input as a vector of one
    "take_along_dim",  # a negative index counts from the end
    "nn.functional.layer_norm",  # a negative eps
    "nn.functional.group_norm",  # an empty batch
    "as_strided",  # a view's storage is its base's (partial_views; the sweep makes the same view)
    "linalg.qr",  # the gradient of a wide matrix's QR, in both modes
    "nn.functional.grid_sample",  # volumes (5-D) and bicubic
    "nn.functional.interpolate.bilinear",  # u8 images, rounded as PyTorch's fixed-point kernel
)


@pytest.fixture(scope="module")
def results() -> list[opinfo_sweep.Result]:
    return opinfo_sweep.sweep_ops(OPS)


@pytest.mark.parametrize("op", OPS)
def test_every_call_agrees_with_pytorch(results, op: str) -> None:
    calls, bad = opinfo_sweep.disagreements(results, op)
    assert calls, f"no OpInfo calls of {op}"
    assert not bad, f"{len(bad)} of {calls} calls differ:\n" + "\n".join(bad[:5])


def test_ctc_loss_gradient_is_pytorchs_for_raw_log_probs() -> None:
    # PyTorch's backward gives exp(log_probs) - posterior (it assumes log_softmax outputs), so do we; in
    # f64 every OpInfo call agrees (and in f32: tests/parity/test_opinfo_round3_torch.py)
    db = [o for o in opinfo_sweep.op_db() if o.name == "nn.functional.ctc_loss"]
    calls = opinfo_sweep.sweep(db, dtypes=(torch.float64,)).results
    bad = [f"sample {r.sample}: {r.category}: {r.detail}" for r in calls if r.category != "agree"]
    assert calls and not bad, "\n".join(bad[:5])


def test_lu_solve_f64_gradient_after_f32_agrees() -> None:
    # these samples (every third) run an empty B's product in f32, then in f64: the eager matmul path ran the
    # f32 plan on the f64 operands (one layout in both dtypes) and half of the LU gradient was stale memory
    db = [o for o in opinfo_sweep.op_db() if o.name == "lu_solve"]
    with verigrad.backend("cpu"):  # the suite's tests run on the reference backend
        calls = opinfo_sweep.sweep(db, 3, stride=3, dtypes=(torch.float32, torch.float64)).results
    bad = [f"{r.dtype} sample {r.sample}: {r.category}: {r.detail}" for r in calls if r.category != "agree"]
    assert len(calls) == 6 and not bad, "\n".join(bad[:5])
