"""DistributedSampler against PyTorch's: the same split (padding, drop_last, lengths) without shuffle;
with shuffle the permutation is verigrad's generator's (documented), so only the split is compared."""

from __future__ import annotations

import pytest
import torch.utils.data as tud

from verigrad.utils.data import DistributedSampler


@pytest.mark.parametrize("n", [0, 1, 7, 10, 12])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_split_matches_torch(n, replicas, drop_last):
    for rank in range(replicas):
        kw = {"num_replicas": replicas, "rank": rank, "drop_last": drop_last}
        theirs, ours = tud.DistributedSampler(range(n), **kw), DistributedSampler(range(n), **kw)
        assert len(ours) == len(theirs)
        assert list(DistributedSampler(range(n), shuffle=False, **kw)) == list(
            tud.DistributedSampler(range(n), shuffle=False, **kw)
        )


def test_rank_errors_match_torch():
    for rank in (-1, 3):
        with pytest.raises(ValueError) as theirs:
            tud.DistributedSampler(range(5), num_replicas=3, rank=rank)
        with pytest.raises(ValueError) as ours:
            DistributedSampler(range(5), num_replicas=3, rank=rank)
        assert str(ours.value) == str(theirs.value)
