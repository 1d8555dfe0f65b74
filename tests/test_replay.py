"""Replay (ir/replay.py): a plan's recorded kernel calls made again without Python, on the cpu backend.
Every run gives the bits the same plan gives without replay: training steps, a kernel that computes in
Python (the check takes it out of the replay), a call whose result differs from the recorded one (the
rest of the run goes to Python), other thread counts and argument layouts (recorded again), and two
threads running one compiled function."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad import nn
from verigrad.backends import cpu as cpu_backend
from verigrad.cli.trainer import training_step
from verigrad.ir import replay
from verigrad.ir.plan import Plan
from verigrad.optim import Adam

pytestmark = pytest.mark.skipif(
    not cpu_backend.available() or cpu_backend.cpu.tape() is None,
    reason="needs the cpu backend's C library and vg_call (replay records vg_call's calls)",
)


def _same(actual: Any, expected: Any) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes()


def _plan(compiled: Any) -> Plan:
    (plan,) = compiled._plans.values()
    return plan


def _batches(n: int, batch: int = 16, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [(rng.random((batch, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, batch)) for _ in range(n)]


def _train(batches: list, on: bool, monkeypatch: Any, threads: list[int] | None = None) -> tuple:
    """A digits CNN trained with Adam by a compiled step on the cpu backend, replay on or off: the loss
    tensors as returned, copies of them made at once, the model and optimizer state after, the plan."""
    monkeypatch.setattr(Plan, "replay", on)
    verigrad.manual_seed(0)
    model = verigrad.models.digits_cnn(8, 8, channels=(6, 8))
    opt = Adam(model.parameters(), lr=1e-2)
    compiled = verigrad.compile(training_step(model, opt, nn.CrossEntropyLoss()))
    returned, copies = [], []
    try:
        with verigrad.backend("cpu"):
            for k, (x, y) in enumerate(batches):
                if threads is not None:
                    verigrad.set_threads(threads[k % len(threads)])
                loss = compiled(verigrad.tensor(x), verigrad.tensor(y))
                returned.append(loss)
                copies.append(loss.numpy().copy())
    finally:
        verigrad.set_threads(1)
    state = [p.numpy().copy() for p in model.parameters()]
    state += [t.numpy().copy() for _, t in opt.state_tensors()]
    return returned, copies, state, _plan(compiled)


def test_a_training_step_replays_with_the_bits_of_the_plan_without_replay(monkeypatch):
    batches = _batches(16)
    returned, on, state_on, plan = _train(batches, True, monkeypatch)
    _, off, state_off, plan_off = _train(batches, False, monkeypatch)
    for a, b in zip(on + state_on, off + state_off):
        _same(a, b)
    for loss, copy in zip(returned, on):  # each run's outputs are its own, not the next run's buffers
        _same(loss.numpy(), copy)
    recorded = plan._replay
    assert isinstance(recorded, replay.Replay) and recorded.checked and plan_off._replay is None
    kinds = recorded.kinds
    assert len(recorded.tape) > 0
    # the whole step is one replay: where a fused kernel may not hold pow (the C library's is not
    # NumPy's: on AVX-512 machines), Adam's bias corrections run member by member, their casts of 0-d
    # f64 values to f32 too, by the backend's cast kernel; cross_entropy with PyTorch's ignore_index
    # and its gradient are one kernel (the loss_step pass), which checks the targets and leaves the
    # ignored rows out, and the reduction of its rows' losses
    python = {call.op.name for call, kind in zip(plan.calls, kinds) if kind == replay.PYTHON}
    assert python <= {"cast"}
    assert {("cross_entropy_step", "f32"), ("cross_entropy_total", "f32")} <= {
        (call.op.name, call.spec.dtype.name) for call, kind in zip(plan.calls, kinds) if kind == replay.REPLAY
    }
    # the convolutions, their gradients, pooling, the fused Adam updates and the i64 step count's add
    replayed = {
        (call.op.name, call.spec.dtype.name) for call, kind in zip(plan.calls, kinds) if kind == replay.REPLAY
    }
    assert {("conv2d", "f32"), ("conv2d_weight_grad", "f32"), ("max_pool2d", "f32")} <= replayed
    assert {("fused", "f32"), ("add", "i64")} <= replayed
    assert len({float(c) for c in on}) == len(batches)  # the model did change from step to step


def test_other_thread_counts_record_again_with_the_same_bits(monkeypatch):
    batches = _batches(24)
    _, on, state_on, plan = _train(batches[:12] + batches[12:], True, monkeypatch, threads=[1] * 12 + [2, 3])
    _, off, state_off, _ = _train(batches, False, monkeypatch, threads=[1] * 12 + [2, 3])
    for a, b in zip(on + state_on, off + state_off):
        _same(a, b)
    assert plan._recordings >= 2  # recorded at one thread, then again at two


def _relu_plus_mean(kernel: Any) -> Any:
    """A kernel that makes its C call, then computes in Python from its operand's values: what the
    check must catch (a replay would repeat the first run's mean)."""
    return lambda x, *rest: kernel(x, *rest) + x.mean(dtype=np.float32)


def test_a_kernel_computing_in_python_runs_in_python(monkeypatch):
    """The check compares each replayed step with Python's run: the step whose kernel computes in
    Python differs, and runs in Python from then on; every run has the bits of the plan without it."""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((64, 1000)).astype(np.float32) for _ in range(16)]
    w1 = verigrad.tensor(rng.standard_normal((1000, 400)).astype(np.float32) / 30)
    w2 = verigrad.tensor(rng.standard_normal((400, 400)).astype(np.float32) / 20)
    results = {}
    for on in (True, False):
        monkeypatch.setattr(Plan, "replay", on)
        compiled = verigrad.compile(lambda x: (F.tanh(F.relu(x * 2.0) @ w1) @ w2).sum(axis=1))
        with verigrad.backend("cpu"):
            out = [compiled(verigrad.tensor(xs[0])).numpy().copy()]
            plan = _plan(compiled)
            (k,) = [k for k, call in enumerate(plan.calls) if call.op.name in ("relu", "fused")][:1]
            kernel, ins, slot = plan._loop[k]
            plan._loop[k] = (_relu_plus_mean(kernel), ins, slot)
            out += [compiled(verigrad.tensor(x)).numpy().copy() for x in xs[1:]]
        results[on] = out
        if on:
            assert isinstance(plan._replay, replay.Replay) and plan._replay.checked
            assert plan._replay.kinds[k] == replay.PYTHON
    for a, b in zip(results[True], results[False]):
        _same(a, b)


