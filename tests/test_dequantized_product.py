"""nn/dequantized_product.py, TrainingQLinear and the CPU backend's dequantize_into: x @ dequantize(w).T
with the tape's bits and gradient, eagerly and compiled, with no f32 copy of the weight held between the
forward and the backward."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends.cpu.quant import dequantize_into
from verigrad.nn.dequantized_product import dequantized_product
from verigrad.nn.lora import MANY_ROWS, TrainingQLinear
from verigrad.ops.quant import BLOCK_QTYPES, dequantize_op, random_blocks

QTYPES = ("q4_1", "q8_0", "q4_k")


def on_tape(x: np.ndarray, w: vg.Tensor, qtype: str, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The product and its gradient in x as the tape makes them from the de-quantized weight."""
    xt = vg.from_numpy(x).requires_grad_(True)
    y = xt @ dequantize_op(w, qtype=qtype).T
    (y * vg.from_numpy(g)).sum().backward()
    return y.numpy(), xt.grad.numpy()


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("lead", [(40,), (2, 24)])
def test_the_product_and_its_gradient_have_the_tapes_bits(qtype, lead):
    rng = np.random.default_rng(0)
    out, k = 48, 256
    w = vg.from_numpy(random_blocks(rng, qtype, out, k))
    x = rng.normal(size=(*lead, k)).astype(np.float32)
    g = rng.normal(size=(*lead, out)).astype(np.float32)
    want_y, want_dx = on_tape(x, w, qtype, g)
    xt = vg.from_numpy(x).requires_grad_(True)
    y = dequantized_product(xt, w, qtype)
    (y * vg.from_numpy(g)).sum().backward()
    np.testing.assert_array_equal(y.numpy(), want_y)
    np.testing.assert_array_equal(xt.grad.numpy(), want_dx)

    def step(x):
        y = dequantized_product(x, w, qtype)
        (y * vg.from_numpy(g)).sum().backward()
        return y

    compiled = vg.compile(step)
    for _ in range(2):  # the plan's second run too
        xt = vg.from_numpy(x).requires_grad_(True)
        np.testing.assert_array_equal(compiled(xt).numpy(), want_y)
        np.testing.assert_array_equal(xt.grad.numpy(), want_dx)


def test_no_f32_weight_is_held_between_the_forward_and_the_backward():
    """The graph of y = x @ W.T holds y and the blocks: W's f32 values (1 MiB here, 40 KiB for y) are
    made again for the backward."""
    rng = np.random.default_rng(0)
    out, k = 512, 512
    layer = TrainingQLinear(random_blocks(rng, "q4_1", out, k), "q4_1", (out, k), "f32")
    x = vg.from_numpy(rng.normal(size=(20, k)).astype(np.float32)).requires_grad_(True)
    layer(x).sum().backward()  # a first step: kernels built, caches filled
    x.grad = None
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        y = layer(x)
        held = tracemalloc.get_traced_memory()[0] - before
        y.sum().backward()
    finally:
        tracemalloc.stop()
    assert held < out * k * 4 // 4, held  # well under the f32 weight's bytes
    want = dequantize_op(layer.weight, qtype="q4_1").sum(0).numpy()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(want, x.shape))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_written_blocks_are_read_at_the_next_call(compiled):
    """Nothing is cached from the blocks: a step after they are written multiplies by the new values."""
    rng = np.random.default_rng(0)
    layer = TrainingQLinear(random_blocks(rng, "q4_1", 24, 64), "q4_1", (24, 64), "f32")
    x = vg.from_numpy(rng.normal(size=(MANY_ROWS, 64)).astype(np.float32))
    fn = vg.compile(lambda x: layer(x) * 2) if compiled else (lambda x: layer(x) * 2)
    for _ in range(2):
        want = (x @ dequantize_op(layer.weight, qtype="q4_1").T * 2).numpy()
        np.testing.assert_array_equal(fn(x).numpy(), want)
        with vg.no_grad():
            layer.weight.copy_(vg.from_numpy(random_blocks(rng, "q4_1", 24, 64)))


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_dequantize_into_writes_the_ops_bits_into_the_buffer(qtype):
    rng = np.random.default_rng(0)
    blocks = random_blocks(rng, qtype, 5, 256)
    out = np.full((5, 256), np.nan, np.float32)
    assert dequantize_into(blocks, qtype, out) is out
    np.testing.assert_array_equal(out, dequantize_op(vg.from_numpy(blocks), qtype=qtype).numpy())
    strided = np.full((5, 512), np.nan, np.float32)[:, ::2]  # not C-contiguous: written through a copy
    np.testing.assert_array_equal(dequantize_into(blocks, qtype, strided), out)
