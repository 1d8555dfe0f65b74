"""Which kernel a plan step runs: `where` on a 0-d condition as a select (no copy, never an argument's
or another result's array), an exact kernel of the backend on small operands as the op's ufunc (the
same bits), and the malloc setting that keeps freed pages for the next step."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
from fresh_process import run_python

import verigrad
from verigrad.backends import Backend, cpu, memory
from verigrad.backends.kernel_table import EXACT, ulp
from verigrad.cli.trainer import training_step
from verigrad.ir import trace
from verigrad.ir.passes import optimize
from verigrad.ir.plan import Plan, bind


def _plan(fn, args, backend=None) -> Plan:
    program = optimize(trace(fn, *[a.spec for a in args]))
    plan = Plan(program, bind(program, args), backend or verigrad.get_backend())
    plan.generate_after = 3
    return plan


def _runs(plan: Plan, args, times: int = 4) -> list:
    arrays = [a.payload for a in args] + [t.payload for t in plan.program.captured]
    return [plan.run(arrays)[0] for _ in range(times)]  # checked, loop, loop, generated


def _step_kernels(plan: Plan, name: str) -> list:
    return [s.kernel for s in plan.steps if s.op.name == name]


# where on a 0-d condition ----------------------------------------------------------------------
def _where_args(flag: bool):
    rng = np.random.default_rng(0)
    c = verigrad.tensor(np.array(flag))
    a, b = (verigrad.tensor(rng.standard_normal((3, 4)).astype(np.float32)) for _ in range(2))
    return [c, a, b]


@pytest.mark.parametrize("flag", [True, False])
def test_where_on_a_scalar_condition_selects_a_branch_without_copying(flag):
    args = _where_args(flag)
    plan = _plan(lambda c, a, b: verigrad.where(c, a * 2, b * 3) + 1, args)
    [kernel] = _step_kernels(plan, "where")
    assert kernel.__name__ == "_select"
    a, b = args[1].numpy(), args[2].numpy()
    expected = np.where(flag, a * np.float32(2), b * np.float32(3)) + np.float32(1)
    for (out,) in _runs(plan, args):
        np.testing.assert_array_equal(out, expected, strict=True)


def test_where_that_would_return_an_argument_or_another_result_copies():
    args = _where_args(True)
    on_arguments = _plan(lambda c, a, b: verigrad.where(c, a, b) * 2, args)
    returned = _plan(lambda c, a, b: (verigrad.where(c, a * 2, b * 2), a * 2), args)
    for plan in (on_arguments, returned):
        assert _step_kernels(plan, "where") == [np.where]
    first, second = _runs(returned, args)[-1]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, args[1].numpy() * np.float32(2), strict=True)


def test_where_with_a_condition_of_elements_keeps_np_where():
    rng = np.random.default_rng(1)
    c = verigrad.tensor(rng.random((3, 4)) > 0.5)
    a, b = (verigrad.tensor(rng.standard_normal((3, 4)).astype(np.float32)) for _ in range(2))
    plan = _plan(lambda c, a, b: verigrad.where(c, a * 2, b * 2), [c, a, b])
    assert _step_kernels(plan, "where") == [np.where]


# small operands: the ufunc -----------------------------------------------------------------------
def _backend_with(kernel, below: int, exactness=EXACT) -> Backend:
    fake = Backend("fake-small-ops", "a backend made by a test")
    fake.register("mul", kernel, exactness=exactness)
    fake.ufunc_below = below
    return fake


def _mul_args(n: int, dtype: Any = np.float32):
    x = np.arange(n, dtype=np.float32).reshape(-1, 4) / 7
    if dtype != np.float32:
        x = np.arange(n).reshape(-1, 4).astype(dtype)
    return [verigrad.tensor(x), verigrad.tensor(x[::-1].copy())]


@pytest.mark.parametrize("n, small", [(8, True), (64, False)])
def test_an_exact_kernel_on_operands_under_the_backends_size_runs_as_the_ufunc(n, small):
    calls = []

    def kernel(a, b):
        calls.append(1)
        return np.multiply(a, b)

    args = _mul_args(n, np.int64)
    plan = _plan(lambda a, b: a * b, args, _backend_with(kernel, below=64))
    assert (_step_kernels(plan, "mul") == [np.multiply]) is small
    for (out,) in _runs(plan, args):
        np.testing.assert_array_equal(out, args[0].numpy() * args[1].numpy(), strict=True)
    assert bool(calls) is not small


def test_two_float_operands_keep_the_backends_kernel_however_small():
    """NumPy's loops give NaN + -NaN either sign (its vector and scalar paths differ): a plan runs eager
    mode's kernel, the backend's, on two float operands, for eager's bits."""
    calls = []

    def kernel(a, b, out=None):
        calls.append(1)
        return np.multiply(a, b, out=out)

    args = _mul_args(8)
    plan = _plan(lambda a, b: a * b, args, _backend_with(kernel, below=64))
    assert _step_kernels(plan, "mul") != [np.multiply]
    for (out,) in _runs(plan, args):
        np.testing.assert_array_equal(out, args[0].numpy() * args[1].numpy(), strict=True)
    assert calls


