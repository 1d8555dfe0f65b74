"""Several sequences' decode rows and prompt chunks in one step (`forward_ragged`, the ragged attention):
every run's logits, keys and values are the bits it gets alone (`forward_rows` for a decode row,
`forward_chunk` for a chunk), on every cache storage and model, whatever the runs, their rows and the
padding; and the engine joins prompts' last chunks to its steps with the same tokens."""

from __future__ import annotations

import numpy as np
import pytest
from llama_gguf import SERVED, write_llama_gguf
from llama_random import wide_heads_llama
from test_serve_mixed import CAPACITY, prefilled, same_bits

import verigrad as vg
from verigrad.models.catalog import load_language_model


@pytest.fixture(params=["reference", "cpu"])
def kernels(request):
    """The backend: the references, and the cpu backend's kernels (the ragged attention's C)."""
    with vg.backend(request.param):
        yield request.param


def exact_products():
    """The cpu backend's f32 products exact, for the models of f32 weights: the default f32 GEMM's bits
    depend on the row count (the quantized products' do not), so their rows differ with any batch,
    forward_mixed's too."""
    from verigrad.backends.cpu import matmul as cpu_matmul

    return cpu_matmul.exact_mode()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return load_language_model(write_llama_gguf(tmp_path_factory.mktemp("ragged") / "tiny.gguf", **SERVED))


@pytest.fixture(scope="module")
def wide_heads():
    """A Llama of f32 weights whose heads (32) a q8_0 cache takes."""
    return wide_heads_llama()


def check_ragged(model, runs: list[tuple[int, int, int]], dtype: str, pad: int = 1, seed: int = 0) -> None:
    """runs (row, length, count): the ragged step of all of them against each run alone, bit for bit, and
    each row of the cache after it against the row after its run alone (other rows untouched)."""
    rng = np.random.default_rng(seed)
    rows = max(r for r, _, _ in runs) + 2  # a row that no run names stays as it was
    prompts = [[] for _ in range(rows)]
    for row, length, count in runs:
        prompts[row] = list(map(int, rng.integers(3, model.vocab_size, length + count)))
    before = [p[:length] for p, (_, length, _) in zip([prompts[r] for r, _, _ in runs], runs)]
    held = [[] for _ in range(rows)]
    for (row, _, _), b in zip(runs, before):
        held[row] = b
    held[-1] = list(map(int, rng.integers(3, model.vocab_size, 9)))
    tokens = [prompts[row][length:] for row, length, _ in runs]
    alone_cache = prefilled(model, held, dtype)
    want = []
    for (row, length, count), t in zip(runs, tokens):
        one = prefilled(model, [held[row]], dtype) if length else model.new_cache(1, CAPACITY, dtype=dtype)
        one.length = length
        if count == 1:
            logits = model.forward_rows(np.asarray([t]), one, [length]).numpy()
        else:
            logits = model.forward_chunk(np.asarray([t]), one).numpy()
        want.append(logits)
        for layer in range(len(one.keys)):
            alone_cache.keys[layer][row] = one.keys[layer][0]
            alone_cache.values[layer][row] = one.values[layer][0]
    cache = prefilled(model, held, dtype)
    rows_of, lengths = [r for r, _, _ in runs], [n for _, n, _ in runs]
    got = model.forward_ragged(tokens, cache, rows_of, lengths, pad=pad).numpy()
    assert got.shape == (len(runs), 1, model.vocab_size)
    for s, w in enumerate(want):
        same_bits(got[s : s + 1], w)
    for layer in range(len(cache.keys)):
        same_bits(cache.keys[layer], alone_cache.keys[layer])
        same_bits(cache.values[layer], alone_cache.values[layer])


