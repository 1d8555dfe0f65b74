"""verigrad.fft against torch.fft: the sample frequencies bit for bit; every transform, which makes or reads
complex tensors, refusing with NotImplementedError naming itself (verigrad has no complex dtype: the
README's "Running PyTorch code" row)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad
from verigrad.fft import TRANSFORMS


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 6, 7, 100, 1001])
@pytest.mark.parametrize("d", [1.0, 0.1, 3, 2.5e-3, 1 / 44100, -0.5])
@pytest.mark.parametrize("dtype", [None, "float64"])
def test_sample_frequencies_bit_for_bit(name, n, d, dtype):
    ours = getattr(verigrad.fft, name)(n, d, dtype=getattr(verigrad, dtype) if dtype else None)
    theirs = getattr(torch.fft, name)(n, d, dtype=getattr(torch, dtype) if dtype else None)
    assert ours.numpy().dtype == theirs.numpy().dtype
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_sample_frequencies_keyword_forms_and_refusals():
    ours = verigrad.fft.rfftfreq(8, d=0.5, requires_grad=True)
    assert ours.requires_grad and torch.fft.rfftfreq(8, d=0.5, requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="non-negative"):
        verigrad.fft.fftfreq(-1)
    with pytest.raises(TypeError, match="floating"):
        verigrad.fft.fftfreq(4, dtype=verigrad.int64)


def test_every_public_name_of_torch_fft_exists():
    names = {n for n in dir(torch.fft) if not n.startswith("_") and callable(getattr(torch.fft, n))}
    assert names - {"Tensor"} <= set(verigrad.fft.__all__)


@pytest.mark.parametrize("name", TRANSFORMS)
def test_transforms_refuse_naming_themselves(name):
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    getattr(torch.fft, name)(torch.from_numpy(x))  # PyTorch answers (complex, or real from a complex half)
    with pytest.raises(NotImplementedError, match=rf"^fft\.{name}: verigrad has no complex"):
        getattr(verigrad.fft, name)(verigrad.from_numpy(x), norm="ortho")
