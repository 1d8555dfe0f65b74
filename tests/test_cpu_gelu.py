"""The f32 gelu and gelu_deriv kernels' vector paths (elementwise_vector.h's erfcx polynomial, and the
polynomials in x^2 of blocks whose every |x| is at most 2.5): the reference's bits at the edges of the
inputs they keep, on every path and thread count."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def _around(values: list[float], n: int = 40) -> np.ndarray:
    """Each value and its n f32 neighbours on either side."""
    x = np.array(values, np.float32).view(np.int32)
    steps = np.arange(-n, n + 1, dtype=np.int32)
    return (x[:, None] + steps[None, :]).ravel().view(np.float32)


# the edges of what the vector paths keep: -3 (below: the routine), gelu_deriv's hole around its zero
# (-0.756, -0.747, the zero -0.75179), gelu's tiny inputs (2^-120), the clamps (t = 6 and 10 of |x| /
# sqrt2, x = 15), the largest float and the special values
EDGES = [-3.0, -0.756, -0.747, -0.75179, 2.0**-120, -(2.0**-120), 6 * math.sqrt(2), 10 * math.sqrt(2), 15.0]
EDGES += [3.4028234e38, -3.4028234e38, 1e-38, -1e-38]
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45], np.float32)


def inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    parts = [_around([e for e in EDGES if abs(e) < 3e38]), SPECIAL, rng.normal(0, 1.5, 20000)]
    parts += [rng.uniform(-0.8, -0.7, 5000), rng.uniform(-3.5, 20, 5000), _around([3.4028234e38], 0)]
    return np.concatenate([np.asarray(p, np.float32) for p in parts])


@needs_cc
@pytest.mark.parametrize("op", ["gelu", "gelu_deriv"])
def test_vector_paths_give_the_references_bits_at_their_edges(op):
    """Every vector path (and the scalar formula), on 1 and 3 threads: the bits of the op's reference,
    a NaN's sign and payload included."""
    x = inputs()
    with np.errstate(all="ignore"):
        expected = REGISTRY[op].reference(x)
    kernel = cpu.cpu.native(REGISTRY[op], verigrad.f32)
    for path in cpu.vector_paths():
        with cpu.cpu.on_path(path):
            for threads in (1, 3):
                verigrad.set_threads(threads)
                got = kernel(x)
                bad = got.view(np.uint32) != expected.view(np.uint32)
                assert not bad.any(), (path, threads, x[bad][:8], got[bad][:8], expected[bad][:8])
    verigrad.set_threads(1)


