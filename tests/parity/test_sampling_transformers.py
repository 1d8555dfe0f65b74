"""verigrad's sampling rules against transformers' logits processors (repetition penalty, temperature,
top-k, top-p): the same tokens kept, the same probabilities."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verigrad.models.sampling import SamplingOptions, filtered_logits

CASES = [
    SamplingOptions(temperature=1.0, top_k=0, top_p=1.0, repeat_penalty=1.3),
    SamplingOptions(temperature=0.7, top_k=40, top_p=1.0),
    SamplingOptions(temperature=0.8, top_k=0, top_p=0.9),
    SamplingOptions(temperature=1.3, top_k=50, top_p=0.95, repeat_penalty=1.1),
    SamplingOptions(temperature=0.5, top_k=5, top_p=0.5, repeat_penalty=0.8),
]


def transformers_scores(logits: np.ndarray, previous: list[int], o: SamplingOptions) -> np.ndarray:
    from transformers import (
        LogitsProcessorList,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    steps = LogitsProcessorList()
    if o.repeat_penalty != 1.0:
        steps.append(RepetitionPenaltyLogitsProcessor(o.repeat_penalty))
    steps.append(TemperatureLogitsWarper(o.temperature))
    if o.top_k:
        steps.append(TopKLogitsWarper(o.top_k))
    if o.top_p < 1.0:
        steps.append(TopPLogitsWarper(o.top_p))
    ids = torch.tensor([previous], dtype=torch.long)
    return steps(ids, torch.tensor(logits[None], dtype=torch.float64))[0].numpy()


@pytest.mark.parametrize("options", CASES)
def test_filtered_distribution_matches_transformers(options):
    rng = np.random.default_rng(0)
    for _ in range(20):
        logits = rng.normal(0, 3, 1000)
        previous = rng.integers(0, 1000, 30).tolist()
        ours = filtered_logits(logits, previous, options)
        theirs = transformers_scores(logits, previous, options)
        kept = np.isfinite(theirs)
        assert np.array_equal(np.isfinite(ours), kept)
        p, q = np.exp(ours[kept] - ours[kept].max()), np.exp(theirs[kept] - theirs[kept].max())
        np.testing.assert_allclose(p / p.sum(), q / q.sum(), rtol=1e-12)
