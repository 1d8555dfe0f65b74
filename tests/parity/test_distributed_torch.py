"""torch.distributed's behaviour without a process group, against verigrad.distributed's."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as tdist

import verigrad
import verigrad.distributed as vdist


@pytest.mark.parametrize(
    "call",
    [
        lambda d, lib: d.get_rank(),
        lambda d, lib: d.get_world_size(),
        lambda d, lib: d.barrier(),
        lambda d, lib: d.all_reduce(lib.ones(2)),
        lambda d, lib: d.broadcast(lib.ones(2), src=0),
    ],
)
def test_uninitialized_group_raises_torchs_error(call):
    with pytest.raises(ValueError) as theirs:
        call(tdist, torch)
    with pytest.raises(ValueError) as ours:
        call(vdist, verigrad)
    assert str(theirs.value) in str(ours.value)
    assert tdist.is_initialized() == vdist.is_initialized() is False
    assert tdist.is_available() and vdist.is_available()


def test_reduce_op_names_are_torchs():
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
        assert hasattr(tdist.ReduceOp, name) and hasattr(vdist.ReduceOp, name)
