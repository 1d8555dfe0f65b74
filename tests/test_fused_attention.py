"""The training step's fused causal attention: the cpu backend's attention and attention_grad kernels
(attention_flash.c, flash-attention style) held to their stated bounds against the f64 references, the same
bits for every thread count, on the shapes of a GPT's step (head views of a qkv projection: strided),
grouped heads, fewer queries than keys and head dims that are not a multiple of 4; the reference's NaN
where an input is not finite; attention's backward pass running attention_grad on the forward's output
and log-sum-exp (no forward pass), and the ops' formulas where the backward is itself differentiated
(create_graph=True)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import verigrad as vg
import verigrad.nn.functional as F
from verigrad import ops
from verigrad.backends import cpu
from verigrad.backends.cpu.attention import ATTENTION_EXACTNESS, GRAD_EXACTNESS
from verigrad.errors import ShapeError

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
composite = importlib.import_module("verigrad.ops.composite.attention")

CASES = [  # (B, H, KV, T, S, D, Dv)
    (2, 4, 4, 128, 128, 32, 32),  # the small GPT's layer
    (1, 6, 2, 40, 90, 16, 8),  # grouped heads, T < S (several key blocks)
    (1, 3, 1, 5, 5, 6, 10),  # head dims not a multiple of 4
    (1, 2, 1, 40, 50, 64, 48),  # wide heads: the backward's queries 16 at a time
    (1, 1, 1, 1, 1, 2, 2),
    (1, 2, 1, 30, 37, 128, 128),  # the backward's queries 8 at a time: a group of four keys straddles them
]


def operands(rng, b, h, kv, t, s, d, dv, strided=True):
    """q, k, v (views of one [B, S, 3, H, D] projection when `strided` and the sizes allow) and the
    gradient g of the output and log-sum-exp [B, H, T, Dv + 1] (a view of a wider array when `strided`)."""
    if strided and h == kv and d == dv and t == s:
        qkv = rng.uniform(-2, 2, (b, s, 3, h, d)).astype(np.float32)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        g = rng.uniform(-2, 2, (b, h, t, dv + 3)).astype(np.float32)[..., 1 : dv + 2]
    else:
        q = rng.uniform(-2, 2, (b, h, t, d)).astype(np.float32)
        k = rng.uniform(-2, 2, (b, kv, s, d)).astype(np.float32)
        v = rng.uniform(-2, 2, (b, kv, s, dv)).astype(np.float32)
        g = rng.uniform(-2, 2, (b, h, t, dv + 1)).astype(np.float32)
    return q, k, v, g


def run(kernel, args, threads, **params):
    vg.set_threads(threads)
    try:
        return kernel(*args, **params)
    finally:
        vg.set_threads(1)


def within(got, want, exactness):
    assert got.dtype == np.float32 and got.shape == want.shape
    bound = exactness.rtol * np.abs(want.astype(np.float64)) + exactness.atol
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


@needs_cc
@pytest.mark.parametrize("sizes", CASES)
@pytest.mark.parametrize("scale", [None, 0.3])
def test_kernels_meet_their_bounds_and_give_the_same_bits_for_every_thread_count(sizes, scale):
    q, k, v, g = operands(np.random.default_rng(1), *sizes)
    out = cpu.cpu.native(ops.attention_lse, vg.f32)(q, k, v, scale=scale)  # the backward reads the forward's
    for op, args, exactness in [
        (ops.attention_lse, (q, k, v), ATTENTION_EXACTNESS),
        (ops.attention_grad, (g, q, k, v, out), GRAD_EXACTNESS),
    ]:
        kernel = cpu.cpu.native(op, vg.f32)
        assert kernel is not None
        want = op.reference(*args, scale=scale)
        got = run(kernel, args, 1, scale=scale)
        within(got, want, exactness)
        # the bound is a worst case: on these operands each result is the reference's, rounded
        assert np.abs(got.astype(np.float64) - want).max() <= 2.0**-22 * max(1.0, np.abs(want).max())
        for threads in (2, 3):
            again = run(kernel, args, threads, scale=scale)
            np.testing.assert_array_equal(again.view(np.uint32), got.view(np.uint32))


@needs_cc
def test_a_nonfinite_input_gives_the_references_nan():
    """A NaN in a later position's value reaches every query through the reference's 0 * NaN (as
    PyTorch's masked softmax times v): the kernels run the reference there."""
    q, k, v, g = operands(np.random.default_rng(2), 1, 2, 2, 6, 6, 4, 4, strided=False)
    v[0, 1, 5, 2] = np.nan
    with np.errstate(invalid="ignore"):
        out = ops.attention_lse.reference(q, k, v, scale=None)
    for op, args in [(ops.attention_lse, (q, k, v)), (ops.attention_grad, (g, q, k, v, out))]:
        got = run(cpu.cpu.native(op, vg.f32), args, 2, scale=None)
        want = op.reference(*args, scale=None)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert np.isnan(want).any() and np.isfinite(want).any()


def test_the_packed_gradients_are_the_ops_formulas():
    """attention_grad's reference, unpacked, against the gradient written in ops (on the reference
    backend), on grouped heads with T < S, the log-sum-exp's gradient included."""
    q, k, v, g = operands(np.random.default_rng(3), 2, 4, 2, 3, 7, 5, 6, strided=False)
    out = ops.attention_lse(vg.tensor(q), vg.tensor(k), vg.tensor(v), scale=0.5)
    packed = ops.attention_grad(vg.tensor(g), vg.tensor(q), vg.tensor(k), vg.tensor(v), out, scale=0.5)
    assert packed.shape == (2, 2, 2 * 3 * 5 + 7 * 5 + 7 * 6)
    with vg.backend("reference"):
        want = composite._vjp_in_ops(*(vg.tensor(x.astype(np.float64)) for x in (g, q, k, v)), 0.5)
    for got, w in zip(composite.unpack_grads(packed, q, k, v), want, strict=True):
        np.testing.assert_allclose(got.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_causal_sdpa_backward_runs_attention_grad_and_create_graph_the_ops(backend, monkeypatch):
    if backend == "cpu" and not cpu.available():
        pytest.skip("the cpu backend could not be built here")
    q, k, v, g = operands(np.random.default_rng(4), 2, 2, 2, 9, 9, 4, 4)
    calls = []
    real = ops.attention_grad.reference

    def counted(*args, **params):
        calls.append(1)
        return real(*args, **params)

    monkeypatch.setattr(ops.attention_grad, "reference", counted)
    with vg.backend(backend):
        g = np.ascontiguousarray(g[..., :-1])  # the output's gradient
        leaves = [vg.tensor(np.ascontiguousarray(x), requires_grad=True) for x in (q, k, v)]
        F.scaled_dot_product_attention(*leaves, is_causal=True).backward(vg.tensor(g))
        fused = [x.grad.numpy() for x in leaves]
        assert len(calls) == (backend == "reference")  # the cpu backend runs its kernel
        calls.clear()
        leaves2 = [vg.tensor(np.ascontiguousarray(x), requires_grad=True) for x in (q, k, v)]
        out = F.scaled_dot_product_attention(*leaves2, is_causal=True)
        grads = vg.autograd.grad(out, leaves2, vg.tensor(g), create_graph=True)
        assert not calls  # the backward written in ops: differentiable again
        (grads[0] * grads[0]).sum().backward()
        assert leaves2[1].grad is not None and np.isfinite(leaves2[1].grad.numpy()).all()
    for a, b in zip(fused, grads, strict=True):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_attention_grad_refuses_a_gradient_of_another_shape():
    q, k, v, g = operands(np.random.default_rng(5), 1, 2, 2, 3, 3, 4, 4, strided=False)
    q, k, v, g = (vg.tensor(x) for x in (q, k, v, g))
    out = ops.attention_lse(q, k, v)
    assert out.shape == (1, 2, 3, 5) and ops.attention(q, k, v).shape == (1, 2, 3, 4)
    with pytest.raises(ShapeError, match=r"output gradient must be \[1, 2, 3, 5\] .*got \[1, 2, 3, 4\]"):
        ops.attention_grad(g[..., :4], q, k, v, out)
    with pytest.raises(ShapeError, match=r"forward's output must be \[1, 2, 3, 5\] .*got \[1, 2, 3, 6\]"):
        ops.attention_grad(g, q, k, v, vg.cat([out, out[..., :1]], -1))
