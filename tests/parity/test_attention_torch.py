"""F.scaled_dot_product_attention against PyTorch's in everything its signature offers: enable_gqa, bool
and float masks (with is_causal too), scale, fully masked queries, dropout's statistics; values and
gradients in f64."""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest
import torch
from gradients import check_values_and_gradients as _check

import verigrad
import verigrad.nn.functional as F

RNG = np.random.default_rng(23)
composite = importlib.import_module("verigrad.ops.composite.attention")


def test_signature_is_pytorchs() -> None:
    names = [p.name for p in inspect.signature(F.scaled_dot_product_attention).parameters.values()]
    assert names == ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]


CASES = [
    "gqa",
    "gqa causal square",
    "gqa bool mask",
    "float mask causal",
    "bool mask causal",
    "scale",
    "fully masked query",
    "broadcast mask",
    "5-D",
]


@pytest.mark.parametrize("how", CASES)
def test_against_pytorch(how) -> None:
    heads, kv_heads = (4, 2) if how.startswith("gqa") else (3, 3)
    length = 5 if "square" in how else 4
    lead = (2, 1) if how == "5-D" else (2,)
    arrays = {
        "q": RNG.standard_normal((*lead, heads, length, 6)),
        "k": RNG.standard_normal((*lead, kv_heads, 5, 6)),
        "v": RNG.standard_normal((*lead, kv_heads, 5, 3)),
    }
    mask = RNG.random((length, 5)) > 0.4
    mask[:, 0] = True
    settings: dict = {"enable_gqa": how.startswith("gqa"), "is_causal": "causal" in how}
    if how == "scale":
        settings["scale"] = 0.37
    masks = {
        "gqa bool mask": mask,
        "float mask": np.where(mask, 0.3, -1.5),
        "fully masked query": np.where(np.arange(length)[:, None] == 1, -np.inf, 0.0) * np.ones((1, 5)),
        "broadcast mask": np.where(RNG.random((2, 1, length, 5)) > 0.5, 0.0, -0.8),
    }

    def run(convert, fn):
        def call(q, k, v):
            extra = {} if how not in masks else {"attn_mask": convert(masks[how])}
            return fn(q, k, v, **extra, **settings)

        return call

    _check(
        arrays,
        run(verigrad.tensor, F.scaled_dot_product_attention),
        run(torch.from_numpy, torch.nn.functional.scaled_dot_product_attention),
    )


def test_refusals_and_dropout() -> None:
    q, kv = verigrad.randn(1, 4, 3, 8), verigrad.randn(1, 3, 3, 8)
    with pytest.raises(
        verigrad.ShapeError, match=r"heads in key \(3\) must divide the number of heads in query \(4\)"
    ):
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, q, q, dropout_p=-0.1)
    mask = verigrad.ones(3, 3).bool()
    with pytest.raises(ValueError, match="attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask, is_causal=True)  # PyTorch's math path's error
    verigrad.manual_seed(1)
    ones = verigrad.ones(1, 1, 64, 8, dtype="f64")
    v = verigrad.tensor(np.eye(64)[None, None])  # output row i is query i's attention weights
    weights = F.scaled_dot_product_attention(ones, ones, v, dropout_p=0.5).numpy()
    kept = weights != 0
    assert 0.4 < kept.mean() < 0.6
    np.testing.assert_allclose(weights[kept], 2 / 64, rtol=1e-12)  # uniform weights, kept ones doubled


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("threads", [1, 2])
def test_causal_f32_step_against_pytorch(backend, threads) -> None:
    """A GPT layer's causal attention in f32 (q, k, v head views of one qkv projection): the fused
    attention and attention_grad kernels on the cpu backend, the f64 references on the reference one;
    output and the projection's gradient within f32 rounding of PyTorch's."""
    if backend == "cpu" and not verigrad.backends.cpu.available():
        pytest.skip("the cpu backend could not be built here")
    b, t, h, d = 2, 64, 4, 16
    x = RNG.uniform(-1, 1, (b, t, 3 * h * d)).astype(np.float32)
    g = RNG.uniform(-1, 1, (b, h, t, d)).astype(np.float32)

    def run(lib, xt, gt):
        q, k, v = (z.view(b, t, h, d).transpose(1, 2) for z in xt.split(h * d, dim=2))
        out = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(gt)
        return out.detach().numpy(), xt.grad.numpy()

    verigrad.set_threads(threads)
    try:
        with verigrad.backend(backend):
            ours = run(verigrad, verigrad.tensor(x, requires_grad=True), verigrad.tensor(g))
    finally:
        verigrad.set_threads(1)
    theirs = run(torch, torch.tensor(x, dtype=torch.float64, requires_grad=True), torch.tensor(g).double())
    for a, want in zip(ours, theirs, strict=True):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_attention_ops_are_pytorchs_flash_attention_forward_and_backward(backend, dtype) -> None:
    """attention_lse's output and log-sum-exp are PyTorch's flash attention's (out, logsumexp), and
    attention_grad, given PyTorch's out and logsumexp, is PyTorch's flash backward on them (no forward
    pass in either): f64 within 1e-12, f32 within f32 rounding."""
    if backend == "cpu" and not verigrad.backends.cpu.available():
        pytest.skip("the cpu backend could not be built here")
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    b, h, t, d = 2, 3, 70, 16  # two of the kernel's key blocks
    np_dtype, tol = (np.float32, 2e-6) if dtype == "f32" else (np.float64, 1e-12)
    q, k, v, g = (RNG.uniform(-2, 2, (b, h, t, d)).astype(np_dtype) for _ in range(4))
    out, lse = flash(*(torch.from_numpy(x) for x in (q, k, v)), is_causal=True, scale=0.3)
    grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        torch.from_numpy(g), *(torch.from_numpy(x) for x in (q, k, v)), out, lse, 0.0, True, scale=0.3
    )
    packed = np.concatenate([out.numpy(), lse.numpy()[..., None]], axis=-1)  # lse [B, H, T]
    g_packed = np.concatenate([g, np.zeros((b, h, t, 1), np_dtype)], axis=-1)  # no gradient of lse
    with verigrad.backend(backend):
        ours = verigrad.ops.attention_lse(q, k, v, scale=0.3).numpy()
        got = verigrad.ops.attention_grad(g_packed, q, k, v, packed, scale=0.3)
        got = [x.numpy() for x in composite.unpack_grads(got, q, k, v)]
    np.testing.assert_allclose(ours, packed, rtol=tol, atol=tol)
    for a, want in zip(got, grads, strict=True):
        assert a.dtype == np_dtype
        np.testing.assert_allclose(a, want.numpy(), rtol=tol, atol=tol)
