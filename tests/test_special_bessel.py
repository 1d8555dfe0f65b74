"""verigrad.special's Bessel and Airy functions against tabulated values (30-digit evaluations of the
definitions, rounded to f64), their special values and dtypes, and their refusal of complex numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad import special

X = [1e-5, 0.5, 1.5, 2.0, 3.7, 5.01, 7.5, 12.0, 24.0, 26.0, 80.0]  # each regime and the seams between
TABLE = {
    "bessel_j0": [
        0.999999999975,
        0.9384698072408129,
        0.5118276717359181,
        0.22389077914123567,
        -0.39923020337119114,
        -0.17431543205674924,
        0.2663396578803784,
        0.047689310796833535,
        -0.056230274166859266,
        0.15599931552242113,
        -0.06974216551221002,
    ],
    "bessel_j1": [
        4.9999999999375e-06,
        0.2422684576748739,
        0.5579365079100996,
        0.5767248077568734,
        0.05383398774546179,
        -0.32868309571784987,
        0.1352484275797055,
        -0.2234471044906276,
        -0.15403806518312121,
        0.015045730586915811,
        -0.056057296675712576,
    ],
    "bessel_y0": [
        -7.40316028370197,
        -0.44451873350670656,
        0.38244892379775886,
        0.5103756726497451,
        0.1060743153203541,
        -0.30997933991664645,
        0.11731328614820863,
        -0.22523731263436145,
        -0.15283402879758778,
        0.012044625860755602,
        -0.05562033908977,
    ],
    "bessel_y1": [
        -63661.97727536548,
        -1.471472392670243,
        -0.4123086269739113,
        -0.10703243154093754,
        0.41667437268380747,
        0.14447857825491056,
        -0.25912851048611624,
        -0.05709921826089652,
        0.05305977612120217,
        -0.15579655322960265,
        0.06939591378458805,
    ],
    "modified_bessel_k0": [
        11.628856980944363,
        0.9244190712276659,
        0.21380556264752573,
        0.11389387274953344,
        0.01563065992162666,
        0.003650876352043749,
        0.00024917761635611437,
        2.2008253973114916e-06,
        9.608818780833116e-12,
        1.2498773979850725e-12,
        2.5251198425054717e-36,
    ],
    "modified_bessel_k1": [
        99999.99993935571,
        1.656441120003301,
        0.2773878004568438,
        0.13986588181652243,
        0.01762803510222326,
        0.003999867567304568,
        0.0002652973901252895,
        2.290757464767188e-06,
        9.806998930441144e-12,
        1.2736907792389236e-12,
        2.54085312752117e-36,
    ],
    "scaled_modified_bessel_k0": [
        11.628973270095617,
        1.5241093857739094,
        0.9582100532948965,
        0.8415682150707714,
        0.6322180591987406,
        0.5472836562659122,
        0.4505236991049157,
        0.3581948784890782,
        0.25452917420902205,
        0.2446380149415515,
        0.13990735522662032,
    ],
    "scaled_modified_bessel_k1": [
        100000.99994435512,
        2.731009708211786,
        1.243165873552553,
        1.0334768470686886,
        0.7130065010495761,
        0.5995990923079205,
        0.4796689337910206,
        0.37283175336970986,
        0.2597787923956998,
        0.24929899875354783,
        0.14077907713800053,
    ],
}
AIRY_X = [-30.0, -11.0, -5.01, -2.5, -1.0, 0.0, 1.0, 2.5, 6.0, 20.0]
AIRY = [
    -0.08796818845684216,
    -0.008759589255702381,
    0.34740160871220593,
    -0.11232506769296609,
    0.5355608832923521,
    0.3550280538878172,
    0.13529241631288141,
    0.01572592338047049,
    9.947694360252889e-06,
    1.6916728686705404e-27,
]
NAMES = [*TABLE, "airy_ai"]


def _f64(name: str, values: list[float]) -> np.ndarray:
    return getattr(special, name)(verigrad.tensor(values, dtype=verigrad.float64)).numpy()


@pytest.mark.parametrize("name", list(TABLE))
def test_bessel_functions_match_tabulated_values(name: str) -> None:
    # the quadratures' rounding: a few ulps of the integrand's largest value, 1
    np.testing.assert_allclose(_f64(name, X), TABLE[name], rtol=1e-14, atol=1e-14)


def test_airy_ai_matches_tabulated_values() -> None:
    np.testing.assert_allclose(_f64("airy_ai", AIRY_X), AIRY, rtol=1e-14, atol=1e-14)


def test_symmetries() -> None:
    x = [0.3, 2.5, 9.0, 31.0]
    neg = [-v for v in x]
    np.testing.assert_array_equal(_f64("bessel_j0", neg), _f64("bessel_j0", x))  # even
    np.testing.assert_array_equal(_f64("bessel_j1", neg), -_f64("bessel_j1", x))  # odd
    # the scaled K is exp(x) K
    np.testing.assert_allclose(
        _f64("scaled_modified_bessel_k0", x), np.exp(x) * _f64("modified_bessel_k0", x), rtol=1e-14
    )


def test_wronskian() -> None:
    # J1 Y0 - J0 Y1 = 2 / (pi x), in every regime
    x = np.array([0.1, 1.9, 2.1, 6.0, 17.0, 24.9, 25.1, 60.0])
    j0, j1, y0, y1 = (_f64(n, list(x)) for n in ("bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"))
    np.testing.assert_allclose(j1 * y0 - j0 * y1, 2 / (np.pi * x), rtol=1e-13)


def test_special_values_are_pytorchs() -> None:
    inf, nan = math.inf, math.nan
    x = [0.0, -0.0, -1.0, inf, -inf, nan]
    np.testing.assert_array_equal(_f64("bessel_j0", x), [1.0, 1.0, 0.7651976865579666, nan, nan, nan])
    np.testing.assert_array_equal(_f64("bessel_j1", x)[3:], [nan, nan, nan])
    for name, at_zero in [("bessel_y0", -inf), ("bessel_y1", -inf), ("modified_bessel_k0", inf)]:
        np.testing.assert_array_equal(
            _f64(name, x), [at_zero, at_zero, nan, nan if "y" in name else 0.0, nan, nan]
        )
    for name in ("modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"):
        np.testing.assert_array_equal(_f64(name, [0.0, -2.0, inf, nan]), [inf, nan, 0.0, nan])
    np.testing.assert_array_equal(_f64("airy_ai", [inf, -inf, nan, 800.0]), [nan, nan, nan, 0.0])
    assert _f64("bessel_j1", [-0.0])[0] == 0.0 and math.copysign(1, _f64("bessel_j1", [-0.0])[0]) == -1


@pytest.mark.parametrize("name", NAMES)
def test_integers_and_bool_give_f32_and_floats_keep_their_dtype(name: str) -> None:
    fn = getattr(special, name)
    for t in (verigrad.tensor([1, 2, 3]), verigrad.tensor([True, False])):
        out = fn(t)
        assert out.dtype is verigrad.float32
        np.testing.assert_allclose(out.numpy(), fn(t.float()).numpy())
    assert fn(verigrad.tensor([1.5], dtype=verigrad.float64)).dtype is verigrad.float64
    assert fn(verigrad.tensor([1.5])).dtype is verigrad.float32


@pytest.mark.parametrize("name", NAMES)
def test_complex_numbers_are_refused(name: str) -> None:
    fn = getattr(special, name)
    for value in (1 + 2j, np.array([1j]), np.complex64(1)):
        with pytest.raises(TypeError, match="verigrad has no complex numbers"):
            fn(value)
    with pytest.raises(TypeError, match="complex"):
        fn(verigrad.tensor([1j]))


@pytest.mark.parametrize("name", NAMES)
def test_no_gradient_is_recorded_as_in_pytorch(name: str) -> None:
    x = verigrad.tensor([1.5, 3.0], requires_grad=True)
    assert not getattr(special, name)(x).requires_grad


def test_large_inputs_are_evaluated_in_chunks() -> None:
    # the quadratures evaluate a few thousand elements at a time; a large tensor gives each its value
    x = np.linspace(2.5, 24.5, 10_001)
    np.testing.assert_allclose(
        _f64("bessel_j0", list(x))[[0, 5000, 10_000]], _f64("bessel_j0", list(x[[0, 5000, 10_000]]))
    )


@pytest.mark.parametrize("name", NAMES)
def test_f16_is_refused_as_pytorchs_cpu_kernels_refuse_it(name: str) -> None:
    with pytest.raises(verigrad.DTypeError, match="not implemented for f16"):
        getattr(special, name)(verigrad.tensor([1.5], dtype=verigrad.float16))