def test_a_call_returning_otherwise_hands_the_run_to_python(monkeypatch):
    """A convolution whose f32 result overflows says so (its C function returns 0) and the kernel gives
    the reference's result instead: a replay stopped there runs the rest in Python, with the bits of
    the plan without replay; the next ordinary run replays again."""
    rng = np.random.default_rng(2)
    weight = verigrad.tensor(rng.standard_normal((8, 3, 3, 3)).astype(np.float32))
    xs = [rng.standard_normal((16, 3, 12, 12)).astype(np.float32) for _ in range(14)]
    xs[11] = xs[11] * np.float32(3e37)  # its sums overflow
    results = {}
    for on in (True, False):
        monkeypatch.setattr(Plan, "replay", on)
        compiled = verigrad.compile(lambda x: F.relu(F.conv2d(x, weight, padding=1)) * 0.5)
        with verigrad.backend("cpu"):
            results[on] = [compiled(verigrad.tensor(x)).numpy().copy() for x in xs]
        if on:
            assert isinstance(_plan(compiled)._replay, replay.Replay) and _plan(compiled)._replay.checked
    assert np.isinf(results[False][11]).any()
    for a, b in zip(results[True], results[False]):
        _same(a, b)


def test_arguments_as_views_replay_with_their_own_strides(monkeypatch):
    """Views as arguments (the same shape, other strides: a plan of their own) replay with the
    pointers into each run's argument, at the view's strides."""
    rng = np.random.default_rng(3)
    base = [rng.standard_normal((30, 2000)).astype(np.float32) for _ in range(30)]
    args = [verigrad.tensor(b[:, :1000]) for b in base[:12]]  # contiguous copies
    args += [verigrad.tensor(b)[:, :1000] for b in base[12:]]  # views of rows of 2000
    results = {}
    for on in (True, False):
        monkeypatch.setattr(Plan, "replay", on)
        compiled = verigrad.compile(lambda x: F.tanh(x * 2.0 + 1.0).sum(axis=0))
        with verigrad.backend("cpu"):
            results[on] = [compiled(a).numpy().copy() for a in args]
        if on:
            recorded = [plan._replay for plan in compiled._plans.values()]
            assert all(isinstance(r, replay.Replay) and r.checked for r in recorded)
            assert sorted(r.layouts[0][0] for r in recorded) == [(4000, 4), (8000, 4)]
    for a, b in zip(results[True], results[False]):
        _same(a, b)


