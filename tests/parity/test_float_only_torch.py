"""Functions PyTorch computes on floats only: on integer and bool tensors verigrad refuses exactly where
PyTorch does (linalg's decompositions, solvers and products, the float activations and losses, hypot,
logaddexp, lerp, addcdiv, pdist, embedding_bag, affine_grid and grid_sample; on bools, trace, median,
topk, kthvalue and reflect or replicate padding), and answers in PyTorch's
dtype where it answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

M = np.array([[4, 1, 2], [1, 5, 3], [2, 3, 6]])
V = np.array([1, 2, 3])

CALLS = {
    "linalg.vecdot": lambda t, m, v: t.linalg.vecdot(v, v),
    "linalg.det": lambda t, m, v: t.linalg.det(m),
    "det": lambda t, m, v: t.det(m),
    "logdet": lambda t, m, v: t.logdet(m),
    "linalg.slogdet": lambda t, m, v: t.linalg.slogdet(m)[1],
    "linalg.inv": lambda t, m, v: t.linalg.inv(m),
    "linalg.inv_ex": lambda t, m, v: t.linalg.inv_ex(m)[0],
    "inverse": lambda t, m, v: t.inverse(m),
    "linalg.tensorinv": lambda t, m, v: t.linalg.tensorinv(m, 1),
    "linalg.solve": lambda t, m, v: t.linalg.solve(m, v),
    "linalg.solve_ex": lambda t, m, v: t.linalg.solve_ex(m, v)[0],
    "linalg.tensorsolve": lambda t, m, v: t.linalg.tensorsolve(m, v),
    "linalg.cholesky": lambda t, m, v: t.linalg.cholesky(m),
    "linalg.cholesky_ex": lambda t, m, v: t.linalg.cholesky_ex(m)[0],
    "cholesky_inverse": lambda t, m, v: t.cholesky_inverse(m),
    "cholesky_solve": lambda t, m, v: t.cholesky_solve(m, m),
    "linalg.qr": lambda t, m, v: t.linalg.qr(m)[0],
    "linalg.eigh": lambda t, m, v: t.linalg.eigh(m)[0],
    "linalg.eigvalsh": lambda t, m, v: t.linalg.eigvalsh(m),
    "linalg.svd": lambda t, m, v: t.linalg.svd(m)[1],
    "svd": lambda t, m, v: t.svd(m)[1],
    "linalg.svdvals": lambda t, m, v: t.linalg.svdvals(m),
    "linalg.pinv": lambda t, m, v: t.linalg.pinv(m),
    "pinverse": lambda t, m, v: t.pinverse(m),
    "linalg.lstsq": lambda t, m, v: t.linalg.lstsq(m, m)[0],
    "linalg.matrix_rank": lambda t, m, v: t.linalg.matrix_rank(m),
    "linalg.cond": lambda t, m, v: t.linalg.cond(m),
    "linalg.lu": lambda t, m, v: t.linalg.lu(m)[1],
    "linalg.lu_factor": lambda t, m, v: t.linalg.lu_factor(m)[0],
    "linalg.solve_triangular": lambda t, m, v: t.linalg.solve_triangular(m, m, upper=True),
    "triangular_solve": lambda t, m, v: t.triangular_solve(m, m)[0],
    "linalg.householder_product": lambda t, m, v: t.linalg.householder_product(m, v),
    "ormqr": lambda t, m, v: t.ormqr(m, v, m),
    "geqrf": lambda t, m, v: t.geqrf(m)[0],
    "linalg.matrix_exp": lambda t, m, v: t.linalg.matrix_exp(m),
    "linalg.norm": lambda t, m, v: t.linalg.norm(m),
    "linalg.vector_norm": lambda t, m, v: t.linalg.vector_norm(v),
    "linalg.matrix_norm": lambda t, m, v: t.linalg.matrix_norm(m),
    "linalg.matrix_norm_nuc": lambda t, m, v: t.linalg.matrix_norm(m, "nuc"),
    "linalg.matrix_norm_2": lambda t, m, v: t.linalg.matrix_norm(m, 2),
    "linalg.ldl_factor": lambda t, m, v: t.linalg.ldl_factor(m)[0],
    "linalg.matrix_power": lambda t, m, v: t.linalg.matrix_power(m, 2),
    "linalg.multi_dot": lambda t, m, v: t.linalg.multi_dot([m, m]),
    "linalg.cross": lambda t, m, v: t.linalg.cross(m, m),
    "linalg.vander": lambda t, m, v: t.linalg.vander(v),
    "linalg.diagonal": lambda t, m, v: t.linalg.diagonal(m),
    "hypot": lambda t, m, v: t.hypot(v, v),
    "logaddexp": lambda t, m, v: t.logaddexp(v, v),
    "logaddexp2": lambda t, m, v: t.logaddexp2(v, v),
    "lerp": lambda t, m, v: t.lerp(v, v, 0.5),
    "lerp_tensor": lambda t, m, v: t.lerp(v, v, v),
    "addcdiv": lambda t, m, v: t.addcdiv(v, v, v),
    "addcdiv_float_x": lambda t, m, v: t.addcdiv(v * 1.0, v, v),
    "addcmul": lambda t, m, v: t.addcmul(v, v, v),
    "pdist": lambda t, m, v: t.nn.functional.pdist(m),
    "embedding_bag": lambda t, m, v: t.nn.functional.embedding_bag(t.arange(3), m, t.arange(1)),
    "affine_grid": lambda t, m, v: t.nn.functional.affine_grid(m[None, :2], (1, 1, 2, 2)),
    "grid_sample": lambda t, m, v: t.nn.functional.grid_sample(
        m[None, None], m[None, :2, :2, None].expand(1, 2, 2, 2)
    ),
    **{
        name: (lambda name: lambda t, m, v: getattr(t.nn.functional, name)(v))(name)
        for name in [
            "gelu",
            "silu",
            "leaky_relu",
            "elu",
            "selu",
            "celu",
            "rrelu",
            "softplus",
            "mish",
            "hardsigmoid",
            "hardswish",
            "hardshrink",
            "softshrink",
            "logsigmoid",
            "relu",
            "relu6",
            "hardtanh",
            "tanhshrink",
            "softsign",
            "sigmoid",
            "tanh",
        ]
    },
    "glu": lambda t, m, v: t.nn.functional.glu(m[:2, :2]),
    "prelu": lambda t, m, v: t.nn.functional.prelu(v, v[:1]),
    **{
        name: (lambda name: lambda t, m, v: getattr(t.nn.functional, name)(v, v))(name)
        for name in [
            "smooth_l1_loss",
            "huber_loss",
            "kl_div",
            "soft_margin_loss",
            "hinge_embedding_loss",
            "mse_loss",
            "l1_loss",
        ]
    },
    "multi_margin_loss": lambda t, m, v: t.nn.functional.multi_margin_loss(m, t.arange(3)),
    "gaussian_nll_loss": lambda t, m, v: t.nn.functional.gaussian_nll_loss(v, v, v),
    "trace": lambda t, m, v: t.trace(m),
    "median": lambda t, m, v: t.median(v),
    "median_dim": lambda t, m, v: t.median(m, 0)[0],
    "nanmedian": lambda t, m, v: t.nanmedian(v),
    "topk": lambda t, m, v: t.topk(v, 1)[0],
    "kthvalue": lambda t, m, v: t.kthvalue(v, 1)[0],
    "pad_reflect": lambda t, m, v: t.nn.functional.pad(m[None], (1, 1), mode="reflect"),
    "pad_replicate": lambda t, m, v: t.nn.functional.pad(m[None], (1, 1), mode="replicate"),
    "pad_circular": lambda t, m, v: t.nn.functional.pad(m[None], (1, 1), mode="circular"),
}


def _run(t, name: str, dtype: str):
    m = t.from_numpy(M.astype(dtype) if dtype != "bool" else M > 2)
    v = t.from_numpy(V.astype(dtype) if dtype != "bool" else V > 1)
    try:
        out = CALLS[name](t, m, v)
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        return None
    return out.detach() if t is torch else out


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name", list(CALLS))
def test_refuses_integers_where_pytorch_does(name: str, dtype: str) -> None:
    theirs, ours = _run(torch, name, dtype), _run(verigrad, name, dtype)
    assert (ours is None) == (theirs is None), f"PyTorch {'raises' if theirs is None else 'answers'}"
    if ours is not None:
        assert ours.dtype is getattr(verigrad, str(theirs.dtype)[6:])
        np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64))
