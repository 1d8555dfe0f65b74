"""Every op in `verigrad.REGISTRY` against PyTorch, driven by the registry.

For each op with a `torch` lambda (`op.torch(torch, *tensors, **canonical_params)`) and each of its
samples: the forward result in f64 and f32, and, for a differentiable op, the vector-Jacobian product
(the gradient of sum(out * cotangent) for one random cotangent) with respect to every float input;
then the forward result again with the float inputs filled with signed zeros, infinities and NaN.
An op added to the registry is tested here with no new test code; an op without a `torch` lambda
must be named in `NO_TORCH_COUNTERPART`, with the reason. Listed ops that PyTorch computes inside
its backward pass are compared with those kernels (`BACKWARD_KERNELS`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import verigrad
from verigrad.ops import Sample

OPS = dict(sorted(verigrad.REGISTRY.items()))
DTYPES = {"f64": np.float64, "f32": np.float32}

# Ops PyTorch has no public counterpart for. Each must still be covered by the main suite.
NO_TORCH_COUNTERPART = {
    # derivative ops: PyTorch has them only as backward kernels (see BACKWARD_KERNELS)
    "gelu_deriv",
    "gelu_tanh_deriv",
    "relu_deriv",
    "sigmoid_deriv",
    "silu_deriv",
    "tanh_deriv",
    # positions checked against a size (the functions that read them raise PyTorch's errors' kinds;
    # tests/test_data_checks.py)
    "check_index",
    # VJP helpers that scatter a gradient back into zeros (slice's and take's VJPs); as above
    "take_grad",
    "unslice",
    # VJPs as ops (one kernel for a backend); the ops' gradients above them are compared with PyTorch's
    "cross_entropy_grad",
    "cross_entropy_step",
    "cross_entropy_total",
    "layer_norm_grad",
    "rms_norm_grad",
    "layer_norm_weight_grad",
    "rms_norm_weight_grad",
    # on a window holding NaN PyTorch sends the gradient to the last NaN, the reference to the first;
    # max_pool2d's gradient (which runs this op) is compared with PyTorch's
    "max_pool2d_grad",
    # ctc_loss's per-sample loss and its VJP: ctc_nll's gradient is the true one (-posterior), where PyTorch's
    # only public form, ctc_loss, adds exp(log_probs) in its backward (it assumes log_softmax outputs), as
    # verigrad's ctc_loss does on top of ctc_nll; ctc_loss is compared with PyTorch's values and gradients in
    # tests/parity/test_opinfo_round3_torch.py and tests/parity/test_losses_torch.py
    "ctc_nll",
    "ctc_nll_grad",
    # a size as a 0-d tensor, so that it stays symbolic in traces
    "numel_of",
    # random ops: PCG64 streams, which PyTorch's generator does not reproduce
    "dropout",
    "rand",
    "randint",
    "randn",
    # GGML's quantized blocks (GGUF files): PyTorch has no such formats; tests/test_quant.py holds them to
    # the gguf package's dequantizer and to hand-computed values
    "dequantize",
    "qembedding",
    "qmatmul",
    "qmatmul_q8",
    "rms_norm_qmatmul_q8",
    "qmatmul_q8_group",
    "rms_norm_qmatmul_q8_group",
    # eigen and singular vectors, unique up to sign, which LAPACK builds choose differently; held to
    # PyTorch's up to sign, values and gradients, in tests/parity/test_linalg_torch.py
    "eigh_vectors",
    "svd_u",
    "svd_vh",
    # collectives (verigrad.distributed): torch.distributed's need a process group; held to the
    # rank-order reference on 2 and 3 ranks in tests/test_distributed.py
    "all_gather",
    "all_reduce",
    "dist_broadcast",
    "reduce_scatter",
}


# Ops that are not exactly rounded (`op.exact` False) and all gradients: the relative tolerance is a
# few ulps of f64 or f32 widened to allow for a different order of summation; the absolute term scales
# with the largest magnitude in the result, because the rounding error of a sum is relative to its
# terms, not to its (possibly cancelled) value. Exactly rounded ops must agree bit for bit. In f32,
# an element may also pass by being at least as close to PyTorch's f64 result as PyTorch's f32 one is
# (see `assert_matches`).
RTOL = {"f64": 1e-12, "f32": 1e-5}
ATOL = {"f64": 1e-12, "f32": 1e-6}


def _unslice(t, g, shape, index):
    for axis in reversed(range(len(shape))):  # one axis at a time; the others keep their sliced size
        sizes = [*g.shape[:axis], shape[axis], *g.shape[axis + 1 :]]
        g = t.ops.aten.slice_backward(g, sizes, axis, *index[axis])
    return g


def _take_grad(t, g, idx, axis, size):
    before, after = g.shape[:axis], g.shape[axis + idx.ndim :]
    g = g.reshape(*before, idx.numel(), *after)
    return t.ops.aten.index_select_backward(g, [*before, size, *after], axis, idx.reshape(-1))


def _silu_deriv(t, x):
    """silu's derivative from autograd: aten::silu_backward itself has no derivative, and silu_deriv
    has a VJP (second derivatives); with grad mode on, torch's silu backward is differentiable."""
    leaf = x if x.requires_grad else x.detach().requires_grad_(True)
    with t.enable_grad():
        (d,) = t.autograd.grad(
            t.nn.functional.silu(leaf), leaf, t.ones_like(leaf), create_graph=x.requires_grad
        )
    return d


