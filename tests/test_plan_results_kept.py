"""A compiled call's results are the caller's: a tensor kept from one call keeps its values through the
later calls, whichever way the plan runs them (checked, its loop, its generated function, a replay),
although a plan reuses its memory from call to call (glibc's freed heap, a replay's fixed buffers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import verigrad
from verigrad import nn
from verigrad.backends import cpu
from verigrad.cli.trainer import training_step
from verigrad.ir.plan import Plan
from verigrad.ir.replay import Replay
from verigrad.optim import Adam

RUNS = 12  # past the checked run, the generated function (generate_after) and a replay (replay_after)


def _ran_as(compiled: Any, replay: bool) -> None:
    """The plan's later runs were a replay, or (replay off) its generated function."""
    (plan,) = compiled._plans.values()
    assert plan._fn is not None
    assert isinstance(plan._replay, Replay) if replay else plan._replay is None


@pytest.fixture(params=[False, True], ids=["loop", "replay"])
def replay(request: Any, monkeypatch: Any) -> Iterator[bool]:
    """Whether the plan replays; the test runs on the cpu backend (its kernels allocate their results)."""
    if not cpu.available() or (request.param and cpu.cpu.tape() is None):
        pytest.skip("needs the cpu backend (and for a replay its vg_call)")
    monkeypatch.setattr(Plan, "replay", request.param)
    monkeypatch.setattr(Plan, "generate_after", 4)
    monkeypatch.setattr(Plan, "replay_after", 6)
    with verigrad.backend("cpu"):
        yield request.param


def test_a_kept_loss_keeps_its_step_s_value(replay: bool):
    """Each step's loss tensor, kept to the end, still holds the value it had when returned."""
    verigrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    step = verigrad.compile(training_step(model, Adam(model.parameters(), lr=1e-2), nn.CrossEntropyLoss()))
    rng = np.random.default_rng(1)
    kept, values = [], []
    for _ in range(RUNS):
        x = verigrad.tensor(rng.standard_normal((8, 12)).astype(np.float32))
        loss = step(x, verigrad.tensor(rng.integers(0, 3, 8)))
        kept.append(loss)
        values.append(loss.numpy().copy())
    assert len({float(v) for v in values}) == RUNS  # each step its own loss
    for loss, value in zip(kept, values):
        np.testing.assert_array_equal(loss.numpy(), value, strict=True)
    _ran_as(step, replay)


def test_kept_results_of_several_outputs_keep_their_values(replay: bool):
    """A function's results (an intermediate, an element-wise result the memory plan may compute in
    place, a reduction) kept from every call: the next calls write none of them."""

    def f(x: Any, w: Any) -> Any:
        h = x @ w
        return h, (h * 2.0).relu() + 1.0, h.sum(dim=0)

    compiled = verigrad.compile(f)
    rng = np.random.default_rng(2)
    w = verigrad.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    kept, values = [], []
    for _ in range(RUNS):
        results = compiled(verigrad.tensor(rng.standard_normal((4, 6)).astype(np.float32)), w)
        kept.append(results)
        values.append([r.numpy().copy() for r in results])
    for results, copies in zip(kept, values):
        for r, copy in zip(results, copies):
            np.testing.assert_array_equal(r.numpy(), copy, strict=True)
    _ran_as(compiled, replay)
