"""PyTorch's functions that its OpInfo suite (tools/opinfo_sweep.py) found missing from verigrad, against
PyTorch on the same inputs: values, dtypes, shapes and gradients, on more inputs than the suite's samples."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import verigrad


def _v(t: torch.Tensor, grad: bool = False) -> verigrad.Tensor:
    out = verigrad.from_numpy(t.detach().numpy().copy())
    return out.requires_grad_(True) if grad else out


def _same(ours: verigrad.Tensor, theirs: torch.Tensor) -> None:
    assert ours.dtype == getattr(verigrad, str(theirs.dtype).removeprefix("torch."))
    assert tuple(ours.shape) == tuple(theirs.shape)
    got = torch.from_numpy(np.array(ours.detach().numpy(), copy=True))
    torch.testing.assert_close(got, theirs.detach(), equal_nan=True)


# aten's max_pool2d_with_indices_backward -----------------------------------------------------------------
POOLS = [
    # (input shape, kernel, stride (None: the kernel), padding, dilation, ceil_mode)
    ((2, 3, 7, 8), 3, 2, 1, 1, True),
    ((2, 3, 7, 8), 3, 2, 1, 1, False),
    ((3, 6, 6), 2, None, 0, 1, False),
    ((1, 2, 9, 9), 3, (2, 1), 1, 2, True),
    ((1, 1, 5, 5), (3, 2), 1, (1, 0), 1, False),  # stride 1: overlapping windows name one position often
    ((2, 1, 4, 6), 2, 1, 1, (1, 2), True),
    ((0, 2, 4, 4), 2, 2, 0, 1, False),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("shape", "kernel", "stride", "padding", "dilation", "ceil_mode"), POOLS)
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool2d_with_indices_backward(shape, kernel, stride, padding, dilation, ceil_mode, dtype, ties):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, dtype=dtype, generator=gen)
    if ties:  # ReLU outputs: many equal maxima
        x = x.clamp(min=0)
    x.requires_grad_(True)
    out, idx = torch.nn.functional.max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode)
    g = torch.randn(out.shape, dtype=dtype, generator=gen).requires_grad_(True)
    step = kernel if stride is None else stride
    theirs = torch.ops.aten.max_pool2d_with_indices_backward.default(
        g, x, kernel, step, padding, dilation, ceil_mode, idx
    )
    vx, vg = _v(x, True), _v(g, True)
    ours = verigrad.ops.aten.max_pool2d_with_indices_backward.default(
        vg, vx, kernel, step, padding, dilation, ceil_mode, _v(idx)
    )
    _same(ours, theirs)
    assert ours.requires_grad
    cot = torch.randn(theirs.shape, dtype=dtype, generator=gen)
    their_g, their_x = torch.autograd.grad(theirs, [g, x], cot)
    our_g, our_x = verigrad.autograd.grad([ours], [vg, vx], [_v(cot)])
    _same(our_g, their_g)
    _same(our_x, their_x)


def test_max_pool2d_with_indices_backward_of_verigrads_own_indices():
    """verigrad's max_pool2d_with_indices and the aten backward give PyTorch's input gradient."""
    x = torch.randn(2, 3, 8, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for k, s, p, d, c in itertools.product((2, 3), (1, 2), (0, 1), (1, 2), (False, True)):
        out, idx = verigrad.nn.functional.max_pool2d_with_indices(_v(x), k, s, p, d, c)
        their_out, their_idx = torch.nn.functional.max_pool2d_with_indices(x, k, s, p, d, c)
        _same(idx, their_idx)
        ones = verigrad.ones_like(out)
        grad = verigrad.ops.aten.max_pool2d_with_indices_backward(ones, _v(x), k, s, p, d, c, idx)
        theirs = torch.ops.aten.max_pool2d_with_indices_backward(
            torch.ones_like(their_out), x, k, s, p, d, c, their_idx
        )
        _same(grad, theirs)


# aten's _safe_softmax and slice.Tensor ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("shape", "dim"), [((4, 5), 1), ((4, 5), 0), ((2, 3, 4), -1), ((6,), 0), ((3, 0), 0), ((3, 0), 1)]
)
def test_safe_softmax(shape, dim, dtype):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(shape, dtype=dtype, generator=gen)
    masked = torch.rand(shape, generator=gen) < 0.5
    x = x.masked_fill(masked, float("-inf"))
    if x.numel():
        x.select(dim, 0).fill_(float("-inf"))  # at least one row all -inf where there are several
    x.requires_grad_(True)
    theirs = torch.ops.aten._safe_softmax.default(x, dim)
    vx = _v(x, True)
    ours = verigrad.ops.aten._safe_softmax.default(vx, dim)
    _same(ours, theirs)
    cot = torch.randn(shape, dtype=dtype, generator=gen)
    (their_grad,) = torch.autograd.grad(theirs, [x], cot)
    (our_grad,) = verigrad.autograd.grad([ours], [vx], [_v(cot)])
    _same(our_grad, their_grad)


@pytest.mark.parametrize(
    ("dim", "start", "end", "step"),
    [(0, None, None, 1), (1, 1, -2, 3), (0, -10, -2, 2), (2, 5, 100, 1), (-1, -100, 3, 2), (1, 4, 2, 1)],
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bool])
def test_slice_tensor(dim, start, end, step, dtype):
    x = (torch.arange(6 * 7 * 8).reshape(6, 7, 8) % 5).to(dtype)
    theirs = torch.ops.aten.slice.Tensor(x, dim, start, end, step)
    _same(verigrad.ops.aten.slice.Tensor(_v(x), dim, start, end, step), theirs)


# sum_to_size, empty_strided, new_empty_strided, zero_, Tensor.H -------------------------------------------
SUM_TO = [((), ()), ((5,), ()), ((5,), (1,)), ((2, 3), (1, 3)), ((2, 3), (2, 1)), ((2, 3), (3,)),
          ((2, 3), (2, 3)), ((4, 1, 3), (1, 1)), ((4, 2, 3), (2, 1)), ((0, 3), (1, 3)),
          ((2, 0), (0,))]  # fmt: skip
DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
          torch.bool]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "size"), SUM_TO)
def test_sum_to_size(shape, size, dtype):
    x = (torch.arange(int(np.prod(shape))).reshape(shape) * 37 % 11).to(dtype)
    _same(_v(x).sum_to_size(size), x.sum_to_size(size))
    if size:
        _same(_v(x).sum_to_size(*size), x.sum_to_size(*size))
    if dtype.is_floating_point:
        x.requires_grad_(True)
        vx = _v(x, True)
        theirs, ours = x.sum_to_size(size), vx.sum_to_size(size)
        cot = torch.randn(theirs.shape, dtype=dtype, generator=torch.Generator().manual_seed(0))
        (their_grad,) = torch.autograd.grad(theirs, [x], cot, allow_unused=True)
        (our_grad,) = verigrad.autograd.grad([ours], [vx], [_v(cot)])
        _same(our_grad, their_grad)


@pytest.mark.parametrize(("shape", "size"), [((2, 3), (2,)), ((2, 3), (1, 2, 3)), ((2, 3), (3, 3))])
def test_sum_to_size_refuses_as_pytorch(shape, size):
    with pytest.raises(RuntimeError, match="is not expandable"):
        torch.ones(shape).sum_to_size(size)
    with pytest.raises(ValueError, match="is not expandable"):
        verigrad.ones(shape).sum_to_size(size)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("size", "stride"), [((), ()), ((2, 3), (1, 2)), ((5, 0, 2), (0, 7, 1)), ((4,), (3,))]
)
def test_empty_strided_shape_and_dtype(size, stride, dtype):
    """Uninitialised memory in PyTorch: the shape and dtype are compared (verigrad's are zeros)."""
    name = str(dtype).removeprefix("torch.")
    theirs = torch.empty_strided(size, stride, dtype=dtype)
    ours = verigrad.empty_strided(size, stride, dtype=getattr(verigrad, name))
    assert ours.shape == theirs.shape and ours.dtype is getattr(verigrad, name)
    base = torch.ones(2, dtype=dtype)
    theirs = base.new_empty_strided(size, stride)
    ours = _v(base).new_empty_strided(size, stride)
    assert ours.shape == theirs.shape and ours.dtype is getattr(verigrad, name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_and_H(dtype):
    x = (torch.arange(12).reshape(3, 4) % 5).to(dtype)
    _same(verigrad.zero_(_v(x)), torch.zero_(x.clone()))
    _same(_v(x).H, x.H)
    if dtype.is_floating_point:
        x.requires_grad_(True)
        vx = _v(x, True)
        cot = torch.arange(12.0, dtype=dtype).reshape(4, 3)
        (their_grad,) = torch.autograd.grad(x.H, [x], cot)
        (our_grad,) = verigrad.autograd.grad([vx.H], [vx], [_v(cot)])
        _same(our_grad, their_grad)
        # zero_ of a copy: the copy's history is replaced, the input's gradient is zero
        theirs, ours = torch.zero_(x.clone()), verigrad.zero_(vx.clone())
        (their_grad,) = torch.autograd.grad(theirs, [x], cot.T)
        (our_grad,) = verigrad.autograd.grad([ours], [vx], [_v(cot.T)])
        _same(our_grad, their_grad)


# fractional_max_pool2d / 3d -------------------------------------------------------------------------
FRACTIONAL = [
    (2, (2, 3, 9, 9), 3, {"output_size": 4}),
    (2, (3, 9, 8), (2, 3), {"output_ratio": (0.5, 0.6)}),  # unbatched, unequal axes: (w, h) samples
    (2, (1, 2, 10, 7), 2, {"output_size": (9, 6)}),  # stride about 1: overlapping windows
    (2, (1, 1, 5, 5), 2, {"output_size": 1}),
    (2, (0, 2, 6, 6), 2, {"output_size": 3}),
    (3, (2, 2, 5, 6, 7), 2, {"output_size": (2, 3, 4)}),
    (3, (2, 5, 6, 7), (2, 1, 3), {"output_ratio": 0.5}),
    (3, (1, 1, 5, 9, 5), (1, 3, 2), {"output_size": (4, 5, 2)}),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("nd", "shape", "kernel", "kwargs"), FRACTIONAL)
@pytest.mark.parametrize("ties", [False, True])
def test_fractional_max_pool_with_samples(nd, shape, kernel, kwargs, dtype, ties):
    """Given the same samples, the same windows: values, indices and gradients as PyTorch's."""
    nd = 3 if len(shape) == 5 or ("output_ratio" in kwargs and kwargs["output_ratio"] == 0.5) else 2
    fn = f"fractional_max_pool{nd}d"
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(shape, dtype=dtype, generator=gen)
    if ties:
        x = x.clamp(min=0.0)
    x.requires_grad_(True)
    batch, channels = (shape[0], shape[1]) if len(shape) == nd + 2 else (1, shape[0])
    u = torch.rand(batch, channels, nd, dtype=dtype, generator=gen)
    pool = getattr(torch.nn.functional, fn)
    theirs, their_idx = pool(x, kernel, return_indices=True, _random_samples=u, **kwargs)
    vx = _v(x, True)
    ours, our_idx = getattr(verigrad.nn.functional, fn)(
        vx, kernel, return_indices=True, _random_samples=_v(u), **kwargs
    )
    _same(ours, theirs)
    _same(our_idx, their_idx)
    cot = torch.randn(theirs.shape, dtype=dtype, generator=gen)
    (their_grad,) = torch.autograd.grad(theirs, [x], cot)
    (our_grad,) = verigrad.autograd.grad([ours], [vx], [_v(cot)])
    _same(our_grad, their_grad)


@pytest.mark.parametrize(("nd", "shape", "kernel", "kwargs"), FRACTIONAL)
def test_fractional_max_pool_draws_its_windows(nd, shape, kernel, kwargs):
    """Without samples, each plane draws its own: PyTorch's shapes and dtypes, every value one of the
    input's at the position its index names."""
    nd = 3 if len(shape) == 5 or ("output_ratio" in kwargs and kwargs["output_ratio"] == 0.5) else 2
    fn = f"fractional_max_pool{nd}d"
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    theirs = getattr(torch.nn.functional, fn)(x, kernel, **kwargs)
    ours, idx = getattr(verigrad.nn.functional, fn)(_v(x), kernel, return_indices=True, **kwargs)
    assert ours.shape == theirs.shape and ours.dtype is verigrad.float32 and idx.dtype is verigrad.int64
    lead = x.shape[:-nd]
    planes = x.reshape(*lead, int(np.prod(x.shape[-nd:])))
    positions = torch.from_numpy(idx.numpy().copy()).reshape(*lead, int(np.prod(theirs.shape[-nd:])))
    picked = torch.gather(planes, -1, positions)
    assert torch.equal(picked.reshape(theirs.shape), torch.from_numpy(ours.numpy().copy()))


@pytest.mark.parametrize(
    ("fn", "shape", "size"),
    [(2, (1, 1, 5, 5), 5), (2, (1, 1, 5, 5), 4), (3, (1, 1, 5, 5, 5), 4), (3, (1, 1, 5, 5, 5), 3)],
)
def test_fractional_max_pool_bounds(fn, shape, size):
    """The largest output a window of 2 allows: PyTorch's, which differs between 2-D and 3-D."""
    name = f"fractional_max_pool{fn}d"
    try:
        theirs = getattr(torch.nn.functional, name)(torch.ones(shape), 2, output_size=size)
    except RuntimeError:
        with pytest.raises(ValueError, match="too large relative to input"):
            getattr(verigrad.nn.functional, name)(verigrad.ones(*shape), 2, output_size=size)
    else:
        ours = getattr(verigrad.nn.functional, name)(verigrad.ones(*shape), 2, output_size=size)
        assert ours.shape == theirs.shape


# random fills and normal: PyTorch's shapes, dtypes, errors and distributions (not its draws) ---------------
FILLS = [("exponential_", (0.5,)), ("exponential_", (3.0,)), ("geometric_", (0.2,)), ("geometric_", (0.8,)),
         ("cauchy_", (0.0, 0.5)), ("cauchy_", (-2.0, 1.0)), ("log_normal_", (0.0, 0.25)),
         ("log_normal_", (0.5, 1.0))]  # fmt: skip


@pytest.mark.parametrize(("method", "args"), FILLS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32])
def test_random_fill_matches_the_distribution(method, args, dtype):
    n = 100_000
    x = torch.zeros(n, dtype=dtype)
    try:
        theirs = getattr(x, method)(*args, generator=torch.Generator().manual_seed(0))
    except RuntimeError:
        with pytest.raises((RuntimeError, TypeError, ValueError)):
            getattr(_v(x), method)(*args)
        return
    verigrad.manual_seed(0)
    ours = getattr(_v(x), method)(*args)
    assert ours.dtype is getattr(verigrad, str(dtype).removeprefix("torch.")) and ours.shape == theirs.shape
    a, b = np.sort(ours.numpy().astype(np.float64)), np.sort(theirs.numpy().astype(np.float64))
    for q in (0.25, 0.5, 0.75):  # the quartiles agree (a Cauchy has no mean), within 5 standard errors
        i = int(q * n)
        assert abs(a[i] - b[i]) <= 0.05 * max(1.0, abs(b[i])) + (0 if dtype.is_floating_point else 1.0)


@pytest.mark.parametrize(
    "args", [((0.3, 1.6, (2, 3)), {}), ((0.3, 1.6, (4,)), {"dtype": "float64"}), (("t34", 2.7), {}),
             ((1.5, "t34"), {}), (("t34", "t134"), {}), (("t1", "t34"), {})]
)  # fmt: skip
def test_normal_shapes_and_dtypes(args):
    def make(lib, a):
        if isinstance(a, str):
            return lib.ones(*(int(c) for c in a[1:]), dtype=lib.float64)
        return a

    positional, kwargs = args
    theirs = torch.normal(
        *(make(torch, a) for a in positional), **{k: getattr(torch, v) for k, v in kwargs.items()}
    )
    ours = verigrad.normal(
        *(make(verigrad, a) for a in positional), **{k: getattr(verigrad, v) for k, v in kwargs.items()}
    )
    assert ours.shape == theirs.shape
    assert ours.dtype is getattr(verigrad, str(theirs.dtype).removeprefix("torch."))


def test_normal_moments():
    n = 200_000
    theirs = torch.normal(torch.full((n,), 2.0), 0.5, generator=torch.Generator().manual_seed(0)).numpy()
    verigrad.manual_seed(0)
    ours = verigrad.normal(verigrad.full((n,), 2.0), 0.5).numpy()
    assert abs(ours.mean() - theirs.mean()) < 0.01 and abs(ours.std() - theirs.std()) < 0.01


# svd_lowrank and pca_lowrank ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("batch", "m", "n", "k"), [((), 8, 5, 2), ((), 4, 9, 3), ((2,), 7, 7, 4), ((3,), 6, 10, 1)]
)
@pytest.mark.parametrize("with_m", [False, True])
def test_svd_lowrank_of_a_low_rank_matrix(batch, m, n, k, dtype, with_m):
    """A (minus M) of rank k, q = k: the singular values are PyTorch's and U diag(S) V^T is A - M."""
    gen = torch.Generator().manual_seed(5)
    a = torch.randn(*batch, m, k, dtype=dtype, generator=gen)
    b = torch.randn(*batch, n, k, dtype=dtype, generator=gen)
    M = torch.randn(*batch, m, n, dtype=dtype, generator=gen) if with_m else None
    A = a @ b.mT + (M if with_m else 0)
    _, their_s, _ = torch.svd_lowrank(A, q=k, M=M)
    U, S, V = verigrad.svd_lowrank(_v(A), q=k, M=None if M is None else _v(M))
    assert (U.shape, S.shape, V.shape) == ((*batch, m, k), (*batch, k), (*batch, n, k))
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    torch.testing.assert_close(torch.from_numpy(S.numpy().copy()), their_s, **tol)
    rebuilt = torch.from_numpy(((U * S.unsqueeze(-2)) @ V.mT).numpy().copy())
    torch.testing.assert_close(rebuilt, A - (M if with_m else 0), **tol)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("q", [None, 2, 3])