# PyTorch's internal backward kernels for listed ops that have one (a gradient of ones gives the
# derivative), compared like a torch lambda.
BACKWARD_KERNELS = {
    "gelu_deriv": lambda t, x: t.ops.aten.gelu_backward(t.ones_like(x), x),
    "gelu_tanh_deriv": lambda t, x: t.ops.aten.gelu_backward(t.ones_like(x), x, approximate="tanh"),
    "relu_deriv": lambda t, x: t.ops.aten.threshold_backward(t.ones_like(x), x, 0),
    "sigmoid_deriv": lambda t, y: t.ops.aten.sigmoid_backward(t.ones_like(y), y),
    "silu_deriv": _silu_deriv,
    "tanh_deriv": lambda t, y: t.ops.aten.tanh_backward(t.ones_like(y), y),
    "take_grad": _take_grad,
    "unslice": _unslice,
}


def _torch_fn(op: Any) -> Any:
    """What computes `op` in PyTorch: its torch lambda, else a backward kernel, else None."""
    return op.torch or BACKWARD_KERNELS.get(op.name)


def _exact(op: Any) -> bool:
    """Bit-identical to torch: an exactly rounded op against its public counterpart. A backward kernel
    evaluates its formula in its own way (tanh_backward rounds 1 - y*y once, verigrad's reference
    rounds y*y first: a few ulps apart where 1 - y*y cancels) and has its own NaN rule
    (threshold_backward passes the gradient at NaN, where relu_deriv's x > 0 gives 0), so it is held
    to the tolerance and left out of the special-value tests."""
    return op.exact and op.torch is not None


TORCH_DTYPES = {
    "bool": torch.bool,
    "i32": torch.int32,
    "i64": torch.int64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
}


def _samples(op: Any) -> list[Sample]:
    return list(op.samples(np.random.default_rng(0))) if op.samples is not None else []


def _has_float(sample: Sample) -> bool:
    return any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in sample.args)


def _cases(grad: bool, floats: bool = False, public: bool = False) -> list[Any]:
    """(name, dtype, index) for every sample of every op PyTorch computes (with a torch lambda only, for
    `public`; differentiable ops and samples with float arrays only, for `grad`; samples with float
    arrays only, for `floats`). A sample without float arrays does not depend on the dtype under test
    and runs once, as f64."""
    cases = []
    for name, op in OPS.items():
        refused = getattr(op, "no_derivative", None) is not None  # torch refuses it too (floor_divide)
        if (op.torch if public else _torch_fn(op)) is None or (grad and (not op.differentiable or refused)):
            continue
        for index, sample in enumerate(_samples(op)):
            if (grad or floats) and not _has_float(sample):
                continue
            for dtype in DTYPES if _has_float(sample) else ["f64"]:
                cases.append(pytest.param(name, dtype, index, id=f"{name}-{dtype}-{index}"))
    return cases


def _arrays(sample: Sample, dtype: str) -> list[Any]:
    """The sample's args with float arrays cast to `dtype` (layout kept); the rest as they are."""
    return [
        a.astype(DTYPES[dtype]) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
        for a in sample.args
    ]


def _copy(a: Any) -> Any:
    return np.array(a, copy=True, order="K") if isinstance(a, np.ndarray) else a


def _verigrad_args(arrays: list[Any], grad: bool) -> list[Any]:
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray):
            t = verigrad.from_numpy(_copy(a))
            out.append(t.requires_grad_(True) if grad and t.dtype.is_float else t)
        else:
            out.append(a)
    return out


def _torch_args(arrays: list[Any], grad: bool) -> list[Any]:
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray):
            t = torch.from_numpy(_copy(a))
            out.append(t.requires_grad_(True) if grad and t.is_floating_point() else t)
        else:
            out.append(a)
    return out