@needs_cc
@pytest.mark.parametrize("op", ["gelu", "gelu_deriv"])
def test_blocks_of_small_inputs_give_the_references_bits(op, small_chunks):
    """Blocks whose every |x| is at most 2.5 take the polynomials in x^2 (no exp, no division): the
    reference's bits where their sum cancels most (x near -2.5, gelu_deriv near its zero's hole) and at
    the bound, on every path; the same inputs with one large input in each block of 32 (the erfcx path
    for that block), or cut into blocks elsewhere on 3 threads, give the same bits."""
    rng = np.random.default_rng(11)
    x = np.concatenate(
        [
            _around([-2.5, 2.5, -2.4999, -0.757, -0.746, -1.0, 1e-3, 2.0**-119], 200),
            rng.uniform(-2.5, 2.5, 8000),
            rng.uniform(-2.5, -2.2, 4000),
            rng.uniform(-0.8, -0.7, 4000),
        ]
    ).astype(np.float32)
    x = x[np.abs(x) <= 2.5]
    x = x[: x.size // 32 * 32]
    with np.errstate(all="ignore"):
        expected = REGISTRY[op].reference(x).view(np.uint32)
    mixed = x.copy()
    mixed[::32] = 7.0
    kernel = cpu.cpu.native(REGISTRY[op], verigrad.f32)
    for path in cpu.vector_paths():
        with cpu.cpu.on_path(path):
            got = kernel(x).view(np.uint32)
            bad = got != expected
            assert not bad.any(), (path, x[bad][:8])
            again = kernel(mixed).view(np.uint32)
            assert (again[1::32] == got[1::32]).all() and (again[31::32] == got[31::32]).all(), path
            verigrad.set_threads(3)  # small_chunks: each thread's blocks cut elsewhere
            assert (kernel(x[5:]).view(np.uint32) == got[5:]).all(), path
            verigrad.set_threads(1)


@needs_cc
def test_hand_computed_values():
    """gelu(1) = Phi(1) = 0.841344746..., gelu(-1) = -0.158655254..., gelu'(0) = 0.5, gelu'(1) =
    Phi(1) + phi(1) = 1.0833154705..., gelu(+inf) = inf, gelu'(+inf) = NaN (the reference's inf * 0)."""
    x = np.array([1.0, -1.0, 0.0, np.inf, 2.0, 40.0], np.float32)
    gelu = cpu.cpu.native(REGISTRY["gelu"], verigrad.f32)(x)
    deriv = cpu.cpu.native(REGISTRY["gelu_deriv"], verigrad.f32)(x)
    phi = math.exp(-0.5) / math.sqrt(2 * math.pi)
    expected = [0.8413447460685429, -0.15865525393145707, 0.0, math.inf, 2 * 0.9772498680518208, 40.0]
    assert gelu.tolist() == np.array(expected, np.float32).tolist()
    assert (
        deriv[:3].tolist()
        == np.array([0.8413447460685429 + phi, 0.15865525393145707 - phi, 0.5], np.float32).tolist()
    )
    assert np.isnan(deriv[3]) and deriv[5] == 1.0


@needs_cc
def test_gelu_grad_kernel_gives_the_two_kernels_bits_on_every_path_and_thread_count():
    """gelu's backward in one pass: the bits of gelu_deriv's kernel then mul's (and the reference's here),
    blocks and threads splitting 3 x 20011 elements anywhere, on every vector path; a view, a broadcast
    and f64 run those two kernels."""
    x = np.resize(inputs(), (3, 20011))
    g = np.random.default_rng(3).uniform(-3, 3, x.shape).astype(np.float32)
    g.ravel()[:8] = SPECIAL
    kernel = cpu.cpu.native(REGISTRY["gelu_grad"], verigrad.f32)
    deriv, mul = (cpu.cpu.native(REGISTRY[op], verigrad.f32) for op in ("gelu_deriv", "mul"))
    with np.errstate(all="ignore"):
        reference = REGISTRY["gelu_grad"].reference(g, x)
    for path in cpu.vector_paths():
        with cpu.cpu.on_path(path):
            two = mul(g, deriv(x))
            for threads in (1, 2, 3):
                verigrad.set_threads(threads)
                got = kernel(g, x)
                assert got.view(np.uint32).tolist() == two.view(np.uint32).tolist(), (path, threads)
    verigrad.set_threads(1)
    if cpu.cpu.exactness("gelu_grad", "f32").is_exact:
        assert two.view(np.uint32).tolist() == reference.view(np.uint32).tolist()
    view = kernel(g[:, ::2], x[:, ::2])
    assert view.view(np.uint32).tolist() == reference[:, ::2].view(np.uint32).tolist()
    # f64: gelu_deriv's and mul's kernels one after the other (not the reference's erf a Python call each)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    deriv64, mul64 = (cpu.cpu.native(REGISTRY[op], verigrad.f64) for op in ("gelu_deriv", "mul"))
    got = cpu.cpu.native(REGISTRY["gelu_grad"], verigrad.f64)(g64, x64)
    assert got.view(np.uint64).tolist() == mul64(g64, deriv64(x64)).view(np.uint64).tolist()


def test_gelu_backward_is_gelu_grad_and_refuses_mismatched_operands():
    """F.gelu's gradient is the gelu_grad op (g * gelu_deriv(x) in one op: the composition's bits);
    gelu_grad broadcasts g and x as mul does, and refuses shapes that do not broadcast and mixed dtypes."""
    rng = np.random.default_rng(5)
    x = verigrad.tensor(rng.uniform(-4, 4, (6, 7)).astype(np.float32), requires_grad=True)
    g = rng.uniform(-2, 2, (6, 7)).astype(np.float32)
    verigrad.nn.functional.gelu(x).backward(verigrad.tensor(g))
    deriv = REGISTRY["gelu_deriv"].reference(x.detach().numpy())
    assert x.grad.numpy().view(np.uint32).tolist() == (g * deriv).view(np.uint32).tolist()

    def step(x, g):
        x.requires_grad_(True)
        verigrad.nn.functional.gelu(x).backward(g)
        return x.grad

    spec = verigrad.spec((6, 7), verigrad.f32)
    program = str(verigrad.trace(step, spec, spec))
    assert "gelu_grad" in program and "gelu_deriv" not in program
    op = REGISTRY["gelu_grad"]
    row = op(verigrad.tensor(g[0]), x.detach()).numpy()  # g's row broadcast over x's rows
    assert row.view(np.uint32).tolist() == (g[0] * deriv).view(np.uint32).tolist()
    with pytest.raises(verigrad.errors.ShapeError, match="gelu_grad"):
        op(verigrad.zeros(7), verigrad.zeros(6, 8))
    with pytest.raises(verigrad.errors.DTypeError, match=r"gelu_grad: the gradient must be f32 .* got f64"):
        op(verigrad.zeros(6, 7, dtype=verigrad.float64), verigrad.zeros(6, 7))
