"""Scaled-dot-product attention with grouped-query heads, as fused ops with NumPy references.

attention(q, k, v): q [B, H, T, D] holds the queries of the last T of S positions; k [B, KV, S, D]
and v [B, KV, S, Dv] the keys and values of all S positions. H is a multiple of KV: query head h
reads key/value head h // (H/KV) (Hugging Face's `repeat_kv`). Query t (position S-T+t) attends keys
0 .. S-T+t: softmax(q k^T * scale) over that prefix only (the rest get weight exactly 0), times v.
Output [B, H, T, Dv]: the first Dv columns of the op attention_lse(q, k, v), whose last column [B, H, T, 1]
holds each query's log-sum-exp of its visible scaled scores (flash attention's statistic: the backward
reads it instead of running the forward again). The log-sum-exp is differentiable like the output.

cached_attention(q, k, v, past_kt, past_v, bias): the same for T new tokens (keys k, values v
[B, KV, T, D]) after a window of W cached positions, whose keys come transposed, past_kt
[B, KV, D, W], and values past_v [B, KV, W, Dv]; `bias` [T, W+T] is added to the scaled scores of
[window, new] (0 where a key is visible, -inf where not), so each query sees exactly its valid prefix;
a bias [B, T, W+T] gives each sequence its own (a batch of sequences of different lengths).
Inference only (no gradient): a KV cache's decode step.

References: the scores, softmax and products in f64, rounded once to the inputs' dtype; attention's
gradient is the `attention_grad` op, flash attention's backward on the forward's output and log-sum-exp
(`_vjp`; written in ops where the backward is itself differentiated).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import modes
from ...dtypes import DType, f64
from ...errors import ShapeError
from ...shapes import DimLike, Spec, exact_div, shape_text
from ...tensor import Tensor
from .._op import Op, Sample
from .._samples import uniform
from ..binary import where
from ..creation import arange, full
from ._common import float_inputs
from .softmax import softmax


def default_scale(d: DimLike) -> float | None:
    """1/sqrt(D) for a head size D; None for a symbolic D (the ops resolve it from their inputs' sizes
    when they run: `resolve_scale`, `scale_tensor`)."""
    if not isinstance(d, int):
        return None
    return 1.0 / math.sqrt(d) if d > 0 else 1.0


def resolve_scale(scale: float | None, d: int) -> float:
    """The scale a run uses: `scale`, or 1/sqrt(D) of the arrays at hand."""
    return default_scale(d) if scale is None else scale  # type: ignore[return-value]


def scale_tensor(scale: float | None, d: DimLike, dtype: DType) -> Tensor | float:
    """The scale as a factor of ops: the float, or 1/sqrt(D) for a symbolic D as a 0-d tensor of
    `dtype` bound when the plan is (formed in f64 and rounded once, as the float would be)."""
    if scale is not None or isinstance(d, int):
        return resolve_scale(scale, d)  # type: ignore[arg-type]
    return full((), d, dtype=f64).rsqrt().cast(dtype)


def _canon(q: Spec, *rest: Spec, scale: float | None = None) -> dict:
    if scale is None:
        return {"scale": default_scale(q.shape[-1] if q.ndim else 1)}
    scale = float(scale)
    if not math.isfinite(scale):
        raise ShapeError(f"scale must be a finite number, got {scale}")
    return {"scale": scale}


def _heads(q: tuple, k: tuple, v: tuple) -> None:
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ShapeError(
            "q, k and v must be [B, heads, positions, head_dim], got "
            f"{shape_text(q)}, {shape_text(k)} and {shape_text(v)}"
        )
    (b, h, _, d), (bk, kv, s, dk) = q, k
    if bk != b or v[0] != b:
        raise ShapeError(f"q, k and v must share the batch size {b}, got {bk} and {v[0]}")
    if dk != d:
        raise ShapeError(f"q's and k's head dims must be equal, got {d} and {dk}")
    if v[1:3] != (kv, s):
        raise ShapeError(f"v must be [{b}, {kv}, {s}, Dv] like k, got {shape_text(v)}")
    if exact_div(h, kv) is None:
        raise ShapeError(f"the {h} query heads are not a multiple of the {kv} key/value heads")


def _shape(q: tuple, k: tuple, v: tuple, scale: float | None) -> tuple:
    _heads(q, k, v)
    t, s = q[2], k[2]
    if isinstance(t, int) and isinstance(s, int) and t > s:
        raise ShapeError(f"{t} queries need at least {t} key positions, got {s}")
    return (*q[:3], v[3] + 1)


def _dtype(*dtypes: DType, scale: float | None) -> DType:
    return float_inputs(*dtypes)


def _softmax64(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=-1, keepdims=True, initial=-np.inf))  # none: no rows (S = T = 0)
    return e / e.sum(axis=-1, keepdims=True)


def _masked_scores(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    """The scaled scores [B, KV, G, T, S] in f64, -inf at the keys a query does not see."""
    b, h, t, d = q.shape
    kv, s = k.shape[1], k.shape[2]
    qg = q.astype(np.float64).reshape(b, kv, h // kv, t, d)
    scores = qg @ np.swapaxes(k.astype(np.float64), -1, -2)[:, :, None] * scale
    return np.where(np.arange(s - t, s)[:, None] >= np.arange(s), scores, -np.inf)


def _reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float | None) -> np.ndarray:
    b, h, t, d = q.shape
    scores = _masked_scores(q, k, resolve_scale(scale, d))  # [B, KV, G, T, S]
    m = scores.max(axis=-1, keepdims=True, initial=-np.inf)  # none: no rows (S = T = 0)
    e = np.exp(scores - m)
    total = e.sum(axis=-1, keepdims=True)
    kv, s, dv = k.shape[1], k.shape[2], v.shape[3]
    out = (e / total).reshape(b, kv, h // kv * t, s) @ v.astype(np.float64)
    # an infinite maximum shifts by 0, as torch.logsumexp (an infinite score gives inf, not NaN)
    shift = np.where(np.isinf(m), 0.0, m)
    lse = (shift + np.log(np.exp(scores - shift).sum(axis=-1, keepdims=True))).reshape(b, h, t, 1)
    return np.concatenate([out.reshape(b, h, t, dv), lse], axis=-1).astype(q.dtype)


def attention_output(packed: Tensor) -> Tensor:
    """The attention's output [B, H, T, Dv] from `attention_lse`'s [B, H, T, Dv + 1] (a view)."""
    return packed[..., : packed.shape[-1] - 1]


def attention(q: Any, k: Any, v: Any, scale: float | None = None) -> Tensor:
    """Causal grouped-query attention of the last T of S positions [B, H, T, Dv] (the module docstring):
    attention_lse's output, whose backward reads the log-sum-exp it keeps."""
    return attention_output(attention_lse(q, k, v, scale=scale))


