"""verigrad.profiler against torch.profiler: the schedule's actions, the steps on_trace_ready is called at,
the table's layout; and what it records: every op call on the profiling thread with its count, ranges whose
own time is their total less their children's, input shapes, the Chrome trace; results unchanged."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
import torch.profiler

import verigrad
from verigrad import modes, profiler


@pytest.mark.parametrize(
    "kwargs",
    [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=0, active=1, repeat=3),
     dict(wait=2, warmup=1, active=3, repeat=2, skip_first=3),
     dict(wait=1, warmup=0, active=2, skip_first_wait=1)],
)  # fmt: skip
def test_schedule_is_torchs(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's: no warmup skews the results
        ours, theirs = profiler.schedule(**kwargs), torch.profiler.schedule(**kwargs)
    assert [ours(i).name for i in range(30)] == [theirs(i).name for i in range(30)]


def _saved_steps(lib, profile_module) -> list[int]:
    saved = []
    x = lib.ones(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile_module.profile(
            schedule=profile_module.schedule(wait=1, warmup=1, active=2, repeat=2),
            on_trace_ready=lambda p: saved.append(p.step_num),
        ) as prof:
            for _ in range(9):
                (x * 2).sum()
                prof.step()
    return saved


def test_on_trace_ready_is_called_at_torchs_steps():
    assert _saved_steps(verigrad, profiler) == _saved_steps(torch, torch.profiler) == [4, 8]


def test_table_has_torchs_columns():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.profiler.profile() as theirs:
            torch.ones(3).exp()
    with profiler.profile() as ours:
        verigrad.ones(3).exp()
    words = lambda table: table.splitlines()[1].split()
    assert words(ours.key_averages().table()) == words(theirs.key_averages().table())
    assert ours.key_averages().table().splitlines()[-1].startswith("Self CPU time total: ")


def test_records_ops_ranges_and_self_times():
    rng = np.random.default_rng(0)
    w = verigrad.from_numpy(rng.standard_normal((8, 8))).requires_grad_(True)
    x = verigrad.from_numpy(rng.standard_normal((4, 8)))
    with profiler.profile(record_shapes=True) as prof:
        with profiler.record_function("forward"):
            loss = (x @ w @ w @ w).tanh().sum()
        loss.backward()
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["matmul"].count >= 3 and averages["tanh"].count == 1 and averages["forward"].count == 1
    forward = averages["forward"]
    ranged = next(e for e in prof.events() if e.name == "forward")
    children = [
        e for e in prof.events() if e is not ranged and ranged.start_us <= e.start_us <= ranged.end_us
    ]
    assert children
    # the range's own time is its total less its direct children's (nested ops are their parents')
    top = [e for e in children if not any(o is not e and o.start_us <= e.start_us and e.end_us <= o.end_us
                                          for o in children)]  # fmt: skip
    assert forward.self_cpu_time_total == pytest.approx(
        forward.cpu_time_total - sum(e.cpu_time_total for e in top)
    )
    assert 0 < forward.self_cpu_time_total < forward.cpu_time_total
    shapes = {str(e.input_shapes) for e in prof.key_averages(group_by_input_shape=True) if e.key == "matmul"}
    assert "[[4, 8], [8, 8]]" in shapes
    assert w.grad is not None and "tanh_deriv" in averages  # backward's ops are recorded too


def test_results_unchanged_and_mode_stack_restored(tmp_path):
    rng = np.random.default_rng(1)
    a = verigrad.from_numpy(rng.standard_normal((5, 7)).astype(np.float32))
    expected = (a.exp() @ a.T).softmax(-1).numpy()
    stack = list(modes.LOCAL.stack)
    with profiler.profile() as prof:
        got = (a.exp() @ a.T).softmax(-1).numpy()
    assert modes.LOCAL.stack == stack
    np.testing.assert_array_equal(got, expected)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert {"exp", "matmul"} <= {e["name"] for e in trace} and all(e["ph"] == "X" for e in trace)
    handler = profiler.tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w")
    handler(prof)
    assert [
        p.name.startswith("w.") and p.name.endswith(".pt.trace.json") for p in (tmp_path / "tb").iterdir()
    ] == [True]


def test_record_function_decorator_and_outside_a_profile():
    @profiler.record_function("step")
    def step(x):
        return (x * 3).sum()

    assert step(verigrad.ones(2)).item() == 6.0  # no profile: nothing recorded, nothing refused
    with profiler.profile() as prof:
        step(verigrad.ones(2))
        step(verigrad.ones(2))
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["step"].count == 2 and averages["mul"].count == 2
    with pytest.raises(AttributeError, match="sort_by"):
        prof.key_averages().table(sort_by="no_such_column")
    assert prof.key_averages().table(sort_by="cuda_time_total")  # as on PyTorch without a GPU: zeros


def test_import_verigrad_profiler_as_torch_profiler():
    assert verigrad.profiler is profiler
    assert profiler.ProfilerActivity.CPU in profiler.supported_activities()
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.CUDA]) as prof:
        verigrad.ones(2).sum()
    assert "sum" in {e.key for e in prof.key_averages()}


def test_autograd_profiler_is_the_older_spelling():
    from verigrad.autograd.profiler import record_function

    x = verigrad.ones(3, 3)
    with verigrad.autograd.profiler.profile(record_shapes=True) as prof, record_function("block"):
        (x @ x).sum()
    assert {"block", "matmul", "sum"} <= {e.key for e in prof.key_averages()}
    with verigrad.autograd.profiler.profile(enabled=False) as idle:
        x.exp()
    assert len(idle.events()) == 0
    with pytest.raises(AttributeError, match="no 'emit_nvtx'"):
        verigrad.autograd.profiler.emit_nvtx  # noqa: B018
