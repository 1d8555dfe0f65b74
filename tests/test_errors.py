"""Errors are part of the interface: the op, the operands with their symbols, and the caller's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import verigrad
from verigrad import DTypeError, ShapeError, check, spec

n, din, dout, m = verigrad.dims("n din dout m")
HERE = __file__


def _next_line() -> int:
    """The number of the line after the caller's current line."""
    return inspect.currentframe().f_back.f_lineno + 1


def _assert_located(err: Exception, op: str, operands: list[str], line: int) -> None:
    text = str(err)
    assert err.op == op
    assert list(err.operands) == operands
    assert text.startswith(f"{op}({', '.join(operands)}): ")
    for operand in operands:
        assert operand in text
    assert err.where is not None, "the error does not say where"
    assert err.where.filename == HERE
    assert err.where.lineno == line
    assert f"{HERE}:{line}" in text


# shape errors ----------------------------------------------------------------------------------
def test_matmul_error_names_op_shapes_symbols_and_line() -> None:
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        check(lambda x, w: x @ w, spec([n, din]), spec([dout, din]))
    _assert_located(info.value, "matmul", ["f32[n, din]", "f32[dout, din]"], line)
    assert "din" in info.value.reason and "dout" in info.value.reason


def test_error_points_at_the_users_line_inside_a_function() -> None:
    def forward(x, w):
        h = x * 2.0
        return h @ w  # the bad line

    bad_line = inspect.getsourcelines(forward)[1] + 2
    with pytest.raises(ShapeError) as info:
        check(forward, spec([n, din], "f64"), spec([dout, din], "f64"))
    _assert_located(info.value, "matmul", ["f64[n, din]", "f64[dout, din]"], bad_line)
    assert info.value.where.function == "forward"


def test_eager_matmul_error_is_located() -> None:
    x, w = verigrad.zeros(3, 4), verigrad.zeros(5, 4)
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        _ = x @ w
    _assert_located(info.value, "matmul", ["f32[3, 4]", "f32[5, 4]"], line)


def test_broadcast_error_is_located() -> None:
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        check(lambda a, b: a + b, spec([n]), spec([m]))
    _assert_located(info.value, "add", ["f32[n]", "f32[m]"], line)
    assert "n" in info.value.reason and "m" in info.value.reason

    with pytest.raises(ShapeError) as info:
        line = _next_line()
        verigrad.ones(4, 3) * verigrad.ones(4)
    _assert_located(info.value, "mul", ["f32[4, 3]", "f32[4]"], line)


def test_reshape_error_is_located() -> None:
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        check(lambda x: x.reshape(n, 5), spec([n, 6]))
    _assert_located(info.value, "reshape", ["f32[n, 6]"], line)
    assert "n*5" in str(info.value) and "n*6" in str(info.value)

    with pytest.raises(ShapeError, match="-1") as info:
        line = _next_line()
        check(lambda x: x.reshape(-1, 4), spec([n, 6]))
    _assert_located(info.value, "reshape", ["f32[n, 6]"], line)


def test_bad_eager_reshape_raises_before_any_work(monkeypatch) -> None:
    calls = []
    op = verigrad.REGISTRY["reshape"]
    reference = op.reference
    monkeypatch.setattr(op, "reference", lambda *a, **k: calls.append(1) or reference(*a, **k))
    x = verigrad.arange(12).reshape(3, 4)
    assert calls == [1]
    before = x.numpy().copy()
    with pytest.raises(ShapeError) as info:
        line = _next_line()
        x.reshape(5, 2)
    _assert_located(info.value, "reshape", ["i64[3, 4]"], line)
    assert calls == [1], "the kernel ran before the shape was refused"
    np.testing.assert_array_equal(x.numpy(), before)


def test_error_in_a_later_op_leaves_nothing_half_done(monkeypatch) -> None:
    ran = []
    op = verigrad.REGISTRY["matmul"]
    monkeypatch.setattr(op, "reference", lambda *a, **k: ran.append(1))
    with pytest.raises(ShapeError):
        verigrad.zeros(2, 3) @ verigrad.zeros(2, 3)
    assert not ran


