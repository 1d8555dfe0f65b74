"""The backward engine's speed paths (autograd.py, backends/cpu/extension/backward.c): the walk in C
gives the Python walk's order item by item (the order gradient contributions are summed in) and hands
back to it where it must; the VJPs written for speed give the bits of the forms they replace."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import verigrad
from verigrad import autograd, eager, versions
from verigrad.backends.cpu import fastcall
from verigrad.ops import REGISTRY
from verigrad.ops import reduce as reduce_ops


@pytest.fixture
def walk():
    """vg_eager's walk (the C calls bound and on)."""
    with verigrad.backend("cpu") as backend:
        if not backend.load() or not eager.install_c_calls():
            pytest.skip(f"no C calls here: {fastcall.eager_status()}")
        was = eager.c_calls(True)
        try:
            yield autograd._C_WALK[0]
        finally:
            eager.c_calls(was)


def python_walk(roots: list) -> list:
    kept = autograd._C_WALK[:]
    autograd._C_WALK[:] = []
    try:
        return autograd._topological(roots)
    finally:
        autograd._C_WALK[:] = kept


def graph(picks: list[tuple[int, int, int]], leaves: int) -> list:
    """Tensors made from `leaves` leaves (some not requiring grad) by ops picked from `picks`: (op, first
    operand, second operand), the operands any tensor made before (so values are reused)."""
    rng = np.random.default_rng(0)
    made = [
        verigrad.tensor(rng.standard_normal((3, 4)).astype(np.float32)).requires_grad_(i % 3 != 2)
        for i in range(leaves)
    ]
    ops = (lambda a, b: a + b, lambda a, b: a * b, lambda a, b: (a - b).relu(), lambda a, b: a.exp() + b)
    for op, i, j in picks:
        made.append(ops[op](made[i % len(made)], made[j % len(made)]))
    return made


@settings(
    database=None,
    derandomize=True,
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # (the fixture binds; nothing to reset)
)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 99), st.integers(0, 99)), min_size=1, max_size=25),
    st.integers(1, 4),
    st.integers(1, 3),
)
def test_the_c_walk_gives_the_python_walks_order(walk, picks, leaves, nroots) -> None:
    made = graph(picks, leaves)
    roots = [t for t in made[-nroots:] if t.requires_grad] or [made[-1]]
    assert [id(t) for t in walk(list(roots), versions.last_recorded)] == [id(t) for t in python_walk(roots)]


def test_backward_gives_the_same_bits_with_the_c_walk_and_without(walk) -> None:
    def grads() -> list[bytes]:
        made = graph([(i % 4, 3 * i + 1, 5 * i + 2) for i in range(40)], 4)
        sum(t.sum() for t in made[-3:] if t.requires_grad).backward()
        return [t.grad.numpy().tobytes() for t in made[:4] if t.grad is not None]

    on = grads()
    assert autograd._C_WALK
    kept = autograd._C_WALK[:]
    autograd._C_WALK[:] = []
    try:
        assert grads() == on
    finally:
        autograd._C_WALK[:] = kept


def test_the_c_walk_hands_back_where_the_python_walk_must_run(walk) -> None:
    x = verigrad.tensor([1.0, 2.0]).requires_grad_(True)
    y = (x * 2).exp()
    assert walk([y], versions.last_recorded) is not None
    # a node made before the last recorded in-place write: a view's history may be made again
    assert walk([y], y._node.stamp + 1) is None
    eager.c_calls(False)
    assert walk([y], versions.last_recorded) is None  # off with the C calls
    eager.c_calls(True)
    with pytest.raises(TypeError, match="topological"):
        walk((y,), 0)


def test_a_view_written_in_place_is_regenerated_through_the_c_walk(walk) -> None:
    """The walk answers None before the write's view and the Python walk regenerates it (as before)."""

    def run() -> bytes:
        x = verigrad.tensor([1.0, 2.0, 3.0]).requires_grad_(True)
        base = x * 1
        view = base[1:]
        base.mul_(3)
        (view * view).sum().backward()
        return x.grad.numpy().tobytes()

    on = run()
    kept = autograd._C_WALK[:]
    autograd._C_WALK[:] = []
    try:
        assert run() == on
    finally:
        autograd._C_WALK[:] = kept


