"""Threads: grad mode, the mode and backend stacks, tracing, the compile caches, plans and their replay,
nn.Module's call stack, the RNG and the C thread pool, each used by several Python threads at once.

Each race runs its workers behind a `threading.Barrier` (so that their first calls meet) and asserts the
bits of every result equal a run of the same work in one thread, with no exception.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fresh_process import run_python

import verigrad
from verigrad import modes, nn
from verigrad.backends import cpu
from verigrad.cli.trainer import training_step
from verigrad.ir import replay, steps
from verigrad.ir.plan import Plan

THREADS = 4
ROUNDS = 100  # rounds of the cheap races (eager training and inference)
COMPILE_ROUNDS = 12  # rounds whose first calls trace and plan (tens of milliseconds each)

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
BACKEND = "cpu" if cpu.available() else "reference"  # its C kernels, thread pool and replay where built


@pytest.fixture(autouse=True)
def _frequent_switches():
    """Threads take turns every 20 us instead of 5 ms, so that a race shows in a few rounds; and a test
    that fails midway leaves this thread's grad mode on for the next."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(2e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        modes.LOCAL.grad[:] = [True]


def _race(workers: list[Callable[[], Any]], backend: str | None = BACKEND) -> list[Any]:
    """Each worker in a thread of its own on `backend`, started together behind a barrier; their results
    in order. An exception in any worker fails the test with that worker's traceback."""
    barrier = threading.Barrier(len(workers))
    results: list[Any] = [None] * len(workers)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            barrier.wait()
            with verigrad.backend(backend) if backend else contextlib.nullcontext():
                results[k] = workers[k]()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _bits(t: Any) -> bytes:
    return np.ascontiguousarray(t.numpy() if isinstance(t, verigrad.Tensor) else t).tobytes()


# small models, made from NumPy arrays (the default generator is shared: drawing from it in several
# threads would give each model weights that depend on the threads' order) ---------------------------
def _mlp(seed: int) -> nn.Module:
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    state = {k: rng.standard_normal(v.shape).astype(np.float32) * 0.3 for k, v in model.state_dict().items()}
    model.load_state_dict({k: verigrad.from_numpy(v) for k, v in state.items()})
    return model


def _batch(seed: int, n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + seed)
    return rng.standard_normal((n, 6)).astype(np.float32), rng.integers(0, 3, n)


def _weights(model: nn.Module) -> dict[str, bytes]:
    return {k: _bits(v) for k, v in model.state_dict().items()}


