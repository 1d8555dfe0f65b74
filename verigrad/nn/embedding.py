"""Embedding, as PyTorch's: rows of a trained table by integer index."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autograd import no_grad
from ..dtypes import f32
from ..errors import ShapeError
from ..ops import tensor
from ..shapes import DimLike, shape_text
from ..tensor import Tensor
from . import functional as F
from .init import normal
from .module import Module


class Embedding(Module):
    """Rows of a [num_embeddings, embedding_dim] table (initialised N(0, 1), as PyTorch)."""

    def __init__(
        self,
        num_embeddings: DimLike,
        embedding_dim: DimLike,
        padding_idx: int | None = None,
        dtype: Any = f32,
    ):
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = normal((num_embeddings, embedding_dim), 1.0, dtype)
        if padding_idx is not None:  # PyTorch's: the padding row starts at zeros and is never trained
            with no_grad():
                self.weight[padding_idx] = 0.0

    @classmethod
    def from_pretrained(
        cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None
    ) -> Embedding:
        """An Embedding whose table is `embeddings` [num_embeddings, embedding_dim] (a copy), trained
        unless `freeze`; the padding row is kept as given."""
        table = embeddings if isinstance(embeddings, Tensor) else tensor(np.asarray(embeddings))
        if table.ndim != 2:
            raise ShapeError(f"Embedding.from_pretrained needs a 2-D table, got {shape_text(table.shape)}")
        module = cls(table.shape[0], table.shape[1], dtype=table.dtype)
        module.weight = table.detach().clone().requires_grad_(not freeze)
        module.padding_idx = padding_idx
        return module

    def forward(self, idx: Tensor) -> Tensor:
        return F.embedding(self.weight, idx, self.padding_idx)

    def extra_repr(self) -> str:
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}"
