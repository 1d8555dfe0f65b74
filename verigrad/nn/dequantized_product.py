"""x @ W.T for a frozen quantized weight W, differentiable in x, with no f32 copy of W kept: the forward
and the backward each multiply by W de-quantized (the `dequantize` op's bits), so the product and its VJP
g @ W have the bits of `x @ dequantize(w).T` on the tape, while a training step holds no matrix's f32
values between its products (a LoRA step's frozen base: 518 MiB for SmolLM2-135M). Eagerly with gradients
off (a Function's forward and backward) on the cpu backend, a product its fast matmul path computes as one
packed GEMM goes through the backend's `dequantized_matmul`: the GEMM de-quantizes W's blocks as it packs
them into its panels (matmul_dequant.c), so W's f32 values are never written out, with the bits of that
GEMM on the de-quantized W. Any other product multiplies by W de-quantized into a buffer the calling
thread reuses (no fresh memory paged in for each matrix), or on the tape by the `dequantize` op."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import modes
from ..autograd import is_grad_enabled
from ..backends.active import get_backend
from ..backends.cpu.quant import dequantize_into, dequantized_matmul
from ..dtypes import f32
from ..function import Function
from ..ops.quant import FORMATS, dequantize_op
from ..shapes import Spec
from ..tensor import Tensor
from ..versions import version

# `buffer`: the f32 values of the last matrix this thread de-quantized; `holds`: (its blocks, their
# version, qtype), so that asking for it again (an output head's backward, right after its forward) reuses it
_scratch = threading.local()


def dequantized(w: Tensor, qtype: str) -> Tensor:
    """dequantize(w) for blocks w [rows, row bytes]: eagerly with gradients off, in this thread's scratch
    buffer, valid until its next call for other blocks (the caller multiplies by it and lets it go;
    nothing records it), on the cpu backend; otherwise (a trace, the tape, another backend, no C library
    yet) the op."""
    blocks = w.payload
    eager = modes.current().name == "eager" and not is_grad_enabled() and isinstance(blocks, np.ndarray)
    if not eager or get_backend().name != "cpu":
        return dequantize_op(w, qtype=qtype)
    fmt = FORMATS[qtype]
    shape = (blocks.shape[0], blocks.shape[1] // fmt.nbytes * fmt.block)
    size = shape[0] * shape[1]
    buffer = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.size < size:
        buffer = _scratch.buffer = np.empty(size, np.float32)
        _scratch.holds = None
    values = buffer[:size].reshape(shape)
    holds = (blocks, version(blocks), qtype)
    held = getattr(_scratch, "holds", None)
    if held is None or held[0] is not blocks or held[1:] != holds[1:]:
        _scratch.holds = None  # written now: holds nothing whole if this fails
        try:
            dequantize_into(blocks, qtype, values)
        except RuntimeError:  # the library is loaded by the first op run
            return dequantize_op(w, qtype=qtype)
        _scratch.holds = holds  # the blocks held: their id stays theirs
    return Tensor(Spec(shape, f32), values)


def _fused(x: Tensor, w: Tensor, qtype: str, transposed: bool) -> Tensor | None:
    """x @ dequantize(w).T (transposed) or x @ dequantize(w) by the cpu backend's GEMM that de-quantizes w's
    blocks as it packs them (the bits of the product on the de-quantized w, which is never written out),
    eagerly with gradients off; None where it does not take the product."""
    a, blocks = x.payload, w.payload
    if modes.current().name != "eager" or is_grad_enabled() or get_backend().name != "cpu":
        return None
    if not isinstance(a, np.ndarray) or not isinstance(blocks, np.ndarray):
        return None
    c = dequantized_matmul(a, blocks, qtype, transposed)
    return None if c is None else Tensor(Spec(c.shape, f32), c)


def product(x: Tensor, w: Tensor, qtype: str) -> Tensor:
    """x [..., in] @ dequantize(w).T for the blocks w (u8 [out, row bytes]) of `qtype`: [..., out]."""
    fused = _fused(x, w, qtype, True)
    return x @ dequantized(w, qtype).T if fused is None else fused


def product_t(g: Tensor, w: Tensor, qtype: str) -> Tensor:
    """g [..., out] @ dequantize(w): [..., in], the product's VJP in x."""
    fused = _fused(g, w, qtype, False)
    return g @ dequantized(w, qtype) if fused is None else fused


class DequantizedProduct(Function):
    """`product` with a VJP in x that de-quantizes w again (w is constant: no gradient); the ctx keeps
    the blocks alone (a reference, not a copy)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, qtype: str) -> Tensor:
        ctx.qtype = qtype
        ctx.save_for_backward(w)
        return product(x, w, qtype)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, None, None]:
        (w,) = ctx.saved_tensors
        return (product_t(g, w, ctx.qtype) if ctx.needs_input_grad[0] else None), None, None


def dequantized_product(x: Tensor, w: Tensor, qtype: str) -> Tensor:
    """x @ dequantize(w).T, differentiable in x, the f32 weight made again for the backward (not kept)."""
    return DequantizedProduct.apply(x, w, qtype)
