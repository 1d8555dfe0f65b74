"""The cpu backend's Adam, AdamW and SGD kernels: 20 steps give the op-based update's bits (parameters and
state) for f32 and f64, with and without weight decay (and SGD's momentum, dampening and Nesterov), on 1, 2
and 3 threads, gradients holding infinities and NaN included; parameters the kernel cannot take go the
op-based way; a compiled step keeps the op-based update in its program."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import nn
from verigrad.backends import cpu
from verigrad.optim import SGD, Adam, AdamW
from verigrad.optim.optimizer import fused_kernel

SMALL_CHUNK = 64  # the min chunk the `small_chunks` fixture (conftest.py) sets

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

SHAPES = [(300, 70), (37,), (1,), (0, 3), ()]
OPTIMIZERS = {
    "adam": lambda ps: Adam(ps, lr=3e-2),
    "adam-l2": lambda ps: Adam(ps, lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05),
    "adamw": lambda ps: AdamW(ps, lr=1e-2),
    "adamw-no-decay": lambda ps: AdamW(ps, lr=2e-3, weight_decay=0.0),
    "sgd": lambda ps: SGD(ps, lr=3e-2),
    "sgd-momentum": lambda ps: SGD(ps, lr=1e-2, momentum=0.9),
    "sgd-dampened-l2": lambda ps: SGD(ps, lr=1e-2, momentum=0.8, dampening=0.3, weight_decay=0.05),
    "sgd-nesterov-l2": lambda ps: SGD(ps, lr=2e-3, momentum=0.95, nesterov=True, weight_decay=1e-3),
}


def _gradients(rng: np.random.Generator, np_dtype: type, steps: int) -> list[list[np.ndarray]]:
    """Per step, a gradient per parameter: several scales, exact zeros, a few huge values, and (in one
    step) infinities of both signs and NaN."""
    out = []
    for step in range(steps):
        grads = []
        for shape in SHAPES:
            g = rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 3, shape)
            g = np.where(rng.random(shape) < 0.05, 0.0, g)
            g = np.where(rng.random(shape) < 0.01, 1e30, g)
            if step == 15:
                g = np.where(rng.random(shape) < 0.02, rng.choice([np.inf, -np.inf, np.nan], shape), g)
            grads.append(g.astype(np_dtype))
        out.append(grads)
    return out


def _run(backend: str, make, np_dtype: type, threads: int) -> list[np.ndarray]:
    """20 steps of `make`'s optimizer on fresh parameters, a learning-rate change half way; the
    parameters and moments after every step."""
    rng = np.random.default_rng(5)
    params = [verigrad.tensor(rng.standard_normal(s).astype(np_dtype)).requires_grad_() for s in SHAPES]
    opt = make(params)
    history = []
    verigrad.set_threads(threads)
    with verigrad.backend(backend):
        for i, grads in enumerate(_gradients(rng, np_dtype, 20)):
            if i == 10:
                opt.lr = opt.lr * 0.5
            for p, g in zip(params, grads):
                p.grad = verigrad.tensor(g)
            opt.step()
            history += [t.numpy().copy() for t in params]
            history += [
                t.numpy().copy() for s in opt.state.values() for name, t in s.items() if name != "step"
            ]
    return history


def _counting(monkeypatch, dtype: str, name: str = "adam") -> list:
    """The shape of each parameter an update kernel of optimizer `name` takes, one by one or together (its
    `name`_all kernel, where it has one)."""
    calls: list = []
    for kernel_name in (name, f"{name}_all"):
        kernel = cpu.cpu.optimizer_kernel(kernel_name, dtype)
        if kernel is None:
            continue

        def counted(*args, kernel=kernel, together=kernel_name != name, **kwargs):
            calls.extend([a.shape for a in args[0]] if together else [args[0].shape])
            return kernel(*args, **kwargs)

        monkeypatch.setitem(cpu.cpu._optimizers, (kernel_name, dtype), counted)
    return calls


@needs_cc
@pytest.mark.parametrize("name", list(OPTIMIZERS))
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_optimizer_kernels_give_the_op_based_bits_over_20_steps(name, dtype, small_chunks, monkeypatch):
    np_dtype = cpu.DTYPES[dtype].type
    expected = _run("reference", OPTIMIZERS[name], np_dtype, 1)
    calls = _counting(monkeypatch, dtype, name.split("-")[0])
    for threads in (1, 2, 3):
        actual = _run("cpu", OPTIMIZERS[name], np_dtype, threads)
        assert len(actual) == len(expected)
        for k, (a, e) in enumerate(zip(actual, expected)):
            assert a.dtype == e.dtype and a.tobytes() == e.tobytes(), (threads, k)
    assert len(calls) == 3 * 20 * len(SHAPES)  # every update took the kernel


@needs_cc
@pytest.mark.parametrize(
    "make", [lambda ps: AdamW(ps, lr=1e-2), lambda ps: Adam(ps, lr=1e-2, weight_decay=0.1)]
)
def test_adam_updates_a_groups_parameters_together_where_they_are_at_one_step(
    make, small_chunks, monkeypatch
):
    """One call over the group's parameters with gradients; one by one where their steps differ (a
    parameter left without a gradient for a step) or their dtypes do; the bits of the op-based update."""
    # parameter 1 starts a thread's chunk (the small chunks' 64 elements) on 2 and 3 threads
    shapes, dtypes = [(5,), (70, 3), (0,), (9,)], [np.float32, np.float32, np.float32, np.float64]
    with_grads = [[0, 1, 2], [0, 2], [0, 1, 2], [0, 1, 2, 3]]  # at each step
    together: list = []  # the parameter counts of the calls over many
    for name in ("adam_all", "adamw_all"):
        kernel = cpu.cpu.optimizer_kernel(name, "f32")
        monkeypatch.setitem(
            cpu.cpu._optimizers, (name, "f32"), lambda *a, k=kernel: together.append(len(a[0])) or k(*a)
        )
    results = {}
    for backend, threads in (("reference", 1), ("cpu", 1), ("cpu", 2), ("cpu", 3)):
        verigrad.set_threads(threads)
        rng = np.random.default_rng(2)
        params = [
            verigrad.tensor(rng.standard_normal(s).astype(d)).requires_grad_() for s, d in zip(shapes, dtypes)
        ]
        opt = make(params)
        history = []
        with verigrad.backend(backend):
            for which in with_grads:
                for i, p in enumerate(params):
                    p.grad = (
                        verigrad.tensor(rng.standard_normal(p.shape).astype(dtypes[i]))
                        if i in which
                        else None
                    )
                opt.step()
                history += [p.numpy().tobytes() for p in params]
        results[backend, threads] = history
    verigrad.set_threads(1)
    assert together == [3, 2] * 3  # the third step's differ (parameter 1 missed one), the fourth's dtypes too
    for threads in (1, 2, 3):
        assert results["cpu", threads] == results["reference", 1], threads


@needs_cc
def test_the_kernel_is_used_in_eager_mode_on_a_backend_that_has_one():
    p = verigrad.tensor(np.zeros(3, np.float32)).requires_grad_()
    assert fused_kernel("adam", p) is None  # the reference backend has none
    with verigrad.backend("cpu"):
        assert fused_kernel("adam", p) is not None
        assert fused_kernel("adamw", p) is not None
        assert {("adam", "f64"), ("adamw", "f64"), ("sgd", "f64")} <= set(cpu.cpu._optimizers)
        assert fused_kernel("sgd", p) is not None
        assert fused_kernel("rmsprop", p) is None
        assert fused_kernel("adam", verigrad.tensor(np.zeros(3, np.float16))) is None


@needs_cc
@pytest.mark.parametrize(
    "make",
    [
        lambda ps: AdamW(ps, lr=0.1),
        lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    ],
)
def test_parameters_the_kernel_cannot_take_go_the_op_based_way(make):
    """A transposed (non-contiguous) gradient and an f16 parameter: the op-based update, same bits."""
    results = {}
    for backend in ("reference", "cpu"):
        rng = np.random.default_rng(1)
        w = verigrad.tensor(rng.standard_normal((4, 6)).astype(np.float32)).requires_grad_()
        h = verigrad.tensor(rng.standard_normal(5).astype(np.float16)).requires_grad_()
        opt = make([w, h])
        with verigrad.backend(backend):
            for _ in range(3):
                w.grad = verigrad.tensor(rng.standard_normal((6, 4)).astype(np.float32).T)
                h.grad = verigrad.tensor(rng.standard_normal(5).astype(np.float16))
                opt.step()
        results[backend] = [w.numpy().tobytes(), h.numpy().tobytes()]
    assert results["cpu"] == results["reference"]


@needs_cc
def test_a_compiled_step_keeps_the_op_based_update(monkeypatch):
    calls = _counting(monkeypatch, "f32")
    verigrad.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = Adam(model.parameters(), lr=0.1)

    def step(x):
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    compiled = verigrad.compile(step)
    x = verigrad.tensor(np.ones((4, 3), np.float32))
    with verigrad.backend("cpu"):
        compiled(x)
        text = str(compiled.program(x))
    assert calls == [] and "sqrt" in text
