"""PyTorch's dtype= on tril_indices/triu_indices and on the module functions cumsum/cumprod, and var/std's
(input, unbiased) form (PyTorch's OpInfo suite passes them; verigrad raised)."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad


@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
def test_triangle_indices_take_int32_or_int64(name):
    fn = getattr(verigrad, name)
    want = np.stack(getattr(np, name)(4, 1, 5))  # row 4, offset 1, col 5
    default = fn(4, 5, 1)
    assert default.dtype == verigrad.int64 and (default.numpy() == want).all()
    narrow = fn(4, 5, 1, dtype=verigrad.int32, device="cpu")
    assert narrow.dtype == verigrad.int32 and (narrow.numpy() == want).all()
    with pytest.raises(verigrad.DTypeError, match=f"{name}: dtype must be int32 or int64"):
        fn(3, 3, dtype=verigrad.float32)
    with pytest.raises(RuntimeError):
        fn(3, 3, device="cuda")


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumulative_functions_take_dtype_as_the_methods_do(name):
    x = verigrad.tensor([[1, 2], [3, 4]], dtype=verigrad.int32)
    got = getattr(verigrad, name)(x, 1, dtype=verigrad.float64)
    want = getattr(np, name)(np.array([[1, 2], [3, 4]], np.float64), axis=1)
    assert got.dtype == verigrad.float64 and (got.numpy() == want).all()
    assert (getattr(verigrad, name)(x, dim=0).numpy() == getattr(np, name)(x.numpy(), axis=0)).all()


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_an_integer_dtype_given_is_the_results_wrapping_as_it_does(name):
    """PyTorch's cumsum(x, 0, dtype=int8) is int8 (the op alone widens integers to int64)."""
    x = verigrad.tensor([100, 100, 100], dtype=verigrad.int32)
    got = getattr(verigrad, name)(x, 0, dtype=verigrad.int8)
    want = getattr(np, name)(np.array([100, 100, 100], np.int64)).astype(np.int8)
    assert got.dtype == verigrad.int8 and got.numpy().tolist() == want.tolist()


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ["float64", "int8"])
def test_a_dtype_given_casts_the_input_once(name, dtype):
    """The method's dtype= casts its input once (a second cast, made only to read its dtype, was a copy of
    the input in eager mode and an instruction of a traced program), with the same values and dtype."""
    fn = lambda x: getattr(x, name)(0, dtype=getattr(verigrad, dtype))
    program = verigrad.trace(fn, verigrad.spec([3]))
    casts = [i.name for i in program.instrs].count("cast")
    assert casts == (1 if dtype == "float64" else 2)  # an integer dtype: the op's i64 result cast back
    x = np.array([100.0, 100.0, -3.0], np.float32)
    got = getattr(verigrad.from_numpy(x), name)(0, dtype=getattr(verigrad, dtype))
    want = getattr(np, name)(x.astype(np.int64 if dtype == "int8" else np.float64)).astype(dtype)
    assert got.dtype == getattr(verigrad, dtype) and got.numpy().tolist() == want.tolist()


@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
def test_a_bool_second_argument_is_unbiased_over_every_axis(name):
    x = np.array([[1.0, 2.0], [4.0, 8.0]], np.float32)
    fn = getattr(verigrad, name)
    for unbiased, ddof in ((True, 1), (False, 0)):
        got = fn(verigrad.from_numpy(x), unbiased)
        first = got[0] if name.endswith("_mean") else got
        want = x.var(ddof=ddof) if name.startswith("var") else x.std(ddof=ddof)
        assert first.shape == () and np.isclose(first.item(), want, rtol=1e-6)
        if name.endswith("_mean"):
            assert got[1].item() == x.mean()
    along = fn(verigrad.from_numpy(x), 1, False)  # (input, dim, unbiased)
    along = along[0] if name.endswith("_mean") else along
    want = x.var(axis=1) if name.startswith("var") else x.std(axis=1)
    np.testing.assert_allclose(along.numpy(), want, rtol=1e-6)
    spelled = fn(verigrad.from_numpy(x), 1, correction=None)  # PyTorch's default spelled out: 1
    spelled = spelled[0] if name.endswith("_mean") else spelled
    want = x.var(axis=1, ddof=1) if name.startswith("var") else x.std(axis=1, ddof=1)
    np.testing.assert_allclose(spelled.numpy(), want, rtol=1e-6)


def test_logsumexp_of_integers_and_bools_is_f32_as_pytorchs():
    for dtype in (verigrad.bool, verigrad.int32, verigrad.int64):
        got = verigrad.logsumexp(verigrad.tensor([1, 0, 1], dtype=dtype), 0)
        assert got.dtype == verigrad.float32 and np.isclose(got.item(), np.log(2 * np.e + 1), rtol=1e-6)


def test_repeat_interleave_checks_output_size():
    x = verigrad.tensor([1, 2])
    assert verigrad.repeat_interleave(x, 2, output_size=4).tolist() == [1, 1, 2, 2]
    assert x.repeat_interleave(verigrad.tensor([1, 2]), dim=0, output_size=3).tolist() == [1, 2, 2]
    with pytest.raises(ValueError, match="output_size 3 is not the result's length 4"):
        verigrad.repeat_interleave(x, 2, output_size=3)
