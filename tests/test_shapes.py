"""Symbolic dimensions (`verigrad.dims`) in normal form, and shape rules checked through `verigrad.check`."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import ShapeError, check, spec

n, m, din, dout = verigrad.dims("n m din dout")
H = verigrad.dims("Hshape", multiple_of=4)


# normal form -----------------------------------------------------------------------------------
def test_dims_returns_one_dim_or_a_tuple() -> None:
    assert isinstance(verigrad.dims("n"), verigrad.Dim)
    assert verigrad.dims("n") == n
    assert verigrad.dims("n, m") == (n, m)
    assert str(n) == "n" and repr(din) == "din"


def test_products_and_sums_print_in_normal_form() -> None:
    assert str(n * 2) == "n*2"
    assert str(n * 6) == "n*6"
    assert str(n + 1) == "n+1"
    assert str(n * din) == "n*din"
    assert str(n - 1) == "n-1"
    assert str(n * n) == "n^2"


def test_equal_polynomials_are_equal_dims() -> None:
    assert n * 6 == n * 2 * 3
    assert 6 * n == n * 6
    assert n + 1 - 1 == n
    assert n * din == din * n
    assert hash(n * din) == hash(din * n)
    assert {n * din: "x"}[din * n] == "x"
    assert n + n == 2 * n
    assert (n + 1) * (n - 1) == n * n - 1
    assert n * (din + dout) == n * din + n * dout


def test_different_symbols_are_different_dims() -> None:
    assert n != m
    assert n * 2 != n * 3
    assert n + 1 != n
    assert n != 4
    assert [4].count(n) == 0  # an int on the left (4 == n) compares by the Dim's rule too


def test_constants_are_plain_ints() -> None:
    assert n - n == 0 and type(n - n) is int
    assert n * 0 == 0 and type(n * 0) is int
    assert (n + 3) - n == 3 and type((n + 3) - n) is int
    assert n * 2 - n == n


def test_division() -> None:
    assert (n * 6) / 3 == n * 2
    assert (n * din) / din == n
    assert (n * n + n) / n == n + 1
    assert (n * 6) // 4 != n  # not exact: a floor atom
    assert ((n * 6) // 4).evaluate({"n": 3}) == 4
    assert (n * 4) // 2 == n * 2
    with pytest.raises(ShapeError):
        _ = n / 2  # not an integer for odd n
    with pytest.raises(ShapeError):
        _ = (n + 1) / n
    with pytest.raises(ShapeError):
        _ = (n * 2) / (n * 4)  # a fractional quotient is refused like any other
    with pytest.raises(ShapeError):
        _ = 12 / n
    assert 0 / n == 0


def test_multiple_of_makes_halves_valid() -> None:
    half = H / 2
    assert str(half) == "Hshape/2"
    assert half * 2 == H
    assert H / 4 * 4 == H
    assert half.evaluate({"Hshape": 12}) == 6
    with pytest.raises(ShapeError):
        _ = H / 8
    with pytest.raises(ValueError, match="multiple of 4"):
        verigrad.dims("Hshape", multiple_of=2)  # declared a multiple of 4 before
    again = verigrad.dims("Hshape")  # named again without a multiple: it keeps its declaration
    assert again == H and (again / 2) * 2 == H


def test_evaluate_and_symbols() -> None:
    expr = n * din + 2 * dout - 1
    assert expr.evaluate({"n": 3, "din": 5, "dout": 7}) == 3 * 5 + 2 * 7 - 1
    assert expr.symbols == {"n", "din", "dout"}
    assert ((n - 1) // 2).symbols == {"n"}
    assert ((n - 1) // 2).evaluate({"n": 8}) == 3
    with pytest.raises(KeyError):
        n.evaluate({"m": 1})


def test_a_symbol_has_no_concrete_value() -> None:
    assert bool(n)
    with pytest.raises(TypeError):
        range(n)
    with pytest.raises(ValueError):
        verigrad.dims("not-a-name")
    with pytest.raises(TypeError):
        _ = n + 1.5


# specs -----------------------------------------------------------------------------------------
def test_spec_construction() -> None:
    s = spec([n, din])
    assert s.shape == (n, din) and s.dtype is verigrad.f32 and s.ndim == 2
    assert repr(s) == "f32[n, din]"
    assert spec("n din", "f64") == verigrad.Spec((n, din), verigrad.f64)
    assert spec([2, "n"]).shape == (2, n)
    assert spec(n).shape == (n,)
    assert repr(spec([], "i64")) == "i64[]"
    with pytest.raises(ShapeError):
        spec([-1, 3])
    with pytest.raises(TypeError):
        check(lambda x: x, (n, din))


# the required cases ----------------------------------------------------------------------------
def test_matmul_with_untransposed_weight_is_refused() -> None:
    with pytest.raises(ShapeError):
        check(lambda x, w: x @ w, spec([n, din]), spec([dout, din]))


def test_matmul_with_transposed_weight() -> None:
    assert check(lambda x, w: x @ w.T, spec([n, din]), spec([dout, din])) == spec([n, dout])
    assert check(lambda x, w: x @ w.mT, spec([n, din]), spec([dout, din])) == spec([n, dout])


def test_matmul_refuses_equal_sizes_under_different_names() -> None:
    d768, e768 = verigrad.dims("d768 e768")
    with pytest.raises(ShapeError):
        check(lambda x, w: x @ w, spec([n, d768]), spec([e768, d768]))


def test_matmul_batch_and_vector_forms() -> None:
    b, k = verigrad.dims("b k")
    assert check(lambda x, y: x @ y, spec([b, n, k]), spec([k, m])) == spec([b, n, m])
    assert check(lambda x, y: x @ y, spec([b, 1, n, k]), spec([m, k, din])) == spec([b, m, n, din])
    assert check(lambda x, y: x @ y, spec([k]), spec([k, m])) == spec([m])
    assert check(lambda x, y: x @ y, spec([n, k]), spec([k])) == spec([n])
    assert check(lambda x, y: x @ y, spec([k]), spec([k])) == spec([])
    with pytest.raises(ShapeError):
        check(lambda x, y: x @ y, spec([b, n, k]), spec([m, k, din]))
    with pytest.raises(ShapeError):
        check(lambda x, y: x @ y, spec([]), spec([k]))


def test_reshape_to_an_equal_polynomial_is_accepted() -> None:
    assert check(lambda x: x.reshape(n * 2, 3), spec([n, 6])) == spec([n * 2, 3])
    assert check(lambda x: x.reshape(n, 6), spec([n * 2, 3])) == spec([n, 6])
    assert check(lambda x: x.reshape(m, n), spec([n, m])) == spec([m, n])
    assert check(lambda x: x.reshape(H / 2, 6), spec([H, 3])) == spec([H / 2, 6])


def test_reshape_to_a_different_count_is_refused() -> None:
    with pytest.raises(ShapeError):
        check(lambda x: x.reshape(n, 5), spec([n, 6]))
    with pytest.raises(ShapeError):
        check(lambda x: x.reshape(m, 6), spec([n, 6]))


def test_reshape_infers_minus_one_only_when_exact() -> None:
    assert check(lambda x: x.reshape(-1, 3), spec([n, 6])) == spec([n * 2, 3])
    assert check(lambda x: x.reshape(-1), spec([n, din])) == spec([n * din])
    assert check(lambda x: x.reshape(din, -1), spec([n, din])) == spec([din, n])
    with pytest.raises(ShapeError, match="-1"):
        check(lambda x: x.reshape(-1, 4), spec([n, 6]))
    with pytest.raises(ShapeError, match="cannot infer -1"):
        check(lambda x: x.reshape(-1, n * 4), spec([n, 2]))  # the quotient would be 1/2
    with pytest.raises(ShapeError):
        check(lambda x: x.reshape(-1, -1), spec([n, 6]))


def test_broadcasting_different_symbols_is_refused() -> None:
    with pytest.raises(ShapeError):
        check(lambda x, y: x + y, spec([n]), spec([m]))
    with pytest.raises(ShapeError):
        check(lambda x, y: x * y, spec([n, 1]), spec([3, m]))


def test_broadcasting_a_symbol_with_one_or_a_scalar() -> None:
    assert check(lambda x, y: x + y, spec([n]), spec([1])) == spec([n])
    assert check(lambda x, y: x + y, spec([1]), spec([n])) == spec([n])
    assert check(lambda x, y: x + y, spec([n]), spec([])) == spec([n])
    assert check(lambda x, y: x + y, spec([n, 1]), spec([1, m])) == spec([n, m])
    assert check(lambda x: x + 1.0, spec([n])) == spec([n])


@pytest.mark.parametrize(
    ("a", "b", "out"),
    [((4, 3), (3,), (4, 3)), ((4, 1), (1, 3), (4, 3)), ((2, 3), (), (2, 3)), ((0, 3), (1, 3), (0, 3))],
)
def test_concrete_broadcasting_gives_numpys_shapes(a, b, out) -> None:
    assert np.broadcast_shapes(a, b) == out
    assert check(lambda x, y: x + y, spec(a), spec(b)) == spec(out)
    assert check(lambda x, y: x + y, spec(b), spec(a)) == spec(out)


def test_concrete_broadcasting_refuses_mismatched_sizes() -> None:
    with pytest.raises(ShapeError):
        check(lambda x, y: x + y, spec([4, 3]), spec([4]))


def test_abstract_mode_creates_specs() -> None:
    with verigrad.abstract():
        w = verigrad.randn(din, dout)
        z = verigrad.zeros(n, din, dtype="f64")
        y = z @ w.double()
        c = verigrad.tensor([1.0, 2.0])
    assert w.is_abstract and w.payload is None
    assert w.spec == spec([din, dout])
    assert y.spec == spec([n, dout], "f64")
    assert c.spec == spec([2])
    with pytest.raises(TypeError):
        w.numpy()
    with pytest.raises(TypeError):
        _ = w + 1.0  # a spec reaching eager code is refused


def test_check_returns_nested_structures() -> None:
    def fn(x, w):
        y = x @ w.T
        return y, {"sum": y.sum(axis=0), "shape": [y.relu(), x.mean()]}

    out = check(fn, spec([n, din]), spec([dout, din]))
    assert out == (spec([n, dout]), {"sum": spec([dout]), "shape": [spec([n, dout]), spec([])]})
    assert check(lambda x: None, spec([n])) is None


def test_check_runs_no_kernel(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise AssertionError("a kernel ran inside check")

    monkeypatch.setattr(verigrad.REGISTRY["matmul"], "reference", boom)
    assert check(lambda x, w: x @ w.T, spec([n, din]), spec([dout, din])) == spec([n, dout])


def test_symbolic_movement_rules() -> None:
    assert check(lambda x: x[1:], spec([n])) == spec([n - 1])
    assert check(lambda x: x[:, ::2], spec([n, 6])) == spec([n, 3])
    assert check(lambda x: x[::2], spec([n])).shape[0].evaluate({"n": 7}) == 4
    assert check(lambda x: x[-1], spec([n, 3])) == spec([3])
    assert check(lambda x: x[None, ..., None], spec([n, din])) == spec([1, n, din, 1])
    assert check(lambda x, y: verigrad.concat(x, y, axis=0), spec([n, din]), spec([m, din])) == spec(
        [n + m, din]
    )
    assert check(lambda x: verigrad.stack(x, x, axis=1), spec([n])) == spec([n, 2])
    assert check(lambda x: x.pad(((1, 2),)), spec([n])) == spec([n + 3])
    assert check(lambda x: x.T, spec([n, din, dout])) == spec([dout, din, n])
    assert check(lambda x: x.flatten(), spec([n, 2, din])) == spec([n * 2 * din])
    assert check(lambda x: x.unsqueeze(0).expand(3, -1), spec([n])) == spec([3, n])
    assert check(lambda x, i: x[i], spec([n, din]), spec([m], "i64")) == spec([m, din])
    assert check(lambda: verigrad.arange(n)) == spec([n], "i64")
    with pytest.raises(ShapeError):
        check(lambda x, y: verigrad.concat(x, y, axis=1), spec([n, din]), spec([m, din]))


def test_symbolic_reductions_and_dtypes() -> None:
    assert check(lambda x: x.sum(), spec([n, din])) == spec([])
    assert check(lambda x: x.mean(1, keepdim=True), spec([n, din])) == spec([n, 1])
    assert check(lambda x: x.argmax(dim=1), spec([n, din])) == spec([n], "i64")
    assert check(lambda x: x.sum(), spec([n], "i32")) == spec([], "i64")
    assert check(lambda x: x.float(), spec([n], "f16")) == spec([n])
    assert check(lambda x: x > 0, spec([n])) == spec([n], "bool")
    cond = spec([n, 1], "bool")
    assert check(lambda x, c: verigrad.where(c, x, 0.0), spec([n, din]), cond) == spec([n, din])


@pytest.mark.parametrize(("index", "length"), [(slice(2, 1), 0), (slice(-1, -3), 0), (slice(-3, -1), 2)])
def test_an_empty_slice_of_a_symbolic_axis_has_length_zero(index, length) -> None:
    """x[2:1] selects nothing whatever the size: its symbolic length was -1 (2 - 1 taken for any n)."""
    out = check(lambda x: x[index], spec((n, 4), "f32"))
    assert out.shape == (length, 4)
    assert verigrad.zeros(5, 4)[index].shape == (length, 4)  # the concrete answer agrees
