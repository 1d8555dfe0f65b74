"""The serving engine without HTTP: continuous batching on a tiny random Llama GGUF. A request's tokens and
log-probabilities are the same bits alone and in any batch (greedy and seeded), with prefix-cache hits or
without; stop strings, max_tokens, cancel, the queue limit and OpenAI's penalties."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from llama_gguf import SERVED, write_llama_gguf

from verigrad.models.catalog import load_language_model
from verigrad.models.sampling import log_probabilities, penalized
from verigrad.serve.engine import Engine, Event, QueueFull, Request


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return load_language_model(write_llama_gguf(tmp_path_factory.mktemp("serve") / "tiny.gguf", **SERVED))


@pytest.fixture
def engine(lm):
    e = Engine(*lm, max_batch=8, capacity=256, block=16).start()
    yield e
    e.close()


def run(engine: Engine, requests: list[Request], timeout: float = 60) -> list[list[Event]]:
    """Submit all at once; every request's events, in order, once all finished."""
    events: list[list[Event]] = [[] for _ in requests]
    left, done = [len(requests)], threading.Event()
    lock = threading.Lock()

    def receiver(i):
        def on_event(e: Event) -> None:
            events[i].append(e)
            if e.finish_reason:
                with lock:
                    left[0] -= 1
                    if not left[0]:
                        done.set()

        return on_event

    for i, r in enumerate(requests):
        engine.submit(r, receiver(i))
    assert done.wait(timeout), "the requests did not finish"
    return events


def summary(events: list[Event]) -> tuple:
    """(token ids, log-probabilities with alternatives, text, finish reason)."""
    return (
        [t for e in events for t in e.tokens],
        [lp for e in events for lp in e.logprobs],
        "".join(e.text for e in events),
        events[-1].finish_reason,
    )


def prompts(count: int, seed: int = 1) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [list(map(int, rng.integers(3, 260, n))) for n in rng.integers(1, 90, count)]


