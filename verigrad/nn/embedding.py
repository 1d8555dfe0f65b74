"""Embedding and EmbeddingBag, as PyTorch's: rows of a trained table by integer index (reduced per bag)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd import no_grad
from ..errors import ShapeError
from ..ops import tensor
from ..shapes import DimLike, shape_text
from ..tensor import Tensor, describe
from . import functional as F
from .init import _normal_param
from .module import Module, factory_dtype


def _given_table(name: str, weight: Any, rows: DimLike, width: DimLike, trained: bool) -> Tensor:
    """PyTorch's `_weight=`: the table itself as the parameter, of shape [rows, width]."""
    if not isinstance(weight, Tensor) or tuple(weight.shape) != (rows, width):
        got = describe(weight) if isinstance(weight, Tensor) else type(weight).__name__
        raise ShapeError(f"{name}: _weight must be a tensor of shape [{rows}, {width}], got {got}")
    return weight.detach().requires_grad_(trained)


def _padding_row(name: str, padding_idx: int | None, rows: DimLike) -> int | None:
    """PyTorch's padding_idx as it keeps it: a negative one counted from the end, within the table."""
    if padding_idx is None or not isinstance(rows, int):
        return padding_idx
    if not -rows <= padding_idx < rows:
        raise ValueError(f"{name}: padding_idx must be within num_embeddings ({rows}), got {padding_idx}")
    return padding_idx % rows


class Embedding(Module):
    """Rows of a [num_embeddings, embedding_dim] table (initialised N(0, 1), as PyTorch)."""

    def __init__(
        self,
        num_embeddings: DimLike,
        embedding_dim: DimLike,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | None = None,
        _freeze: bool = False,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype("Embedding", device, dtype)
        padding_idx = _padding_row("Embedding", padding_idx, num_embeddings)
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if sparse:
            raise ValueError("Embedding: sparse gradients are not supported (sparse=True); use sparse=False")
        if _weight is not None:  # PyTorch's: the given table itself, kept as it is (its padding row too)
            self.weight = _given_table("Embedding", _weight, num_embeddings, embedding_dim, not _freeze)
            return
        self.weight = _normal_param((num_embeddings, embedding_dim), 1.0, dtype)
        if padding_idx is not None:  # PyTorch's: the padding row starts at zeros and is never trained
            with no_grad():
                self.weight[padding_idx] = 0.0

    @classmethod
    def from_pretrained(
        cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None, **options: Any
    ) -> Embedding:
        """An Embedding whose table is `embeddings` [num_embeddings, embedding_dim] (a copy), trained
        unless `freeze`; the padding row is kept as given."""
        table = embeddings if isinstance(embeddings, Tensor) else tensor(np.asarray(embeddings))
        if table.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained needs a 2-D table, got {shape_text(table.shape)}")
        module = cls(table.shape[0], table.shape[1], dtype=table.dtype, **options)
        module.weight = table.detach().clone().requires_grad_(not freeze)
        module.padding_idx = _padding_row("Embedding.from_pretrained", padding_idx, table.shape[0])
        return module

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq
        )

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        return text


class EmbeddingBag(Module):
    """Rows of a [num_embeddings, embedding_dim] table (N(0, 1)) reduced per bag: "sum", "mean" or "max"
    (see F.embedding_bag)."""

    def __init__(
        self,
        num_embeddings: DimLike,
        embedding_dim: DimLike,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype("EmbeddingBag", device, dtype)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        self.padding_idx = padding_idx = _padding_row("EmbeddingBag", padding_idx, num_embeddings)
        if _weight is not None:
            self.weight = _given_table("EmbeddingBag", _weight, num_embeddings, embedding_dim, True)
            return
        self.weight = _normal_param((num_embeddings, embedding_dim), 1.0, dtype)
        if padding_idx is not None:
            with no_grad():
                self.weight[padding_idx] = 0.0

    def forward(
        self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None
    ) -> Tensor:
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        return text if self.padding_idx is None else f"{text}, padding_idx={self.padding_idx}"
