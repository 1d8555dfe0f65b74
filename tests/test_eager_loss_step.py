"""cross_entropy's eager loss step (nn/functional/loss_step.py): the forward keeps the logits' gradient for
an incoming gradient of 1; the loss and every gradient are the bits of the cross_entropy op and its
backward kernel, on every vector path and thread count, whatever the incoming gradient; the kept gradient
is used once, only where it stands for the kernel's, and freed with its node."""

from __future__ import annotations

import gc
import re

import numpy as np
import pytest
from test_loss_step import _cases, needs_cpu

import verigrad
import verigrad.nn.functional as F
from verigrad.backends import cpu
from verigrad.ops.composite.losses import KEPT


@pytest.fixture(autouse=True)
def _on_cpu():
    """The cpu backend, whose step kernel the eager step runs (the suite starts on the reference)."""
    if not cpu.available():
        yield
        return
    with verigrad.backend("cpu"):
        yield


def _op_way(x, target, g, reduction, ignore_index):
    """The loss and the logits' gradient through the cross_entropy op and its backward kernel."""
    logits = verigrad.tensor(x, requires_grad=True)
    loss = verigrad.ops.cross_entropy(
        logits, verigrad.tensor(target), reduction=reduction, ignore_index=ignore_index
    )
    assert not KEPT
    loss.backward(verigrad.tensor(g))
    return loss.numpy().tobytes(), logits.grad.numpy().tobytes()


def _kept_way(x, target, g, reduction, ignore_index):
    """The same through F.cross_entropy's eager step; asserts that the kept gradient is used exactly where
    the incoming gradient is 1."""
    logits = verigrad.tensor(x, requires_grad=True)
    ignore = -100 if ignore_index is None else ignore_index  # F's default: a class no target is
    loss = F.cross_entropy(logits, verigrad.tensor(target), reduction=reduction, ignore_index=ignore)
    kept = KEPT[loss._node].grad
    loss.backward(verigrad.tensor(g))
    assert not KEPT
    assert (logits.grad.payload is kept) == (float(g) == 1.0)
    return loss.numpy().tobytes(), logits.grad.numpy().tobytes()


@needs_cpu
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_eager_step_gives_the_ops_bits_on_every_path_and_thread_count(dtype, small_chunks):
    chosen = cpu.vector_path()
    try:
        for path in cpu.vector_paths():
            cpu.vector_path(path)
            for case in _cases(cpu.DTYPES[dtype]):
                want = _op_way(*case)
                for threads in (1, 2, 3):
                    verigrad.set_threads(threads)
                    assert _kept_way(*case) == want, (path, threads, case[1:])
    finally:
        cpu.vector_path(chosen)
        verigrad.set_threads(1)


@needs_cpu
def test_a_retained_graph_and_a_graph_of_the_backward_run_the_kernel():
    rng = np.random.default_rng(5)
    x, target = rng.standard_normal((6, 9)).astype(np.float32), rng.integers(0, 9, 6)
    logits = verigrad.tensor(x, requires_grad=True)
    loss = F.cross_entropy(logits, verigrad.tensor(target))
    loss.backward(retain_graph=True)
    first = logits.grad.numpy().copy()
    loss.backward()  # the kept gradient was taken: the kernel's, the same bits
    assert logits.grad.numpy().tobytes() == (first + first).tobytes()
    logits.grad = None
    loss = F.cross_entropy(logits, verigrad.tensor(target))
    (g,) = verigrad.autograd.grad(loss, [logits], create_graph=True)
    assert g.requires_grad and g.numpy().tobytes() == first.tobytes()
    assert not KEPT


@needs_cpu
def test_no_gradient_kept_without_a_backward_to_use_it():
    x, target = verigrad.randn(4, 5, requires_grad=True), verigrad.tensor([0, 1, 2, 3])
    with verigrad.no_grad():
        F.cross_entropy(x, target)
    F.cross_entropy(x.detach(), target)
    F.cross_entropy(x, target, reduction="none")
    assert not KEPT
    loss = F.cross_entropy(x, target)
    assert len(KEPT) == 1
    del loss
    gc.collect()
    assert not KEPT  # freed with its node


@needs_cpu
def test_the_eager_step_refuses_a_target_out_of_range_as_the_op_does():
    x = verigrad.randn(3, 6, requires_grad=True)
    with pytest.raises(IndexError, match=re.escape("cross_entropy: target 6 is out of range for 6")):
        F.cross_entropy(x, verigrad.tensor([0, 6, 1]))
    assert not KEPT


def test_no_gradient_kept_on_a_backend_without_the_step_kernel():
    x, target = verigrad.randn(4, 5, requires_grad=True), verigrad.tensor([0, 1, 2, 3])
    with verigrad.backend("reference"):
        loss = F.cross_entropy(x, target)
    assert not KEPT
    loss.backward()
    assert x.grad is not None


@needs_cpu
def test_a_cross_entropy_kernel_registered_in_place_of_the_pairs_runs(monkeypatch):
    calls = []
    kernel = cpu.cpu.native(verigrad.ops.cross_entropy, verigrad.f32)

    def own(*args, **params):
        calls.append(args[0].shape)
        return kernel(*args, **params)

    monkeypatch.setitem(cpu.cpu._kernels, ("cross_entropy", "f32"), own)
    monkeypatch.setattr(cpu.cpu, "stamp", object())  # as a registration renews it: eager plans choose again
    x = verigrad.randn(4, 5, requires_grad=True)
    F.cross_entropy(x, verigrad.tensor([0, 1, 2, 3])).backward()
    assert calls == [(4, 5)] and not KEPT
