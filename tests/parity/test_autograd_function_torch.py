"""verigrad.autograd.Function against torch.autograd.Function: the same class body written once and
subclassed from each library's Function, run on the same inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import verigrad as vg


def _functions(lib):
    """The custom Functions of these tests, subclassing `lib.autograd.Function` (lib: torch or verigrad)."""

    class RoundSTE(lib.autograd.Function):
        """A straight-through estimator: rounds, and passes the gradient through unchanged."""

        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

    class MSE(lib.autograd.Function):
        """Mean squared error with its backward written by hand."""

        @staticmethod
        def forward(ctx, pred, target):
            diff = pred - target
            ctx.save_for_backward(diff)
            return (diff * diff).mean()

        @staticmethod
        def backward(ctx, g):
            (diff,) = ctx.saved_tensors
            grad = diff * (2.0 / diff.numel()) * g
            return grad, -grad

    class Reverse(lib.autograd.Function):
        """Gradient reversal (domain adaptation): identity forward, -scale * g backward."""

        @staticmethod
        def forward(ctx, x, scale):
            ctx.scale = scale
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return -ctx.scale * g, None

    class ScaleShift(lib.autograd.Function):
        """Two outputs and a non-tensor argument, in the setup_context style."""

        @staticmethod
        def forward(x, w, k):
            return x * w * k, x.exp() + w

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, w, k = inputs
            ctx.save_for_backward(x, w, output[1])
            ctx.k = k

        @staticmethod
        def backward(ctx, ga, gb):
            x, w, e = ctx.saved_tensors
            gx = ga * w * ctx.k + gb * (e - w)
            gw = ga * x * ctx.k + gb
            return gx, gw, None

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    class AddOneInPlace(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 1

    class SortIdx(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values, idx = x.sort()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            return values, idx

        @staticmethod
        def backward(ctx, g, gidx):
            (idx,) = ctx.saved_tensors
            return g.new_zeros(g.shape).scatter(0, idx, g)

    class Lazy(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            ctx.seen = (ga is None, gb is None)
            Lazy.seen = ctx.seen
            total = 0 * ga if ga is not None else 0 * gb
            if ga is not None:
                total = total + 2 * ga
            if gb is not None:
                total = total + 3 * gb
            return total

    return {k: v for k, v in locals().items() if isinstance(v, type)}


VG, TORCH = _functions(vg), _functions(torch)


def _pair(array, requires_grad=True):
    return (
        vg.tensor(array, requires_grad=requires_grad),
        torch.tensor(array, requires_grad=requires_grad),
    )


def _same(a, b, tol=1e-6):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def _train(lib, fns, w0, b0, xs, ys, steps=6):
    """A quantization-aware linear model: weights rounded by the straight-through estimator, the loss the
    hand-written MSE; SGD with momentum. The losses and the gradients of each step."""
    w = lib.tensor(w0, requires_grad=True)
    b = lib.tensor(b0, requires_grad=True)
    opt = lib.optim.SGD([w, b], lr=0.05, momentum=0.9)
    x, y = lib.tensor(xs), lib.tensor(ys)
    losses, grads = [], []
    for _ in range(steps):
        opt.zero_grad()
        q = fns["RoundSTE"].apply(w * 4) / 4
        loss = fns["MSE"].apply(x @ q + b, y)
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append((w.grad.numpy().copy(), b.grad.numpy().copy()))
        opt.step()
    return losses, grads, w.detach().numpy()


def test_straight_through_estimator_and_custom_loss_in_a_training_loop():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    xs = rng.standard_normal((16, 5)).astype(np.float32)
    ys = rng.standard_normal((16, 3)).astype(np.float32)
    ours = _train(vg, VG, w0, b0, xs, ys)
    theirs = _train(torch, TORCH, w0, b0, xs, ys)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    for (gw, gb), (tw, tb) in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(gw, tw, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(gb, tb, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-6)


def test_gradient_reversal():
    a = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    results = []
    for lib, fns in ((vg, VG), (torch, TORCH)):
        x = lib.tensor(a, requires_grad=True)
        h = x * 2
        y = fns["Reverse"].apply(h, 0.5)
        assert y is not h
        (y * y).sum().backward()
        results.append(x.grad)
    _same(*results)


def test_two_outputs_and_a_non_tensor_argument():
    rng = np.random.default_rng(1)
    xa, wa = rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    out = []
    for lib, fns in ((vg, VG), (torch, TORCH)):
        x, w = lib.tensor(xa, requires_grad=True), lib.tensor(wa, requires_grad=True)
        a, b = fns["ScaleShift"].apply(x, w, 1.5)
        (a.sum() * 2 + (b * b).sum()).backward()
        out.append((a, b, x.grad, w.grad))
    for ours, theirs in zip(*out):
        _same(ours, theirs)


def test_only_one_output_used():
    xa = np.array([0.5, -1.0, 2.0], np.float32)
    out = []
    for lib, fns in ((vg, VG), (torch, TORCH)):
        x, w = lib.tensor(xa, requires_grad=True), lib.tensor(xa[::-1].copy(), requires_grad=True)
        _, b = fns["ScaleShift"].apply(x, w, 2.0)
        b.sum().backward()
        out.append((x.grad, w.grad))
    for ours, theirs in zip(*out):
        _same(ours, theirs)


def test_finite_differences_in_f64():
    """gradcheck-style: the Function's backward against central differences of its forward (f64), and
    the double backward (create_graph) against torch's."""
    xa = np.array([0.3, -1.2, 2.0, 0.7])
    x = vg.tensor(xa, dtype=vg.f64, requires_grad=True)
    v = np.array([1.0, -0.5, 2.0, 0.25])
    (g,) = vg.autograd.grad((VG["Cube"].apply(x) * vg.tensor(v)).sum(), x, create_graph=True)
    eps = 1e-6
    numeric = np.empty_like(xa)
    for i in range(len(xa)):
        up, down = xa.copy(), xa.copy()
        up[i] += eps
        down[i] -= eps
        f = lambda a: float((VG["Cube"].apply(vg.tensor(a)) * vg.tensor(v)).sum())
        numeric[i] = (f(up) - f(down)) / (2 * eps)
    np.testing.assert_allclose(g.numpy(), numeric, rtol=1e-7, atol=1e-8)
    assert torch.autograd.gradcheck(TORCH["Cube"].apply, (torch.tensor(xa, requires_grad=True),))
    g.sum().backward()
    t = torch.tensor(xa, requires_grad=True)
    (tg,) = torch.autograd.grad((TORCH["Cube"].apply(t) * torch.tensor(v)).sum(), t, create_graph=True)
    tg.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_mark_dirty():
    out = []
    for lib, fns in ((vg, VG), (torch, TORCH)):
        a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = a * 2
        y = fns["AddOneInPlace"].apply(h)
        assert y is h
        (y * y).sum().backward()
        out.append((y, a.grad))
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            fns["AddOneInPlace"].apply(lib.tensor([1.0], requires_grad=True))
    for ours, theirs in zip(*out):
        _same(ours, theirs)