def test_an_inexact_kernel_is_kept_on_small_operands():
    fake = _backend_with(np.multiply, below=1 << 20, exactness=ulp(1))
    args = _mul_args(8)
    plan = _plan(lambda a, b: a * b, args, fake)
    assert _step_kernels(plan, "mul") == [np.multiply]  # the backend's own (a ufunc here), not `fast`
    assert [s.op.name for s in plan.inplace_steps] == []


@pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
def test_cpu_training_step_compiled_gives_eagers_bits_with_small_ops_as_ufuncs():
    from verigrad import nn
    from verigrad.optim import SGD

    rng = np.random.default_rng(0)
    x, y = rng.random((8, 12), dtype=np.float32), rng.integers(0, 3, 8)
    results = []
    for compiled in (False, True):
        verigrad.manual_seed(0)
        with verigrad.backend("cpu"):
            model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
            opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
            loss_fn = nn.CrossEntropyLoss()

            step = training_step(model, opt, loss_fn)

            run = verigrad.compile(step) if compiled else step
            losses = [run(verigrad.tensor(x), verigrad.tensor(y)).numpy() for _ in range(4)]
        results.append((losses, [p.numpy().copy() for p in model.parameters()]))
    (eager_losses, eager_params), (losses, params) = results
    for a, b in zip(eager_losses + eager_params, losses + params):
        np.testing.assert_array_equal(a, b, strict=True)


# reshape that copies: the backend's contiguous kernel ----------------------------------------------
@pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
def test_cpu_reshape_of_a_permuted_view_copies_through_the_contiguous_kernel():
    x = np.random.default_rng(2).standard_normal((4, 3, 2, 2, 5, 5)).astype(np.float32)
    args = [verigrad.tensor(x)]
    with verigrad.backend("cpu"):
        plan = _plan(lambda a: (a.permute(1, 2, 3, 0, 4, 5).reshape(12, 100), a.reshape(4, 300)), args)
    kernels = _step_kernels(plan, "reshape")
    assert [k.__qualname__ for k in kernels] == ["_reshape_copying.<locals>.reshape"] * 2
    for copied, viewed in _runs(plan, args):
        np.testing.assert_array_equal(copied, x.transpose(1, 2, 3, 0, 4, 5).reshape(12, 100), strict=True)
        assert copied.flags.c_contiguous and not np.shares_memory(copied, args[0].payload)
        assert np.shares_memory(viewed, args[0].payload)  # a view, as np.reshape gives


# malloc ------------------------------------------------------------------------------------------
def test_retain_freed_is_set_once_where_glibc_is(monkeypatch):
    assert memory.retain_freed() is memory.retain_freed()
    monkeypatch.setattr(memory, "_done", [False])
    monkeypatch.setenv("VERIGRAD_RETAIN_MEMORY", "0")
    assert memory.retain_freed() is False


HUGE_HEAP_CHECK = """
    import numpy as np
    from verigrad.backends import memory

    def heap_huge_kib():  # AnonHugePages over the heap's mappings
        total, inside = 0, False
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split()[0]
                if "-" in head and not head.endswith(":"):
                    inside = line.rstrip().endswith("[heap]")
                elif inside and head == "AnonHugePages:":
                    total += int(line.split()[1])
        return total

    def address_space():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0])

    memory.retain_freed()
    arrays = [np.ones(1 << 18, np.float32) for _ in range(64)]  # 64 MiB of heap, written
    before, space = heap_huge_kib(), address_space()
    asked = memory.collapse_heap()
    gained = (heap_huge_kib() - before) >> 10
    print(memory.huge_pages(), asked >> 20, gained, address_space() == space, memory.collapse_heap())
"""


def test_the_heap_is_gathered_into_huge_pages_without_more_address_space():
    """`collapse_heap` gathers the heap's pages into huge pages (where the kernel can: Linux 6.1+, THP not
    "never"), the 64 MiB of arrays written there too, which NumPy does not advise itself; the address
    space stays as it was (an address-space limit behaves as without); a second call has nothing new to
    gather; VERIGRAD_HUGE_PAGES=0 leaves the heap alone (fresh processes)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's heap and /proc/self/smaps: Linux only")
    default = run_python(HUGE_HEAP_CHECK, VERIGRAD_HUGE_PAGES=None)
    assert default.returncode == 0, default.stderr
    allowed, asked, gained, same_space, again = default.stdout.split()
    assert same_space == "True" and again == "0"
    if allowed == "True" and int(asked):  # the kernel took it
        assert int(asked) >= 64 and int(gained) >= 48  # (a 2 MiB range at each end may stay apart)
    off = run_python(HUGE_HEAP_CHECK, VERIGRAD_HUGE_PAGES="0")
    assert off.returncode == 0, off.stderr
    assert off.stdout.split()[:3] == ["False", "0", "0"]


def test_a_plan_gathers_the_heap_once_before_its_third_run(monkeypatch):
    """A plan calls `collapse_heap` once, before its COLLAPSE_AT-th run: its checked run and one of its
    loop have grown the heap to what a run holds."""
    import verigrad.ir.plan as plan_module

    calls = []
    monkeypatch.setattr(plan_module, "collapse_heap", lambda: calls.append(1) or 0)
    compiled = verigrad.compile(lambda x: (x * 2.0).exp().sum())
    x = verigrad.tensor(np.arange(6, dtype=np.float32))
    for k in range(1, 7):
        compiled(x)
        assert len(calls) == (k >= memory.COLLAPSE_AT)