@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"temperature": 0.9, "top_p": 0.9, "seed": 7}])
def test_a_request_gets_the_same_bits_alone_and_in_any_batch(engine, sampling):
    mine = Request(prompts(1, seed=5)[0], 12, logprobs=3, **sampling)
    alone = summary(run(engine, [mine])[0])
    assert len(alone[0]) == 12 and alone[3] == "length"
    assert all(isinstance(lp.logprob, float) and len(lp.top) == 3 for lp in alone[1])
    for others in (1, 3, 8):  # 8 others: the batch is full, some wait and join later
        neighbours = [
            Request(p, 5 + 3 * i, temperature=0.5 * (i % 3), seed=i, logprobs=1)
            for i, p in enumerate(prompts(others, seed=others))
        ]
        for at in (0, others // 2, others):
            got = run(engine, [*neighbours[:at], mine, *neighbours[at:]])[at]
            assert summary(got) == alone  # the log-probabilities compared as floats: the same bits
    assert engine.running == 0


def test_batched_rows_give_the_logits_each_sequence_gets_alone(lm):
    """CachedStep.rows on a cache of B rows at different lengths: row i's logits, bit for bit, are those
    of sequence i decoded alone (the path `generate` takes)."""
    ps = prompts(5, seed=3)
    big = rows_against_alone(lm[0], ps)
    for i, p in enumerate(ps):
        assert np.any(big.keys[0][i, :, len(p)] != 0)  # the new key went to the row's own position


def rows_against_alone(model, ps: list[list[int]]):
    """Each prompt run alone and its greedy token decoded alone; then forward_rows of those tokens on a
    cache of B rows holding the prompts: row i's logits must be sequence i's, bit for bit. The cache."""
    alone, nexts = [], []
    for p in ps:
        cache = model.new_cache(1, 256)
        token = int(np.argmax(model.last_logits(np.asarray([p]), cache)[0]))
        alone.append(model.last_logits(np.asarray([[token]]), cache)[0])
        nexts.append(token)
    big = model.new_cache(len(ps), 256)
    for i, p in enumerate(ps):
        one = model.new_cache(1, 256)
        model.last_logits(np.asarray([p]), one)
        for layer, (k, v) in enumerate(zip(big.keys, big.values)):
            k[i], v[i] = one.keys[layer][0], one.values[layer][0]
    rows = model.forward_rows(np.asarray([[t] for t in nexts]), big, [len(p) for p in ps]).numpy()
    for i, want in enumerate(alone):
        np.testing.assert_array_equal(rows[i, 0].view(np.uint32), want.view(np.uint32))
    return big


def same_chunks(model, dtype: str, vocab: int) -> None:
    """forward_chunk against the eager forward with last_only, chunk after chunk of every length: the
    same logits and cache, bit for bit."""
    ids = list(map(int, np.random.default_rng(11).integers(3, vocab, 83)))
    compiled, eager = (model.new_cache(1, 128, dtype=dtype) for _ in range(2))
    at = 0
    for t in (16, 5, 1, 16, 2, 11, 16, 16):
        chunk = np.asarray([ids[at : at + t]])
        got = model.forward_chunk(chunk, compiled).numpy()
        want = model.forward(chunk, eager, last_only=True).numpy()
        assert got.shape == want.shape == (1, 1, model.vocab_size)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        at += t
        assert compiled.length == eager.length == at
    for a, b in zip(compiled.keys + compiled.values, eager.keys + eager.values):
        np.testing.assert_array_equal(a[:, :, :at], b[:, :, :at])
        assert not np.any(a[:, :, at:])


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_compiled_prompt_chunk_gives_the_eager_forwards_logits_keys_and_values(lm, dtype):
    """forward_chunk: the engine's prompt chunks, one plan for any chunk length."""
    same_chunks(lm[0], dtype, 260)


def test_gpt2_compiled_prompt_chunks_give_the_eager_forwards_bits():
    import verigrad as vg
    from verigrad.models.gpt2 import GPT2, GPT2Config

    vg.manual_seed(0)
    same_chunks(GPT2(GPT2Config(vocab_size=37, n_positions=128, n_embd=24, n_layer=2, n_head=3)), "f32", 37)


def test_a_shared_prefix_is_copied_from_the_prefix_cache_with_the_same_result(engine):
    base = prompts(1, seed=9)[0] * 3  # > 2 blocks of 16
    first = run(engine, [Request(base[:50], 6, temperature=0.0)])[0]
    assert first[-1].cached_tokens == 0
    cold = Engine(engine.model, engine.tokenizer, capacity=256, block=16, prefix_blocks=0).start()
    try:
        fresh = summary(run(cold, [Request(base[:60], 6, temperature=0.0, logprobs=2)])[0])
    finally:
        cold.close()
    warm = run(engine, [Request(base[:60], 6, temperature=0.0, logprobs=2)])[0]
    assert warm[-1].cached_tokens == 48  # whole blocks of the 50 tokens the first prompt ran
    assert summary(warm) == fresh
    # a prompt of exactly 3 blocks recomputes its last block (its logits give the first token)
    assert run(engine, [Request(base[:48], 2, temperature=0.0)])[0][-1].cached_tokens == 32


def test_by_default_prompts_sharing_a_system_prompt_share_its_blocks(lm):
    """The default engine's blocks are 16 tokens (a chat template's system prompt is shorter than 64): a
    second prompt starting with the first's 20 tokens copies their first block and gets the tokens a cold
    engine computes; between two decode steps several chunks run (64 tokens)."""
    system = list(map(int, np.random.default_rng(21).integers(3, 260, 20)))
    first, second = [*system, 7, 8, 9, 10], [*system, 11, 12, 13]
    e = Engine(*lm, max_batch=4, capacity=256).start()
    cold = Engine(*lm, max_batch=4, capacity=256, prefix_blocks=0).start()
    try:
        assert (e.block, e.prefill_tokens, e.prefix.max_blocks * e.block) == (16, 64, 16384)
        assert run(e, [Request(first, 4, temperature=0.0)])[0][-1].cached_tokens == 0
        warm = run(e, [Request(second, 6, temperature=0.0, logprobs=2)])[0]
        fresh = run(cold, [Request(second, 6, temperature=0.0, logprobs=2)])[0]
    finally:
        e.close()
        cold.close()
    assert warm[-1].cached_tokens == 16 and fresh[-1].cached_tokens == 0
    assert summary(warm) == summary(fresh)


def test_a_long_prompt_is_prefilled_between_decode_steps_with_the_same_result(lm):
    """A prompt of 7 chunks, prefilled a block between two decode steps: the running sequences keep
    getting tokens meanwhile (one of them ends, so the prompt's half-filled row moves down one), and the
    prompt's tokens and log-probabilities are the bits it gets alone (its chunks are the same)."""
    e = Engine(*lm, max_batch=4, capacity=256, block=16, prefix_blocks=0, prefill_tokens=16).start()
    try:
        ids = np.random.default_rng(13).integers(3, 260, 100)
        long = Request(list(map(int, ids)), 8, temperature=0.0, logprobs=2)  # 6 blocks and 4 tokens
        alone = summary(run(e, [long])[0])
        order: list[str] = []
        started = [threading.Event(), threading.Event()]
        done = threading.Event()

        def receiver(name: str, i: int | None = None):
            def on_event(ev: Event) -> None:
                order.append(name)
                if i is not None:
                    started[i].set()
                if name == "long" and ev.finish_reason:
                    done.set()

            return on_event

        events: list[Event] = []
        e.submit(Request([5, 6, 7], 4, temperature=0.0), receiver("short", 0))  # ends during the prefill
        e.submit(Request([8, 9], 40, temperature=0.0), receiver("running", 1))
        assert all(s.wait(30) for s in started)
        e.submit(long, lambda ev: (events.append(ev), receiver("long")(ev)))
        assert done.wait(60)
        first = order.index("long")
        assert order[:first].count("running") >= 6  # a token a chunk (7 chunks), not 0 or 1
        assert "short" in order[order.index("running") : first]
        assert summary(events) == alone
    finally:
        e.close()


def test_a_nan_a_sequence_left_in_its_row_does_not_reach_the_next_one(lm):
    """A sequence whose keys became NaN (written here into its row while it runs) leaves: the next
    sequence in that row, batched with a longer one whose window covers those positions, gets the bits it
    gets alone (the row is zero past its sequence; a NaN at a hidden position would count)."""
    e = Engine(*lm, max_batch=4, capacity=256, block=16, prefix_blocks=0).start()
    try:
        short = Request([5, 6, 7, 8, 9], 10, temperature=0.0, logprobs=2)
        alone = summary(run(e, [short])[0])
        seen, poisoned, done = [], [], threading.Event()

        def poison(ev: Event) -> None:  # on the engine's thread, between two steps
            seen.extend(ev.tokens)
            if len(seen) == 12 and not ev.finish_reason:  # it holds positions 0 .. 50 of row 0
                for a in e.cache.cache.keys:
                    a[0, :, 45:50] = np.nan
                poisoned.append(True)
            if ev.finish_reason:
                done.set()

        e.submit(Request(list(range(3, 43)), 20, temperature=0.0), poison)
        assert done.wait(60) and poisoned  # it was poisoned, and has left row 0
        long = Request(list(map(int, np.random.default_rng(2).integers(3, 260, 60))), 12, temperature=0.0)
        got = run(e, [short, long])[0]  # short in row 0, at 5 .. 15 positions in a window of 64 or 128
        assert summary(got) == alone
    finally:
        e.close()


def test_a_prompt_cancelled_or_closed_while_prefilled_is_answered(lm):
    """Cancelled between two of its chunks, a prompt gets "cancelled" and the engine keeps serving; a
    prompt being prefilled when the engine closes is answered too."""
    e = Engine(*lm, max_batch=4, capacity=256, block=16, prefix_blocks=0, prefill_tokens=16).start()
    long = list(map(int, np.random.default_rng(3).integers(3, 260, 200)))
    try:
        got: list[Event] = []
        handle = e.submit(Request(long, 4, temperature=0.0), got.append)
        e.cancel(handle)
        after = summary(run(e, [Request([5, 6, 7], 3, temperature=0.0)])[0])
        assert got[-1].finish_reason == "cancelled" and not [t for ev in got for t in ev.tokens]
        assert after[3] == "length" and len(after[0]) == 3
        e.submit(Request([8, 9], 200, temperature=0.0), lambda ev: None)
        e.submit(Request(long, 4, temperature=0.0), got.append)
    finally:
        e.close()
    assert got[-1].finish_reason == "cancelled" and got[-1].prompt_tokens == 200


def test_stop_strings_end_the_text_before_them(engine):
    p = prompts(1, seed=11)[0]
    full = "".join(e.text for e in run(engine, [Request(p, 30, temperature=0.0)])[0])
    stop = full[10:13]
    events = run(engine, [Request(p, 30, temperature=0.0, stop=("zzzz-not-there", stop))])[0]
    text = "".join(e.text for e in events)
    assert text == full[: full.index(stop)] and events[-1].finish_reason == "stop"
    assert all(stop not in e.text for e in events)


def test_cancel_frees_the_row_and_says_cancelled(engine):
    started, events = threading.Event(), []

    def on_event(e):
        events.append(e)
        started.set()

    handle = engine.submit(Request(prompts(1)[0], 200, temperature=0.0), on_event)
    assert started.wait(30)
    engine.cancel(handle)
    for _ in range(200):
        if events[-1].finish_reason:
            break
        threading.Event().wait(0.05)
    assert events[-1].finish_reason == "cancelled" and engine.running == 0
    assert len([t for e in events for t in e.tokens]) < 200


def test_closing_the_engine_ends_running_and_waiting_requests(lm):
    e = Engine(*lm, max_batch=1, capacity=256).start()
    events: list[Event] = []
    first = threading.Event()

    def on_event(ev):
        events.append(ev)
        first.set()

    for _ in range(3):
        e.submit(Request([5, 6, 7], 200, temperature=0.0), on_event)
    assert first.wait(30)
    e.close()
    assert [ev.finish_reason for ev in events if ev.finish_reason] == ["cancelled"] * 3


def test_the_queue_limit_and_prompts_past_the_context_are_refused(lm):
    e = Engine(*lm, max_batch=1, max_queue=2, capacity=64)  # not started: nothing leaves the queue
    for _ in range(2):
        e.submit(Request([5, 6], 3), lambda ev: None)
    with pytest.raises(QueueFull, match="2 requests are waiting"):
        e.submit(Request([5, 6], 3), lambda ev: None)
    with pytest.raises(ValueError, match="64 positions"):
        e.submit(Request(list(range(3, 67)), 3), lambda ev: None)
    with pytest.raises(ValueError, match="max_tokens"):
        Request([5], 0)


def test_openai_penalties_and_log_probabilities():
    logits = np.array([1.0, 2.0, 3.0, -1.0], np.float32)
    got = penalized(logits, {2: 3, 3: 1}, presence=0.5, frequency=0.25)
    np.testing.assert_array_equal(got, [1.0, 2.0, 3.0 - 0.75 - 0.5, -1.0 - 0.25 - 0.5])
    lp = log_probabilities(logits)
    assert abs(np.logaddexp.reduce(lp)) < 1e-12 and np.argmax(lp) == 2


def test_a_frequency_penalty_changes_the_answer_and_seeds_repeat(engine):
    p = prompts(1, seed=4)[0]
    plain = summary(run(engine, [Request(p, 20, temperature=0.0)])[0])[0]
    assert len(set(plain)) < len(plain)  # the tiny model repeats itself
    penal = summary(run(engine, [Request(p, 20, temperature=0.0, frequency_penalty=2.0)])[0])[0]
    assert penal != plain
    a, b, c = (summary(run(engine, [Request(p, 10, seed=s)])[0])[0] for s in (1, 1, 2))
    assert a == b and a != c


def test_forward_rows_checks_its_arguments_and_makes_the_rope_tables_first(tmp_path):
    model, _ = load_language_model(write_llama_gguf(tmp_path / "fresh.gguf", **SERVED))  # no forward run yet
    cache = model.new_cache(2, 128)
    assert model.forward_rows(np.asarray([[5], [6]]), cache, [0, 3]).shape == (2, 1, model.vocab_size)
    with pytest.raises(ValueError, match="B = len"):
        model.forward_rows(np.asarray([[5], [6], [7]]), cache, [0, 1, 2])
    with pytest.raises(ValueError, match=r"0 \.\.\. 127"):
        model.forward_rows(np.asarray([[5]]), cache, [128])


def test_gpt2_batched_rows_give_the_logits_each_sequence_gets_alone():
    import verigrad as vg
    from verigrad.models.gpt2 import GPT2, GPT2Config

    vg.manual_seed(0)
    model = GPT2(GPT2Config(vocab_size=37, n_positions=64, n_embd=24, n_layer=2, n_head=3))
    ps = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10], [11]]
    big = model.new_cache(len(ps), 64)
    alone = []
    for i, p in enumerate(ps):
        one = model.new_cache(1, 64)
        model.last_logits(np.asarray([p]), one)
        for layer in range(2):
            big.keys[layer][i], big.values[layer][i] = one.keys[layer][0], one.values[layer][0]
        alone.append(model.last_logits(np.asarray([[7]]), one)[0])
    rows = model.forward_rows(np.full((3, 1), 7), big, [len(p) for p in ps]).numpy()
    for i, want in enumerate(alone):
        np.testing.assert_array_equal(rows[i, 0].view(np.uint32), want.view(np.uint32))


