"""PyTorch's OpInfo suite, every sample in every dtype, on the ops whose silent or raising calls this round
fixed (tools/opinfo_sweep.py): each call must agree (values, dtype, shape and gradients)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import opinfo_sweep

OPS = (
    "nn.functional.scaled_dot_product_attention",  # softmax's VJP in f64, rounded once (f32 sample 4)
    "nn.functional.ctc_loss",  # PyTorch's log-space recursions in f32 (values and gradients)
    "arange",  # an unsigned dtype wraps negative values
    "full_like",  # u8 wraps -9
    "signbit",  # bool: False
    "isfinite",  # bool: True
    "logit",  # bool in f32
    "einsum",  # upper-case subscripts; an integer operand summed alone makes the product i64
    "masked_scatter",  # a mask larger than the input: broadcast
    "tensordot",  # a contracted size 1 against another size
    "nn.functional.batch_norm",  # an empty vector
    "matmul",  # the gradient of [5, 5, 0] @ [0, 5]
    "__rmatmul__",
    "nn.functional.adaptive_avg_pool1d",  # an empty batch
    "nn.functional.adaptive_avg_pool3d",
    "nn.functional.avg_pool1d",  # i64 (sums divided by truncation), (1,) sizes, stride ()
    "nn.functional.avg_pool2d",
    "nn.functional.avg_pool3d",  # also an empty batch and a negative divisor_override
    "nn.functional.multi_margin_loss",  # a 0-d score
    "nn.functional.multilabel_margin_loss",
    "nn.functional.conv_transpose1d",  # i64, wrapping
    "nn.functional.conv_transpose2d",
    "nn.functional.conv_transpose3d",
)


@pytest.fixture(scope="module")
def results() -> list[opinfo_sweep.Result]:
    return opinfo_sweep.sweep_ops(OPS)


@pytest.mark.parametrize("op", OPS)
def test_every_call_agrees_with_pytorch(results, op: str) -> None:
    calls, bad = opinfo_sweep.disagreements(results, op)
    assert calls, f"no OpInfo calls of {op}"
    assert not bad, f"{len(bad)} of {calls} calls differ:\n" + "\n".join(bad[:5])
