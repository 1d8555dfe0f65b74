"""Rotary position embedding on x [..., T, D] with cos/sin tables [Tmax, D/2].

Rows offset .. offset+T of the tables are used (the position of the first token, for a KV cache).
Tables [..., T, D/2] with leading axes broadcasting against x's hold each row's own T positions (a batch
of sequences at different positions); offset is then 0.
interleaved=True rotates adjacent pairs (x[2i], x[2i+1]), the layout of GGUF Llama weights;
interleaved=False rotates the halves (x[i], x[i + D/2]), Hugging Face's layout. Each pair (a, b)
becomes (a*cos - b*sin, a*sin + b*cos).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ...errors import ShapeError
from ...shapes import Dim, Spec, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ..movement import concat
from ..shaping import stack
from ._common import float_inputs


def _canon(x: Spec, cos: Spec, sin: Spec, offset=0, interleaved: bool = True) -> dict:
    if not isinstance(offset, Dim) and (not isinstance(offset, int) or offset < 0):
        raise ShapeError(f"offset must be a non-negative int (or a symbolic size), got {offset!r}")
    return {"offset": offset, "interleaved": bool(interleaved)}


def _shape(x: tuple, cos: tuple, sin: tuple, offset, interleaved: bool) -> tuple:
    if len(x) < 2:
        raise ShapeError(f"x must be [..., T, D] (positions, then features), got {shape_text(x)}")
    if len(cos) < 2 or len(cos) > len(x) or sin != cos:
        raise ShapeError(
            f"cos and sin must both be [Tmax, D/2] (or [..., T, D/2]), "
            f"got {shape_text(cos)} and {shape_text(sin)}"
        )
    t, d = x[-2:]
    if len(cos) > 2:  # per-row tables: exactly T rows, leading axes broadcasting against x's
        lead, xlead = cos[:-2], x[len(x) - len(cos) : -2]
        if offset != 0 or cos[-2] != t or any(c != 1 and c != xs for c, xs in zip(lead, xlead)):
            raise ShapeError(
                f"per-row tables {shape_text(cos)} must be [..., {t}, D/2] broadcasting against x "
                f"{shape_text(x)}, with offset 0 (got {offset})"
            )
    if cos[-1] * 2 != d:
        raise ShapeError(f"the tables have {cos[-1]} columns, so x's last axis must be 2*{cos[-1]}, got {d}")
    end = offset + t
    if len(cos) == 2 and isinstance(end, int) and isinstance(cos[0], int) and end > cos[0]:
        raise ShapeError(f"positions {offset}..{end - 1} need {end} table rows, but the tables have {cos[0]}")
    return x


def _dtype(x: DType, cos: DType, sin: DType, offset, interleaved: bool) -> DType:
    return float_inputs(x, cos, sin)


def _decompose(x, cos, sin, offset, interleaved: bool):
    t, half = x.shape[-2], cos.shape[-1]
    if offset != 0 or t != cos.shape[-2]:
        cos, sin = cos[offset : offset + t], sin[offset : offset + t]
    if interleaved:
        pairs = x.reshape(*x.shape[:-1], half, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        return stack(a * cos - b * sin, a * sin + b * cos, axis=-1).reshape(x.shape)
    a, b = x[..., :half], x[..., half:]
    return concat(a * cos - b * sin, a * sin + b * cos, axis=-1)


def _torch_rope(t, x, cos, sin, offset, interleaved):
    """The same rotation written independently: complex products, or Hugging Face's rotate_half."""
    n = x.shape[-2]
    c, s = cos[..., offset : offset + n, :], sin[..., offset : offset + n, :]
    if interleaved:
        z = t.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous()) * t.complex(c, s)
        return t.view_as_real(z).reshape(x.shape)
    half = x.shape[-1] // 2
    rotated = t.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * t.cat([c, c], dim=-1) + rotated * t.cat([s, s], dim=-1)


def _samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for xs, rows, offset in [((2, 3, 4), 5, 1), ((1, 1, 2), 1, 0), ((2, 2, 4, 6), 4, 0), ((3, 8), 4, 1)]:
        half = xs[-1] // 2
        for interleaved in (True, False):
            cos, sin = uniform(rng, (rows, half)), uniform(rng, (rows, half))
            out.append(Sample((uniform(rng, xs), cos, sin), {"offset": offset, "interleaved": interleaved}))
    for interleaved in (True, False):  # per-row tables: each of 2 sequences at its own 3 positions
        cos, sin = uniform(rng, (2, 1, 3, 2)), uniform(rng, (2, 1, 3, 2))
        out.append(Sample((uniform(rng, (2, 2, 3, 4)), cos, sin), {"interleaved": interleaved}))
    return out


rope = Op(
    "rope",
    shape=_shape,
    dtype=_dtype,
    params=_canon,
    decompose=_decompose,
    samples=_samples,
    torch=_torch_rope,
    exact=False,
    doc="Rotary embedding: pairs of x rotated by the table rows offset..offset+T (see module docstring).",
)