def _train_eager(seed: int, optimizer: str = "adam", steps: int = 3) -> dict[str, bytes]:
    """Its own model trained eagerly (grad mode on: this thread records while others do not)."""
    model = _mlp(seed)
    opt = (verigrad.optim.Adam if optimizer == "adam" else verigrad.optim.SGD)(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    x, y = _batch(seed)
    for _ in range(steps):
        loss = loss_fn(model(verigrad.from_numpy(x)), verigrad.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return _weights(model)


def _infer(model: nn.Module, x: np.ndarray, how: str) -> bytes:
    """model(x) under no_grad or inference_mode: no history, and grad mode back on after."""
    context = verigrad.no_grad() if how == "no_grad" else verigrad.inference_mode()
    with context:
        assert not verigrad.is_grad_enabled()
        out = model(verigrad.from_numpy(x))
    assert verigrad.is_grad_enabled()
    assert not out.requires_grad and out.grad_fn is None
    return _bits(out)


# grad mode ---------------------------------------------------------------------------------------
def test_grad_mode_is_per_thread():
    """no_grad in one thread leaves grad mode on in another (PyTorch keeps grad mode per thread)."""
    inside, go_on = threading.Event(), threading.Event()
    seen = []

    def quiet():
        with verigrad.no_grad():
            inside.set()
            go_on.wait(5)

    def records():
        inside.wait(5)
        w = verigrad.ones(3, requires_grad=True)
        seen.append((verigrad.is_grad_enabled(), (w * 2).requires_grad))
        go_on.set()

    _race([quiet, records])
    assert seen == [(True, True)]


def test_set_grad_enabled_as_a_function_sets_this_thread_alone():
    turned_off, checked = threading.Event(), threading.Event()
    seen = []

    def off():
        verigrad.set_grad_enabled(False)
        turned_off.set()
        checked.wait(5)
        seen.append(("off", verigrad.is_grad_enabled()))

    def on():
        turned_off.wait(5)
        seen.append(("on", verigrad.is_grad_enabled()))
        checked.set()

    _race([off, on])
    assert sorted(seen) == [("off", False), ("on", True)]
    assert verigrad.is_grad_enabled()


def test_set_grad_enabled_as_a_context_manager_and_as_a_decorator():
    """As PyTorch's: a block restores what was before it; decorating does not change grad mode."""
    with verigrad.set_grad_enabled(False):
        assert not verigrad.is_grad_enabled()
    assert verigrad.is_grad_enabled()

    @verigrad.set_grad_enabled(False)
    def quiet():
        return verigrad.is_grad_enabled()

    assert verigrad.is_grad_enabled()  # decorating changed nothing
    assert quiet() is False
    assert verigrad.is_grad_enabled()
    with verigrad.no_grad():
        assert quiet() is False
        assert not verigrad.is_grad_enabled()  # the call put back what it found
        with verigrad.enable_grad():
            assert quiet() is False
            assert verigrad.is_grad_enabled()


def test_grad_modes_decorate_without_their_call():
    """As PyTorch's: `@no_grad`, `@enable_grad` and `@inference_mode` decorate without the call (the name
    was bound to a no_grad object: calling it returned a wrapper and ran nothing, or raised), and
    `@inference_mode(False)` turns grad mode on (PyTorch's guard, even inside no_grad); anything else is
    refused by name."""

    def grad_mode() -> bool:
        return verigrad.is_grad_enabled()

    quiet, kept = verigrad.no_grad(grad_mode), verigrad.inference_mode(False)(grad_mode)
    inference, enabled = verigrad.inference_mode(grad_mode), verigrad.enable_grad(grad_mode)
    assert (quiet(), inference(), kept(), enabled()) == (False, False, True, True)
    with verigrad.no_grad():
        assert (kept(), enabled(), verigrad.is_grad_enabled()) == (True, True, False)
    assert verigrad.is_grad_enabled()
    with pytest.raises(
        TypeError, match="inference_mode takes a bool \\(mode\\) or a function to decorate, got int 1"
    ):
        verigrad.inference_mode(1)
    with pytest.raises(TypeError, match="no_grad takes a function to decorate, or nothing, got str 'x'"):
        verigrad.no_grad("x")


@pytest.mark.parametrize(
    "make", [verigrad.no_grad, verigrad.inference_mode, lambda: verigrad.set_grad_enabled(False)]
)
def test_one_grad_mode_instance_decorates_a_function_called_from_several_threads(make):
    """One instance as a decorator, its function called by several threads at once, some with grad mode
    on and some under no_grad: each thread's grad mode inside is off, and after it what it was before."""
    decorator = make()

    @decorator
    def inside(pause: threading.Barrier) -> bool:
        pause.wait(5)  # every thread inside at once
        return verigrad.is_grad_enabled()

    pause = threading.Barrier(THREADS)

    def call(k: int) -> tuple[bool, bool]:
        if k % 2:
            with verigrad.no_grad():
                return inside(pause), verigrad.is_grad_enabled()
        return inside(pause), verigrad.is_grad_enabled()

    for _ in range(10):
        assert _race([lambda k=k: call(k) for k in range(THREADS)]) == [
            (False, k % 2 == 0) for k in range(THREADS)
        ]
    assert verigrad.is_grad_enabled()


# eager training and inference at once -----------------------------------------------------------------
def test_training_while_other_threads_infer_under_no_grad_and_inference_mode():
    """Thread 0 trains its model with Adam, thread 1 with SGD; threads 2 and 3 run another model under
    no_grad and inference_mode: the weights and outputs are the bits of a run in one thread, every round
    (before grad mode was per thread, a no_grad elsewhere turned recording off mid-step: an error, or
    once in 8 the weights trained without a gradient and no error)."""
    model = _mlp(9)
    x, _ = _batch(9, 16)
    workers = [
        lambda: _train_eager(0, "adam"),
        lambda: _train_eager(1, "sgd"),
        lambda: _infer(model, x, "no_grad"),
        lambda: _infer(model, x, "inference"),
    ]
    with verigrad.backend(BACKEND):
        expected = [work() for work in workers]
    for _ in range(ROUNDS):
        assert _race(workers) == expected


# compiled steps -------------------------------------------------------------------------------------
def _compiled_training(seed: int, runs: int) -> dict[str, bytes]:
    """Its own model and its own compiled step, run `runs` times (past the replay's recording)."""
    model = _mlp(seed)
    opt = verigrad.optim.Adam(model.parameters(), lr=0.05)
    step = verigrad.compile(training_step(model, opt, nn.CrossEntropyLoss()))
    x, y = _batch(seed)
    for _ in range(runs):
        step(x, y)
    return _weights(model)


@needs_cc
def test_first_calls_of_compiled_training_steps_race():
    """Each thread traces, plans, records and replays its own compiled step at the same time as the
    others (before, two threads making the first calls of their own steps failed 7 times in 9)."""
    runs = 12  # past Plan.replay_after: each records its calls and replays them
    with verigrad.backend(BACKEND):
        expected = [_compiled_training(k, runs) for k in range(THREADS)]
    for _ in range(COMPILE_ROUNDS):
        assert _race([lambda k=k: _compiled_training(k, runs) for k in range(THREADS)]) == expected


@needs_cc
def test_one_compiled_training_step_called_by_several_threads_applies_every_step():
    """4 threads call one compiled step of one model on one batch, 6 times each: the weights are those
    of 24 steps in one thread (a run's updates are written back before the next run of the plan reads
    them: no step lost)."""
    x, y = _batch(3)

    def setup() -> tuple[nn.Module, Any]:
        model = _mlp(3)
        opt = verigrad.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        return model, verigrad.compile(training_step(model, opt, nn.CrossEntropyLoss()))

    with verigrad.backend(BACKEND):
        model, step = setup()
        for _ in range(THREADS * 6):
            step(x, y)
    expected = _weights(model)
    for _ in range(COMPILE_ROUNDS):
        model, step = setup()

        def calls(step=step) -> None:
            for _ in range(6):
                step(x, y)

        _race([calls] * THREADS)
        assert _weights(model) == expected
        assert step.stats()["hits"] == THREADS * 6 - 1


@needs_cc
def test_one_compiled_inference_function_called_by_several_threads():
    """Several threads make the first calls of one compiled function at once, then keep calling it
    (its plan runs, records its calls and replays while the others run it): every output is the bits
    of one thread's; it traced once and planned once."""
    model = _mlp(5)
    xs = [_batch(k, 8)[0] for k in range(THREADS)]

    def forward(x):
        with verigrad.no_grad():
            return model(x).softmax(-1)

    with verigrad.backend(BACKEND):
        expected = [_bits(forward(verigrad.from_numpy(x))) for x in xs]
    for _ in range(COMPILE_ROUNDS):
        shared = verigrad.compile(forward)

        def calls(k: int, shared=shared) -> list[bytes]:
            return [_bits(shared(xs[k])) for _ in range(12)]

        results = _race([lambda k=k: calls(k) for k in range(THREADS)])
        assert results == [[e] * 12 for e in expected]
        assert shared.stats()["traces"] == 1 and shared.stats()["plans"] == 1


@needs_cc
def test_a_recording_is_not_cut_short_by_another_threads(monkeypatch):
    """Thread A's plan records its calls (ir/replay.py); after its first step it gives thread B half a
    second to start recording its own plan (vg_call keeps one tape: B's recording took A's later calls
    off A's tape, which then ran in Python). Each plan records every step, as it does alone."""
    rng = np.random.default_rng(8)
    w1, w2 = (verigrad.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in ((256, 128), (128, 64)))
    x = rng.standard_normal((64, 256)).astype(np.float32)

    def compiled():
        return verigrad.compile(lambda x: ((x @ w1).tanh() @ w2).relu().sum(-1))

    def recorded(fn: Any) -> Any:
        (plan,) = fn._plans.values()
        return plan._replay

    monkeypatch.setattr(Plan, "replay", True)
    with verigrad.backend("cpu"):
        alone = compiled()
        expected = [_bits(alone(x)) for _ in range(Plan.replay_after + 3)]
    kinds = recorded(alone).kinds
    assert replay.REPLAY in kinds
    a, b = compiled(), compiled()
    a_recording, b_recording = threading.Event(), threading.Event()
    recording, kernel_for = cpu.cpu.recording, steps.recording_kernel

    @contextlib.contextmanager
    def noted(tape: Any) -> Any:
        with recording(tape):
            (a_recording if threading.current_thread().name == "A" else b_recording).set()
            yield

    def slowed(step: Any, fixed: Any) -> Any:
        if threading.current_thread().name == "A":
            b_recording.wait(0.5)  # B starts recording now, unless it must wait for A's to end
        return kernel_for(step, fixed)

    monkeypatch.setattr(cpu.cpu, "recording", noted)
    monkeypatch.setattr(replay, "recording_kernel", slowed)
    with verigrad.backend("cpu"):
        for _ in range(Plan.replay_after):
            a(x), b(x)
    results: dict[str, list[bytes]] = {}

    def run(fn: Any, name: str) -> None:
        with verigrad.backend("cpu"):
            results[name] = [_bits(fn(x)) for _ in range(3)]

    threads = [threading.Thread(target=run, args=(fn, name), name=name) for fn, name in ((a, "A"), (b, "B"))]
    threads[0].start()
    assert a_recording.wait(5)
    threads[1].start()
    for t in threads:
        t.join()
    assert results == {"A": expected[-3:], "B": expected[-3:]}
    for fn in (a, b):  # without the lock, A's steps after the first ran in Python: it gave up replaying
        found = recorded(fn)
        assert isinstance(found, replay.Replay) and found.kinds == kinds, found


# the rest of the per-thread state ---------------------------------------------------------------------
def test_a_backend_block_in_one_thread_leaves_the_others_on_theirs():
    """`verigrad.backend(name)` in one thread does not change another's kernels (this test runs inside
    conftest's `backend("reference")` block: a new thread starts on the process default, cpu)."""
    inside, go_on = threading.Event(), threading.Event()
    seen = []

    def other():
        with verigrad.backend("reference"):
            inside.set()
            go_on.wait(5)
            seen.append(("other", verigrad.get_backend().name))

    def this():
        inside.wait(5)
        seen.append(("this", verigrad.get_backend().name, (verigrad.ones(2) + 1).numpy().tolist()))
        go_on.set()

    _race([other, this], backend=None)
    assert sorted(seen) == [("other", "reference"), ("this", "cpu", [2.0, 2.0])]
    assert verigrad.get_backend().name == "reference"


def test_set_backend_sets_the_default_every_thread_starts_from():
    try:
        verigrad.set_backend("reference")
        assert _race([lambda: verigrad.get_backend().name] * 2, backend=None) == ["reference"] * 2
    finally:
        verigrad.set_backend("cpu")
    assert _race([lambda: verigrad.get_backend().name], backend=None) == ["cpu"]


LOAD_RACE = """
import threading
from verigrad.backends import cpu
barrier = threading.Barrier(4)
seen = []
def ask():
    barrier.wait()
    seen.append(cpu.available())
threads = [threading.Thread(target=ask) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(seen)
"""


@needs_cc
def test_threads_asking_for_the_cpu_backend_while_it_loads_wait_for_it():
    """In a fresh process, 4 threads ask for the cpu backend at once: one loads its library and registers
    its kernels, the others wait (they were told it was unavailable: 3 in 4, every time)."""
    done = run_python(LOAD_RACE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == str([True] * 4)


def test_module_call_stack_is_per_thread():
    """A ShapeError in a layer names the layer by its path from the outermost module of its own thread,
    while other threads are inside modules of their own."""
    bad = nn.Sequential(nn.Linear(4, 3), nn.Linear(5, 2))
    good = _mlp(2)
    x4 = verigrad.zeros(2, 4)
    x6 = verigrad.zeros(2, 6)

    def fails() -> str:
        with pytest.raises(verigrad.ShapeError) as info:
            bad(x4)
        return str(info.value)

    def runs() -> str:
        for _ in range(20):
            good(x6)
        return "ok"

    message = fails()
    for _ in range(ROUNDS // 4):
        assert _race([fails, runs, fails, runs]) == [message, "ok", message, "ok"]


def test_draws_from_the_default_generator_are_atomic():
    """Threads drawing from the shared default generator at once get the numbers one thread would draw
    (in some order): none twice, none lost."""
    draws = 500
    verigrad.manual_seed(11)
    one = sorted(verigrad.randint(0, 2**62, (1,)).item() for _ in range(THREADS * draws))
    verigrad.manual_seed(11)
    got = _race([lambda: [verigrad.randint(0, 2**62, (1,)).item() for _ in range(draws)]] * THREADS)
    assert sorted(v for part in got for v in part) == one


@needs_cc
def test_the_c_thread_pool_serves_several_python_threads_at_once():
    """Products large enough to split over the pool, from several Python threads at once (vg_call lets
    go of the GIL during a kernel): every result has the bits of one thread's."""
    rng = np.random.default_rng(3)
    pairs = [
        (verigrad.from_numpy(rng.standard_normal((96, 128)).astype(np.float32)),
         verigrad.from_numpy(rng.standard_normal((128, 80)).astype(np.float32)))
        for _ in range(THREADS)
    ]  # fmt: skip
    before = verigrad.get_threads()
    verigrad.set_threads(2)
    try:
        with verigrad.backend(BACKEND):
            expected = [_bits(a @ b) for a, b in pairs]
        for _ in range(ROUNDS // 4):
            got = _race([lambda a=a, b=b: [_bits(a @ b) for _ in range(10)] for a, b in pairs])
            assert got == [[e] * 10 for e in expected]
    finally:
        verigrad.set_threads(before)
