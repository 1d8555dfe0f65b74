"""Names device-agnostic programs and data pipelines use that verigrad lacked: torch.cpu / torch.xpu /
torch.mps queries (the same answers as torch's on a machine without a GPU) and utils.data.StackDataset."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import verigrad


def test_device_queries_answer_as_torch_without_a_gpu():
    for lib in (torch, verigrad):
        assert (
            lib.cpu.is_available() is True
            and lib.cpu.device_count() == 1
            and lib.cpu.current_device() == "cpu"
        )
        assert lib.cpu.synchronize() is None
        assert lib.xpu.is_available() is False and lib.xpu.device_count() == 0
        assert lib.mps.device_count() == 0


def _stack(lib, by_name: bool):
    data = lib.utils.data
    xs = data.TensorDataset(lib.from_numpy(np.arange(12.0).reshape(6, 2)))
    ys = list(range(10, 16))
    return data.StackDataset(x=xs, y=ys) if by_name else data.StackDataset(xs, ys)


@pytest.mark.parametrize("by_name", [False, True])
def test_stack_dataset_is_torchs(by_name):
    ours, theirs = _stack(verigrad, by_name), _stack(torch, by_name)
    assert len(ours) == len(theirs) == 6
    item, want = ours[4], theirs[4]
    if by_name:
        assert list(item) == list(want) == ["x", "y"]
        item, want = tuple(item.values()), tuple(want.values())
    np.testing.assert_array_equal(item[0][0].numpy(), want[0][0].numpy())
    assert item[1] == want[1] == 14
    batches = list(verigrad.utils.data.DataLoader(ours, batch_size=4))
    tbatches = list(torch.utils.data.DataLoader(theirs, batch_size=4))
    first, tfirst = (batches[0], tbatches[0]) if not by_name else (batches[0]["y"], tbatches[0]["y"])
    if not by_name:
        first, tfirst = first[1], tfirst[1]
    np.testing.assert_array_equal(first.numpy(), tfirst.numpy())


@pytest.mark.parametrize("lib", [torch, verigrad])
def test_stack_dataset_refusals(lib):
    data = lib.utils.data
    with pytest.raises(ValueError, match="Size mismatch"):
        data.StackDataset([1, 2], [1])
    with pytest.raises(ValueError):
        data.StackDataset([1], y=[2])
    with pytest.raises(ValueError, match="At least one dataset"):
        data.StackDataset()
