"""A concat of views of one array lowered to one copy (ir/passes/concat_views.py): where it applies,
what it leaves, and that a compiled step keeps eager's bits."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad.ir import trace
from verigrad.ir.passes import concat_views, lower, optimize
from verigrad.ir.passes.concat_views import _permuted
from verigrad.ir.plan import Plan, bind


def _packed_gradient_layout(x):
    """Attention's backward: dq|dk|dv packed per (batch, head), each made (batch, tokens, width), then
    concatenated on the width."""
    b, h, n = x.shape
    t, d = 4, n // 12
    pieces = [x[:, :, j * t * d : (j + 1) * t * d].reshape(b, h, t, d).permute(0, 2, 1, 3) for j in range(3)]
    return verigrad.cat([p.reshape(b, t, h * d) for p in pieces], dim=2)


def _lowered(fn, *args):
    program = optimize(trace(fn, *[a.spec for a in args]))
    plan = Plan(program, bind(program, args), verigrad.get_backend())
    return plan, lower.run(program, plan.values, plan.backend)


def _ops(program) -> list[str]:
    return [instr.name for instr in program.instrs]


def test_a_packed_gradients_concat_becomes_one_rearranging_copy_with_the_same_bits():
    x = verigrad.tensor(np.random.default_rng(0).standard_normal((2, 3, 48)).astype(np.float32))
    plan, lowered = _lowered(_packed_gradient_layout, x)
    assert _ops(lowered) == ["reshape", "permute", "reshape"]
    (result,), _ = plan.run([x.payload])
    expected = _packed_gradient_layout(x).numpy()
    assert result.flags.c_contiguous and result.strides == expected.strides
    np.testing.assert_array_equal(result, expected, strict=True)


def test_pieces_that_do_not_hold_each_element_once_keep_their_concat():
    x = verigrad.tensor(np.arange(24, dtype=np.float32).reshape(2, 12))

    def overlapping(x):
        return verigrad.cat([x[:, 0:8], x[:, 4:12]], dim=1)

    def twice(x):
        return verigrad.cat([x[:, 0:6], x[:, 0:6]], dim=1)

    def two_arrays(x):
        return verigrad.cat([x[:, 0:6], (x * 2)[:, 6:12]], dim=1)

    for fn in (overlapping, twice, two_arrays):
        plan, lowered = _lowered(fn, x)
        assert "concat" in _ops(lowered), fn.__name__
        (result,), _ = plan.run([x.payload])
        np.testing.assert_array_equal(result, fn(x).numpy(), strict=True)


def test_a_concat_a_view_would_give_is_kept():
    """Halves of a row put back in order: reshape(x) would be a view of x, not the concat's own array."""
    x = verigrad.tensor(np.arange(24, dtype=np.float32).reshape(2, 12))

    def halves(x):
        return verigrad.cat([x[:, 0:6], x[:, 6:12]], dim=1)

    _, lowered = _lowered(halves, x)
    assert "concat" in _ops(lowered)


def test_a_piece_read_elsewhere_keeps_its_chain():
    x = verigrad.tensor(np.random.default_rng(1).standard_normal((2, 3, 48)).astype(np.float32))

    def also_read(x):
        piece = x[:, :, 0:16].reshape(2, 3, 4, 4).permute(0, 2, 1, 3).reshape(2, 4, 12)
        return _packed_gradient_layout(x), piece.sum()

    plan, lowered = _lowered(also_read, x)
    assert "concat" not in _ops(lowered) and "sum" in _ops(lowered)
    (result, total), _ = plan.run([x.payload])
    expected, expected_total = also_read(x)
    np.testing.assert_array_equal(result, expected.numpy(), strict=True)
    np.testing.assert_array_equal(total, expected_total.numpy(), strict=True)


@pytest.mark.parametrize("seed", range(20))
def test_permuted_reads_every_rearrangement_back(seed: int):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(2, 5, rng.integers(2, 5)))
    axes = tuple(int(a) for a in rng.permutation(len(shape)))
    order = np.arange(np.prod(shape)).reshape(shape).transpose(axes).ravel()
    found_shape, found_axes = _permuted(order)
    np.testing.assert_array_equal(
        np.arange(order.size).reshape(found_shape).transpose(found_axes).ravel(), order
    )
    for i, j in ((0, 1), (-2, -1)):  # first: no stride fits; last: the strides fit all but two
        swapped = order.copy()
        swapped[[i, j]] = swapped[[j, i]]
        assert _permuted(swapped) is None


def test_the_compiled_gpt_step_has_no_concat_and_eagers_bits():
    """The small GPT's attention backward concatenated dq, dk and dv after copying each: one copy now."""
    nn = verigrad.nn
    rng = np.random.default_rng(2)

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.proj = nn.Linear(16, 48), nn.Linear(16, 16)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.reshape(b, t, 2, c // 2).permute(0, 2, 1, 3) for z in self.qkv(x).split(c, dim=2))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.permute(0, 2, 1, 3).reshape(b, t, c))

    def losses(compiled: bool) -> tuple[list[float], list[np.ndarray]]:
        verigrad.manual_seed(0)
        model = Attention()
        optimizer = verigrad.optim.AdamW(model.parameters(), lr=1e-2)

        def step(x):
            loss = model(x).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        run = verigrad.compile(step) if compiled else step
        out = [run(x).item() for _ in range(3)]
        if compiled:
            (plan,) = run._plans.values()
            assert "concat" not in {s.op.name for s in plan.steps}
        return out, [p.detach().numpy() for p in model.parameters()]

    x = verigrad.tensor(rng.standard_normal((2, 8, 16)).astype(np.float32))
    eager, compiled = losses(False), losses(True)
    assert eager[0] == compiled[0]
    for a, b in zip(eager[1], compiled[1]):
        np.testing.assert_array_equal(a, b, strict=True)


def test_the_pass_leaves_a_program_without_concat_as_it_is():
    x = verigrad.tensor(np.ones((2, 3), np.float32))
    program = optimize(trace(lambda x: x * 2, x.spec))
    assert concat_views.run(program) is program