def test_where_differentiates_only_the_branches_wanted() -> None:
    """masked_fill's fill value wants no gradient: its sum over the whole mask was work thrown away."""
    cond = verigrad.tensor([True, False, True])
    x = verigrad.tensor([1.0, 2.0, 3.0]).requires_grad_(True)
    fill = verigrad.tensor(-5.0)
    out = verigrad.where(cond, fill, x)
    g = verigrad.ones_like(out)
    _, gfill, gx = REGISTRY["where"].vjp(g, out, cond, fill, x)
    assert gfill is None
    assert gx.numpy().tolist() == [0.0, 1.0, 0.0]
    fill.requires_grad_(True)
    _, gfill, _ = REGISTRY["where"].vjp(g, out, cond, fill, x)
    assert gfill.numpy().tolist() == 2.0


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_permutes_gradient_undoes_its_axes(n: int) -> None:
    rng = np.random.default_rng(n)
    x = verigrad.tensor(rng.standard_normal(tuple(range(2, 2 + n))).astype(np.float32)).requires_grad_(True)
    for axes in itertools.permutations(range(n)):
        inverse = tuple(int(i) for i in np.argsort(axes))
        out = x.permute(*axes)
        (g,) = REGISTRY["permute"].vjp(verigrad.ones_like(out), out, x, axes=axes)
        assert g._node.params["axes"] == inverse if g._node else True
        assert g.shape == x.shape
        y = out.detach().requires_grad_(True)
        (back,) = REGISTRY["permute"].vjp(y, out, x, axes=axes)
        assert back.numpy().tobytes() == np.transpose(y.numpy(), inverse).tobytes()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize(
    "shape, dim", [((64, 64), None), ((3, 5, 7), (0, 2)), ((100001,), None), ((3, 4), 1), ((3, 0), 1)]
)
def test_means_gradient_gives_the_bits_of_the_count_op(dtype: str, shape: tuple, dim) -> None:
    """A Python int count (f32, f64, exact counts) divides as numel_of's 0-d count did, to the bit."""
    rng = np.random.default_rng(1)
    x = verigrad.tensor(rng.random(shape)).to(getattr(verigrad, dtype)).requires_grad_(True)
    m = x.mean() if dim is None else x.mean(dim=dim)
    with np.errstate(all="ignore"):
        m.sum().backward()
        axis = reduce_ops._canon(x.spec, dim=dim)["axis"]
        spread = reduce_ops._expand_back(verigrad.ones_like(m), x, axis, False)
        expected = spread / reduce_ops.numel_of(x, axis=axis).cast(x.dtype)
    assert x.grad.numpy().tobytes() == expected.numpy().tobytes()


def test_a_full_sums_gradient_broadcasts_the_0d_gradient() -> None:
    x = verigrad.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3)).requires_grad_(True)
    (x.sum() * 3).backward()
    assert x.grad.numpy().tolist() == [[3.0] * 3] * 2
    assert x.grad._node is None and x.grad.shape == (2, 3)


def test_a_backward_seed_is_ones_of_the_roots_dtype() -> None:
    for dtype in (verigrad.float16, verigrad.float32, verigrad.float64):
        x = verigrad.tensor([1.0, 2.0]).to(dtype).requires_grad_(True)
        (seed,) = autograd._seeds([x.sum()], None, "backward()")
        assert seed.dtype is dtype and seed.shape == () and float(seed) == 1.0 and not seed.requires_grad


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_a_broadcast_gradient_is_copied_into_grad(reduce: str) -> None:
    """As PyTorch's AccumulateGrad copies an expanded gradient: `.grad` can be written in place (it was a
    read-only broadcast view after x.sum().backward(), and zero_() raised)."""
    x = verigrad.tensor(np.ones((2, 3), np.float32)).requires_grad_(True)
    getattr(x, reduce)().backward()
    assert x.grad.payload.flags.writeable and x.grad.payload.flags.c_contiguous
    x.grad.mul_(2)
    assert x.grad.numpy().tolist() == [[2.0 if reduce == "sum" else float(np.float32(1 / 6) * 2)] * 3] * 2
    x.grad.zero_()
    assert x.grad.numpy().tolist() == [[0.0] * 3] * 2


def test_a_broadcast_gradient_with_history_is_copied_by_the_op() -> None:
    x = verigrad.tensor(np.ones((2, 3), np.float32)).requires_grad_(True)
    total = x.sum()
    (total * total).backward(create_graph=True)  # d/dx: 2 * sum, broadcast, with its history
    assert x.grad.payload.flags.writeable and x.grad._node.op.name == "contiguous"
    assert x.grad.numpy().tolist() == [[12.0] * 3] * 2
    x.grad.sum().backward()
    assert x.grad.numpy().tolist() == [[12.0 + 12.0] * 3] * 2