def test_two_threads_run_one_compiled_function(monkeypatch):
    """The runs take turns (the plan's lock: its fixed buffers are one), each replaying. On two
    threads each (OpenBLAS too, outside verigrad's one-thread sections, which then overlap)."""
    monkeypatch.setattr(Plan, "replay", True)
    verigrad.set_threads(2)
    try:
        _two_threads_run_one_compiled_function()
    finally:
        verigrad.set_threads(1)


def _two_threads_run_one_compiled_function() -> None:
    rng = np.random.default_rng(4)
    w = verigrad.tensor(rng.standard_normal((256, 128)).astype(np.float32))
    fn = verigrad.compile(lambda x: F.relu(x @ w).sum(axis=1))
    xs = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(12)]
    with verigrad.backend("cpu"):
        expected = [fn(verigrad.tensor(x)).numpy().copy() for x in xs]
    assert isinstance(_plan(fn)._replay, replay.Replay)
    failures: list[str] = []

    def worker(order: list[int]) -> None:
        with verigrad.backend("cpu"):
            for _ in range(20):
                for k in order:
                    got = fn(verigrad.tensor(xs[k])).numpy()
                    if got.tobytes() != expected[k].tobytes():
                        failures.append(f"input {k}")

    orders = (list(range(12)), list(range(11, -1, -1)))
    threads = [threading.Thread(target=worker, args=(order,)) for order in orders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_mostly_python_plans_do_not_replay(monkeypatch):
    """A plan whose kernels are mostly NumPy's (i32 ops: the cpu backend has no C kernel for them)
    keeps its generated function: replaying would save nothing."""
    monkeypatch.setattr(Plan, "replay", True)
    fn = verigrad.compile(lambda x: ((x * 3 + 1) * x).sum())
    with verigrad.backend("cpu"):
        for k in range(12):
            fn(verigrad.tensor(np.arange(5, dtype=np.int32) + k))
    assert _plan(fn)._replay is False


def test_small_operands_replay_the_backends_kernels(monkeypatch):
    """On small operands a plan runs NumPy's ufuncs (a C call through Python costs more); a replay
    records the backend's C kernels instead, written into the same arrays, with the same bits."""
    results = {}
    for on in (True, False):
        monkeypatch.setattr(Plan, "replay", on)
        fn = verigrad.compile(lambda x: ((x * 2.0 + 1.0).exp() - x).sum())
        with verigrad.backend("cpu"):
            results[on] = [
                fn(verigrad.tensor(np.linspace(-k, k, 7, dtype=np.float32))).numpy() for k in range(12)
            ]
        if on:
            recorded = _plan(fn)._replay
            assert isinstance(recorded, replay.Replay) and recorded.checked
            assert recorded.kinds.count(replay.REPLAY) >= 2 and replay.PYTHON not in recorded.kinds
    for a, b in zip(results[True], results[False]):
        _same(a, b)


def test_replays_past_the_memory_budget_let_the_least_recent_go(monkeypatch):
    """The buffers of all replays stay within `replay.BUDGET`: a new recording past it drops the least
    recently run plan's (which runs in Python, and may record again); every result keeps its bits."""
    monkeypatch.setattr(replay, "BUDGET", 1)  # room for one replay
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((64, 512)).astype(np.float32) for _ in range(12)]

    def run(on: bool) -> tuple[list, list]:
        monkeypatch.setattr(Plan, "replay", on)
        first = verigrad.compile(lambda x: F.tanh(x * 2.0).sum(axis=1))
        second = verigrad.compile(lambda x: F.sigmoid(x - 1.0).sum(axis=0))
        with verigrad.backend("cpu"):
            a = [first(verigrad.tensor(x)).numpy().copy() for x in xs]
            assert not on or isinstance(_plan(first)._replay, replay.Replay)
            b = [second(verigrad.tensor(x)).numpy().copy() for x in xs]
            if on:  # the second's recording dropped the first's
                assert isinstance(_plan(second)._replay, replay.Replay) and _plan(first)._replay is None
                assert replay._live.total == _plan(second)._replay.bytes > 0
            a += [first(verigrad.tensor(x)).numpy().copy() for x in xs]
        return a, b

    for got, expected in zip(run(True), run(False)):
        for a, b in zip(got, expected):
            _same(a, b)