def test_a_batched_step_runs_one_attention_and_one_product_per_matrix_for_all_rows(lm):
    """The compiled rows step (its program, traced for any B): each layer's attention is one
    ragged_attention over the whole batch (the rows' tokens as one sequence of B tokens, told apart by
    their runs [B, 4]: `Rows`), not a loop over rows, and each quantized product takes the B rows as one
    operand (the kernel's tiles then reuse each de-quantized weight block across the rows)."""
    from verigrad.models._decoder import row_inputs
    from verigrad.ops import from_numpy

    model, _ = lm
    cache = model.new_cache(3, 128)
    lengths = [4, 9, 1]
    model.forward_rows(np.asarray([[5], [6], [7]]), cache, lengths)
    step = model.cached_step.decode_rows["f32"]
    positions, runs, windows = row_inputs(cache, lengths, runs=True)
    assert runs.tolist() == [[0, 0, 1, 4], [1, 1, 1, 9], [2, 2, 1, 1]]
    ids = from_numpy(np.asarray([[5], [6], [7]], np.int64))
    program = step.program(ids, from_numpy(positions), from_numpy(runs), *windows)
    names = [i.name for i in program.instrs]
    layers = len(model.layers)
    assert names.count("ragged_attention") == layers and "cached_attention" not in names
    batch = program.inputs[0].spec.shape[0]  # the batch symbol
    products = [i for i in program.instrs if i.name.startswith(("qmatmul", "rms_norm_qmatmul"))]
    assert len(products) >= 2 * layers
    assert all(i.args[0].spec.shape[0] == batch for i in products)
    attention = [i for i in program.instrs if i.name == "ragged_attention"]
    assert all(i.args[0].spec.shape[2] == batch for i in attention)  # q [1, H, B, hd]