def _canonical(op: Any, args: list[Any], params: dict) -> dict:
    """The params as the op records them (what its torch lambda receives)."""
    if op.canonical_params is None:
        return dict(params)
    specs = [a.spec for a in args if isinstance(a, verigrad.Tensor)]
    return op.canonical_params(*specs, **params)


def _numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return t.float().numpy() if t.dtype is torch.bfloat16 else t.numpy()


def _torch(op: Any, arrays: list[Any], params: dict, cotangent: np.ndarray | None = None) -> tuple:
    """torch's result and, given a cotangent, its gradients for the float inputs (None elsewhere)."""
    args = _torch_args(arrays, grad=cotangent is not None)
    out = _torch_fn(op)(torch, *args, **params)
    assert isinstance(out, torch.Tensor), f"{op.name}: the torch lambda gave {type(out).__name__}"
    if cotangent is None:
        return out, []
    assert out.requires_grad, f"torch records no gradient for {op.name}: check its torch lambda"
    out.backward(torch.from_numpy(cotangent.astype(_numpy(out).dtype)))
    grads = []
    for t in args:
        if not isinstance(t, torch.Tensor) or not t.requires_grad:
            grads.append(None)
            continue
        grads.append(_numpy(t.grad) if t.grad is not None else np.zeros(tuple(t.shape), _numpy(t).dtype))
    return out, grads


def _in_f64(arrays: list[Any]) -> list[Any]:
    """f32 arrays widened to f64 (exactly): the same inputs, for PyTorch's f64 result."""
    return [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in arrays]


def assert_matches(
    actual: np.ndarray,
    expected: np.ndarray,
    dtype: str,
    exact: bool,
    what: str,
    truth: np.ndarray | None = None,
) -> None:
    """Equal shapes and dtypes; then bit-identical values (NaN where NaN) if `exact`, else close, with
    NaN where torch has NaN and the same infinities.

    `truth` (for f32: PyTorch's f64 result on the same inputs) also accepts an element where verigrad
    is at least as close to it as PyTorch's f32 result is (or equal to it, NaN and inf included). Two
    f32 evaluation orders can differ by more than the tolerance where the problem amplifies rounding:
    layer_norm over an axis of size 1 is exactly `bias` (x - mean is 0), but torch computes
    x * rstd - mean * rstd, whose f32 rounding is multiplied by rstd = 1/sqrt(eps). And torch's f32
    conv2d can give a finite value where the f64 one (and verigrad's f32 one) gives NaN.
    """
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != torch's {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != torch's {expected.dtype}"
    if exact or actual.dtype.kind != "f":
        nan = actual.dtype.kind == "f"
        assert np.array_equal(actual, expected, equal_nan=nan), (
            f"{what}: not bit-identical to torch\n ours:  {actual!r}\n torch: {expected!r}"
        )
        return
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    finite = np.isfinite(a) & np.isfinite(e)
    scale = float(np.max(np.abs(e[np.isfinite(e)]), initial=1.0))
    with np.errstate(invalid="ignore"):
        ok = (np.isnan(a) & np.isnan(e)) | (np.isinf(e) & (a == e))
        ok |= finite & (np.abs(a - e) <= RTOL[dtype] * np.abs(e) + ATOL[dtype] * scale)
        if truth is not None:
            t = truth.astype(np.float64).ravel()
            ok |= (np.isnan(a) & np.isnan(t)) | (a == t)
            ok |= finite & np.isfinite(t) & (np.abs(a - t) <= np.abs(e - t))
    if not ok.all():
        rows = "\n".join(
            f"  at {np.unravel_index(i, actual.shape)}: ours {a[i]!r}, torch {e[i]!r}"
            + (f", torch f64 {t[i]!r}" if truth is not None else "")
            for i in np.flatnonzero(~ok)[:5]
        )
        raise AssertionError(
            f"{what}: {int((~ok).sum())} of {ok.size} values differ from torch ({dtype}: rtol "
            f"{RTOL[dtype]}, atol {ATOL[dtype]} x {scale:.3g})\n{rows}"
        )


def _setup(name: str, dtype: str, index: int) -> tuple:
    op = OPS[name]
    sample = _samples(op)[index]
    return op, sample, _arrays(sample, dtype)