def test_read_only_weights_replay(monkeypatch):
    """Captured arrays that are read-only (a model's weights mapped from its file) are read by the
    replay and never written back by the check."""
    monkeypatch.setattr(Plan, "replay", True)
    rng = np.random.default_rng(7)
    weight = rng.standard_normal((256, 200)).astype(np.float32)
    weight.flags.writeable = False
    w = verigrad.from_numpy(weight)
    fn = verigrad.compile(lambda x: F.relu(x @ w).sum(axis=1))
    xs = [rng.standard_normal((128, 256)).astype(np.float32) for _ in range(12)]
    with verigrad.backend("cpu"):
        got = [fn(verigrad.tensor(x)).numpy().copy() for x in xs]
        assert isinstance(_plan(fn)._replay, replay.Replay) and _plan(fn)._replay.checked
    monkeypatch.setattr(Plan, "replay", False)
    again = verigrad.compile(lambda x: F.relu(x @ w).sum(axis=1))
    with verigrad.backend("cpu"):
        for x, y in zip(xs, got):
            _same(again(verigrad.tensor(x)).numpy(), y)


def test_an_in_place_step_that_differs_keeps_pythons_result(monkeypatch):
    """A step writing a captured tensor in place whose Python kernel differs from the call the replay
    recorded (here: Adam's step-power update, given one more addition in Python): the check runs it
    in Python from then on, and leaves the tensor as Python wrote it; every run has the bits of the
    plan without replay (patched the same)."""
    batches = _batches(14, seed=8)
    results = {}
    for on in (True, False):
        monkeypatch.setattr(Plan, "replay", on)
        verigrad.manual_seed(0)
        model = verigrad.models.digits_cnn(8, 8, channels=(6, 8))
        opt = Adam(model.parameters(), lr=1e-2)
        compiled = verigrad.compile(training_step(model, opt, nn.CrossEntropyLoss()))
        losses = []
        with verigrad.backend("cpu"):
            for k, (x, y) in enumerate(batches):
                losses.append(compiled(verigrad.tensor(x), verigrad.tensor(y)).numpy().copy())
                if k == 0:
                    plan = _plan(compiled)
                    step = next(
                        j
                        for j, call in enumerate(plan.calls)
                        # a parameter's step count: an f32 scalar, as PyTorch's
                        if call.op.name == "add"
                        and call.into is not None
                        and call.spec == verigrad.spec([], "f32")
                    )
                    _, ins, slot = plan._loop[step]
                    # the C kernel (the plan's own on two float operands), then one more addition
                    add = plan.calls[step].native or plan.calls[step].kernel
                    plan.calls[step].native = None  # the recording records what the loop runs

                    def patched(a: np.ndarray, b: np.ndarray, out: np.ndarray, add: Any = add) -> np.ndarray:
                        return np.add(add(a, b, out=out), 1.0, out=out)

                    plan._loop[step] = (patched, ins, slot)
        state = [t.numpy().copy() for _, t in opt.state_tensors()] + [
            p.numpy().copy() for p in model.parameters()
        ]
        results[on] = losses + state
        if on:
            assert isinstance(plan._replay, replay.Replay) and plan._replay.kinds[step] == replay.PYTHON
    for a, b in zip(results[True], results[False]):
        _same(a, b)