def _vjp(g, out, q, k, v, scale: float | None):
    """The gradients of q, k and v: the fused `attention_grad` op on the forward's output and log-sum-exp,
    or, where the backward pass is itself recorded (`create_graph=True`: grad mode on), the same written
    in ops, so that it can be differentiated again."""
    if modes.LOCAL.grad[-1]:
        return _vjp_in_ops(g, q, k, v, scale)
    return unpack_grads(attention_grad(g, q, k, v, out, scale=scale), q, k, v)


def _vjp_in_ops(g, q, k, v, scale: float | None):
    """The gradient of the op written in ops: softmax(mask(q k^T * scale)) v and its log-sum-exp,
    differentiated by hand (the log-sum-exp's gradient glse adds p glse to the scores' gradient)."""
    b, h, t, d = q.shape
    scale = scale_tensor(scale, d, q.dtype)
    kv, s, dv = k.shape[1], k.shape[2], v.shape[3]
    group = exact_div(h, kv)
    qg, kg, vg = q.reshape(b, kv, group, t, d), k.unsqueeze(2), v.unsqueeze(2)
    visible = arange(s - t, s).unsqueeze(-1) >= arange(s)
    p = softmax(where(visible, qg @ kg.mT * scale, float("-inf")), axis=-1)  # [B, KV, G, T, S]
    gg = g[..., :dv].reshape(b, kv, group, t, dv)
    glse = g[..., dv:].reshape(b, kv, group, t, 1)
    dp = gg @ vg.mT
    ds = p * (dp - ((dp * p).sum(axis=-1, keepdim=True) - glse)) * scale
    dq = (ds @ kg).reshape(b, h, t, d)
    return dq, (ds.mT @ qg).sum(axis=2), (p.mT @ gg).sum(axis=2)