def test_greedy_rows_of_a_step_choose_the_token_sampling_chooses(lm, monkeypatch):
    """The step takes greedy rows' tokens from one argmax over the batch's f32 logits: the same token as
    sampling's (penalized, f64) choice on ties, NaN and a frequency penalty."""
    model, tok = lm
    from verigrad.models.sampling import SamplingOptions, next_token
    from verigrad.serve.engine import Handle, _Sequence

    vocab, ends = model.vocab_size, set(tok.end_ids)
    free = [t for t in range(vocab) if t not in ends]
    logits = np.random.default_rng(0).standard_normal((5, 1, vocab)).astype(np.float32)
    logits[1, 0, [free[9], free[4]]] = 50  # a tie: the first of them
    logits[2, 0, [free[8], free[6]]] = np.nan  # the first NaN
    logits[3, 0, free[5]] = 40  # penalized below the runner-up
    logits[3, 0, free[7]] = 39.5
    logits[4, 0, free[5]] = -0.0  # all the same but one: -0.0 and 0.0 tie
    logits[4, 0, :] = 0.0
    logits[4, 0, free[2]] = -0.0
    engine = Engine(model, tok, max_batch=8, capacity=64)
    got: list[list[int]] = [[] for _ in range(5)]
    for i in range(5):
        penalty = 1.0 if i == 3 else 0.0
        request = Request([1, 2], 4, temperature=0.0, frequency_penalty=penalty)
        s = _Sequence(Handle(i, request, lambda e, i=i: got[i].extend(e.tokens)), tok, 0)
        s.length, s.last = 2, 1
        if i == 3:
            s.counts = {free[5]: 1}
        engine._running.append(s)

    class Logits:
        def numpy(self):
            return logits

    monkeypatch.setattr(model, "forward_rows", lambda ids, cache, lengths: Logits())
    engine._step()
    for i, s in enumerate(engine._running):
        scores = penalized(logits[i, 0], {free[5]: 1} if i == 3 else {}, 0.0, s.request.frequency_penalty)
        want = next_token(scores, (), SamplingOptions(0.0, 0, 1.0), np.random.default_rng(0))
        assert got[i] == [want], i
    assert got[1] == [free[4]] and got[2] == [free[6]] and got[3] == [free[7]]
