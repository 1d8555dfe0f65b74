"""Functions that check their data (class targets, positions, one_hot's classes) raise the same error
eagerly, in a compiled plan, and in the plan's replay from C (ir/replay.py), on both backends; a plan
that refused bad data goes on with good data; negative positions are refused as PyTorch refuses them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad import nn
from verigrad.backends import cpu as cpu_backend
from verigrad.ir import replay
from verigrad.ops import check_index

BACKENDS = ("reference", "cpu")
RUNS = 12  # more than Plan.replay_after (8): the plan has recorded its calls and replays them
RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((4, 10)).astype(np.float32)
TABLE = RNG.standard_normal((5, 3)).astype(np.float32)


def _xent_step(logits: Any, target: Any) -> Any:
    """A loss and its gradient: the forward and backward kernels both see the targets."""
    w = logits.detach().requires_grad_()
    loss = F.cross_entropy(w, target)
    loss.backward()
    return loss, w.grad


# (name, function, good arguments, bad arguments, the error the bad ones raise)
CASES: list[tuple[str, Callable, tuple, tuple, type, str]] = [
    (
        "cross_entropy",
        lambda x, t: F.cross_entropy(x, t),
        (LOGITS, np.array([1, 2, 3, 9])),
        (LOGITS, np.array([200] * 4)),
        IndexError,
        "cross_entropy: target 200 is out of range for 10 classes",
    ),
    (
        "cross_entropy backward",
        _xent_step,
        (LOGITS, np.array([1, 2, 3, 9])),
        (LOGITS, np.array([0, -1, 3, 9])),
        IndexError,
        "cross_entropy: target -1 is out of range for 10 classes",
    ),
    (
        "cross_entropy ignore_index",
        lambda x, t: F.cross_entropy(x, t, ignore_index=-100, reduction="sum"),
        (LOGITS, np.array([1, -100, 3, -100])),
        (LOGITS, np.array([1, -100, 10, -100])),
        IndexError,
        "cross_entropy: target 10 is out of range for 10 classes",
    ),
    (
        "cross_entropy label_smoothing",
        lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
        (LOGITS, np.array([1, 2, 3, 9])),
        (LOGITS, np.array([1, 2, 3, 11])),
        IndexError,
        "cross_entropy: target 11 is out of range for 10 classes",
    ),
    (
        "nll_loss",
        lambda x, t: F.nll_loss(x, t),
        (LOGITS, np.array([1, 2, 3, 9])),
        (LOGITS, np.array([1, 2, -3, 9])),
        IndexError,
        "nll_loss: target -3 is out of range for 10 classes",
    ),
    (
        "gather",
        lambda x, i: verigrad.gather(x, 1, i),
        (LOGITS, np.array([[0, 9]] * 4)),
        (LOGITS, np.array([[0, 10]] * 4)),
        IndexError,
        "gather: index 10 is out of range for a dimension of size 10",
    ),
    (
        "gather negative",
        lambda x, i: verigrad.gather(x, 1, i),
        (LOGITS, np.array([[0, 9]] * 4)),
        (LOGITS, np.array([[0, -1]] * 4)),
        IndexError,
        "gather: index -1 is out of range for a dimension of size 10",
    ),
    (
        "index_select",
        lambda x, i: verigrad.index_select(x, 0, i),
        (LOGITS, np.array([3, 0])),
        (LOGITS, np.array([3, -1])),
        IndexError,
        "index_select: index -1 is out of range for a dimension of size 4",
    ),
    (
        "scatter",
        lambda x, i: verigrad.zeros(4, 10).scatter(1, i, x[:, :2]),
        (LOGITS, np.array([[0, 9]] * 4)),
        (LOGITS, np.array([[0, 12]] * 4)),
        IndexError,
        "scatter: index 12 is out of range for a dimension of size 10",
    ),
    (
        "scatter_add",
        lambda x, i: verigrad.zeros(4, 10).scatter_add(1, i, x[:, :2]),
        (LOGITS, np.array([[0, 9]] * 4)),
        (LOGITS, np.array([[-2, 9]] * 4)),
        IndexError,
        "scatter_add: index -2 is out of range for a dimension of size 10",
    ),
    (
        "scatter_reduce",
        lambda x, i: verigrad.zeros(4, 10).scatter_reduce(1, i, x[:, :2], "amax"),
        (LOGITS, np.array([[0, 9]] * 4)),
        (LOGITS, np.array([[0, 10]] * 4)),
        IndexError,
        "scatter_reduce: index 10 is out of range for a dimension of size 10",
    ),
    (
        "index_add",
        lambda x, i: verigrad.zeros(5, 10).index_add(0, i, x[:2]),
        (LOGITS, np.array([4, 0])),
        (LOGITS, np.array([5, 0])),
        IndexError,
        "index_add: index 5 is out of range for a dimension of size 5",
    ),
    (
        "embedding",
        lambda w, i: F.embedding(i, w),
        (TABLE, np.array([[0, 4], [2, 2]])),
        (TABLE, np.array([[0, 5], [2, 2]])),
        IndexError,
        "embedding: index 5 is out of range for a dimension of size 5",
    ),
    (
        "embedding negative",
        lambda w, i: F.embedding(i, w),
        (TABLE, np.array([[0, 4], [2, 2]])),
        (TABLE, np.array([[0, 4], [-1, 2]])),
        IndexError,
        "embedding: index -1 is out of range for a dimension of size 5",
    ),
    (
        "getitem",
        lambda x, i: x[i],
        (LOGITS, np.array([3, -4])),
        (LOGITS, np.array([3, 4])),
        IndexError,
        "index 4 is out of range for dimension 0 of size 4",
    ),
    (
        "getitem negative",  # counted from the end as far as -size: past it, not wrapped again
        lambda x, i: x[:, i],
        (LOGITS, np.array([9, -10])),
        (LOGITS, np.array([9, -11])),
        IndexError,
        "index -11 is out of range for dimension 1 of size 10",
    ),
    (
        "index_put",
        lambda x, i: x.index_put((i,), verigrad.tensor(np.float32(1.0))),
        (LOGITS, np.array([0, -1])),
        (LOGITS, np.array([0, -5])),
        IndexError,
        "index -5 is out of range for dimension 0 of size 4",
    ),
    (
        "take",  # PyTorch's take counts a negative position from the end
        lambda x, i: verigrad.take(x, i),
        (LOGITS, np.array([0, -40])),
        (LOGITS, np.array([0, -41])),
        IndexError,
        "index -41 is out of range for dimension 0 of size 40",
    ),
    (
        "take_along_dim",  # a negative position counts from the end once, as PyTorch's: -11 is refused
        lambda x, i: verigrad.take_along_dim(x, i, 1),
        (LOGITS, np.full((4, 1), -10)),
        (LOGITS, np.full((4, 1), -11)),
        IndexError,
        "index -11 is out of range for take_along_dim's dimension 1 of size 10",
    ),
    (
        "index_fill",
        lambda x, i: x.index_fill(1, i, 0.0),
        (LOGITS, np.array([0, -10])),
        (LOGITS, np.array([0, -11])),
        IndexError,
        "index -11 is out of range for dimension 1 of size 10",
    ),
    (
        "one_hot",
        lambda c: F.one_hot(c, 3),
        (np.array([0, 2, 1]),),
        (np.array([0, 3, 1]),),
        ValueError,
        "one_hot: Class values must be smaller than num_classes (3).",
    ),
    (
        "one_hot negative",
        lambda c: F.one_hot(c, 3),
        (np.array([0, 2, 1]),),
        (np.array([0, -1, 1]),),
        ValueError,
        "one_hot: Class values must be non-negative.",
    ),
]


def _outputs(result: Any) -> list[np.ndarray]:
    results = result if isinstance(result, tuple) else (result,)
    return [np.asarray(r.numpy()) for r in results]


def _same(actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    for a, e in zip(actual, expected, strict=True):
        assert a.dtype == e.dtype and a.shape == e.shape and a.tobytes() == e.tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_compiled_and_replayed_plans_raise_what_eager_raises(case, backend):
    _, fn, good, bad, error, message = case
    with verigrad.backend(backend):
        with pytest.raises(error, match=re.escape(message)):
            fn(*[verigrad.tensor(a) for a in bad])
        expected = _outputs(fn(*[verigrad.tensor(a) for a in good]))
        compiled = verigrad.compile(fn)
        for _ in range(RUNS):
            _same(_outputs(compiled(*[verigrad.tensor(a) for a in good])), expected)
        (plan,) = compiled._plans.values()
        replays = isinstance(plan._replay, replay.Replay) and plan._replay.checked
        assert replays or backend == "reference" or cpu_backend.cpu.tape() is None or plan._replay is False
        for _ in range(2):  # the replay stops at the check's call, the rest runs in Python, which raises
            with pytest.raises(error, match=re.escape(message)):
                compiled(*[verigrad.tensor(a) for a in bad])
            _same(_outputs(compiled(*[verigrad.tensor(a) for a in good])), expected)  # and goes on


def test_a_compiled_training_step_with_bad_labels_raises_and_leaves_the_model_alone():
    """The targets are checked before the update: a refused step writes nothing into the parameters."""
    verigrad.manual_seed(0)
    model = nn.Linear(10, 10)
    opt = verigrad.optim.SGD(model.parameters(), lr=0.1)

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = verigrad.compile(step)
    with verigrad.backend("cpu"):
        for _ in range(RUNS):
            compiled(verigrad.tensor(LOGITS), verigrad.tensor(np.array([1, 2, 3, 4])))
        before = [p.numpy().copy() for p in model.parameters()]
        with pytest.raises(IndexError, match="target 200 is out of range for 10 classes"):
            compiled(verigrad.tensor(LOGITS), verigrad.tensor(np.array([200] * 4)))
    for p, b in zip(model.parameters(), before):
        assert p.numpy().tobytes() == b.tobytes()


def test_nn_embedding_refuses_a_negative_index_as_pytorch():
    table = nn.Embedding(5, 3)
    with pytest.raises(IndexError, match="embedding: index -1 is out of range"):
        table(verigrad.tensor(np.array([0, -1])))
    assert table(verigrad.tensor(np.array([0, 4]))).shape == (2, 3)


@pytest.mark.parametrize("classes", [[-1, 0], [0, 3]])
def test_one_hot_refuses_classes_out_of_range(classes):
    with pytest.raises(ValueError, match="one_hot: Class values must be"):
        F.one_hot(verigrad.tensor(np.array(classes)), 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_check_index_copies_and_maps_ignored_entries_to_zero(backend):
    idx = np.array([2, -100, 0, -100, 1])
    with verigrad.backend(backend):
        checked = check_index(verigrad.tensor(idx), size=3, name="nll_loss", what="target", ignore=-100)
        assert checked.numpy().tolist() == [2, 0, 0, 0, 1] and idx.tolist() == [2, -100, 0, -100, 1]
        with pytest.raises(IndexError, match=re.escape("nll_loss: target 3 is out of range for 3 classes")):
            check_index(
                verigrad.tensor(np.array([3, -100])), size=3, name="nll_loss", what="target", ignore=-100
            )
        strided = np.arange(12).reshape(3, 4)[:, ::2] % 3  # not contiguous: the reference's path
        assert (
            check_index(verigrad.tensor(strided), size=3, name="gather").numpy().tolist() == strided.tolist()
        )


def test_the_ops_cross_entropy_refuses_targets_out_of_range_on_both_backends():
    for backend in BACKENDS:
        target = verigrad.tensor(np.array([0, 1, 10, 2]))
        message = "cross_entropy: target 10 is out of range for 10 classes"
        with verigrad.backend(backend), pytest.raises(IndexError, match=message):
            verigrad.ops.cross_entropy(verigrad.tensor(LOGITS), target)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("bad", [-1, 10, np.iinfo(np.int32).min])
def test_eager_checks_read_every_integer_dtype(dtype, bad):
    """Eagerly the check is one max over the positions read as unsigned (no op call): a negative one of
    any width is larger than any size."""
    index = np.array([[0, 9]] * 4, dtype)
    index[2, 1] = bad
    with pytest.raises(IndexError, match=re.escape(f"gather: index {bad} is out of range")):
        verigrad.gather(verigrad.tensor(LOGITS), 1, verigrad.tensor(index))
    index[2, 1] = 9
    assert verigrad.gather(verigrad.tensor(LOGITS), 1, verigrad.tensor(index)).shape == (4, 2)
