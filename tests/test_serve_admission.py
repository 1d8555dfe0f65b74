"""How the engine fills its batch's rows: waiting requests are admitted as soon as a row is free (no step
runs with a row empty while a request waits), several prompts are prefilled at once, their chunks run
as one ragged forward (padded or not), and every request's tokens are the bits it gets alone."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from llama_gguf import SERVED, write_llama_gguf
from test_serve_engine import run, summary

from verigrad.serve.engine import Engine, Event, Request


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from verigrad.models.catalog import load_language_model

    return load_language_model(write_llama_gguf(tmp_path_factory.mktemp("admit") / "tiny.gguf", **SERVED))


class Watched(Engine):
    """An engine that notes, at each step, the rows it runs (decode rows and joined prompt chunks) and
    the requests not yet finished (running, prefilled or waiting)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps: list[tuple[int, int]] = []

    def _step(self) -> None:
        joined = [p for p in self._joins if p in self._prefills]
        left = len(self._running) + len(self._prefills) + self.queue_depth
        self.steps.append((len(self._running) + len(joined), left))
        super()._step()


def requests(lengths: list[int], prompts_seed: int = 4, **sampling) -> list[Request]:
    rng = np.random.default_rng(prompts_seed)
    return [
        Request(list(map(int, rng.integers(3, 260, n))), 3 + 2 * i, logprobs=1, **sampling)
        for i, n in enumerate(lengths)
    ]


@pytest.mark.parametrize("join_last", [False, True])
def test_a_waiting_request_takes_the_row_freed_by_the_step_before(served, join_last):
    """Six requests on two rows: every step runs both rows (a decode row, or a prompt's joined chunk)
    while two or more requests are unfinished: a waiting one is admitted after the step that frees a row
    and its prompt runs before or within the next."""
    e = Watched(*served, max_batch=2, capacity=256, prefix_blocks=0, join_last=join_last).start()
    try:
        got = run(e, requests([5, 9, 3, 20, 7, 12], temperature=0.0))
    finally:
        e.close()
    assert all(events[-1].finish_reason == "length" for events in got)
    assert len(e.steps) > 10
    assert all(busy == min(2, left) for busy, left in e.steps), e.steps


@pytest.mark.parametrize("pad", [1, 8])
@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"temperature": 0.8, "seed": 3}])
def test_waiting_prompts_run_their_chunks_as_one_forward_with_the_same_bits(served, pad, sampling):
    """Prompts that wait together (a long one first: the short ones finish first and take the row after
    the running ones, swapped with its) are prefilled at once, with `batch_prompts` a chunk of each in one
    ragged forward, padded or not; every request's tokens and log-probabilities are the bits it gets
    alone."""
    model = served[0]
    batch = requests([70, 3, 12, 30, 5], prompts_seed=6, **sampling)
    e = Engine(*served, max_batch=8, capacity=256, prefix_blocks=0, prefill_tokens=256, ragged_pad=pad)
    try:
        e.start()
        alone = [summary(run(e, [r])[0]) for r in batch]
    finally:
        e.close()
    calls: list[int] = []
    ragged = model.forward_ragged

    def counted(tokens, *args, **kwargs):
        calls.append(len(tokens))
        return ragged(tokens, *args, **kwargs)

    e = Engine(
        *served,
        max_batch=8,
        capacity=256,
        prefix_blocks=0,
        prefill_tokens=256,
        ragged_pad=pad,
        batch_prompts=True,
    )
    model.forward_ragged = counted
    try:
        got = queued_then_run(e, batch)
    finally:
        del model.forward_ragged
        e.close()
    assert [summary(events) for events in got] == alone
    assert calls and calls[0] == 5  # the five prompts' first chunks, one forward


def queued_then_run(engine: Engine, batch: list[Request], timeout: float = 60) -> list[list[Event]]:
    """Submit every request before the engine's thread starts (they all wait), then run them."""
    events: list[list[Event]] = [[] for _ in batch]
    finished = threading.Semaphore(0)

    def receiver(mine: list[Event]):
        def on_event(event: Event) -> None:
            mine.append(event)
            if event.finish_reason:
                finished.release()

        return on_event

    for r, mine in zip(batch, events):
        engine.submit(r, receiver(mine))
    engine.start()
    assert all(finished.acquire(timeout=timeout) for _ in batch), "the requests did not finish"
    return events


def test_warmed_plans_serve_short_chats_with_the_same_bits(tmp_path):
    """`warm_positions`: the batched steps' and prompt chunks' plans for windows of up to 128 positions
    are built before the first request (none is built while requests of up to 128 positions run), and
    the rows the warm-up wrote are cleared: every request gets the bits it gets without it."""
    from verigrad.models.catalog import load_language_model

    lm = load_language_model(write_llama_gguf(tmp_path / "tiny.gguf", **SERVED))
    batch = requests([40, 3, 17, 60, 9, 33], prompts_seed=8, temperature=0.0)
    cold = Engine(*lm, max_batch=4, capacity=256, prefix_blocks=0, join_chunks=False).start()
    try:
        want = [summary(events) for events in run(cold, batch)]
    finally:
        cold.close()

    def built() -> int:  # (the step is made anew where the RoPE tables grow: read it each time)
        step = lm[0].cached_step
        return sum(c.counts["plans"] for kind in (step.decode_rows, step.chunks) for c in kind.values())

    lm[0].cached_step.drop_plans()
    before = built()
    warm = Engine(*lm, max_batch=4, capacity=256, prefix_blocks=0, join_chunks=False, warm_positions=128)
    try:
        warm.start()
        alone = summary(run(warm, [batch[0]])[0])
        assert not any(a.any() for a in warm.cache.cache.keys + warm.cache.cache.values)  # all cleared
        warmed = built()
        assert warmed - before == 2 * (4 + 15)  # 1 ... 4 rows, chunks of 2 ... 16 tokens; 2 windows
        got = [summary(events) for events in run(warm, batch)]
    finally:
        warm.close()
    assert got == want and alone == want[0]
    assert built() == warmed
