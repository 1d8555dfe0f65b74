"""verigrad.check of a whole training step (forward, backward(), optimizer step) on symbolic sizes: the
backward pass is checked too, and nothing the step reaches is changed."""

import numpy as np
import pytest

import verigrad as vg
import verigrad.nn as nn
import verigrad.nn.functional as F


def _setup():
    vg.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    return model, vg.optim.AdamW(model.parameters(), lr=0.01)


def test_a_training_step_checks_on_symbolic_sizes_and_changes_nothing():
    model, opt = _setup()
    before = [p.numpy().copy() for p in model.parameters()]
    model(vg.randn(2, 6)).sum().backward()  # a gradient already there is left as it was
    grads = [p.grad.numpy().copy() for p in model.parameters()]

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    n = vg.dims("n")
    assert vg.check(step, vg.spec([n, 6]), vg.spec([n], "i64")) == vg.spec([])
    assert all(np.array_equal(p.numpy(), b) for p, b in zip(model.parameters(), before))
    assert all(np.array_equal(p.grad.numpy(), g) for p, g in zip(model.parameters(), grads))
    assert opt.steps == 0


def test_a_shape_error_in_the_backward_pass_is_found():
    model, _ = _setup()

    def step(x):
        loss = model(x[:, :5]).sum()  # 5 features into a Linear of 6
        loss.backward()
        return loss

    with pytest.raises(vg.ShapeError, match="contracted dimensions differ"):
        vg.check(step, vg.spec([vg.dims("n"), 6]))