CASES = [
    [(0, 5, 1), (1, 70, 1), (2, 12, 1), (3, 16, 16)],  # decode rows and a whole block after one
    [(2, 3, 1), (0, 9, 1), (1, 0, 5)],  # rows out of order, a prompt's first (and last) chunk
    [(0, 130, 1), (1, 32, 7), (2, 0, 3), (3, 16, 16)],  # several prompts' chunks, a 256 window
    [(i, i + 1, 1) for i in range(7)] + [(7, 144, 16)],  # 7 + 16 rows: the products' many-row tiles
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("runs", CASES)
def test_a_ragged_step_gives_each_run_the_bits_it_gets_alone(served, runs, dtype, kernels):
    """The served model (quantized weights: the products' kernels for 1 to 23 rows)."""
    check_ragged(served[0], runs, dtype)


@pytest.mark.parametrize("pad", [4, 16])
def test_padding_changes_no_bit(served, pad, kernels):
    check_ragged(served[0], CASES[1], "f32", pad=pad)


@pytest.mark.parametrize("dtype", ["f32", "q8_0"])
@pytest.mark.parametrize("runs", CASES[1::2])
def test_a_ragged_step_on_a_q8_0_cache_gives_each_run_the_bits_it_gets_alone(
    wide_heads, runs, dtype, kernels
):
    with exact_products():
        check_ragged(wide_heads, runs, dtype)


def test_gpt2_ragged_step_gives_each_run_the_bits_it_gets_alone(kernels):
    from verigrad.models.gpt2 import GPT2, GPT2Config

    vg.manual_seed(0)
    model = GPT2(GPT2Config(vocab_size=37, n_positions=CAPACITY, n_embd=24, n_layer=2, n_head=3))
    with exact_products():
        check_ragged(model, CASES[2], "f32")


def test_gemma3_ragged_step_gives_each_run_the_bits_it_gets_alone(kernels):
    """Gemma 3's local and global layers; Gemma 2's soft-capped attention (written in ops) takes none."""
    import dataclasses

    from test_architectures import SMALL, _random_gemma

    from verigrad.models.gemma import GemmaConfig

    flags = {"n_layers": 6, "qk_norm": True, "local_rope_base": 100.0, "context_length": CAPACITY}
    model = _random_gemma(GemmaConfig(**dataclasses.asdict(SMALL) | flags))
    assert model.ragged_steps
    with exact_products():
        check_ragged(model, CASES[0], "f32")
    capped = GemmaConfig(**dataclasses.asdict(SMALL) | {"attn_softcap": 5.0, "context_length": CAPACITY})
    assert not _random_gemma(capped).ragged_steps


def test_forward_ragged_checks_its_arguments(served):
    llama = served[0]
    cache = llama.new_cache(3, 128)
    ok = llama.forward_ragged([[5], [7, 8, 9]], cache, [0, 2], [0, 3])
    assert ok.shape == (2, 1, llama.vocab_size)
    with pytest.raises(ValueError, match="distinct"):
        llama.forward_ragged([[5], [6]], cache, [1, 1], [0, 0])
    with pytest.raises(ValueError, match="distinct"):
        llama.forward_ragged([[5]], cache, [3], [0])
    with pytest.raises(ValueError, match=r"0 \.\.\. 127"):
        llama.forward_ragged([[5, 6]], cache, [0], [127])
    with pytest.raises(ValueError, match="at least one token"):
        llama.forward_ragged([[5], []], cache, [0, 1], [0, 0])


@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"temperature": 0.8, "seed": 3}])
def test_the_engine_joins_last_chunks_to_its_steps_with_the_same_tokens(served, sampling, kernels):
    """Prompts arriving while others decode, short (one last chunk) and long: with `join_last` their last
    chunks join the ragged step too (their first token from the step's logits), padded or not, and every
    request's tokens and log-probabilities are the bits it gets alone, with whole blocks alone joined
    (the default) and with every chunk run alone."""
    from test_serve_engine import run, summary

    from verigrad.serve.engine import Engine, Request

    rng = np.random.default_rng(5)
    requests = [
        Request(list(map(int, rng.integers(3, 260, n))), 6 + i, logprobs=2, **sampling)
        for i, n in enumerate([3, 90, 5, 41, 12, 70, 2])
    ]
    ways = {
        "ragged": {"join_last": True},
        "ragged, padded": {"join_last": True, "ragged_pad": 8},
        "blocks": {},
        "apart": {"join_chunks": False},
    }
    got, joined = {}, {}
    for way, flags in ways.items():
        e = Engine(*served, max_batch=4, capacity=CAPACITY, prefix_blocks=0, prefill_tokens=16, **flags)
        e.start()
        try:
            got[way] = [summary(events) for events in run(e, requests)]
            joined[way] = e.joined_chunks_total
            if way == "ragged":
                assert e.join_last and e.ragged
                alone = [summary(run(e, [r])[0]) for r in requests]
                assert got[way] == alone
        finally:
            e.close()
    assert got["ragged"] == got["ragged, padded"] == got["blocks"] == got["apart"]
    assert joined["ragged"] > joined["blocks"] > joined["apart"] == 0  # the last chunks joined too