def test_a_step_giving_back_an_argument_is_not_replayed(monkeypatch):
    """A step whose result is its argument's own array (as `where` on a 0-d condition gives a branch):
    a replay would make that array its buffer and write later runs' values into the caller's old
    argument, so the plan does not replay; the arguments are never written."""
    rng = np.random.default_rng(9)
    w = verigrad.tensor(rng.standard_normal((256, 128)).astype(np.float32))
    xs = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(12)]
    results = {}
    for on in (True, False):
        monkeypatch.setattr(Plan, "replay", on)
        compiled = verigrad.compile(lambda x: F.relu((x * 2.0) @ w).sum(axis=1))
        kept = [verigrad.tensor(x) for x in xs]
        with verigrad.backend("cpu"):
            out = [compiled(kept[0]).numpy().copy()]
            plan = _plan(compiled)
            first = plan.calls[0]  # x * 2.0: now a step that gives x back
            first.native = None
            _, ins, slot = plan._loop[0]
            plan._loop[0] = (lambda x, *rest: x, ins, slot)
            out += [compiled(t).numpy().copy() for t in kept[1:]]
        results[on] = out
        for t, x in zip(kept, xs):
            _same(t.numpy(), x)
        if on:
            assert plan._replay is False and plan._recordings == 1
    for a, b in zip(results[True], results[False]):
        _same(a, b)


def test_a_replay_keeps_no_argument_alive(monkeypatch):
    """Each run's arguments are pointed at anew, so neither the tape nor the fixed buffers keep the
    recording run's (or any run's) arguments: a model's old key/value cache is freed."""
    import gc
    import weakref

    monkeypatch.setattr(Plan, "replay", True)
    rng = np.random.default_rng(10)
    w = verigrad.tensor(rng.standard_normal((256, 128)).astype(np.float32))
    fn = verigrad.compile(lambda x: F.relu(x.reshape(128, 512)[:, :256] @ w).sum(axis=1))
    refs = []
    with verigrad.backend("cpu"):
        for _ in range(12):
            x = rng.standard_normal((256, 256)).astype(np.float32)
            refs.append(weakref.ref(x))
            fn(verigrad.from_numpy(x))
            del x
    gc.collect()
    assert isinstance(_plan(fn)._replay, replay.Replay) and _plan(fn)._replay.checked
    assert [r() is None for r in refs] == [True] * 12


