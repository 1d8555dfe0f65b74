"""PyTorch's `torch.nn.utils.parametrizations`: `weight_norm`, `spectral_norm` and `orthogonal` as
parametrizations (`parametrize.register_parametrization`), with PyTorch's state dict keys
(`parametrizations.weight.original0`, `parametrizations.weight.0._u`, ...)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import functions, linalg
from ...autograd import no_grad
from ...ops import concat, randn, tensor, zeros
from ...ops import eye as identity
from ...tensor import Tensor
from ...typeinfo import finfo
from ..functional import normalize
from ..module import Module
from . import parametrize
from .spectral_norm import _TRANSPOSED, _matrix

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """PyTorch's norm_except_dim(v, 2, dim): the 2-norm over every axis but `dim` (kept, the others of
    size 1); over all of v (a 0-d tensor) for dim -1."""
    if dim == -1:
        return v.norm(2)
    keep = dim % v.ndim
    axes = tuple(a for a in range(v.ndim) if a != keep)
    return v.norm(2, dim=axes, keepdim=True) if axes else v.abs()


class _WeightNorm(Module):
    """weight = v * (g / ||v||), the norm over every axis but `dim` (over all of v for dim None or -1)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalisation as a parametrization: `name` is computed from
    `parametrizations.<name>.original0` (g, its norm over every axis but `dim`) and `original1` (v, its
    direction) as v * g / ||v||. dim None: one norm over the whole tensor. Returns the module."""
    if not isinstance(getattr(module, name, None), Tensor):
        raise ValueError(f"weight_norm: Module '{type(module).__name__}' has no parameter or buffer '{name}'")
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def compat(state_dict: dict, prefix: str, *rest: Any) -> None:
        """A state dict of the hook-based nn.utils.weight_norm (name_g, name_v) loads, as PyTorch's."""
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(compat)
    return module


class _SpectralNorm(Module):
    """weight / sigma, sigma its largest singular value estimated by power iteration on the buffers `_u`
    and `_v` (one step of n_power_iterations each forward in training; none in eval). A 1-D weight is
    normalised instead."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with no_grad():
                rows, cols = _matrix(weight, self.dim).shape
                self.register_buffer("_u", normalize(randn(rows, dtype=weight.dtype), dim=0, eps=eps))
                self.register_buffer("_v", normalize(randn(cols, dtype=weight.dtype), dim=0, eps=eps))
                self._power_method(_matrix(weight, self.dim), 15)

    def _power_method(self, matrix: Tensor, n_power_iterations: int) -> None:
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.assign(normalize(matrix @ self._v, dim=0, eps=self.eps))
                self._v.assign(normalize(matrix.T @ self._u, dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        matrix = _matrix(weight, self.dim)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * (matrix @ v)).sum()
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Spectral normalisation as a parametrization: `name` is `parametrizations.<name>.original` divided
    by its spectral norm, estimated with the buffers `parametrizations.<name>.0._u` and `._v`. dim: the
    output axis (1 for the transposed convolutions, else 0). Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(
            f"spectral_norm: Module '{type(module).__name__}' has no parameter or buffer '{name}'"
        )
    if dim is None:
        dim = 1 if parametrize.type_before_parametrizations(module).__name__ in _TRANSPOSED else 0
    return parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """PyTorch's linalg.householder_product for a [..., n, k] (n >= k): the first k columns of
    H_0 H_1 ... H_{k-1}, H_i = I - tau_i v_i v_i^T, v_i column i of `a` below the diagonal with a 1 on it.
    Written with ops, so it differentiates."""
    n, k = a.shape[-2], a.shape[-1]
    eye = identity(n, k, dtype=a.dtype)
    vectors = functions.tril(a, -1) + eye
    q = eye.expand(*a.shape)
    for i in reversed(range(k)):
        v = vectors[..., i : i + 1]  # [..., n, 1]
        q = q - (tau[..., i : i + 1].unsqueeze(-1) * v) @ (v.transpose(-2, -1) @ q)
    return q


def _matrix_exp(a: Tensor) -> Tensor:
    """exp of each square matrix of a [..., n, n]: a Taylor polynomial of degree 18 (Horner) of a / 2^s,
    s making its 1-norm at most 1 (the remainder below 1/19! < eps / 2), squared s times. Written with
    ops, so it differentiates."""
    n = a.shape[-1]
    if not isinstance(a.payload, np.ndarray):
        raise NotImplementedError(
            "orthogonal: the matrix_exp map picks its scaling from the matrix's values, which a traced "
            "(compiled) call does not have; use orthogonal_map='cayley' or 'householder' there"
        )
    with no_grad():
        norm = float(a.abs().sum(-2).max().item()) if a.numel() else 0.0
    s = max(0, math.ceil(math.log2(norm))) if norm > 0 else 0
    scaled = a / float(2**s)
    eye = identity(n, dtype=a.dtype)
    result = eye + scaled / 18.0
    for j in range(17, 0, -1):
        result = eye + (scaled / float(j)) @ result
    for _ in range(s):
        result = result @ result
    return result


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of a's QR, each column's sign that of R's diagonal entry (so that R's diagonal is positive)."""
    q, r = linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * finfo(q.dtype).eps
    return functions.allclose(q.transpose(-2, -1) @ q, identity(k, dtype=q.dtype), atol=eps)


