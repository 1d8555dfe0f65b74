"""bf16 convolutions (conv1d/2d/3d and their transposes), which PyTorch computes on the CPU, raise in
verigrad with an error naming the function called (conv1d's said conv2d): PyTorch's kernel sums in f32 in
an order of its own, and its bits are then neither the once-rounded result (which verigrad could compute)
nor the f32 path's, a bf16 step apart on a few elements in 10^4 of a 256-channel 3x3 convolution (the
README's row)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

CASES = [
    ("conv1d", (2, 8, 20), (6, 8, 5), {}),
    ("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), {}),
    ("conv3d", (1, 2, 5, 5, 5), (3, 2, 3, 3, 3), {}),
    ("conv_transpose1d", (2, 32, 10), (32, 16, 4), {"stride": 2}),
    ("conv_transpose2d", (1, 4, 6, 6), (4, 3, 3, 3), {"stride": 2}),
    ("conv_transpose3d", (1, 8, 4, 4, 4), (8, 4, 3, 3, 3), {}),
]


def _bf16(rng: np.random.Generator, shape: tuple, scale: float = 1.0) -> torch.Tensor:
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32)).to(torch.bfloat16)


def _ours(t: torch.Tensor) -> verigrad.Tensor:
    return verigrad.from_numpy(t.float().numpy()).to(verigrad.bfloat16)


@pytest.mark.parametrize("name,xs,ws,kwargs", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("with_bias", [False, True])
def test_bf16_convolution_raises_naming_the_function(name, xs, ws, kwargs, with_bias):
    rng = np.random.default_rng(0)
    x, w = _bf16(rng, xs), _bf16(rng, ws, 0.1)
    b = _bf16(rng, (ws[1] if "transpose" in name else ws[0],)) if with_bias else None
    assert getattr(torch.nn.functional, name)(x, w, b, **kwargs).dtype == torch.bfloat16  # PyTorch answers
    args = [_ours(x), _ours(w), None if b is None else _ours(b)]
    with pytest.raises(verigrad.DTypeError, match=rf"^{name} of bf16: not supported .*\.bfloat16\(\)"):
        getattr(verigrad.nn.functional, name)(*args, **kwargs)


def test_a_bf16_conv_module_raises_and_the_f32_way_round_works():
    layer = verigrad.nn.Conv2d(3, 4, 3).to(verigrad.bfloat16)
    x = verigrad.ones(1, 3, 8, 8).to(verigrad.bfloat16)
    with pytest.raises(verigrad.DTypeError, match=r"^conv2d of bf16"):
        layer(x)
    out = verigrad.nn.functional.conv2d(x.float(), layer.weight.float(), layer.bias.float()).bfloat16()
    assert out.dtype is verigrad.bfloat16