# forward ---------------------------------------------------------------------------------------
# PyTorch's f64 kernels of these are up to this far (absolute, x max(1, |value|)) from the exact value,
# where verigrad's are within 1e-14 of it: its J, Y and Ai evaluate Cephes' rational approximations
# without the leading 1 of the denominators Cephes evaluates with p1evl, its igamma and igammac sum a
# truncated uniform asymptotic series for 20 < a ~ x (2e-9 relative; P(100, 100) among the special
# values). tests/test_special_bessel.py and tests/test_special_gamma.py hold verigrad's to exact values;
# tests/parity/test_special_bessel_torch.py measures PyTorch's error against them.
TORCH_F64_KERNEL_ERROR = {
    "bessel_j0": 1e-6,
    "bessel_j1": 1e-6,
    "bessel_y0": 1e-6,
    "bessel_y1": 1e-6,
    "airy_ai": 4e-6,
    "igamma": 1e-8,
    "igammac": 1e-8,
}


def _within_torch_kernel_error(name: str, dtype: str, actual: np.ndarray, expected: np.ndarray) -> bool:
    """For an op of TORCH_F64_KERNEL_ERROR in f64: assert ours is within PyTorch's kernel error of
    PyTorch's (NaN and infinities where PyTorch's are) and say so; False for every other op."""
    if name not in TORCH_F64_KERNEL_ERROR or dtype != "f64":
        return False
    bound = TORCH_F64_KERNEL_ERROR[name] * np.maximum(1.0, np.abs(np.nan_to_num(expected)))
    np.testing.assert_array_equal(np.isfinite(actual), np.isfinite(expected))
    np.testing.assert_array_equal(actual[~np.isfinite(actual)], expected[~np.isfinite(expected)])
    finite = np.isfinite(expected)
    gap = np.abs(actual[finite] - expected[finite])
    assert np.all(gap <= bound[finite]), f"{name}: {gap.max()} from PyTorch's, beyond its kernel error"
    return True


@pytest.mark.parametrize(("name", "dtype", "index"), _cases(grad=False))
def test_forward_matches_torch(name: str, dtype: str, index: int) -> None:
    op, sample, arrays = _setup(name, dtype, index)
    ours = _verigrad_args(arrays, grad=False)
    out = op(*ours, **sample.params)
    params = _canonical(op, ours, sample.params)
    expected, _ = _torch(op, arrays, params)
    assert expected.dtype is TORCH_DTYPES[out.dtype.name], (
        f"{name}: verigrad gives {out.dtype.name}, torch {expected.dtype}"
    )
    if _within_torch_kernel_error(name, dtype, out.numpy(), _numpy(expected)):
        return
    truth = None
    if dtype != "f64" and not _exact(op):
        truth = _numpy(_torch(op, _in_f64(arrays), params)[0])
    assert_matches(out.numpy(), _numpy(expected), dtype, _exact(op), f"{name} forward", truth)


# gradients -------------------------------------------------------------------------------------
# PyTorch's gradient of digamma is its trigamma, a short series 4e-10 from the exact value (verigrad's
# polygamma(1) is within 1e-15 of it: tests/parity/test_special_and_joining_torch.py checks exact values)
TORCH_SERIES_GRADIENT_RTOL = {"digamma": 1e-9}


@pytest.mark.parametrize(("name", "dtype", "index"), _cases(grad=True))
def test_gradient_matches_torch(name: str, dtype: str, index: int) -> None:
    op, sample, arrays = _setup(name, dtype, index)
    ours = _verigrad_args(arrays, grad=True)
    out = op(*ours, **sample.params)
    assert out.dtype.is_float, f"{name} is differentiable but gave {out.dtype.name}"
    assert out.requires_grad, f"{name} recorded no gradient history"
    params = _canonical(op, ours, sample.params)

    cotangent = np.random.default_rng(1).standard_normal(out.numpy().shape).astype(out.dtype.np)
    out.backward(verigrad.from_numpy(cotangent.copy()))
    _, expected = _torch(op, arrays, params, cotangent)
    truths = [None] * len(arrays) if dtype == "f64" else _torch(op, _in_f64(arrays), params, cotangent)[1]

    for i, (a, gb, truth) in enumerate(zip(ours, expected, truths)):
        if not isinstance(a, verigrad.Tensor) or not a.requires_grad:
            continue
        ga = a.grad.numpy() if a.grad is not None else np.zeros(a.numpy().shape, a.dtype.np)
        if name in TORCH_SERIES_GRADIENT_RTOL and dtype == "f64":
            np.testing.assert_allclose(ga, gb, rtol=TORCH_SERIES_GRADIENT_RTOL[name], atol=0)
            continue
        assert_matches(ga, gb, dtype, False, f"{name}: gradient of input {i}", truth)


