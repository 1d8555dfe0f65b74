"""Eager dispatch: the plan an op keeps per (operand specs, params), and what must not change with it.

A plan remembers the canonical params, the result spec and the kernel; each must be found again where
it could differ: another backend, a kernel registered, the table or the op's reference replaced, params
that are equal but not the same (True and 1, -0.0 and 0.0). Errors are raised on every call, never
remembered; NumPy's warnings stay off inside kernels and on outside them.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import verigrad
from verigrad.backends import active
from verigrad.backends.kernel_table import Backend
from verigrad.eager import EAGER, Plan, quietly
from verigrad.errors import DTypeError, ShapeError
from verigrad.ops import REGISTRY, _op


@pytest.fixture
def fake_backend():
    """A backend with no kernels of its own, active inside the test."""
    backend = active.add_backend(Backend("fake-eager-dispatch", "a backend made by a test"))
    try:
        with verigrad.backend(backend.name):
            yield backend
    finally:
        active._BACKENDS.pop(backend.name, None)


def test_one_plan_per_operand_specs_and_params() -> None:
    neg = REGISTRY["neg"]
    neg._eager_plans.clear()
    x, y = verigrad.ones(2, 3), verigrad.ones(2, 3)
    assert (-x).shape == (-y).shape  # the same specs: the same plan
    assert len(neg._eager_plans) == 1
    (plan,) = [p for _, p in neg._eager_plans.values()]
    assert isinstance(plan, Plan) and plan.out == x.spec
    verigrad.neg(x.double()), verigrad.neg(verigrad.ones(3))
    assert len(neg._eager_plans) == 3


def test_a_kernel_registered_after_a_plan_runs_from_the_next_call(fake_backend) -> None:
    x = verigrad.tensor([1.0, -2.0], dtype=verigrad.f64)
    assert (-x).tolist() == [-1.0, 2.0]  # the reference, planned
    calls = []

    def kernel(a: np.ndarray) -> np.ndarray:
        calls.append(a.shape)
        return np.negative(a) * 10

    fake_backend.register("neg", kernel, "f64")
    assert (-x).tolist() == [-10.0, 20.0] and calls == [(2,)]
    fake_backend._kernels = {}  # the table replaced: the reference again
    assert (-x).tolist() == [-1.0, 2.0] and calls == [(2,)]


def test_a_plan_follows_the_active_backend(fake_backend) -> None:
    fake_backend.register("neg", lambda a: np.negative(a) + 100, "f64")
    x = verigrad.tensor([1.0], dtype=verigrad.f64)
    assert (-x).item() == 99.0
    with verigrad.backend("reference"):
        assert (-x).item() == -1.0
    assert (-x).item() == 99.0


def test_a_replaced_reference_runs(monkeypatch) -> None:
    x = verigrad.tensor([3.0], dtype=verigrad.f64)
    with verigrad.backend("reference"):
        assert (-x).item() == -3.0
        monkeypatch.setattr(REGISTRY["neg"], "reference", lambda a: np.negative(a) - 1)
        assert (-x).item() == -4.0


@pytest.mark.parametrize(("first", "second"), [((2, 3), (2.0, 3)), ((1, 6), (True, 6))])
def test_params_equal_but_of_another_type_are_planned_apart(first: tuple, second: tuple) -> None:
    """A plan made for `first` does not answer `second`, which compares equal to it (and hashes the
    same) but is refused."""
    reshape = REGISTRY["reshape"]
    x = verigrad.ones(6)
    assert reshape(x, shape=first).shape == first
    with pytest.raises(TypeError):
        reshape(x, shape=second)
    with pytest.raises(TypeError):
        x.reshape(second)


def test_minus_zero_and_zero_fill_apart() -> None:
    assert not np.signbit(verigrad.full((2,), 0.0).numpy()).any()
    assert np.signbit(verigrad.full((2,), -0.0).numpy()).all()
    assert not np.signbit(verigrad.full((2,), 0.0).numpy()).any()


def test_float_params_are_planned_once_per_value_and_sign() -> None:
    """layer_norm's eps (a float) keeps one plan; another eps gets its own and its own result."""
    layer_norm = REGISTRY["layer_norm"]
    rng = np.random.default_rng(1)
    x = verigrad.tensor(rng.standard_normal((3, 4)))
    w, b = verigrad.ones(4, dtype=verigrad.f64), verigrad.zeros(4, dtype=verigrad.f64)
    layer_norm._eager_plans.clear()
    first = [layer_norm(x, w, b, eps=1e-5).numpy() for _ in range(3)]
    assert len(layer_norm._eager_plans) == 1
    other = layer_norm(x, w, b, eps=1.0).numpy()
    assert len(layer_norm._eager_plans) == 2
    assert all(np.array_equal(f, first[0]) for f in first) and not np.allclose(other, first[0])


