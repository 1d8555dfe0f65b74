"""cross_entropy and its gradient in one pass (the `cross_entropy_step` op, rows.c's xent_step, the
loss_step pass): the step's gradient and losses have the bits of the two kernels it replaces, on every
vector path and thread count; the pass fuses a compiled training step's pair, whose results keep the
unfused program's bits, and leaves alone what it must (reduction "none", a g computed from the loss,
label smoothing's loss, which is not the op)."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from test_cpu_reduce import _kernel

import verigrad
import verigrad.nn.functional as F
from verigrad.backends import cpu
from verigrad.ir import passes
from verigrad.ir.passes import constfold, loss_step
from verigrad.ops import REGISTRY

SMALL_CHUNK = 7  # the min chunk the `small_chunks` fixture (conftest.py) sets

needs_cpu = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def _unfused(x, target, g, reduction, ignore_index):
    """The gradient and the loss from the cpu backend's two kernels, as a program without the pass
    computes them."""
    dtype = {np.float32: "f32", np.float64: "f64"}[x.dtype.type]
    grad = _kernel("cross_entropy_grad", dtype)(x, target, g, reduction=reduction, ignore_index=ignore_index)
    loss = _kernel("cross_entropy", dtype)(x, target, reduction=reduction, ignore_index=ignore_index)
    return grad, loss


def _fused(x, target, g, reduction, ignore_index):
    dtype = {np.float32: "f32", np.float64: "f64"}[x.dtype.type]
    step = _kernel("cross_entropy_step", dtype)(x, target, g, reduction=reduction, ignore_index=ignore_index)
    n, c = x.shape
    total = _kernel("cross_entropy_total", dtype)
    return step[: n * c].reshape(n, c), total(
        step[n * c :], target, reduction=reduction, ignore_index=ignore_index
    )


def _cases(np_dtype):
    rng = np.random.default_rng(21)
    for n, c in [(1, 1), (9, 5), (40, 300), (6, 4099)]:  # short rows, and rows in pieces and quotients
        x = (rng.standard_normal((n, c)) * rng.choice([1, 30], (n, 1))).astype(np_dtype)
        target = rng.integers(0, c, n)
        ignored = target.copy()
        ignored[::3] = -100
        for t, ignore_index in [(target, None), (ignored, -100), (target, int(target[0]))]:
            for reduction in ("mean", "sum"):
                for g in (1.0, -0.375, 3.0):
                    yield x, t, np.array(g, np_dtype), reduction, ignore_index


@needs_cpu
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_step_kernel_gives_the_two_kernels_bits_on_every_path_and_thread_count(dtype, small_chunks):
    chosen = cpu.vector_path()
    try:
        for path in cpu.vector_paths():
            cpu.vector_path(path)
            for case in _cases(cpu.DTYPES[dtype]):
                want = [a.tobytes() for a in _unfused(*case)]
                for threads in (1, 2, 3):
                    verigrad.set_threads(threads)
                    assert [a.tobytes() for a in _fused(*case)] == want, (path, threads, case[1:])
    finally:
        cpu.vector_path(chosen)
        verigrad.set_threads(1)


@needs_cpu
def test_the_step_kernel_refuses_a_target_out_of_range_and_keeps_special_rows():
    x = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
    x[1, 2], x[2] = np.nan, -np.inf  # a NaN row, a row of -inf (its sum 0): the unfused kernels' NaNs
    target, g = np.array([0, 1, 5, 3]), np.array(1.0, np.float32)
    grad, loss = _fused(x, target, g, "mean", None)
    want_grad, want_loss = _unfused(x, target, g, "mean", None)
    assert grad.tobytes() == want_grad.tobytes() and loss.tobytes() == want_loss.tobytes()
    step = _kernel("cross_entropy_step", "f32")
    for bad in (-1, 6):
        wrong = target.copy()
        wrong[-1] = bad
        with pytest.raises(IndexError, match=re.escape(f"cross_entropy: target {bad} is out of range for 6")):
            step(x, wrong, g, reduction="sum", ignore_index=None)


def test_the_step_op_refuses_reduction_none():
    x, t = verigrad.randn(3, 4), verigrad.tensor([0, 1, 2])
    with pytest.raises(ValueError, match="'mean' or 'sum'"):
        REGISTRY["cross_entropy_step"](x, t, verigrad.ones(3), reduction="none")


class _Model(verigrad.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = verigrad.nn.Linear(16, 32), verigrad.nn.Linear(32, 300)

    def forward(self, x):
        return self.b(F.gelu(self.a(x)))


def _batch(seed: int):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 300, 24)
    y[::5] = -100
    return verigrad.tensor(rng.standard_normal((24, 16)).astype(np.float32)), verigrad.tensor(y)


def _losses(loss_of, fuse: bool, monkeypatch, backend: str = "cpu", steps: int = 5):
    """A compiled SGD step's losses and final parameters, the pass in the pipeline or not, and the op
    names of its program."""
    pipeline = [run for run in passes.PIPELINE if fuse or run is not loss_step.run]
    monkeypatch.setattr(passes, "PIPELINE", pipeline)
    verigrad.manual_seed(0)
    model = _Model()
    opt = verigrad.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        loss = loss_of(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    compiled = verigrad.compile(step)
    out = []
    with verigrad.backend(backend):
        for k in range(steps):
            verigrad.set_threads(1 + k % 2)
            out.append(compiled(*_batch(k)).numpy().tobytes())
    verigrad.set_threads(1)
    program = compiled.program(*_batch(0))
    return out, [p.numpy().tobytes() for p in model.parameters()], Counter(i.name for i in program.instrs)


LOSSES = {
    "mean": lambda z, y: F.cross_entropy(z, y),
    "sum": lambda z, y: F.cross_entropy(z, y, reduction="sum"),
    "mean, no ignored class": lambda z, y: verigrad.ops.cross_entropy(
        z, verigrad.clamp(y, 0), ignore_index=None
    ),
    "scaled": lambda z, y: F.cross_entropy(z, y) * 0.5,  # g: 1 * 0.5, computed after the loss
}


@pytest.mark.parametrize("backend", ["cpu", "reference"])
@pytest.mark.parametrize("name", list(LOSSES))
def test_a_compiled_step_fuses_its_loss_and_keeps_the_bits(name, backend, monkeypatch):
    if backend == "cpu" and not cpu.available():
        pytest.skip("the cpu backend could not be built here")
    fused = _losses(LOSSES[name], True, monkeypatch, backend)
    unfused = _losses(LOSSES[name], False, monkeypatch, backend)
    assert fused[:2] == unfused[:2]
    names = fused[2]  # "scaled": g = 0.5, made a constant by constfold, moved before the loss
    assert names["cross_entropy_step"] == names["cross_entropy_total"] == 1
    assert names["cross_entropy"] == names["cross_entropy_grad"] == 0
    assert unfused[2]["cross_entropy_step"] == 0 and unfused[2]["cross_entropy_grad"] == 1


DECLINED = {
    "none": lambda z, y: F.cross_entropy(z, y, reduction="none").sum(),
    "g from the loss": lambda z, y: F.cross_entropy(z, y) ** 2,  # g = 2 loss: known only after the loss
    "label smoothing": lambda z, y: F.cross_entropy(z, y, label_smoothing=0.1),  # not the op
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_the_pass_leaves_what_it_cannot_fuse(name, monkeypatch):
    fused = _losses(DECLINED[name], True, monkeypatch, "reference", steps=2)
    unfused = _losses(DECLINED[name], False, monkeypatch, "reference", steps=2)
    assert fused == unfused
    assert fused[2]["cross_entropy_step"] == 0


def test_the_pass_on_a_traced_loss_and_its_gradient():
    """A program's cross_entropy and its gradient (backward()'s 1 after the loss, folded to a constant
    and moved before it) become the step, its slices and the total: printed against
    tests/golden/loss_step.txt, verified, the same bits on the reference backend."""
    from test_passes import check, golden

    n = verigrad.dims("n")

    def f(x, y):
        x = x.detach().requires_grad_()
        loss = F.cross_entropy(x * 2.0, y)
        loss.backward()
        return loss, x.grad

    p = constfold.run(verigrad.trace(f, verigrad.spec([n, 6]), verigrad.spec([n], "i64"))).verify()
    rng = np.random.default_rng(2)
    after = check(
        loss_step.run, p, rng.standard_normal((5, 6)).astype(np.float32), np.array([0, 5, -100, 2, 1])
    )
    golden("loss_step", p, after)
    assert [i.name for i in after if i.name.startswith("cross_entropy")] == [
        "cross_entropy_step",
        "cross_entropy_total",
    ]


def test_the_pass_leaves_a_loss_per_row():
    """reduction "none": its gradient is one per row (here an input, known before the loss), which the
    step op does not take."""

    def f(x, y, g):
        x = x.detach().requires_grad_()
        loss = F.cross_entropy(x, y, reduction="none")
        loss.backward(g)
        return loss, x.grad

    p = verigrad.trace(f, verigrad.spec([5, 6]), verigrad.spec([5], "i64"), verigrad.spec([5]))
    after = loss_step.run(constfold.run(p)).verify()
    assert Counter(i.name for i in after)["cross_entropy_grad"] == 1
    assert Counter(i.name for i in after)["cross_entropy_step"] == 0