def _torch_attention(t, q, k, v, scale):
    group = q.shape[1] // k.shape[1]
    n, s = q.shape[2], k.shape[2]
    mask = t.ones(n, s, dtype=t.bool).tril(s - n)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2) * scale).masked_fill(~mask, float("-inf"))
    out = scores.softmax(dim=-1) @ v  # not the fused SDPA kernel: it turns NaN rows into zeros
    return t.cat([out, scores.logsumexp(dim=-1, keepdim=True)], dim=-1)


def _samples(rng: np.random.Generator) -> list[Sample]:
    cases = [  # (B, H, KV, T, S, D, Dv, scale)
        (1, 2, 2, 3, 3, 4, 4, None),
        (2, 4, 2, 2, 5, 3, 3, 0.5),
        (1, 3, 1, 1, 4, 2, 5, None),
        (2, 1, 1, 1, 1, 2, 2, 1.0),
    ]
    out = []
    for b, h, kv, t, s, d, dv, scale in cases:
        arrays = (uniform(rng, (b, h, t, d)), uniform(rng, (b, kv, s, d)), uniform(rng, (b, kv, s, dv)))
        out.append(Sample(arrays, {} if scale is None else {"scale": scale}))
    return out


attention_lse = Op(
    "attention_lse",
    shape=_shape,
    dtype=_dtype,
    params=lambda q, k, v, scale=None: _canon(q, scale=scale),
    reference=_reference,
    vjp=_vjp,
    samples=_samples,
    torch=_torch_attention,
    exact=False,
    doc="Causal grouped-query attention of the last T of S positions and each query's log-sum-exp "
    "([B, H, T, Dv + 1]; see the module docstring).",
)


# attention's gradients -------------------------------------------------------------------------------
def _grad_shape(g: tuple, q: tuple, k: tuple, v: tuple, out: tuple, scale: float | None) -> tuple:
    want = _shape(q, k, v, scale)
    for name, got in (("output gradient", g), ("forward's output", out)):
        if got != want:
            raise ShapeError(
                f"the {name} must be [{', '.join(map(str, want))}] (attention's output and log-sum-exp), "
                f"got {shape_text(got)}"
            )
    (b, h, t, d), (kv, s, dv) = q, (k[1], k[2], v[3])
    return (b, kv, exact_div(h, kv) * t * d + s * d + s * dv)