def _householder_inverse(q: Tensor) -> Tensor:
    """PyTorch's householder right_inverse: geqrf's reflectors of q (transposed where wide) below the
    diagonal, and on it the signs of R's diagonal (-1 where a reflector is the identity)."""
    if not isinstance(q.payload, np.ndarray):
        raise NotImplementedError("orthogonal: assigning to a householder-parametrized weight needs values")
    values = np.asarray(q.detach().numpy())
    wide = values.shape[-2] < values.shape[-1]
    if wide:
        values = np.swapaxes(values, -1, -2)
    h, tau = np.linalg.qr(values, mode="raw")  # LAPACK's geqrf, its result transposed
    a = np.swapaxes(h, -1, -2).copy()
    diagonal = np.sign(np.diagonal(a, axis1=-2, axis2=-1))
    diagonal = np.where(tau == 0, -diagonal, diagonal)
    k = diagonal.shape[-1]
    a[..., np.arange(k), np.arange(k)] = diagonal
    return tensor(np.swapaxes(a, -1, -2) if wide else a, dtype=q.dtype)


_MAPS = ("matrix_exp", "cayley", "householder")


class _Orthogonal(Module):
    """An orthogonal matrix (or batch of them, over the last two axes) computed from the original by
    `orthogonal_map`; with `use_trivialization` times the buffer `base`, the orthogonal matrix the
    weight was made into on registration."""

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.transpose(-2, -1)
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = functions.tril(x)
            if n != k:  # embed the tall matrix in a square one
                x = concat([x, zeros((*x.shape[:-1], n - k), dtype=x.dtype)], axis=-1)
            a = x - x.transpose(-2, -1)  # skew-symmetric
            if self.orthogonal_map == "matrix_exp":
                q = _matrix_exp(a)
            else:  # the Cayley retraction (I + A/2)(I - A/2)^-1
                eye = identity(n, dtype=a.dtype)
                q = linalg.solve(eye - a * 0.5, eye + a * 0.5)
            if n != k:
                q = q[..., :k]
        else:
            a = functions.tril(x, -1)
            tau = 2.0 / (1.0 + (a * a).sum(-2))
            q = _householder_product(a, tau)
            # x's diagonal holds 1s and -1s (not trained: read without gradient, as PyTorch's int cast)
            with no_grad():
                signs = x.diagonal(dim1=-2, dim2=-1).int().cast(x.dtype)
            q = q * signs.unsqueeze(-2)
        if "base" in self._buffers:
            q = self.base @ q
        return q.transpose(-2, -1) if transposed else q

    def right_inverse(self, q: Tensor) -> Tensor:
        if tuple(q.shape) != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of shape "
                f"{tuple(q.shape)}."
            )
        if "base" not in self._buffers:
            if self.orthogonal_map in ("matrix_exp", "cayley"):
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley parametrizations "
                    "when use_trivialization=False."
                )
            return _householder_inverse(q)
        with no_grad():
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            if n < k:
                q = q.transpose(-2, -1)
                n, k = k, n
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:  # complete q to a full n x n orthogonal matrix
                fill = randn(*q.shape[:-2], n, n - k, dtype=q.dtype)
                q = _make_orthogonal(concat([q, fill], axis=-1))
            self.base = q
            # -I: householder of zeros is then the identity (the diagonal holds the signs)
            return (
                (identity(q_init.shape[-2], q_init.shape[-1], dtype=q_init.dtype) * -1.0)
                .expand(*q_init.shape)
                .clone()
            )


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """Make the matrix (or batch of matrices, over its last two axes) `name` orthogonal (its rows or
    columns orthonormal), computed by `orthogonal_map` ("matrix_exp", "cayley" or "householder"; by
    default, as PyTorch, "matrix_exp" for square matrices and "householder" otherwise) from
    `parametrizations.<name>.original`. With `use_trivialization` (the default) the weight starts as the
    orthogonal matrix nearest it (QR) kept in the buffer `base`. Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"orthogonal: Module '{type(module).__name__}' has no parameter or buffer '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}'
        )
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    return parametrize.register_parametrization(module, name, orth, unsafe=True)
