"""A prompt chunk joined to a batched decode step (`forward_mixed`, the engine's `join_chunks`): every row's
logits, keys and values are the bits it gets alone (`forward_rows` for the running rows, `forward_chunk`
for the chunk), on every cache storage, whatever the rows' lengths and the chunk's length and position."""

from __future__ import annotations

import numpy as np
import pytest
from llama_gguf import SERVED, write_llama_gguf
from llama_random import wide_heads_llama

import verigrad as vg
from verigrad.models.catalog import load_language_model

CAPACITY = 256


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The served tiny Llama (quantized weights) and its tokenizer."""
    return load_language_model(write_llama_gguf(tmp_path_factory.mktemp("mixed") / "tiny.gguf", **SERVED))


@pytest.fixture(scope="module")
def llama(served):
    return served[0]


@pytest.fixture(scope="module")
def wide_heads():
    """A Llama of f32 weights whose heads (32) a q8_0 cache takes."""
    return wide_heads_llama()


def prefilled(model, prompts: list[list[int]], dtype: str):
    """A cache of len(prompts) rows, row i holding prompt i run alone in chunks of 16 (the engine's)."""
    big = model.new_cache(len(prompts), CAPACITY, dtype=dtype)
    for i, p in enumerate(prompts):
        one = model.new_cache(1, CAPACITY, dtype=dtype)
        for at in range(0, len(p), 16):
            model.forward_chunk(np.asarray([p[at : at + 16]]), one)
        for layer, (k, v) in enumerate(zip(big.keys, big.values)):
            k[i], v[i] = one.keys[layer][0], one.values[layer][0]
    return big


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def check_joined(model, lengths: list[int], at: int, count: int, dtype: str, seed: int = 0) -> None:
    """Rows at `lengths` decode one token each while a prompt's chunk of `count` tokens runs at position
    `at` of the next row: the joined step against each part run alone, bit for bit."""
    rng = np.random.default_rng(seed)
    vocab = model.vocab_size
    prompts = [list(map(int, rng.integers(3, vocab, n))) for n in [*lengths, at + count]]
    nexts = np.asarray([[int(t)] for t in rng.integers(3, vocab, len(lengths))])
    chunk = np.asarray([prompts[-1][at:]])
    alone = prefilled(model, prompts[:-1], dtype)
    rows = model.forward_rows(nexts, alone, lengths).numpy()
    row = prefilled(model, [prompts[-1][:at]], dtype) if at else model.new_cache(1, CAPACITY, dtype=dtype)
    row.length = at
    last = model.forward_chunk(chunk, row).numpy()
    joined = prefilled(model, [*prompts[:-1], prompts[-1][:at]], dtype)
    got = model.forward_mixed(nexts, chunk, joined, lengths, at).numpy()
    assert got.shape == (len(lengths) + 1, 1, vocab)
    same_bits(got[:-1], rows)
    same_bits(got[-1:], last)
    for layer in range(len(joined.keys)):
        for stored, rows_alone, row_alone in (
            (joined.keys[layer], alone.keys[layer], row.keys[layer]),
            (joined.values[layer], alone.values[layer], row.values[layer]),
        ):
            same_bits(stored[:-1], rows_alone)  # each row's new key at its own position, nothing else
            same_bits(stored[-1:], row_alone)


CASES = [
    ([5, 70, 12], 16, 16),  # a whole block after one, beside rows of two window widths
    ([3, 9], 0, 5),  # a prompt's first (and last) chunk
    ([130], 32, 7),  # the rows' window (256) wider than the chunk's own (64)
    ([1, 2, 3, 4, 5, 6, 7], 144, 16),  # 7 + 16 rows: the products' many-row tiles
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize(("lengths", "at", "count"), CASES)
def test_a_chunk_joined_to_decode_rows_gives_the_bits_each_gets_alone(llama, lengths, at, count, dtype):
    """The served model (quantized weights: the products' kernels for 1 to 23 rows)."""
    check_joined(llama, lengths, at, count, dtype)


@pytest.mark.parametrize("dtype", ["f32", "q8_0"])
@pytest.mark.parametrize(("lengths", "at", "count"), CASES[::3])
def test_a_joined_chunk_on_a_q8_0_cache_gives_the_bits_each_gets_alone(wide_heads, lengths, at, count, dtype):
    check_joined(wide_heads, lengths, at, count, dtype)


def test_gpt2_joined_chunk_gives_the_bits_each_gets_alone():
    from verigrad.models.gpt2 import GPT2, GPT2Config

    vg.manual_seed(0)
    model = GPT2(GPT2Config(vocab_size=37, n_positions=CAPACITY, n_embd=24, n_layer=2, n_head=3))
    check_joined(model, [4, 20], 16, 9, "f32")


@pytest.mark.parametrize(
    "flags",
    [{"attn_softcap": 5.0, "final_softcap": 3.0}, {"n_layers": 6, "qk_norm": True, "local_rope_base": 100.0}],
    ids=["gemma2", "gemma3"],
)
def test_gemma_joined_chunk_gives_the_bits_each_gets_alone(flags):
    """Gemma 2's soft-capped attention (written in ops) and Gemma 3's local layers split by sequence."""
    import dataclasses

    from test_architectures import SMALL, _random_gemma

    from verigrad.models.gemma import GemmaConfig

    model = _random_gemma(GemmaConfig(**dataclasses.asdict(SMALL) | {"context_length": CAPACITY} | flags))
    check_joined(model, [4, 20, 9], 16, 11, "f32")


def test_forward_mixed_checks_its_arguments(llama):
    cache = llama.new_cache(3, 128)
    ok = llama.forward_mixed(np.asarray([[5], [6]]), np.asarray([[7, 8, 9]]), cache, [0, 3], 0)
    assert ok.shape == (3, 1, llama.vocab_size)
    with pytest.raises(ValueError, match="B = len"):  # no row left for the chunk
        llama.forward_mixed(np.asarray([[5], [6], [7]]), np.asarray([[8]]), cache, [0, 1, 2], 0)
    with pytest.raises(ValueError, match=r"0 \.\.\. 127"):
        llama.forward_mixed(np.asarray([[5]]), np.asarray([[7, 8]]), cache, [1], 127)
    with pytest.raises(ValueError, match=r"\[1, T\]"):
        llama.forward_mixed(np.asarray([[5]]), np.asarray([[7], [8]]), cache, [1], 0)


@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"temperature": 0.8, "seed": 3}])
def test_the_engine_joins_prompt_chunks_to_its_steps_with_the_same_tokens(served, sampling, monkeypatch):
    """Long prompts arriving while others decode: with `join_chunks` their whole blocks run in the decode
    steps (one a step: `prefill_tokens` 16; `forward_mixed`: a model without ragged steps), and every
    request's tokens and log-probabilities are the bits it gets alone and with every chunk run alone."""
    from test_serve_engine import run, summary

    from verigrad.serve.engine import Engine, Request

    rng = np.random.default_rng(5)
    requests = [
        Request(list(map(int, rng.integers(3, 260, n))), 6 + i, logprobs=2, **sampling)
        for i, n in enumerate([3, 90, 70, 41, 120])
    ]
    monkeypatch.setattr(served[0], "ragged_steps", False)
    got = {}
    for join in (True, False):
        e = Engine(*served, max_batch=4, capacity=CAPACITY, prefix_blocks=0, prefill_tokens=16,
                   join_chunks=join).start()  # fmt: skip
        try:
            got[join] = [summary(events) for events in run(e, requests)]
            alone = [summary(run(e, [r])[0]) for r in requests] if join else None
            assert (e.joined_chunks_total > 0) == join
        finally:
            e.close()
        if alone is not None:
            assert got[join] == alone
    assert got[True] == got[False]


