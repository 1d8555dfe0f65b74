"""verigrad.multiprocessing (torch.multiprocessing): Python's multiprocessing under PyTorch's name, spawn
running fn(i, *args) in each process and raising a process's error in the parent, the sharing strategies."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

import verigrad
import verigrad.multiprocessing as mp


def _square_into(i: int, queue, scale: float) -> None:
    queue.put((i, (verigrad.arange(3, dtype=verigrad.float64) * (i + scale)).numpy()))


def _fail(i: int) -> None:
    if i == 1:
        raise ValueError("process one fails")


def test_is_pythons_multiprocessing_under_torchs_name():
    assert mp.Queue is not None and mp.Process is multiprocessing.Process
    assert set(multiprocessing.__all__) <= set(mp.__all__) and "spawn" in mp.__all__


@pytest.mark.parametrize("join", [True, False])
def test_spawn_runs_fn_with_its_index_and_tensors_travel_by_value(join):
    context = multiprocessing.get_context("fork")
    queue = context.SimpleQueue()
    started = mp.spawn(_square_into, args=(queue, 0.5), nprocs=2, join=join, start_method="fork")
    if not join:
        assert len(started.pids()) == 2
        while not started.join():
            pass
    else:
        assert started is None
    got = dict(queue.get() for _ in range(2))
    for i in (0, 1):
        np.testing.assert_array_equal(got[i], np.arange(3) * (i + 0.5))


def test_spawn_raises_a_process_error_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException, match="process one fails") as info:
        mp.spawn(_fail, nprocs=2, start_method="fork")
    assert info.value.error_index == 1 and "Traceback" in info.value.msg


def test_sharing_strategies():
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    mp.set_sharing_strategy("file_system")
    try:
        assert mp.get_sharing_strategy() == "file_system"
    finally:
        mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError, match="not one of"):
        mp.set_sharing_strategy("shared")
