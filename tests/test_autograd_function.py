"""verigrad.autograd.Function: PyTorch's custom autograd functions, eagerly (the parity test holds them to
torch's numbers)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import verigrad as vg
from verigrad.autograd import Function
from verigrad.function import FunctionCtx, once_differentiable


class Cube(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g * ctx.k, None


class CubeSetup(Function):
    @staticmethod
    def forward(x, k):
        return x * x * x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.k = inputs[1]

    backward = Cube.backward


def _leaf(values, dtype=vg.f32):
    return vg.tensor(values, dtype=dtype, requires_grad=True)


@pytest.mark.parametrize("fn", [Cube, CubeSetup])
def test_forward_backward_and_non_tensor_argument(fn):
    x = _leaf([1.0, 2.0, -3.0])
    y = fn.apply(x, 2.0)
    assert y.requires_grad and y.grad_fn is not None and y.grad_fn.op.name == f"{fn.__name__}Backward"
    np.testing.assert_array_equal(y.numpy(), [2.0, 16.0, -54.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 24.0, 54.0])


def test_forward_runs_without_recording_and_backward_with_grad_mode_off():
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, x):
            seen["forward"] = vg.is_grad_enabled()
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen["backward"] = vg.is_grad_enabled()
            return g * 2

    x = _leaf([1.0])
    Probe.apply(x).sum().backward()
    assert seen == {"forward": False, "backward": False}
    Probe.apply(x).sum().backward(create_graph=True)
    assert seen["backward"] is True


def test_no_history_without_grad():
    x = vg.tensor([1.0, 2.0])
    y = Cube.apply(x, 1.0)
    assert not y.requires_grad and y.grad_fn is None
    with vg.no_grad():
        y = Cube.apply(_leaf([1.0]), 1.0)
    assert not y.requires_grad


def test_needs_input_grad():
    got = []

    class Needs(Function):
        @staticmethod
        def forward(ctx, a, b, k):
            got.append(ctx.needs_input_grad)
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    Needs.apply(_leaf([1.0]), vg.tensor([2.0]), 3)
    assert got == [(True, False, False)]


def test_double_backward_through_a_backward_written_in_ops():
    x = _leaf([1.0, 2.0])
    (g,) = vg.autograd.grad(Cube.apply(x, 1.0).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.numpy(), [3.0, 12.0])
    g.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 12.0])


def test_second_pass_without_retain_graph_raises():
    x = _leaf([1.0])
    out = Cube.apply(x, 1.0)
    y = out.sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    ctx = out.grad_fn.params["ctx"]
    with pytest.raises(RuntimeError, match="directly access saved tensors after they have already been"):
        _ = ctx.saved_tensors
    z = Cube.apply(x, 1.0)
    z.sum().backward(retain_graph=True)
    assert len(z.grad_fn.params["ctx"].saved_tensors) == 1


class Twice(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g, g


def test_wrong_number_of_gradients():
    message = r"function TwiceBackward returned an incorrect number of gradients \(expected 1, got 2\)"
    with pytest.raises(RuntimeError, match=message):
        Twice.apply(_leaf([1.0])).sum().backward()


def test_extra_none_gradients_are_accepted():
    class Extra(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None

    x = _leaf([1.0])
    Extra.apply(x).sum().backward()
    assert x.grad.numpy().tolist() == [2.0]


def test_gradient_of_a_wrong_shape_raises_and_a_broadcast_one_is_summed():
    class Wrong(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g.sum(0)

    class Wide(Function):
        @staticmethod
        def forward(ctx, b):
            return b * 1

        @staticmethod
        def backward(ctx, g):
            return vg.ones(4, 3)

    x = _leaf(np.ones((2, 3)))
    message = r"Function WrongBackward returned an invalid gradient at index 0 - got \[3\] but expected shape"
    with pytest.raises(RuntimeError, match=message):
        Wrong.apply(x).sum().backward()
    b = _leaf([1.0, 2.0, 3.0])
    Wide.apply(b).sum().backward()
    assert b.grad.numpy().tolist() == [4.0, 4.0, 4.0]


def test_gradient_for_a_non_tensor_argument_raises():
    class K(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match="position 2, but the corresponding forward input was not a"):
        K.apply(_leaf([1.0]), 2.0).sum().backward()


def test_torch_module_path():
    import importlib

    module = importlib.import_module("verigrad.autograd.function")
    assert module.once_differentiable is once_differentiable and module.Function is Function


def test_vjp_alias_of_backward():
    class ByVjp(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def vjp(ctx, g):
            return g * 2

    class Both(ByVjp):
        @staticmethod
        def backward(ctx, g):
            return g * 3

    class Neither(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    x = _leaf([1.0])
    ByVjp.apply(x).sum().backward()
    assert x.grad.numpy().tolist() == [2.0]
    with pytest.raises(RuntimeError, match="Implementing both 'backward' and 'vjp' for a custom Function"):
        Both.apply(x).sum().backward()
    with pytest.raises(NotImplementedError, match="You must implement either the backward or vjp method"):
        Neither.apply(x).sum().backward()


def test_legacy_call_raises():
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method"):
        Cube()(_leaf([1.0]), 1.0)


class Pair(Function):
    """Two outputs and a non-tensor argument; records what backward received."""

    received: list = []

    @staticmethod
    def forward(ctx, x, k, materialize=True):
        ctx.set_materialize_grads(materialize)
        ctx.save_for_backward(x)
        return x * k, x * x

    @staticmethod
    def backward(ctx, ga, gb):
        Pair.received.append((ga, gb))
        (x,) = ctx.saved_tensors
        total = None
        if ga is not None:
            total = ga * 3.0
        if gb is not None:
            total = 2 * x * gb if total is None else total + 2 * x * gb
        return total, None, None


def test_two_outputs_one_backward_call():
    Pair.received.clear()
    x = _leaf([1.0, 2.0])
    a, b = Pair.apply(x, 3.0)
    (a.sum() + (b * 2).sum()).backward()
    assert len(Pair.received) == 1
    np.testing.assert_array_equal(x.grad.numpy(), [3.0 + 4.0, 3.0 + 8.0])


def test_an_unused_output_gets_zeros_or_none():
    Pair.received.clear()
    x = _leaf([1.0, 2.0])
    _, b = Pair.apply(x, 3.0)
    b.sum().backward()
    ga, gb = Pair.received[-1]
    assert ga.numpy().tolist() == [0.0, 0.0] and gb.numpy().tolist() == [1.0, 1.0]
    _, b = Pair.apply(x, 3.0, False)
    b.sum().backward()
    assert Pair.received[-1][0] is None


def test_two_outputs_retain_graph_twice():
    Pair.received.clear()
    x = _leaf([1.0])
    a, b = Pair.apply(x, 3.0)
    loss = a.sum() + b.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert x.grad.numpy().tolist() == [10.0]


def test_mark_non_differentiable():
    class ArgMax(Function):
        @staticmethod
        def forward(ctx, x):
            doubled = x * 2
            ctx.mark_non_differentiable(doubled)
            return x * 3, doubled, x.argmax()

        @staticmethod
        def backward(ctx, g, gd, gi):
            assert gd.numpy().tolist() == [0.0, 0.0] and gi.dtype == vg.i64
            return g * 3

    x = _leaf([1.0, 2.0])
    y, d, i = ArgMax.apply(x)
    assert y.requires_grad and not d.requires_grad and not i.requires_grad
    y.sum().backward()
    assert x.grad.numpy().tolist() == [3.0, 3.0]


class DoubleInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_mark_dirty():
    a = _leaf([1.0, 2.0])
    x = a * 3
    y = DoubleInPlace.apply(x)
    assert y is x and y.grad_fn.op.name == "DoubleInPlaceBackward"
    np.testing.assert_array_equal(x.numpy(), [6.0, 12.0])
    (y * y).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [72.0, 144.0])  # d/da (6a)^2


def test_mark_dirty_moves_hooks_to_the_tensor_as_it_was():
    a = _leaf([1.0, 1.0])
    h = a * 3
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().tolist()))
    y = DoubleInPlace.apply(h)
    (y * 5).sum().backward()
    assert seen == [[10.0, 10.0]] and a.grad.numpy().tolist() == [30.0, 30.0]  # (PyTorch's numbers)


def test_mark_dirty_of_a_leaf_raises():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place"):
        DoubleInPlace.apply(_leaf([1.0]))


def test_output_that_is_an_input_is_a_new_tensor():
    class Same(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    x = _leaf([1.0, 2.0])
    y = Same.apply(x)
    assert y is not x and x.is_leaf and np.shares_memory(y.numpy(), x.numpy())
    y.sum().backward()
    assert x.grad.numpy().tolist() == [5.0, 5.0]


def test_once_differentiable():
    class Once(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            assert not vg.is_grad_enabled()
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = _leaf([3.0])
    Once.apply(x).sum().backward()
    assert x.grad.numpy().tolist() == [6.0]
    (g,) = vg.autograd.grad(Once.apply(x).sum(), x, create_graph=True)
    assert g.numpy().tolist() == [6.0] and not g.requires_grad  # (the seed needs no grad: as PyTorch's)
    (g,) = vg.autograd.grad(Once.apply(x * 1).sum() * x.sum(), x, create_graph=True)
    assert g.numpy().tolist() == [27.0]
    with pytest.raises(RuntimeError, match="differentiate twice a function that was marked with @once_diff"):
        g.sum().backward()


def test_save_for_backward_refuses_a_non_tensor():
    ctx = FunctionCtx((False,))
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        ctx.save_for_backward(3.0)


def test_same_gradient_as_the_ops_it_replaces_through_the_engine():
    """A Function wrapping an op chain gives the chain's gradient, through a graph of several nodes."""

    class Tanh(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.tanh()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * (1 - y * y)

    x = _leaf(np.linspace(-2, 2, 7))
    w = _leaf(np.linspace(1, 2, 7))
    (Tanh.apply(x * w) * w).sum().backward()
    got = (x.grad.numpy(), w.grad.numpy())
    x.grad = w.grad = None
    ((x * w).tanh() * w).sum().backward()
    np.testing.assert_allclose(got[0], x.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[1], w.grad.numpy(), rtol=1e-6)


@settings(database=None, derandomize=True, max_examples=20, deadline=None)
@given(st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=6), st.floats(0.5, 2.0))
def test_straight_through_round(values, scale):
    class Round(Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

    x = _leaf(values)
    (Round.apply(x * scale) * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(len(values), 2 * np.float32(scale), np.float32))


# traced and compiled: the `function` and `function_backward` instructions --------------------------------
class Counted(Function):
    """x * k with a hand-written backward; counts the runs of its forward and backward."""

    runs = {"forward": 0, "backward": 0}

    @staticmethod
    def forward(ctx, x, k):
        Counted.runs["forward"] += 1
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * k

    @staticmethod
    def backward(ctx, g):
        Counted.runs["backward"] += 1
        (x,) = ctx.saved_tensors
        return 2 * x * g * ctx.k, None


class RoundSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


def test_a_traced_function_is_one_instruction_that_prints():
    w = vg.tensor([1.0, 2.0], requires_grad=True)

    def step(x):
        loss = Counted.apply(w * x, 3.0).sum()
        loss.backward()
        return loss

    text = str(vg.trace(step, vg.spec((2,), vg.f32)))
    assert "= function %" in text and "(call=Counted)" in text
    assert "= function_backward %" in text and "(call=Counted, index=0)" in text
    assert "mul" not in text.split("backward:")[0].split("function")[1]  # the forward is not inlined


def _training(compiled: bool, steps: int = 12):
    rng = np.random.default_rng(3)
    w = vg.tensor(rng.standard_normal((4, 2)).astype(np.float32), requires_grad=True)
    xs = [vg.tensor(rng.standard_normal((5, 4)).astype(np.float32)) for _ in range(steps)]
    y = vg.tensor(rng.standard_normal((5, 2)).astype(np.float32))
    opt = vg.optim.SGD([w], lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        q = RoundSTE.apply(w * 4) / 4
        loss = Counted.apply(x @ q - y, 0.5).mean()
        loss.backward()
        opt.step()
        return loss

    run = vg.compile(step) if compiled else step
    losses = [run(x).numpy().copy() for x in xs]
    return losses, w.detach().numpy().copy()


def test_a_compiled_training_step_with_functions_gives_the_eager_bits():
    """12 steps: past the runs after which a plan records its kernel calls and replays them."""
    eager = _training(False)
    before = dict(Counted.runs)
    compiled = _training(True)
    for a, b in zip(eager[0], compiled[0]):
        assert a.tobytes() == b.tobytes()
    assert eager[1].tobytes() == compiled[1].tobytes()
    # the user's code ran at each compiled call (the trace runs the forward once more, on shapes)
    assert Counted.runs["forward"] - before["forward"] == 12 + 1
    assert Counted.runs["backward"] - before["backward"] == 12


def test_traced_function_errors_name_the_function():
    class ReadsValues(Function):
        @staticmethod
        def forward(ctx, x):
            return vg.tensor(x.numpy() * 2)

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class NoGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return None

    w = vg.tensor([1.0, 2.0], requires_grad=True)
    spec = vg.spec((2,), vg.f32)
    with pytest.raises(
        NotImplementedError, match=r"DoubleInPlace\.apply inside a traced .* marks an input di"
    ):
        vg.trace(lambda x: DoubleInPlace.apply(x * 1), spec)
    with pytest.raises(TypeError, match=r"ReadsValues\.apply inside a traced or compiled function: its fo"):
        vg.trace(lambda x: ReadsValues.apply(x), spec)

    def step(x):
        loss = NoGrad.apply(w * x).sum()
        loss.backward()
        with vg.no_grad():
            w.sub_(w.grad)
        w.grad = None
        return loss

    with pytest.raises(RuntimeError, match=r"NoGrad\.backward returned None for argument 0, which requires"):
        vg.compile(step)(vg.tensor([1.0, 1.0]))


def test_compiled_function_in_two_threads_at_two_sizes():
    """Two plans of one program (two sizes) run at once in two threads: each run's ctx is its own."""
    import threading
    import time

    class Slow(Function):
        @staticmethod
        def forward(ctx, x):
            time.sleep(0.002)  # the other thread runs meanwhile, between Counted's forward and backward
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g

    def step(x):
        return vg.grad(lambda v: Slow.apply(Counted.apply(v, 2.0)).sum())(x)

    compiled = vg.compile(step)
    failures = []

    def worker(n):
        x = vg.tensor(np.arange(1, n + 1, dtype=np.float32))
        for _ in range(20):
            try:
                got = compiled(x).numpy()
            except Exception as e:  # (a ctx of the other size)
                got = e
            if not isinstance(got, np.ndarray) or got.tolist() != (4 * np.arange(1, n + 1)).tolist():
                failures.append((n, got))

    threads = [threading.Thread(target=worker, args=(n,)) for n in (3, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@pytest.mark.parametrize("materialize", [True, False])
@pytest.mark.parametrize("use_a", [True, False])
def test_traced_function_with_two_outputs(materialize, use_a):
    """Pair's two outputs are `function_output` instructions of one `function`; its backward runs once
    per run with both gradients (None or zeros for an unused one, as eagerly)."""

    def loss(v):
        a, b = Pair.apply(v * 1.5, 3.0, materialize)
        return (b * 2).sum() + (a.sum() if use_a else 0)

    def step(x):
        return vg.grad(loss)(x)

    text = str(vg.trace(step, vg.spec((3,), vg.f32)))
    assert "= function_output %" in text and "present=" in text
    xs = [vg.tensor(np.array([0.5, -1.0, 2.0], np.float32) * k) for k in (1, 2, 3)]
    Pair.received.clear()
    eager = [step(x).numpy() for x in xs]
    assert [r[0] is None for r in Pair.received] == [not materialize and not use_a] * 3
    Pair.received.clear()
    compiled = vg.compile(step)
    got = [compiled(x).numpy() for x in xs]
    assert [r[0] is None for r in Pair.received] == [not materialize and not use_a] * 3
    assert [a.tobytes() for a in eager] == [b.tobytes() for b in got]


def test_traced_function_with_a_non_differentiable_and_an_integer_output():
    class Sorted(Function):
        @staticmethod
        def forward(ctx, x):
            values = x * 3
            flags = x * 0
            ctx.mark_non_differentiable(flags)
            return values, flags, x.argmax()

        @staticmethod
        def backward(ctx, g, gflags, gi):
            return g * 3 + gflags

    def step(x):
        def loss(v):
            y, flags, i = Sorted.apply(v)
            assert not flags.requires_grad and not i.requires_grad
            return (y * y).sum() + flags.sum() + i.cast(vg.f32)

        return vg.grad(loss)(x)

    x = vg.tensor([0.5, -1.0, 2.0])
    assert step(x).numpy().tobytes() == vg.compile(step)(x).numpy().tobytes()


class _SavesItsInput(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x


class _TwoOutputs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        (x,) = ctx.saved_tensors
        return g1 * x + g2


@pytest.mark.parametrize("fn", [_SavesItsInput, _TwoOutputs])
def test_a_function_graph_is_freed_without_the_cycle_collector(fn):
    # the ctx and the node that holds it must not refer to each other: the graph (its saved tensors) goes
    # when the last output goes, as PyTorch's, not at the next garbage collection
    import gc
    import weakref

    gc.disable()
    try:
        x = vg.randn(1000, requires_grad=True)
        inner = x * 1.5  # a tensor only the graph holds
        out = fn.apply(inner)
        loss = (out if isinstance(out, vg.Tensor) else out[0] + out[1]).sum()
        loss.backward()
        gone = weakref.ref(inner)
        del inner, out, loss
        assert gone() is None
    finally:
        gc.enable()


def test_saved_tensors_after_the_pass_freed_them_still_raise():
    x = vg.randn(4, requires_grad=True)
    kept = []

    class Keep(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            kept.append(ctx)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0]

    y = Keep.apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        kept[0].saved_tensors  # noqa: B018


def test_a_compiled_functions_single_output_is_not_kept_after_its_forward():
    """The plan holds its copy of the output; the tensor the user's forward returned goes at once (it was
    held until the next run: every such output twice at a compiled step's peak)."""
    import weakref

    made = []

    class Doubles(Function):
        @staticmethod
        def forward(ctx, x):
            out = x * 2
            if isinstance(out.payload, np.ndarray):  # a run, not the trace's shapes
                made.append(weakref.ref(out.payload))
            return out

        @staticmethod
        def backward(ctx, g):
            return g * 2

    w = vg.randn(4, 16, requires_grad=True)
    opt = vg.optim.SGD([w], lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = (Doubles.apply(w * x) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = vg.compile(step)
    for _ in range(3):
        compiled(vg.randn(4, 16))
        assert made and made[-1]() is None
    assert compiled._plans  # the calls ran the plan
