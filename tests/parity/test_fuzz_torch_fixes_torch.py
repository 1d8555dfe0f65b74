"""Silent differences the differential fuzzer (test_fuzz_torch.py) found, each now PyTorch's: norm and dist
of a vector holding NaN (were 0), unique's NaNs (each distinct), scatter / index_add / scatter_add keeping
-0.0, integer division of an empty dividend by zero (no error), binary_cross_entropy's target range and
soft_margin_loss's target that does not broadcast to the input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad

NAN, INF = float("nan"), float("inf")


def _same(ours, theirs) -> None:
    """The same dtype, shape, values (NaN where NaN) and signs of zero."""
    got, want = ours.detach().numpy(), theirs.detach().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def _both(values, dtype=np.float64):
    array = np.asarray(values, dtype=dtype)
    return verigrad.from_numpy(array.copy()), torch.from_numpy(array.copy())


@pytest.mark.parametrize("p", [2, 3, 0.5, "fro"])
@pytest.mark.parametrize("values", [[0.0, NAN, -0.0, -1.0], [1.0, INF, NAN], [0.0, -0.0], [3.0, -4.0]])
def test_norm_propagates_nan(p, values):
    ours, theirs = _both(values)
    np.testing.assert_allclose(
        verigrad.norm(ours, p).numpy(), torch.norm(theirs, p).numpy(), rtol=1e-15, equal_nan=True
    )
    np.testing.assert_allclose(
        verigrad.dist(ours, ours * 0).numpy(),
        torch.dist(theirs, theirs * 0).numpy(),
        rtol=1e-15,
        equal_nan=True,
    )


def test_norm_gradient_at_zero_stays_zero():
    x = verigrad.zeros(3, requires_grad=True)
    verigrad.norm(x).backward()
    _same(x.grad, torch.zeros(3))


def test_unique_keeps_each_nan():
    ours, theirs = _both([NAN, 1.0, NAN, 1.0, 0.5])  # (with dim=, PyTorch's order then follows its sort's)
    got = verigrad.unique(ours, return_inverse=True, return_counts=True)
    want = torch.unique(theirs, return_inverse=True, return_counts=True)
    for a, b in zip(got, want):
        _same(a, b)


def test_scatter_keeps_negative_zero_and_gradients():
    x = np.array([[-0.0, 2.0, -0.0, -1.5], [1.0, -0.0, 3.0, -0.0]])
    index = np.array([[2, 1, 0, 3], [0, 0, 0, 1]])
    results = []
    for t in (verigrad, torch):
        src = t.from_numpy(x.copy()).requires_grad_(True)
        out = t.zeros(2, 4, dtype=t.float64).scatter(1, t.from_numpy(index), src)
        (out * t.arange(8.0, dtype=t.float64).reshape(2, 4)).sum().backward()
        results.append((out, src.grad))
    _same(results[0][0], results[1][0])
    _same(results[0][1], results[1][1])


@pytest.mark.parametrize("name", ["index_add", "scatter_add"])
def test_adding_into_keeps_negative_zero(name):
    """-0.0 stays where nothing or only -0.0 is added; +0.0 added to it makes +0.0 (PyTorch adds in place)."""
    x = np.array([[-0.0, 3.0, -1.0], [-0.0, -0.0, -0.0]])
    src = np.array([[-0.0, -0.0, 1.0], [0.0, -0.0, 2.0]])
    results = []
    for t in (verigrad, torch):
        base, values = (t.from_numpy(a.copy()).requires_grad_(True) for a in (x, src))
        if name == "index_add":
            out = base.index_add(0, t.tensor([1, 1]), values, alpha=2)
        else:
            out = base.scatter_add(1, t.tensor([[0, 0], [2, 1]]), values[:, :2])
        (out * t.arange(6.0, dtype=t.float64).reshape(2, 3)).sum().backward()
        results.append((out, base.grad, values.grad))
    for ours, theirs in zip(*results):
        _same(ours, theirs)


@pytest.mark.parametrize("name", ["remainder", "floor_divide", "fmod"])
def test_integer_division_of_nothing_by_zero_is_empty(name):
    ours, theirs = _both(np.zeros((0, 2)), np.int64)
    _same(
        getattr(verigrad, name)(ours, verigrad.tensor([3, 0])),
        getattr(torch, name)(theirs, torch.tensor([3, 0])),
    )
    with pytest.raises(ZeroDivisionError):
        getattr(verigrad, name)(verigrad.tensor([1, 2]), verigrad.tensor([3, 0]))


@pytest.mark.parametrize("target", [[0.5, 1.5], [0.5, NAN], [-0.1, 0.5]])
def test_binary_cross_entropy_refuses_targets_outside_zero_one(target):
    probabilities = [0.3, 0.6]
    with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
        torch.nn.functional.binary_cross_entropy(torch.tensor(probabilities), torch.tensor(target))
    with pytest.raises(ValueError, match="target should be between 0 and 1"):
        verigrad.nn.functional.binary_cross_entropy(verigrad.tensor(probabilities), verigrad.tensor(target))


@pytest.mark.parametrize(("input_shape", "target_shape"), [((2, 1), (1, 3)), ((3,), (2, 3)), ((2, 3), (3,))])
def test_soft_margin_loss_target_must_broadcast_to_the_input(input_shape, target_shape):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=input_shape), np.sign(rng.normal(size=target_shape))
    try:
        want = torch.nn.functional.soft_margin_loss(
            torch.from_numpy(x), torch.from_numpy(y), reduction="none"
        )
    except RuntimeError:
        with pytest.raises(verigrad.ShapeError, match="must broadcast to the input's shape"):
            verigrad.nn.functional.soft_margin_loss(verigrad.from_numpy(x), verigrad.from_numpy(y))
        return
    got = verigrad.nn.functional.soft_margin_loss(
        verigrad.from_numpy(x), verigrad.from_numpy(y), reduction="none"
    )
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)


@pytest.mark.parametrize(
    "bounds",
    [
        {"min": NAN},
        {"max": NAN},
        {"min": "nan_tensor"},
        {"max": "nan_tensor"},
        {"min": "zeros", "max": "nan_tensor"},
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_clamp_with_a_nan_bound_gives_nan(bounds, dtype):
    ours, theirs = _both([1, -1, 3], dtype)

    def given(t):
        tensors = {"nan_tensor": t.tensor([NAN, 0.0, 5.0]), "zeros": t.zeros(3)}
        return {k: tensors.get(v, v) if isinstance(v, str) else v for k, v in bounds.items()}

    _same(verigrad.clamp(ours, **given(verigrad)), torch.clamp(theirs, **given(torch)))


def test_glu_of_an_empty_dimension_is_empty():
    _same(verigrad.nn.functional.glu(verigrad.zeros(2, 0)), torch.nn.functional.glu(torch.zeros(2, 0)))


def test_out_writes_into_the_tensor_given_as_pytorch():
    """out=: the result written into out (resized, with PyTorch's warning where it held elements) and out
    returned; an out of another dtype, or a graph, refused."""
    import warnings

    x_v, x_t = _both([[1.0, -3.0, 2.0]], np.float32)
    for make in (
        lambda t, x, o: t.add(x, x, out=o),
        lambda t, x, o: t.exp(x, out=o),
        lambda t, x, o: t.sum(x, 1, out=o),
        lambda t, x, o: t.matmul(x, x.T, out=o),
        lambda t, x, o: t.cat([x, x], out=o),
    ):
        for shape in [(0,), (1, 3), (7,)]:
            with warnings.catch_warnings(record=True) as ours_warned:
                warnings.simplefilter("always")
                out_v = verigrad.zeros(shape)
                got = make(verigrad, x_v, out_v)
            with warnings.catch_warnings(record=True) as theirs_warned:
                warnings.simplefilter("always")
                out_t = torch.zeros(shape)
                want = make(torch, x_t, out_t)
            assert got is out_v and want is out_t
            _same(out_v, out_t)
            assert bool(ours_warned) == bool(theirs_warned)
    for other in (verigrad.float64, verigrad.int64):  # PyTorch casts (add) or computes in out's dtype (sum)
        with pytest.raises(TypeError, match="of its own dtype only"):
            verigrad.add(x_v, x_v, out=verigrad.zeros(3, dtype=other))
    values, indices = verigrad.zeros(1), verigrad.zeros(1, dtype=verigrad.int64)
    got = verigrad.max(x_v, 1, out=(values, indices))
    assert got.values is values and got.indices is indices and indices.tolist() == [2]
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        verigrad.add(x_v.clone().requires_grad_(True), 1, out=verigrad.zeros(3))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
@pytest.mark.parametrize(("input_shape", "target_shape"), [((3,), ()), ((), (2, 2)), ((2, 3), (3,))])
def test_pointwise_losses_broadcast_first_and_warn(name, input_shape, target_shape):
    """A 0-d operand of another dtype: PyTorch broadcasts both first, so the result is promoted as
    between dimensioned tensors (f64 here; huber_loss's is the input's dtype), and warns of the sizes."""
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=input_shape).astype(np.float32), rng.normal(size=target_shape)
    with pytest.warns(UserWarning, match="different to the input size"):
        want = getattr(torch.nn.functional, name)(torch.from_numpy(x), torch.from_numpy(y))
    with pytest.warns(UserWarning, match="different to the input size"):
        got = getattr(verigrad.nn.functional, name)(verigrad.from_numpy(x), verigrad.from_numpy(y))
    assert got.dtype.name == ("f32" if name == "huber_loss" else "f64")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6 if name == "huber_loss" else 1e-12)


@pytest.mark.parametrize(
    "shapes", [((), (2, 2), (2, 2)), ((3,), (), ()), ((2, 1), (1, 3), (2, 3)), ((3,), (3,), (3,))]
)
def test_margin_ranking_loss_needs_operands_of_one_rank(shapes):
    rng = np.random.default_rng(2)
    a, b, y = (rng.normal(size=s) for s in shapes)
    try:
        want = torch.nn.functional.margin_ranking_loss(*(torch.from_numpy(np.asarray(v)) for v in (a, b, y)))
    except RuntimeError:
        with pytest.raises(verigrad.ShapeError, match="same number of dimensions"):
            verigrad.nn.functional.margin_ranking_loss(
                *(verigrad.from_numpy(np.asarray(v)) for v in (a, b, y))
            )
        return
    got = verigrad.nn.functional.margin_ranking_loss(*(verigrad.from_numpy(np.asarray(v)) for v in (a, b, y)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize(
    "scores", [[NAN, 0.0, 1.0], [INF, 0.0, 1.0], [0.0, -INF, INF], [NAN, NAN, 1.0], [0.3, -0.2, 1.5]]
)
def test_multi_margin_loss_skips_nan_margins(scores, p):
    """PyTorch adds a class's margin term only where margin - x[y] + x[j] > 0: a NaN term adds nothing
    (verigrad's relu kept it, and the loss was NaN), nor a gradient."""
    for target in range(3):
        ours, theirs = _both([scores])
        ours.requires_grad_(True)
        theirs.requires_grad_(True)
        got = verigrad.nn.functional.multi_margin_loss(ours, verigrad.tensor([target]), p=p)
        want = torch.nn.functional.multi_margin_loss(theirs, torch.tensor([target]), p=p)
        got.backward()
        want.backward()
        _same(got, want)
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-15, equal_nan=True)


def test_out_in_a_compiled_function_is_the_eager_result():
    """out= under verigrad.compile writes the tensor given and returns what the eager call returns."""

    def step(x, out):
        verigrad.add(x, 1, out=out)
        return out * 2

    x = verigrad.tensor([1.0, -2.0])
    eager_out, compiled_out = verigrad.zeros(2), verigrad.zeros(2)
    eager = step(x, eager_out)
    compiled = verigrad.compile(step)(x, compiled_out)
    assert compiled.tolist() == eager.tolist() == [4.0, -2.0]
    assert compiled_out.tolist() == eager_out.tolist() == [2.0, -1.0]