def _pack(dq: np.ndarray, dk: np.ndarray, dv: np.ndarray) -> np.ndarray:
    """[B, KV, G T D + S D + S Dv]: per key/value head, the dq of its G query heads, its dk, its dv."""
    b, kv = dk.shape[:2]
    parts = [x.reshape(b, kv, x.size // (b * kv) if x.size else 0) for x in (dq, dk, dv)]
    return np.concatenate(parts, axis=-1)


def _grad_reference(g, q, k, v, out, scale: float | None) -> np.ndarray:
    """Flash attention's backward in f64, rounded once, packed (`_pack`): p = exp(s - lse) from the
    forward's log-sum-exp, delta = rowsum(g * out) - glse from its output (`out` [..., Dv + 1] holds both;
    g's last column is the log-sum-exp's gradient glse), ds = p (g v^T - delta) scale."""
    b, h, t, d = q.shape
    scale = resolve_scale(scale, d)
    kv, dv = k.shape[1], v.shape[3]
    qg = q.astype(np.float64).reshape(b, kv, h // kv, t, d)
    k64, v64 = k.astype(np.float64)[:, :, None], v.astype(np.float64)[:, :, None]
    out64 = out.astype(np.float64).reshape(b, kv, h // kv, t, dv + 1)
    g64 = g.astype(np.float64).reshape(b, kv, h // kv, t, dv + 1)
    gg = g64[..., :dv]
    p = np.exp(_masked_scores(q, k, scale) - out64[..., dv:])
    delta = (gg * out64[..., :dv]).sum(axis=-1, keepdims=True) - g64[..., dv:]
    ds = p * (gg @ np.swapaxes(v64, -1, -2) - delta) * scale
    grads = ds @ k64, (np.swapaxes(ds, -1, -2) @ qg).sum(axis=2), (np.swapaxes(p, -1, -2) @ gg).sum(axis=2)
    return _pack(*grads).astype(q.dtype)


def unpack_grads(packed: Tensor, q: Any, k: Any, v: Any) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk and dv from attention_grad's packed result (q, k and v: anything with their shapes)."""
    (b, h, t, d), (kv, s, dv) = q.shape, (k.shape[1], k.shape[2], v.shape[3])
    n_q, n_k = exact_div(h, kv) * t * d, s * d
    return (
        packed[:, :, :n_q].reshape(b, h, t, d),
        packed[:, :, n_q : n_q + n_k].reshape(b, kv, s, d),
        packed[:, :, n_q + n_k :].reshape(b, kv, s, dv),
    )


def _grad_samples(rng: np.random.Generator) -> list[Sample]:
    """The forward's samples with an output gradient and the forward's result (its reference's, in f64:
    the registry's suites cast it with the other operands, as a forward in that dtype would round it)."""
    out = []
    for sample in _samples(rng):
        q, k, v = sample.args
        forward = _reference(q, k, v, sample.params.get("scale"))
        out.append(Sample((uniform(rng, forward.shape), q, k, v, forward), sample.params))
    return out


def _torch_grad(t, g, q, k, v, out, scale):
    """Flash attention's backward (PyTorch's, as `_scaled_dot_product_flash_attention_for_cpu_backward`
    computes it) on the given output and log-sum-exp, with the log-sum-exp's gradient, in torch ops."""
    group, (b, kv, s, d), dv = q.shape[1] // k.shape[1], k.shape, v.shape[3]
    n = q.shape[2]
    mask = t.ones(n, s, dtype=t.bool).tril(s - n)
    kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ kr.transpose(-1, -2) * scale).masked_fill(~mask, float("-inf"))
    p = (scores - out[..., dv:]).exp()
    gg = g[..., :dv]
    delta = (gg * out[..., :dv]).sum(dim=-1, keepdim=True) - g[..., dv:]
    ds = p * (gg @ vr.transpose(-1, -2) - delta) * scale
    dk = (ds.transpose(-1, -2) @ q).reshape(b, kv, group, s, d).sum(dim=2)
    dvv = (p.transpose(-1, -2) @ gg).reshape(b, kv, group, s, dv).sum(dim=2)
    return t.cat([x.reshape(b, kv, -1) for x in (ds @ kr, dk, dvv)], dim=-1)


attention_grad = Op(
    "attention_grad",
    shape=_grad_shape,
    dtype=_dtype,
    params=lambda g, q, k, v, out, scale=None: _canon(q, scale=scale),
    reference=_grad_reference,
    samples=_grad_samples,
    torch=_torch_grad,
    exact=False,
    differentiable=False,
    doc="The gradients of attention_lse(q, k, v) for the gradient g of its output and log-sum-exp, from the "
    "forward's result `out` (flash attention's backward: no forward pass), packed per key/value head "
    "([B, KV, G T D + S D + S Dv]: dq of its G query heads, dk, dv; `unpack_grads` reads them): attention's "
    "backward pass (with create_graph=True the backward is written in ops instead).",
)


# the cached step's attention ------------------------------------------------------------------------
def _cached_shape(
    q: tuple, k: tuple, v: tuple, past_kt: tuple, past_v: tuple, bias: tuple, scale: float | None
) -> tuple:
    _heads(q, k, v)
    (b, kv, t, d), w = k, past_v[2] if len(past_v) == 4 else None
    if len(past_kt) != 4 or len(past_v) != 4 or past_kt != (b, kv, d, w) or past_v[:2] != (b, kv):
        raise ShapeError(
            f"the window must be past_kt [{b}, {kv}, {d}, W] and past_v [{b}, {kv}, W, {v[3]}], "
            f"got {shape_text(past_kt)} and {shape_text(past_v)}"
        )
    if past_v[3] != v[3]:
        raise ShapeError(f"past_v's head dim must be v's {v[3]}, got {past_v[3]}")
    if q[2] != t:
        raise ShapeError(f"q and k must hold the same {t} new positions, got {q[2]}")
    if bias != (t, w + t) and bias != (b, t, w + t):
        raise ShapeError(
            f"bias must be [T, W+T] = [{t}, {w + t}] or [B, T, W+T] = [{b}, {t}, {w + t}], "
            f"got {shape_text(bias)}"
        )
    return (*q[:3], v[3])


def _cached_reference(q, k, v, past_kt, past_v, bias, scale: float | None) -> np.ndarray:
    b, h, t, d = q.shape
    scale = resolve_scale(scale, d)
    kv, w = k.shape[1], past_v.shape[2]
    q64 = q.astype(np.float64).reshape(b, kv, h // kv * t, d)
    keys = (past_kt.astype(np.float64), np.swapaxes(k.astype(np.float64), -1, -2))
    scores = np.concatenate([q64 @ keys[0], q64 @ keys[1]], axis=-1).reshape(b, kv, h // kv, t, w + t)
    bias64 = bias.astype(np.float64) if bias.ndim == 2 else bias.astype(np.float64)[:, None, None]
    p = _softmax64(scores * scale + bias64).reshape(b, kv, h // kv * t, w + t)
    out = p[..., :w] @ past_v.astype(np.float64) + p[..., w:] @ v.astype(np.float64)
    return out.reshape(b, h, t, v.shape[3]).astype(q.dtype)


def _torch_cached(t, q, k, v, past_kt, past_v, bias, scale):
    group = q.shape[1] // k.shape[1]
    keys = t.cat([past_kt.transpose(-1, -2), k], dim=2).repeat_interleave(group, dim=1)
    values = t.cat([past_v, v], dim=2).repeat_interleave(group, dim=1)
    bias = bias if bias.dim() == 2 else bias[:, None]
    return (q @ keys.transpose(-1, -2) * scale + bias).softmax(dim=-1) @ values


def cached_samples(rng: np.random.Generator, dims: tuple[int, ...], window: Any) -> list[Sample]:
    """The cached step's sample cases with head dims `dims` (one a case): three windows of `length`
    positions in use, masked with the new tokens' causal part, and a batch of two with a mask per sequence
    (the second's window holds 2 positions, the first's 4). window(rng, [B, KV, W, D]) makes the past keys
    and values as the op takes them (cached_attention_q8 shares these cases)."""
    out = []
    cases = [(1, 6, 2, 1, 4, 2), (2, 2, 2, 3, 5, 5), (1, 3, 1, 2, 3, 0), (2, 4, 2, 2, 4, 4)]
    for (b, h, kv, t, w, length), d in zip(cases, dims):
        bias = np.zeros((t, w + t))
        bias[:, length:w] = -np.inf
        bias[:, w:][np.triu_indices(t, 1)] = -np.inf
        if b == 2:
            bias = np.stack([bias, bias])
            bias[1, :, 2:w] = -np.inf
        new = [uniform(rng, s) for s in [(b, h, t, d), (b, kv, t, d), (b, kv, t, d)]]
        out.append(Sample((*new, *window(rng, (b, kv, w, d)), bias)))
    return out


def _cached_window(rng: np.random.Generator, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    b, kv, w, d = shape
    return uniform(rng, (b, kv, d, w)), uniform(rng, shape)


def cached_params(q: Spec, *rest: Spec, scale: float | None = None) -> dict:
    """The cached ops' one param, the scale (1 / sqrt(D) when None)."""
    return _canon(q, scale=scale)


cached_attention = Op(
    "cached_attention",
    shape=_cached_shape,
    dtype=_dtype,
    params=cached_params,
    reference=_cached_reference,
    samples=lambda rng: cached_samples(rng, (4, 3, 2, 3), _cached_window),
    torch=_torch_cached,
    exact=False,
    differentiable=False,
    doc="Attention of T new tokens over a cache window and themselves, masked by an additive bias "
    "(see the module docstring).",
)