def test_exact_keys_tell_types_apart() -> None:
    key = _op._exact_items
    assert key({"a": (1, 2)}) != key({"a": (1, True)})
    assert key({"a": ((0, 2, 1), (1, 3, 1))}) != key({"a": ((0, 2, 1), (1, 3, True))})
    assert key({"a": (slice(0, 2), slice(None))}) == key({"a": (slice(0, 2), slice(None))})
    assert key({"a": (slice(0, 2),)}) != key({"a": (slice(0, 2.0),)})
    assert key({"a": (slice(0, 2.0),)}) is None
    assert key({"v": 0.0}) != key({"v": -0.0}) and key({"v": 1.0}) != key({"v": 1})
    assert key({"v": 0.0, "s": (1, 2)}) != key({"v": -0.0, "s": (1, 2)})
    assert key({"v": (0.5,)}) is None and key({"v": [1, 2]}) is None
    assert key({"d": verigrad.f32, "n": None, "s": "mean"}) is not None


def test_a_shape_given_as_a_size_is_keyed_apart_from_a_tuple() -> None:
    key = _op._exact_items
    size = verigrad.ones(2, 3).shape
    assert key({"shape": size}) is not None and key({"shape": size}) != key({"shape": (2, 3)})
    assert key({"shape": size, "value": 1}) != key({"shape": size, "value": True})
    full, x = REGISTRY["full"], verigrad.zeros(2, 3)
    full._eager_plans.clear()
    for _ in range(3):
        ones = verigrad.ones_like(x)  # full(shape=x.shape): planned once, not per call
    assert len(full._eager_plans) == 1 and ones.tolist() == [[1.0] * 3] * 2


@pytest.mark.parametrize(
    "key",
    [
        (slice(1, 3), slice(None, None, 2)),
        slice(-2, None),
        (slice(None), slice(None)),
        (),
        (slice(None, None, -1),),
        (slice(0, 2), slice(0, 1), slice(0, 1)),
        (slice(1, 2), 0),
        (Ellipsis, slice(1, 3)),
    ],
)
def test_keys_of_slices_give_what_the_general_parse_gives(key) -> None:
    from verigrad.ops import shaping

    x = verigrad.tensor(np.arange(24.0).reshape(4, 6))
    general = shaping._parse_key  # the path every key took before slices had their own

    def parsed() -> Any:
        index, layout, _ = general(x, key)
        out = shaping.slice_(x, index=tuple(index)) if any(s != slice(None) for s in index) else x
        shape = tuple(1 if d is None else out.shape[d] for d in layout)
        return out if shape == tuple(out.shape) else out.reshape(shape)

    outcomes = []
    for way in (lambda: x[key], parsed):
        try:
            outcomes.append(way().numpy())
        except Exception as e:  # the same error both ways (each at its own line)
            outcomes.append((type(e), str(e).split("\n")[0]))
    if isinstance(outcomes[0], tuple):
        assert outcomes[0] == outcomes[1]
    else:
        np.testing.assert_array_equal(outcomes[0], outcomes[1])
        assert outcomes[0].strides == outcomes[1].strides and np.shares_memory(outcomes[0], x.numpy())


def test_transpose_takes_every_axis_pair_as_normalize_axis_does() -> None:
    from verigrad.shapes import normalize_axis

    for ndim in range(4):
        x = verigrad.tensor(np.arange(2.0**ndim).reshape((2,) * ndim))
        axes = [*range(-ndim - 2, ndim + 2), True]
        for a, b in [(a, b) for a in axes for b in axes]:
            try:
                first, second = normalize_axis(a, ndim), normalize_axis(b, ndim)
            except (ShapeError, DTypeError) as e:  # refused as the general path refuses it
                with pytest.raises(type(e)):
                    x.transpose(a, b)
                continue
            want = np.swapaxes(x.numpy(), first, second) if ndim else x.numpy()
            got = x.transpose(a, b).numpy()
            np.testing.assert_array_equal(got, want)
            assert got.strides == want.strides


def test_slices_are_planned_once_and_give_numpys_views() -> None:
    a = np.arange(24.0).reshape(4, 6)
    x = verigrad.tensor(a)
    for _ in range(2):
        np.testing.assert_array_equal(x[1:3, ::2].numpy(), a[1:3, ::2])
        np.testing.assert_array_equal(x[:, -2:].numpy(), a[:, -2:])
    plans = REGISTRY["slice"]._eager_plans
    assert any(k[:2] == (x.shape, x.dtype) for k in plans)


