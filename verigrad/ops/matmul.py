"""Matrix product with NumPy semantics: batch dimensions broadcast, 1-D operands are vectors.

Rounding rule (kernels must reproduce it or state their bound): f16/f32 products accumulate in f64
and round once; f64 in f64.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import DType, bool_, from_numpy_dtype
from ..errors import DTypeError
from ..shapes import matmul_shape
from ._op import Op, Sample, no_bf16, numeric_dtype, unbroadcast
from ._samples import uniform


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = numeric_dtype(*(_dt(a), _dt(b)))
    if out.is_float and out.itemsize < 8:
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(out.np)
    return np.matmul(a.astype(out.np, copy=False), b.astype(out.np, copy=False))


def _dtype(a: DType, b: DType) -> DType:
    """PyTorch's: both operands of one dtype, which the product keeps (no promotion); not bool."""
    no_bf16(a, b)
    if a is not b:
        raise DTypeError(f"expected m1 and m2 to have the same dtype, but got: {a.name} != {b.name}")
    if a is bool_:
        raise DTypeError("matrix products of bool tensors are not supported (as in PyTorch); cast them first")
    return a


def _fast(out: DType, dtypes: tuple[DType, ...]):
    """_reference for operands that already have the result's dtype."""
    if not all(d is out for d in dtypes):
        return None
    if out.is_float and out.itemsize < 8:
        storage = out.np
        return lambda a, b: np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(storage)
    return np.matmul


def _dt(a: np.ndarray) -> DType:
    return from_numpy_dtype(a.dtype)


def _vjp(g, out, a, b):
    """Gradients through the 2-D (or batched) forms; vectors get a dimension added and removed. Each
    only where it is wanted (a first layer's input wants none: a third of an MLP step's products)."""
    a2 = a.reshape((1, *a.shape)) if a.ndim == 1 else a
    b2 = b.reshape((*b.shape, 1)) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2.unsqueeze(-2 if b.ndim > 1 else 0)
    if b.ndim == 1:
        g2 = g2.unsqueeze(-1)
    ga = _first_grad(g2, a, a2, b2) if a.requires_grad else None
    gb = _second_grad(g2, b, a2, b2) if b.requires_grad else None
    return ga, gb


def _first_grad(g2, a, a2, b2):
    if _is_transposed(a):  # a = x.mT: form x's gradient row-major, (b g^T)^T
        return unbroadcast(b2 @ g2.mT, _swapped(a2.shape)).mT
    return unbroadcast(g2 @ b2.mT, a2.shape).reshape(a.shape)


def _second_grad(g2, b, a2, b2):
    if b2.ndim == 2 and a2.ndim > 2 and a2.shape[:-2] == g2.shape[:-2]:
        # a matrix applied to a batch (a Linear's weight): one product over the batch's rows, where the
        # batched product made a [batch, K, N] array to sum, each of its products rounded apart
        rows = math.prod(g2.shape[:-1], start=1)  # not -1: it cannot be inferred for 0 elements
        g2, a2 = g2.reshape(rows, g2.shape[-1]), a2.reshape(rows, a2.shape[-1])
    if _is_transposed(b):  # b = w.mT (Linear's weight.T): w's gradient as g^T a, not a transposed a^T g
        return unbroadcast(g2.mT @ a2, _swapped(b2.shape)).mT
    return unbroadcast(a2.mT @ g2, b2.shape).reshape(b.shape)


def _is_transposed(t) -> bool:
    """Whether `t` was made by swapping the last two axes of a tensor of rank >= 2 (x.mT, or x.T of a
    matrix): its gradient is then best formed in the layout of that tensor, which reads it next."""
    node = t._node
    if node is None or node.op.name != "permute":
        return False
    axes, n = node.params["axes"], t.ndim
    return n >= 2 and tuple(axes) == (*range(n - 2), n - 1, n - 2)


def _swapped(shape: tuple) -> tuple:
    return (*shape[:-2], shape[-1], shape[-2])


matmul = Op(
    "matmul",
    shape=matmul_shape,
    dtype=_dtype,
    reference=_reference,
    vjp=_vjp,
    samples=lambda rng: [
        Sample((uniform(rng, sa), uniform(rng, sb)))
        for sa, sb in [
            ((2, 3), (3, 4)),
            ((3,), (3, 2)),
            ((2, 3), (3,)),
            ((4,), (4,)),
            ((2, 3, 4), (4, 5)),
            ((2, 1, 3, 4), (3, 4, 2)),
            ((0, 3), (3, 2)),
            ((2, 0), (0, 3)),
        ]
    ],
    torch=lambda t, a, b: a @ b,
    exact=False,
    fast=_fast,
    doc="a @ b with NumPy semantics; f32 accumulates in f64 and rounds once.",
)
