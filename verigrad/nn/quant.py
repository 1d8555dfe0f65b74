"""Layers with quantized weights (GGUF blocks), computed from the blocks: no dequantized copy is kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ops import concat, from_numpy
from ..ops.quant import (
    BLOCK_QTYPES,
    FORMATS,
    Q8_QTYPES,
    qembedding,
    qmatmul,
    qmatmul_q8,
    qmatmul_q8_group,
    rms_norm_qmatmul_q8,
    rms_norm_qmatmul_q8_group,
)
from ..tensor import Tensor
from .containers import ModuleList
from .module import Module


def _weight(raw: np.ndarray, qtype: str, shape: tuple[int, int], what: str) -> Tensor:
    """The u8 tensor viewing `raw` (u8[rows, row bytes]) after checking it against qtype and shape."""
    if qtype not in BLOCK_QTYPES:
        raise ValueError(f"{what}: qtype must be one of {', '.join(BLOCK_QTYPES)}, got {qtype!r}")
    fmt = FORMATS[qtype]
    rows, k = (int(s) for s in shape)
    if k % fmt.block:
        raise ValueError(f"{what}: {qtype} rows hold multiples of {fmt.block} values; shape {shape} does not")
    want = (rows, fmt.row_bytes(k))
    raw = np.asarray(raw)
    if raw.dtype != np.uint8 or raw.shape != want:
        raise ValueError(
            f"{what}: a {qtype} weight of shape {tuple(shape)} is u8 bytes of shape {want}, "
            f"got {raw.dtype} {raw.shape}"
        )
    return from_numpy(raw)  # a u8 view of the bytes (a spec only, inside verigrad.abstract())


class QLinear(Module):
    """y = x @ W.T for a quantized W [out_features, in_features] held as its blocks (`weight`, u8).

    `activations="q8"` quantizes x to 8 bits per block (of 32 values, or 256 for the k-quants and iq4_xs)
    and uses integer block dots (llama.cpp's fast path, `qmatmul_q8`) for the formats in Q8_QTYPES; other
    formats, and "f32", use `qmatmul`.
    """

    def __init__(self, raw: np.ndarray, qtype: str, shape: tuple[int, int], activations: str = "f32"):
        super().__init__()
        if activations not in ("f32", "q8"):
            raise ValueError(f"QLinear: activations must be 'f32' or 'q8', got {activations!r}")
        self.register_buffer("weight", _weight(raw, qtype, shape, "QLinear"))
        self.qtype, self.activations = qtype, activations
        self.out_features, self.in_features = (int(s) for s in shape)
        self._op = qmatmul_q8 if activations == "q8" and qtype in Q8_QTYPES else qmatmul

    def forward(self, x: Tensor) -> Tensor:
        return self._op(x, self.weight, qtype=self.qtype)

    def fuses(self, norm: Any) -> bool:
        """Whether `normed` makes norm and product one op: 8-bit activations and an RMSNorm over the last
        axis, with a weight and a stated eps."""
        fusable = norm.eps is not None and norm.weight is not None and len(norm.normalized_shape) == 1
        return self._op is qmatmul_q8 and fusable

    def normed(self, x: Tensor, norm: Any) -> Tensor:
        """self(norm(x)) for an RMSNorm `norm`: with 8-bit activations one op (`rms_norm_qmatmul_q8`, the
        same bits as the two)."""
        if self.fuses(norm):
            return rms_norm_qmatmul_q8(x, norm.weight, self.weight, qtype=self.qtype, eps=norm.eps)
        return self(norm(x))

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, qtype={self.qtype}, "
            f"activations={self.activations}"
        )


class QLinearGroup(Module):
    """QLinears on the same input, their outputs concatenated along the last axis: a fused projection
    (q/k/v, gate/up) whose parts are stored in different formats, each part kept in its own. Each output
    element is its part's product, the same bits as that part's QLinear alone."""

    def __init__(self, parts: Sequence[QLinear]):
        super().__init__()
        parts = list(parts)
        if not parts or not all(isinstance(p, QLinear) for p in parts):
            raise TypeError(f"QLinearGroup: parts must be one or more QLinears, got {parts!r}")
        widths = {p.in_features for p in parts}
        if len(widths) != 1:
            raise ValueError(f"QLinearGroup: the parts take inputs of different sizes {sorted(widths)}")
        self.parts = ModuleList(parts)
        self.in_features, self.out_features = widths.pop(), sum(p.out_features for p in parts)

    def _quantized_once(self) -> bool:
        """Whether every part is a QLinear with 8-bit activations: then one op quantizes x (and normalizes
        it) once for all of them (qmatmul_q8_group), where each part's own op would do it again."""
        return all(type(p) is QLinear and p._op is qmatmul_q8 for p in self.parts)

    def forward(self, x: Tensor) -> Tensor:
        if self._quantized_once():
            ws, qtypes = [p.weight for p in self.parts], tuple(p.qtype for p in self.parts)
            return qmatmul_q8_group(x, *ws, qtypes=qtypes)
        return concat(*(p(x) for p in self.parts), axis=-1)

    def normed(self, x: Tensor, norm: Any) -> Tensor:
        """self(norm(x)): with 8-bit activations in every part and a norm they fuse, one op that makes the
        norm and the 8-bit activations once; otherwise a part that fuses the norm (QLinear.normed) takes x,
        the others norm(x), made once."""
        if self._quantized_once() and self.parts[0].fuses(norm):
            ws, qtypes = [p.weight for p in self.parts], tuple(p.qtype for p in self.parts)
            return rms_norm_qmatmul_q8_group(x, norm.weight, *ws, qtypes=qtypes, eps=norm.eps)
        normed = None
        ys = []
        for p in self.parts:
            if p.fuses(norm):
                ys.append(p.normed(x, norm))
            else:
                normed = norm(x) if normed is None else normed
                ys.append(p(normed))
        return concat(*ys, axis=-1)

    def extra_repr(self) -> str:
        qtypes = "+".join(p.qtype for p in self.parts)
        return f"in_features={self.in_features}, out_features={self.out_features}, qtypes={qtypes}"


class QEmbedding(Module):
    """Rows of a quantized [num_embeddings, embedding_dim] table, dequantized as they are looked up."""

    def __init__(self, raw: np.ndarray, qtype: str, shape: tuple[int, int]):
        super().__init__()
        self.register_buffer("weight", _weight(raw, qtype, shape, "QEmbedding"))
        self.qtype = qtype
        self.num_embeddings, self.embedding_dim = (int(s) for s in shape)

    def forward(self, ids: Tensor) -> Tensor:
        return qembedding(ids, self.weight, qtype=self.qtype)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, qtype={self.qtype}"
