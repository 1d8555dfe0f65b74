"""addcmul, addcdiv and round(decimals=) bit for bit as PyTorch's CPU kernels: addcmul is (value * t1) *
t2 + x with one fused multiply-add, addcdiv (value * t1) / t2 + x, round(x * 10^d) / 10^d, each with f16
computed in f32 and rounded once (1 in 6 f32 and 1 in 5 f16 results of addcmul differed by an ulp when
verigrad rounded the product; addcdiv divided first; f16 round(decimals=1) was computed in f16). var and
std of f16 and f32 are computed in f64 and rounded once (std's square root too): 1 in 2 f32 rows differed
when verigrad computed them in f32."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("value", [1, 0.3, -1.7])
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_bits_are_pytorchs(name: str, value: float, dtype: str) -> None:
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(1000).astype(dtype) for _ in range(3)]
    theirs = getattr(torch, name)(*(torch.from_numpy(a) for a in arrays), value=value).numpy()
    ours = getattr(verigrad, name)(*(verigrad.from_numpy(a) for a in arrays), value=value).numpy()
    assert ours.dtype == theirs.dtype and np.array_equal(ours.view(np.uint8), theirs.view(np.uint8))


def test_mixed_dtypes_compute_in_the_common_one() -> None:
    """An int64 tensor1 with an f64 tensor2: value * tensor1 in f64, as PyTorch's common dtype."""
    ints, floats = np.arange(1, 9), np.linspace(0.1, 3.0, 8)
    x = np.zeros(8, np.float32)
    theirs = torch.addcdiv(torch.from_numpy(x), torch.from_numpy(ints), torch.from_numpy(floats), value=0.3)
    ours = verigrad.addcdiv(
        verigrad.from_numpy(x), verigrad.from_numpy(ints), verigrad.from_numpy(floats), value=0.3
    )
    assert ours.dtype is verigrad.float64 and np.array_equal(ours.numpy(), theirs.numpy())


def test_addcmul_gradients_are_pytorchs() -> None:
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((3, 4)) for _ in range(3)]
    grads = []
    for lib in (torch, verigrad):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        lib.addcmul(*leaves, value=0.7).sum().backward()
        grads.append([leaf.grad.numpy() for leaf in leaves])
    for theirs, ours in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-15)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("decimals", [1, 2, -1, -2])
def test_round_decimals_bits_are_pytorchs(decimals: int, dtype: str) -> None:
    values = (np.random.default_rng(5).standard_normal(2000) * 100).astype(dtype)
    values[:3] = [np.nan, np.inf, -0.0]
    theirs = torch.from_numpy(values).round(decimals=decimals).numpy()
    ours = (
        verigrad.from_numpy(values).round(decimals=np.int64(decimals)).numpy()
    )  # a NumPy int, as torch takes
    assert ours.dtype == theirs.dtype and np.array_equal(ours.view(np.uint8), theirs.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize(("shape", "dim"), [((1000,), None), ((50, 37), 1), ((50, 37), 0), ((7,), None)])
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_bits_are_pytorchs(
    name: str, correction: int, shape: tuple, dim: int | None, dtype: str
) -> None:
    values = (np.random.default_rng(11).standard_normal(shape) * 3 + 1).astype(dtype)
    theirs = getattr(torch.from_numpy(values), name)(dim=dim, correction=correction).numpy()
    ours = getattr(verigrad.from_numpy(values), name)(dim=dim, correction=correction).numpy()
    assert ours.dtype == theirs.dtype and np.array_equal(np.atleast_1d(ours), np.atleast_1d(theirs))