def test_mark_non_differentiable():
    xa = np.array([3.0, 1.0, 2.0], np.float32)
    out = []
    for lib, fns in ((vg, VG), (torch, TORCH)):
        x = lib.tensor(xa, requires_grad=True)
        values, idx = fns["SortIdx"].apply(x)
        assert values.requires_grad and not idx.requires_grad
        (values * lib.tensor([1.0, 10.0, 100.0])).sum().backward()
        out.append((values, idx, x.grad))
    for ours, theirs in zip(*out):
        _same(ours, theirs)


def test_set_materialize_grads_false():
    seen = []
    for lib, fns in ((vg, VG), (torch, TORCH)):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        _, b = fns["Lazy"].apply(x)
        b.sum().backward()
        seen.append((fns["Lazy"].seen, x.grad.numpy().tolist()))
    assert seen[0] == seen[1] == ((True, False), [3.0, 3.0])


def test_errors_match():
    messages = []
    for lib in (vg, torch):

        class Bad(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return g

        x = lib.tensor([1.0], requires_grad=True)
        with pytest.raises(RuntimeError) as count:
            Bad.apply(x, x).sum().backward()
        with pytest.raises(RuntimeError) as legacy, warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # (torch warns on the instance first)
            Bad()(x, x)
        messages.append((str(count.value), str(legacy.value)))
    assert messages[0][0] == messages[1][0]
    assert messages[0][1] == messages[1][1]


def _custom_sin(lib, name):
    """torch.library.custom_op in each library: sin(x) * k in NumPy, its fake and its autograd."""

    def sin(x, k):
        return lib.tensor(np.sin(x.detach().numpy()) * np.float32(k))

    sin.__annotations__ = {"x": lib.Tensor, "k": float, "return": lib.Tensor}  # (each library's Tensor)
    op = lib.library.custom_op(name, sin, mutates_args=())

    @op.register_fake
    def _(x, k):
        return lib.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.k = inputs[1]

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos() * ctx.k, None

    op.register_autograd(backward, setup_context=setup_context)
    return op


def test_custom_op():
    xa = np.array([0.5, -1.0, 2.0], np.float32)
    out = []
    for lib, name in ((vg, "vgparity::sin"), (torch, "vgparity::sin")):
        op = _custom_sin(lib, name)
        x = lib.tensor(xa, requires_grad=True)
        y = op(x * 2, 1.5)
        (y * y).sum().backward()
        out.append((y, x.grad))
    for ours, theirs in zip(*out):
        _same(ours, theirs)