def test_other_shape_errors_name_their_op() -> None:
    cases = [
        ("concat", lambda: verigrad.concat(verigrad.zeros(2, 3), verigrad.zeros(2, 4), axis=0)),
        ("sum", lambda: verigrad.zeros(2, 3).sum(axis=2)),
        ("permute", lambda: verigrad.zeros(2, 3).permute(0, 0)),
        ("broadcast_to", lambda: verigrad.zeros(2, 3).broadcast_to(3, 3)),
        ("max", lambda: verigrad.zeros(0, 3).amax(axis=0)),
        ("pad", lambda: verigrad.zeros(2).pad(((1, 1), (1, 1)))),
        ("slice", lambda: verigrad.zeros(4)[::-1]),
    ]
    for name, fn in cases:
        with pytest.raises(ShapeError) as info:
            fn()
        assert info.value.op == name, (name, str(info.value))
        assert str(info.value).startswith(f"{name}(")
        assert info.value.where.filename == HERE


def test_shaping_functions_name_themselves() -> None:
    x, v = verigrad.zeros(2, 3), verigrad.zeros(3)
    cases = [
        ("transpose", "f32[2, 3]", lambda: x.transpose(0, 5)),
        ("unsqueeze", "f32[2, 3]", lambda: x.unsqueeze(4)),
        ("squeeze", "f32[2, 3]", lambda: x.squeeze(2)),
        ("flatten", "f32[2, 3]", lambda: x.flatten(0, 3)),
        ("expand", "f32[2, 3]", lambda: x.expand(3)),
        ("expand", "f32[3]", lambda: v.expand(-1, 3)),  # -1 in a new leading dimension
    ]
    for name, operand, fn in cases:
        with pytest.raises(ShapeError) as info:
            fn()
        _assert_located(info.value, name, [operand], inspect.getsourcelines(fn)[1])


def test_shape_error_is_a_value_error_and_dtype_error_a_type_error() -> None:
    assert issubclass(ShapeError, ValueError) and issubclass(ShapeError, verigrad.VerigradError)
    assert issubclass(DTypeError, TypeError) and issubclass(DTypeError, verigrad.VerigradError)


# dtype errors ----------------------------------------------------------------------------------
def test_bf16_compute_is_refused() -> None:
    b = verigrad.tensor([1.0, 2.0], dtype="bf16")
    with pytest.raises(DTypeError, match="bf16") as info:
        line = _next_line()
        b + b
    _assert_located(info.value, "add", ["bf16[2]", "bf16[2]"], line)
    for fn in (lambda: b.exp(), lambda: b.sum(), lambda: b @ b, lambda: b * 2.0, lambda: b > 0):
        with pytest.raises(DTypeError, match="bf16"):
            fn()
    assert b.float().dtype is verigrad.f32  # casting is allowed
    assert b.reshape(2, 1).shape == (2, 1)  # and so is moving


def test_where_condition_must_be_bool() -> None:
    x = verigrad.ones(3)
    with pytest.raises(DTypeError, match="bool") as info:
        line = _next_line()
        verigrad.where(x, x, x)
    _assert_located(info.value, "where", ["f32[3]", "f32[3]", "f32[3]"], line)
    with pytest.raises(DTypeError):
        check(lambda c, a: verigrad.where(c, a, 0.0), spec([n], "i64"), spec([n]))


def test_float_indices_are_refused() -> None:
    x = verigrad.zeros(3, 4)
    with pytest.raises(DTypeError) as info:
        line = _next_line()
        x[verigrad.tensor([0.0, 1.0])]
    _assert_located(info.value, "getitem", ["f32[3, 4]", "f32[2]"], line)
    with pytest.raises(DTypeError):
        x[1.0]
    with pytest.raises(DTypeError):
        verigrad.take(x, verigrad.tensor([1.0]), axis=0)
    with pytest.raises(DTypeError):
        check(lambda a, i: a[i], spec([n, din]), spec([m], "f32"))


def test_other_dtype_errors() -> None:
    with pytest.raises(DTypeError):
        verigrad.tensor([1, 2]).mean()
    assert verigrad.logical_and(verigrad.ones(2), verigrad.zeros(2)).tolist() == [False, False]  # any dtype
    with pytest.raises(DTypeError):  # but bf16, which computes nothing
        verigrad.logical_and(verigrad.ones(2, dtype="bf16"), verigrad.ones(2, dtype="bf16"))
    with pytest.raises(RuntimeError, match="floating point"):  # PyTorch's error
        verigrad.tensor([1, 2]).requires_grad_()
    with pytest.raises(TypeError):
        verigrad.tensor("abc")


# index errors ----------------------------------------------------------------------------------
def test_out_of_range_integer_index() -> None:
    x = verigrad.zeros(3, 4)
    for key in (3, -4, (0, 4), (2, -5)):
        with pytest.raises(IndexError, match="out of range"):
            x[key]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0]
    with pytest.raises(IndexError):
        x[..., ...]
    assert x[-3].shape == (4,) and x[2, -1].shape == ()
