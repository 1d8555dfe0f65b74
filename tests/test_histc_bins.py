"""histc places each value as PyTorch's kernel does: bin int((v - min) * bins / (max - min)) in the
input's dtype, the last bin holding max, where NumPy's histogram compares with its own edges; its range
checks and dtypes are PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad


def test_a_value_on_an_edge_takes_the_bin_its_rounded_quotient_names() -> None:
    x, low, high = np.float32(-5 / 7), np.float32(-3), np.float32(3 / 7)  # -5/7 is the edge of bins 1 and 2
    assert int((x - low) * np.float32(3) / (high - low)) == 1  # 16/7 * 3 / (24/7) = 2 rounds below 2 in f32
    counts = verigrad.histc(verigrad.tensor([float(x)]), bins=3, min=-3, max=3 / 7)
    assert counts.tolist() == [0.0, 1.0, 0.0]
    assert np.histogram(np.array([x]), 3, (-3.0, 3 / 7))[0].tolist() == [0, 0, 1]  # NumPy's other answer


def test_values_past_2_to_the_53() -> None:
    x = verigrad.tensor([2.0**53, 2.0**53 + 2, 2.0**53 + 4, 2.0**53 + 8], dtype=verigrad.float64)
    # quotients 0, 2 * 3 / 8 = 0.75, 1.5 and 3 (max: the last bin)
    assert verigrad.histc(x, bins=3).tolist() == [2.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("values", "options", "match"),
    [
        ([1.0, float("nan"), 3.0], {}, r"the range \[nan, nan\] is not finite"),
        ([1.0, float("inf")], {"bins": 4}, r"the range \[1.0, inf\] is not finite"),
        ([1.0, 3.0], {"bins": 4, "min": 5, "max": 4}, "max must be larger than min"),
    ],
)
def test_ranges_pytorch_refuses(values, options, match) -> None:
    with pytest.raises(ValueError, match=match):
        verigrad.histc(verigrad.tensor(values), **options)


def test_nan_inside_a_given_range_is_skipped_and_integers_are_refused() -> None:
    x = verigrad.tensor([1.0, float("nan"), 3.0])
    assert verigrad.histc(x, bins=4, min=0, max=4).tolist() == [0.0, 1.0, 0.0, 1.0]
    with pytest.raises(verigrad.DTypeError, match="histc takes a float tensor"):
        verigrad.histc(verigrad.arange(5), bins=3)
    with pytest.raises(verigrad.DTypeError, match="bf16 tensors can only be loaded"):  # not f32 counts
        verigrad.histc(verigrad.arange(5.0).bfloat16(), bins=3)