# special values --------------------------------------------------------------------------------
# Signed zeros, infinities, NaN, tiny and overflowing values. Forward only: NaN must be NaN where
# torch's is, infinities the same; -0.0 == 0.0 here (relu(-0.0) is +0.0 in verigrad, -0.0 in torch).
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-30, 100.0, -100.0, np.inf, -np.inf, np.nan])
# Matrix factorizations: special values make singular or non-finite matrices, whose outcome LAPACK's
# callers settle each their own way (NumPy raises on an exact zero pivot, and its det is 0 there; PyTorch
# gives NaN). Their samples and gradients are held to PyTorch's above; singular input in test_linalg.py.
# And searchsorted: a sequence filled with special values is not sorted, where the result is unspecified.
NO_SPECIAL_VALUES = {
    "inv",
    "det",
    "solve",
    "searchsorted",
    "cholesky",
    "eigvalsh",
    "svdvals",
    "pinv",
    "qr_q",
    "qr_r",
    "lu_packed",
    "lu_pivots",
    "ldl_ld",
    "ldl_pivots",
    "ldl_info",
    "ldl_solve",
    "matrix_exp",  # a matrix op (the value grid is element-wise); its 1 x 1 infinities: test_linalg_extra.py
    "binary_cross_entropy",  # probabilities only: PyTorch refuses an input outside [0, 1]
}


def _special_forward(op: Any, arrays: list[Any], dtype: str, params: dict, what: str) -> None:
    ours = _verigrad_args(arrays, grad=False)
    out = op(*ours, **params)
    params = _canonical(op, ours, params)
    expected, _ = _torch(op, arrays, params)
    assert expected.dtype is TORCH_DTYPES[out.dtype.name]
    if _within_torch_kernel_error(op.name, dtype, out.numpy(), _numpy(expected)):
        return
    truth = None if dtype == "f64" or _exact(op) else _numpy(_torch(op, _in_f64(arrays), params)[0])
    assert_matches(out.numpy(), _numpy(expected), dtype, _exact(op), what, truth)


@pytest.mark.parametrize(
    ("name", "dtype", "index"),
    [c for c in _cases(grad=False, floats=True, public=True) if c.values[0] not in NO_SPECIAL_VALUES],
)
def test_special_values_match_torch(name: str, dtype: str, index: int) -> None:
    """Each sample with its float arrays filled with special values (the same shapes and params)."""
    op, sample, arrays = _setup(name, dtype, index)
    rng = np.random.default_rng(index)
    filled = [
        rng.choice(SPECIAL, a.shape).astype(a.dtype)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f"
        else a
        for a in arrays
    ]
    _special_forward(op, filled, dtype, sample.params, f"{name} at special values")


def _float_only(op: Any) -> int:
    """How many float arrays each sample of `op` has, if every sample has the same number and no params."""
    samples = _samples(op)
    arities = {len(s.args) for s in samples}
    plain = all(
        not s.params and all(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in s.args)
        for s in samples
    )
    return arities.pop() if plain and len(arities) == 1 else 0


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        pytest.param(name, dtype, id=f"{name}-{dtype}")
        for name, op in OPS.items()
        if op.torch is not None and _float_only(op) in (1, 2) and name not in NO_SPECIAL_VALUES
        for dtype in DTYPES
    ],
)
def test_special_value_grid_matches_torch(name: str, dtype: str) -> None:
    """Element-wise ops (and matmul) on every special value, or every pair of them."""
    x = SPECIAL.astype(DTYPES[dtype])
    arrays = [x] if _float_only(OPS[name]) == 1 else [x[:, None].copy(), x[None, :].copy()]
    _special_forward(OPS[name], arrays, dtype, {}, f"{name} at special values")


# coverage --------------------------------------------------------------------------------------
def test_backward_kernels_are_for_listed_ops() -> None:
    assert set(BACKWARD_KERNELS) <= NO_TORCH_COUNTERPART


def test_ops_without_torch_counterpart_are_listed() -> None:
    """An op without a `torch` lambda fails here until it gets one or is listed with a reason."""
    missing = {name for name, op in OPS.items() if op.torch is None}
    assert missing == NO_TORCH_COUNTERPART, (
        f"ops without a torch lambda that are not listed: {sorted(missing - NO_TORCH_COUNTERPART)}; "
        f"listed ops that have one (or no longer exist): {sorted(NO_TORCH_COUNTERPART - missing)}"
    )


@pytest.mark.parametrize("name", [n for n, op in OPS.items() if _torch_fn(op) is not None])
def test_op_with_torch_lambda_has_samples(name: str) -> None:
    assert _samples(OPS[name]), f"op {name} has a torch lambda but no samples, so nothing compares them"