def test_errors_are_raised_on_every_call_and_not_remembered() -> None:
    add = REGISTRY["add"]
    a, b = verigrad.ones(2, 3), verigrad.ones(4)
    for _ in range(3):
        with pytest.raises(verigrad.ShapeError, match="add"):
            a + b
    assert (a.shape, a.dtype, b.shape, b.dtype) not in add._eager_plans
    assert (a + a).shape == (2, 3) and (a.shape, a.dtype, a.shape, a.dtype) in add._eager_plans
    for _ in range(2):
        with pytest.raises(verigrad.ShapeError):
            a.reshape(4, 2)


def test_an_abstract_tensor_is_refused_eagerly() -> None:
    with verigrad.abstract():
        x = verigrad.ones(2)
    for _ in range(2):  # the second time through the plan
        with pytest.raises(TypeError, match="abstract tensor"):
            verigrad.neg(x)


def test_kernels_that_may_warn_run_quietly_and_numpy_warns_after() -> None:
    x = verigrad.tensor([-1.0, 0.0], dtype=verigrad.f64)
    with verigrad.backend("reference"), warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            out = verigrad.log(x).numpy()
            assert np.isnan(out[0]) and out[1] == -np.inf
        with pytest.raises(RuntimeWarning):
            np.log(np.array([-1.0]))  # NumPy's error state is as it was
        with np.errstate(divide="raise"):
            assert verigrad.log(x).numpy()[1] == -np.inf  # inside another error state too
            with pytest.raises(FloatingPointError):
                np.log(np.array([0.0]))


def test_quietly_restores_the_error_state_when_the_kernel_raises() -> None:
    before = np.geterr()

    def failing(a: np.ndarray) -> None:
        raise ValueError("no")

    with pytest.raises(ValueError):
        quietly(failing, [np.ones(1)], {})
    assert np.geterr() == before


def test_composites_run_their_native_kernel_or_decomposition() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 5))
    x = verigrad.tensor(a, requires_grad=True)
    for _ in range(2):
        y = verigrad.nn.functional.softmax(x, dim=-1)
        expected = np.exp(a - a.max(-1, keepdims=True))
        np.testing.assert_allclose(y.numpy(), expected / expected.sum(-1, keepdims=True), rtol=1e-12)
        assert y.grad_fn is not None and y.grad_fn.op.name == "softmax"
    with verigrad.backend("reference"), verigrad.no_grad():
        z = verigrad.nn.functional.softmax(x, dim=-1)
        assert z.grad_fn is None
        np.testing.assert_allclose(z.numpy(), y.numpy(), rtol=1e-12)


def test_grad_records_follow_grad_mode_through_a_plan() -> None:
    x = verigrad.ones(3, requires_grad=True)
    assert (x * 2).grad_fn is not None
    with verigrad.no_grad():
        assert (x * 2).grad_fn is None and not (x * 2).requires_grad
    y = verigrad.ones(3)
    assert (y * 2).grad_fn is None


def test_the_eager_mode_is_the_default() -> None:
    from verigrad import modes

    assert modes.current() is EAGER


def test_enable_grad_is_a_block_and_a_decorator_and_nests() -> None:
    x = verigrad.ones(2, requires_grad=True)

    @verigrad.enable_grad()
    def doubled(t: verigrad.Tensor) -> verigrad.Tensor:
        return t * 2

    with verigrad.no_grad():
        assert doubled(x).requires_grad
        with verigrad.enable_grad():
            assert (x * 2).requires_grad
            with verigrad.no_grad():
                assert not (x * 2).requires_grad
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert verigrad.is_grad_enabled()


@pytest.mark.parametrize("value", [0.1, 1 / 3, -0.0, 1e-46, 3.4028235677973366e38, float("inf")])
def test_a_python_float_meets_a_tensor_in_its_dtype_rounded_once(value: float) -> None:
    for dtype in (verigrad.f32, verigrad.f64):
        x = verigrad.ones(2, dtype=dtype)
        with np.errstate(over="ignore"):  # the largest double overflows f32 (inf, as PyTorch's)
            expected = np.ones(2, dtype.np) * np.asarray(value).astype(dtype.np)
            results = (x * value, value * x)
        for result in results:
            assert result.dtype is dtype
            assert result.numpy().tobytes() == expected.tobytes()
    assert (verigrad.ones(2, dtype=verigrad.i64) * 0.5).dtype is verigrad.f32  # an int tensor: as before
