"""nn/dequantized_product.py, TrainingQLinear and the CPU backend's dequantize_into: x @ dequantize(w).T
with the tape's bits and gradient, eagerly and compiled, with no f32 copy of the weight held between the
forward and the backward."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from llama_gguf import write_llama_gguf

import verigrad as vg
from verigrad.backends.cpu import matmul as cpu_matmul
from verigrad.backends.cpu.quant import dequantize_into
from verigrad.backends.cpu.quant import dequantized_matmul as dequantized_matmul_c
from verigrad.models import answer_loss as answer_loss_module
from verigrad.models.answer_loss import answer_loss
from verigrad.models.llama import Llama
from verigrad.models.lora import TARGETS, add_lora
from verigrad.nn import dequantized_product as dequantized_product_module
from verigrad.nn.dequantized_product import dequantized_product
from verigrad.nn.lora import MANY_ROWS, TrainingQLinear
from verigrad.ops.quant import BLOCK_QTYPES, dequantize_op, random_blocks

QTYPES = ("q4_1", "q8_0", "q4_k")


@pytest.fixture(autouse=True, params=["reference", "cpu"])
def backend(request):
    """Each test on both backends: on the cpu one the weight goes through the thread's scratch buffer."""
    with vg.backend(request.param):
        yield request.param


def packed_available() -> bool:
    return cpu_matmul.fast_available() and bool(cpu_matmul._lib().packed_available())


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


@pytest.mark.parametrize("qtype", QTYPES)
def test_products_the_packed_gemm_takes_are_fused_with_the_tapes_bits(qtype, backend, monkeypatch):
    """A product of the packed GEMM's size (a LoRA step's) de-quantizes W as the GEMM packs it, on the cpu
    backend: both layouts, eager and compiled, the tape's bits."""
    calls = []

    def counted(*args):
        calls.append(fused := dequantized_matmul_c(*args))
        return fused

    monkeypatch.setattr(dequantized_product_module, "dequantized_matmul", counted)
    rng = np.random.default_rng(0)
    w = vg.from_numpy(random_blocks(rng, qtype, 320, 512))
    x = rng.normal(size=(2, 40, 512)).astype(np.float32)
    g = rng.normal(size=(2, 40, 320)).astype(np.float32)
    want_y, want_dx = on_tape(x, w, qtype, g)
    step = vg.compile(lambda x: (dequantized_product(x, w, qtype) * vg.from_numpy(g)).sum().backward())
    for run in (None, step, step):
        xt = vg.from_numpy(x).requires_grad_(True)
        if run is None:
            y = dequantized_product(xt, w, qtype)
            (y * vg.from_numpy(g)).sum().backward()
            np.testing.assert_array_equal(y.numpy(), want_y)
        else:
            run(xt)
        np.testing.assert_array_equal(xt.grad.numpy(), want_dx)
    fused = [c is not None for c in calls]
    assert fused == ([] if backend == "reference" else [packed_available()] * len(fused))
    assert backend == "reference" or len(fused) >= 6  # forward and backward each run


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
    _, want = on_tape(x.numpy(), layer.weight, "q4_1", np.ones((20, out), np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), want)


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
def test_dequantize_into_writes_the_ops_bits_into_the_buffer(qtype, backend):
    dequantize_op(vg.from_numpy(random_blocks(np.random.default_rng(1), qtype, 1, 256)), qtype=qtype)
    rng = np.random.default_rng(0)
    blocks = random_blocks(rng, qtype, 5, 256)
    out = np.full((5, 256), np.nan, np.float32)
    assert dequantize_into(blocks, qtype, out) is out
    np.testing.assert_array_equal(out, dequantize_op(vg.from_numpy(blocks), qtype=qtype).numpy())
    strided = np.full((5, 512), np.nan, np.float32)[:, ::2]  # not C-contiguous: written through a copy
    np.testing.assert_array_equal(dequantize_into(blocks, qtype, strided), out)


def on_the_tape(x: vg.Tensor, w: vg.Tensor, qtype: str) -> vg.Tensor:
    return x @ dequantize_op(w, qtype=qtype).T


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_lora_steps_loss_and_adapter_gradients_are_the_tapes_bits(tmp_path, monkeypatch, tied, compiled):
    """The LoRA step (the base and a tied or quantized head de-quantized twice) gives the bits of the same
    step with the base multiplied by the de-quantized weight on the tape (the f32 copy kept)."""
    path = write_llama_gguf(tmp_path / "tiny.gguf", tied=tied)
    rng = np.random.default_rng(0)
    ids = rng.integers(3, 270, (1, 24))
    targets = np.roll(ids, -1, axis=1)
    targets[:, :10] = -100

    def step():
        vg.manual_seed(0)
        init = np.random.default_rng(1)
        model = add_lora(Llama.from_gguf(path, activations="f32"), TARGETS, 4, 8.0)
        with vg.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("lora_B"):  # B = 0 would leave A without gradient
                    p.assign(vg.from_numpy(init.normal(0, 0.05, p.shape).astype(np.float32)))
        params = [p for p in model.parameters() if p.requires_grad]

        def run(x, y):
            loss = answer_loss(model, x, y, -100)
            return (loss, *vg.autograd.grad(loss, params))

        run = vg.compile(run) if compiled else run
        loss, *grads = run(vg.from_numpy(ids), vg.from_numpy(targets))
        return float(loss), [g.numpy().copy() for g in grads]

    ours = step()
    monkeypatch.setattr(
        TrainingQLinear, "product", lambda self, x: x @ dequantize_op(self.weight, qtype=self.qtype).T
    )
    monkeypatch.setattr(
        answer_loss_module, "dequantized_product", lambda x, w, q: x @ dequantize_op(w, qtype=q).T
    )
    theirs = step()
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_array_equal(a, b)