def test_a_0d_broadcast_gradient_stays_0d() -> None:
    x = verigrad.tensor(np.array(1.5)).requires_grad_(True)
    x.mean().backward()
    assert x.grad.payload.shape == () and x.grad.payload.flags.writeable and float(x.grad) == 1.0


def engine_both_ways(fn):
    """fn() with backward's walk in C, then in Python: the two outcomes (a result, or the exception's
    type and message)."""
    out = []
    kept = autograd._C_WALK[:]
    for c in (True, False):
        autograd._C_WALK[:] = kept if c else []
        try:
            out.append(fn())
        except Exception as e:  # compared by the caller
            out.append((type(e), str(e)))
        finally:
            autograd._C_WALK[:] = kept
    return out


def leaf(values, grad: bool = True):
    return verigrad.tensor(np.asarray(values, np.float32)).requires_grad_(grad)


def test_the_c_walk_gives_the_python_walks_gradients_to_the_bit(walk) -> None:
    def run() -> list[bytes]:
        rng = np.random.default_rng(5)
        x, w = leaf(rng.standard_normal((8, 16))), leaf(rng.standard_normal((16, 4)))
        b = leaf(rng.standard_normal(4))
        h = (x @ w + b).tanh()
        loss = (h * h).mean() + h.softmax(-1).sum() * 0.5 + (x.exp() * 1e-3).sum()
        loss.backward()
        return [t.grad.numpy().tobytes() for t in (x, w, b)]

    on, off = engine_both_ways(run)
    assert on == off


def test_hooks_and_retain_grad_through_the_c_walk(walk) -> None:
    def run():
        x = leaf([1.0, 2.0, 3.0])
        y = x * 2
        y.retain_grad()
        seen = []
        y.register_hook(lambda g: seen.append(g.numpy().tolist()))
        z = y.exp()
        z.register_hook(lambda g: g * 3)  # replaced: y's gradient is three times as large
        z.sum().backward()
        return x.grad.numpy().tolist(), y.grad.numpy().tolist(), seen

    on, off = engine_both_ways(run)
    assert on == off and on[1][0] == pytest.approx(3 * np.exp(2.0))


def test_errors_through_the_c_walk_are_the_python_walks(walk) -> None:
    def twice():
        x = leaf([1.0, 2.0])
        y = (x * x).sum()
        y.backward()
        y.backward()

    def written():
        x = leaf([1.0, 2.0])
        a = x * 1
        b = a * a  # mul reads a: a's write after raises
        a.mul_(2)
        b.sum().backward()

    def bad_hook():
        x = leaf([1.0, 2.0])
        y = x * 2
        y.register_hook(lambda g: verigrad.ones(3))
        y.sum().backward()

    for fn in (twice, written, bad_hook):
        on, off = engine_both_ways(fn)
        assert on == off and isinstance(on, tuple) and on[0] is RuntimeError, fn.__name__


def test_create_graph_and_retain_graph_through_the_c_walk(walk) -> None:
    def run():
        x = leaf([0.5, -1.0, 2.0])
        y = (x * x * x).sum()
        y.backward(create_graph=True, retain_graph=True)
        first = x.grad.numpy().tolist()
        g = x.grad
        x.grad = None
        g.sum().backward(retain_graph=True)  # d/dx sum(3x^2) = 6x
        second = x.grad.numpy().tolist()
        x.grad = None
        y.backward()  # the graph was retained
        return first, second, x.grad.numpy().tolist()

    on, off = engine_both_ways(run)
    assert on == off and on[1] == [3.0, -6.0, 12.0]


def test_mixed_dtypes_and_shared_inputs_through_the_c_walk(walk) -> None:
    def run():
        a = leaf([1.0, 2.0, 3.0])
        b = verigrad.tensor(np.array([0.5, 0.25, 2.0])).requires_grad_(True)  # f64
        c = a * b + a * a - (a + b).relu()
        c.sum().backward()
        return a.grad.dtype, a.grad.numpy().tobytes(), b.grad.dtype, b.grad.numpy().tobytes()

    on, off = engine_both_ways(run)
    assert on == off and on[0] is verigrad.float32 and on[2] is verigrad.float64