@pytest.mark.parametrize("forward", ["forward_mixed", "forward_ragged"])
def test_a_joined_step_that_fails_ends_its_rows_and_its_prompt_with_an_error(served, monkeypatch, forward):
    """An exception in a joined step (`forward_mixed`, or `forward_ragged` where last chunks join): the
    running request and the prompt whose chunk it ran get an error event (its row cleared), and the engine
    serves the next request with the bits it gets alone."""
    from test_serve_engine import run, summary

    from verigrad.serve.engine import Engine, Request

    model = served[0]
    join_last = forward == "forward_ragged"
    if not join_last:  # a model without ragged steps joins through forward_mixed
        monkeypatch.setattr(model, "ragged_steps", False)
    e = Engine(
        *served, max_batch=4, capacity=CAPACITY, prefix_blocks=0, prefill_tokens=16, join_last=join_last
    ).start()
    try:
        after = Request([5, 6, 7], 4, temperature=0.0, logprobs=1)
        alone = summary(run(e, [after])[0])

        def broken(*args, **kwargs):
            raise RuntimeError("planted")

        monkeypatch.setattr(model, forward, broken)
        running, long = Request([8, 9], 30, temperature=0.0), Request(list(range(3, 60)), 3, temperature=0.0)
        got = run(e, [running, long])
        assert [events[-1].finish_reason for events in got] == ["error", "error"]
        assert "planted" in got[1][-1].error and not [t for ev in got[1] for t in ev.tokens]
        assert e.running == 0 and not any(a.any() for a in e.cache.cache.keys)
        monkeypatch.undo()
        assert summary(run(e, [after])[0]) == alone
    finally:
        e.close()