def test_a_replay_holds_what_its_calls_point_into(monkeypatch):
    """The tape holds every object a recorded call points into (here the GEMM's argument structure
    and its offsets, which the matmul kernel keeps in a cache of its own): emptying that cache and
    reusing the freed memory does not change a replay's bits."""
    import gc

    from verigrad.backends.cpu import matmul as cpu_matmul

    rng = np.random.default_rng(11)
    w = verigrad.tensor(rng.standard_normal((4, 200, 96)).astype(np.float32))
    xs = [rng.standard_normal((4, 128, 200)).astype(np.float32) for _ in range(14)]
    results = {}
    for on in (True, False):
        monkeypatch.setattr(Plan, "replay", on)
        fn = verigrad.compile(lambda x: F.relu(x @ w).sum(axis=2))
        with verigrad.backend("cpu"):
            out = [fn(verigrad.tensor(x)).numpy().copy() for x in xs[:10]]
            cpu_matmul._plans.clear()
            gc.collect()
            junk = [cpu_matmul._GemmArgs(*([7] * 16)) for _ in range(2000)]  # the freed memory reused
            junk += [np.full(3 * 4, 1 << 40, np.int64) for _ in range(2000)]
            out += [fn(verigrad.tensor(x)).numpy().copy() for x in xs[10:]]
            del junk
        results[on] = out
        if on:
            assert isinstance(_plan(fn)._replay, replay.Replay) and _plan(fn)._replay.checked
    for a, b in zip(results[True], results[False]):
        _same(a, b)


def test_a_replayed_plan_still_has_its_generated_source(monkeypatch):
    """Past `generate_after` runs a replaying plan also makes its generated function: `plan.source`
    prints as on any backend, and runs that cannot replay use it."""
    monkeypatch.setattr(Plan, "replay", True)
    rng = np.random.default_rng(12)
    w = verigrad.tensor(rng.standard_normal((256, 128)).astype(np.float32))
    fn = verigrad.compile(lambda x: F.relu(x @ w).sum(axis=1))
    x = verigrad.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    with verigrad.backend("cpu"):
        first = fn(x).numpy().copy()
        (plan,) = fn._plans.values()
        for _ in range(plan.generate_after + 1):
            _same(fn(x).numpy(), first)
    assert isinstance(plan._replay, replay.Replay) and plan.source is not None and "matmul" in plan.source


@pytest.mark.parametrize(("text", "mib"), [("", 512), ("64", 64), ("0", 0), ("4k", None), ("-1", None)])
def test_verigrad_replay_mib_is_a_count_of_mib(monkeypatch, text, mib):
    """The replays' budget: 512 MiB unless VERIGRAD_REPLAY_MIB says otherwise; other text is one warning
    line naming the variable and what it takes, and the default (int() took "4k" with its own message, at
    import)."""
    monkeypatch.setenv("VERIGRAD_REPLAY_MIB", text)
    if mib is not None:
        assert replay.budget() == mib << 20
        return
    with pytest.warns(RuntimeWarning, match=f"VERIGRAD_REPLAY_MIB='{text}' is ignored: it must be a whole"):
        assert replay.budget() == 512 << 20


@pytest.mark.parametrize(("extra_mib", "weights_mib"), [(16, 0), (1, 0), (1, 8)])
def test_plans_whose_buffers_would_outgrow_a_run_do_not_replay(monkeypatch, extra_mib: int, weights_mib: int):
    """A replay holds every result from run to run, where a run drops each after its last reader: a
    chain of ten products (256 KiB each) holds about 2.5 MiB in a replay and two products in a run.
    Within `replay_extra`, or half the captured tensors' memory (a model's weights: here an 8 MiB table
    the step reads a row of), it replays; past both the plan keeps its loop (a training step's large
    activations would be held twice over). The bits are the same either way."""
    monkeypatch.setattr(Plan, "replay", True)
    monkeypatch.setattr(Plan, "replay_extra", extra_mib << 20)
    rng = np.random.default_rng(0)
    weights = [verigrad.tensor(rng.standard_normal((256, 256)).astype(np.float32) / 16) for _ in range(10)]
    table = verigrad.tensor(np.ones((max(1, weights_mib << 10), 256), np.float32))

    def chain(x):
        for w in weights:
            x = x @ w
        return x.sum(axis=1) + table[0]

    fn = verigrad.compile(chain)
    x = verigrad.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    with verigrad.backend("cpu"):
        expected = chain(x).numpy()
        for _ in range(Plan.replay_after + 3):
            _same(fn(x).numpy(), expected)
    recorded = _plan(fn)._replay
    assert isinstance(recorded, replay.Replay) if extra_mib == 16 or weights_mib else recorded is False
