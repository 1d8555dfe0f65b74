"""The backward of pieces sliced from one tensor: where they tile one axis (split, chunk, q, k and v cut
from one projection) their gradients are concatenated, PyTorch's split backward (a -0.0 stays -0.0, no
zero-padded array per piece); pieces that overlap, leave part of the tensor out or meet other gradients
give the sum of their zero-padded gradients as before."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.ops import movement


@pytest.fixture
def unslices(monkeypatch):
    """The number of unslice calls (the zero-padded gradient of one piece) made during the test."""
    calls = []
    real = movement.unslice

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr("verigrad.autograd.unslice", counted)
    return calls


def weights(rng, *shape):
    w = rng.standard_normal(shape).astype(np.float32)
    w.flat[::3] = -0.0  # gradients of -0.0: a sum with the zeros of unslice would make them +0.0
    return w


def test_a_split_into_pieces_that_tile_an_axis_gives_their_gradients_concatenated(unslices):
    rng = np.random.default_rng(0)
    x = vg.tensor(rng.standard_normal((2, 3, 12)).astype(np.float32), requires_grad=True)
    ws = [weights(rng, 2, 3, 4) for _ in range(3)]
    q, k, v = x.split(4, dim=2)
    ((q * vg.tensor(ws[0])).sum() + (k * vg.tensor(ws[1])).sum() + (v * vg.tensor(ws[2])).sum()).backward()
    want = np.concatenate(ws, axis=2)
    np.testing.assert_array_equal(x.grad.numpy().view(np.uint32), want.view(np.uint32))  # -0.0 kept
    assert not unslices


def test_pieces_used_in_any_order_and_chunks_of_unequal_sizes():
    rng = np.random.default_rng(1)
    x = vg.tensor(rng.standard_normal((5, 7)).astype(np.float32), requires_grad=True)
    a, b, c = x.chunk(3, dim=1)  # widths 3, 3, 1
    ws = [weights(rng, 5, n) for n in (3, 3, 1)]
    ((c * vg.tensor(ws[2])).sum() + (a * vg.tensor(ws[0])).sum() + (b * vg.tensor(ws[1])).sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy().view(np.uint32), np.concatenate(ws, 1).view(np.uint32))


@pytest.mark.parametrize(
    "cut",
    [
        lambda x: (x[:, :3], x[:, 2:]),  # overlapping
        lambda x: (x[:, :2], x[:, 4:]),  # a gap
        lambda x: (x[:2, :3], x[2:, 3:]),  # along two axes
        lambda x: (x[:, :3], x[:, 3:], x),  # the whole tensor too
    ],
)
def test_pieces_that_do_not_tile_one_axis_give_the_sum_of_their_padded_gradients(cut, unslices):
    rng = np.random.default_rng(2)
    data = rng.standard_normal((4, 6)).astype(np.float32)
    x = vg.tensor(data, requires_grad=True)
    pieces = cut(x)
    ws = [rng.standard_normal(tuple(p.shape)).astype(np.float32) for p in pieces]
    total = None
    for p, w in zip(pieces, ws):
        term = (p * vg.tensor(w)).sum()
        total = term if total is None else total + term
    total.backward()
    # the gradient as before: each piece's zero-padded one, added in the order the backward reaches them
    probe = np.arange(data.size, dtype=np.float32).reshape(data.shape)
    want = np.zeros_like(data)
    for p, w in reversed(list(zip(cut(probe), ws))):
        padded = np.zeros_like(data)
        padded[np.isin(probe, p)] = w.ravel()
        want = want + padded
    np.testing.assert_array_equal(x.grad.numpy(), want)
    assert unslices


def test_a_split_is_differentiated_twice():
    x = vg.tensor(np.arange(1.0, 7.0, dtype=np.float32), requires_grad=True)
    a, b = x.split(3)
    (g,) = vg.autograd.grad((a**3).sum() + (b**2).sum(), [x], create_graph=True)
    g.sum().backward()
    want = np.concatenate([6 * np.arange(1.0, 4.0), [2.0, 2.0, 2.0]]).astype(np.float32)
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_a_compiled_backward_concatenates_too_and_gives_eagers_bits(unslices):
    rng = np.random.default_rng(3)
    data = rng.standard_normal((2, 3, 12)).astype(np.float32)
    ws = [vg.tensor(weights(rng, 2, 3, 4)) for _ in range(3)]

    def grad_of(x):
        x = x.detach().requires_grad_()
        q, k, v = x.split(4, dim=2)
        ((q * ws[0]).sum() + (k * ws[1]).sum() + (v * ws[2]).sum()).backward()
        return x.grad

    compiled = vg.compile(grad_of)
    got = compiled(vg.tensor(data))
    eager = grad_of(vg.tensor(data))
    np.testing.assert_array_equal(got.numpy().view(np.uint32), eager.numpy().view(np.uint32))  # -0.0 kept
    assert not unslices
    (plan,) = compiled._plans.values()
    assert "concat" in str(plan.program)