def test_pca_lowrank(center, q):
    gen = torch.Generator().manual_seed(6)
    A = torch.randn(9, 3, dtype=torch.float64, generator=gen) @ torch.randn(
        3, 5, dtype=torch.float64, generator=gen
    )
    _, their_s, _ = torch.pca_lowrank(A, q=q, center=center)
    U, S, V = verigrad.pca_lowrank(_v(A), q=q, center=center)
    assert S.shape == their_s.shape and U.shape == (9, S.shape[0]) and V.shape == (5, S.shape[0])
    if q is None or q >= 3:  # the matrix (centered or not) has rank 3: the values are exact
        torch.testing.assert_close(torch.from_numpy(S.numpy().copy()), their_s)
    with pytest.raises(ValueError, match="must be non-negative integer and not greater than"):
        verigrad.pca_lowrank(_v(A), q=6)


@pytest.mark.parametrize(("x", "q"), [(-8.4784, -1.7658), (2.0, 1.0), (3.5, 0.25), (1.0, 2.0), (4.0, -3.0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_zeta_of_0d_tensors(x, q, dtype):
    theirs = torch.special.zeta(torch.tensor(x, dtype=dtype), torch.tensor(q, dtype=dtype))
    _same(verigrad.special.zeta(_v(torch.tensor(x, dtype=dtype)), _v(torch.tensor(q, dtype=dtype))), theirs)


@pytest.mark.parametrize(
    ("shape", "size"),
    [((5, 5, 5), (25, 5)), ((), ()), ((), (1, 1, 1)), ((2, 3), (6,)), ((4, 3), (2, 2)), ((6,), (0,))],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8, torch.bool])
def test_resize_within_the_elements(shape, size, dtype):
    """Where the new size has at most the elements there are, PyTorch's values are defined: the first ones."""
    x = (torch.arange(int(np.prod(shape))).reshape(shape) % 7).to(dtype)
    _same(_v(x).resize_(size), x.clone().resize_(size))
    _same(verigrad.resize_as_(_v(x), verigrad.zeros(*size)), torch.resize_as_(x.clone(), torch.zeros(size)))
