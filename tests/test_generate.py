"""Generation on a table-driven fake model: greedy chains, stop conditions, the prompt in one forward
pass then one token per step, cache reuse, Ctrl-C, and the sampling rules checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from lm_fakes import TableLM, chain_table, token_id, tokenizer

from verigrad.models.lm import generate
from verigrad.models.sampling import SamplingOptions, filtered_logits, next_token

GREEDY = {"temperature": 0.0}


@pytest.fixture
def tok(tmp_path):
    return tokenizer(tmp_path)


def chain_model(tok, chain: dict[int, int], **kwargs) -> TableLM:
    return TableLM(chain_table(tok.vocab_size, chain), **kwargs)


def test_greedy_follows_the_table_and_stops_at_the_end_token(tok):
    hello, world, bang = token_id("hello"), token_id("Ġworld"), token_id("!")
    model = chain_model(tok, {hello: world, world: bang, bang: 2})
    pieces = []
    result = generate(model, tok, "hello", max_tokens=10, stream=pieces.append, **GREEDY)
    assert result.ids == [world, bang] and result.text == " world!" and result.finish_reason == "end"
    assert "".join(pieces) == result.text
    assert model.calls == [1, 1, 1]  # the prompt, then " world" and "!" (the end token is not run)
    assert result.prompt_tokens == 1 and result.prompt_ids == [hello]


def test_the_chat_end_token_stops_like_eos(tok):
    model = chain_model(tok, {token_id("hello"): 0})  # <|endoftext|>
    assert generate(model, tok, "hello", **GREEDY).finish_reason == "end"


def test_prompt_runs_in_one_forward_then_one_token_per_step(tok):
    model = chain_model(tok, dict.fromkeys(range(tok.vocab_size), 5))
    prompt = tok.encode("hello world, hello world")
    result = generate(model, tok, prompt, max_tokens=5, **GREEDY)
    assert result.finish_reason == "length" and len(result.ids) == 5
    assert model.calls == [len(prompt), 1, 1, 1, 1]
    assert result.text == tok.decode(result.ids)


def test_greedy_takes_the_first_maximum(tok):
    table = np.zeros((tok.vocab_size, tok.vocab_size))
    table[:, 7] = table[:, 9] = 1.0
    result = generate(TableLM(table), tok, [5], max_tokens=3, **GREEDY)
    assert result.ids == [7, 7, 7]


def test_same_seed_same_tokens_other_seed_other_tokens(tok):
    model = TableLM(np.zeros((tok.vocab_size, tok.vocab_size)))  # uniform: every draw is random
    options = {"max_tokens": 20, "temperature": 1.0, "top_k": 0, "top_p": 1.0}
    a = generate(model, tok, [5], seed=3, **options).ids
    assert a == generate(model, tok, [5], seed=3, **options).ids
    assert a != generate(model, tok, [5], seed=4, **options).ids
    assert len(set(a)) > 10


def test_prompt_longer_than_the_context_is_refused_before_any_work(tok):
    model = chain_model(tok, {}, context_length=8)
    with pytest.raises(ValueError, match="the prompt has 9 tokens, more than the model's context holds"):
        generate(model, tok, [5] * 9)
    assert model.calls == []
    with pytest.raises(ValueError, match="prompt is empty"):
        generate(model, tok, "")
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        generate(model, tok, [tok.vocab_size])
    with pytest.raises(ValueError, match="top_p"):
        generate(model, tok, [5], top_p=0.0)
    assert model.calls == []


def test_a_full_context_stops_generation(tok):
    model = chain_model(tok, {}, context_length=6)
    result = generate(model, tok, [5, 6, 7, 8], max_tokens=10, **GREEDY)
    # 4 prompt tokens + 2 run tokens fill the cache; the token sampled after them is still returned
    assert result.finish_reason == "context" and len(result.ids) == 3
    assert model.calls == [4, 1, 1]


def test_ctrl_c_returns_what_was_generated(tok):
    model = chain_model(tok, {}, interrupt_at=3)
    cache = model.new_cache()
    result = generate(model, tok, [5, 6], max_tokens=10, cache=cache, **GREEDY)
    assert result.finish_reason == "interrupted"
    assert len(result.ids) == 3 and model.calls == [2, 1, 1]
    assert cache.length == 4 == len(cache.extra["tokens"])  # the tokens whose forward pass finished


def test_ctrl_c_during_the_prompt(tok):
    model = chain_model(tok, {}, interrupt_at=0)
    result = generate(model, tok, [5, 6], **GREEDY)
    assert result.finish_reason == "interrupted" and result.ids == [] and result.text == ""


def test_a_cache_passed_again_runs_only_the_new_tokens(tok):
    model = chain_model(tok, {})
    cache = model.new_cache()
    first = generate(model, tok, [5, 6, 7], max_tokens=3, cache=cache, **GREEDY)
    assert model.calls == [3, 1, 1]
    held = [5, 6, 7, *first.ids[:2]]  # the last sampled token was never run
    assert cache.extra["tokens"] == held and cache.length == 5
    model.calls.clear()
    again = generate(model, tok, [*held, first.ids[2], 9, 10], max_tokens=2, cache=cache, **GREEDY)
    assert model.calls == [3, 1]
    fresh = chain_model(tok, {})
    assert again.ids == generate(fresh, tok, [*held, first.ids[2], 9, 10], max_tokens=2, **GREEDY).ids
    # a prompt that differs early reruns from the difference; one equal to the cache reruns its last token
    model.calls.clear()
    generate(model, tok, [5, 99], max_tokens=1, cache=cache, **GREEDY)
    generate(model, tok, [5, 99], max_tokens=1, cache=cache, **GREEDY)
    assert model.calls == [1, 1]


def test_language_model_generate_delegates(tok):
    hello, world = token_id("hello"), token_id("Ġworld")
    model = chain_model(tok, {hello: world, world: 2})
    assert model.generate(tok, "hello", **GREEDY).text == " world"


def test_result_reports_speed_and_memory(tok):
    result = generate(chain_model(tok, {}), tok, [5, 6, 7], max_tokens=4, **GREEDY)
    assert result.prompt_tokens == 3 and result.prompt_tokens_per_s > 0 and result.generated_tokens_per_s > 0
    assert result.peak_memory > 10 * 2**20
    line = result.summary()
    assert "prompt: 3 tokens" in line and "generated: 4 tokens" in line and "MiB" in line


# the sampling rules, by hand --------------------------------------------------------------------------


def test_repeat_penalty_divides_positive_and_multiplies_negative_logits():
    options = SamplingOptions(temperature=0.0, repeat_penalty=2.0)
    scores = filtered_logits(np.array([2.0, -2.0, 1.0, 3.0]), [0, 1, 1], options)
    assert scores.tolist() == [1.0, -4.0, 1.0, 3.0]  # each token once, however often it appeared


def test_temperature_and_top_k_keep_ties():
    options = SamplingOptions(temperature=2.0, top_k=2, top_p=1.0)
    scores = filtered_logits(np.array([1.0, 4.0, 3.0, 3.0, 0.0]), [], options)
    assert scores.tolist() == [-math.inf, 2.0, 1.5, 1.5, -math.inf]


@pytest.mark.parametrize(
    ("top_p", "kept"), [(0.35, [3]), (0.5, [2, 3]), (0.75, [1, 2, 3]), (1.0, [0, 1, 2, 3])]
)
def test_top_p_keeps_the_smallest_set_reaching_p(top_p, kept):
    logits = np.log([0.1, 0.2, 0.3, 0.4])
    scores = filtered_logits(logits, [], SamplingOptions(temperature=1.0, top_k=0, top_p=top_p))
    assert np.flatnonzero(np.isfinite(scores)).tolist() == kept
    assert np.allclose(scores[kept], logits[kept])


def test_draws_invert_the_cumulative_distribution():
    class Fixed:  # a generator whose next uniform number is given
        def __init__(self, u):
            self.u = u

        def random(self):
            return self.u

    logits = np.log([0.1, 0.2, 0.3, 0.4])
    options = SamplingOptions(temperature=1.0, top_k=3, top_p=1.0)  # probabilities 0, 2/9, 3/9, 4/9
    picks = {u: next_token(logits, [], options, Fixed(u)) for u in (0.0, 0.2, 0.25, 0.5, 0.6, 0.999)}
    assert picks == {0.0: 1, 0.2: 1, 0.25: 2, 0.5: 2, 0.6: 3, 0.999: 3}  # never the removed token 0
    rng = np.random.default_rng(0)
    draws = np.bincount([next_token(logits, [], options, rng) for _ in range(2000)], minlength=4) / 2000
    assert draws[0] == 0 and np.allclose(draws[1:], [2 / 9, 3 / 9, 4 / 9], atol=0.04)


def test_greedy_generation_draws_no_random_numbers(tok, monkeypatch):
    """Temperature 0 makes no numpy Generator (numpy.random stays unread by a greedy chat); sampling
    without one is refused by name."""

    def refused(*args, **kwargs):
        raise AssertionError("a greedy generation made a random generator")

    model = chain_model(tok, {token_id("hello"): token_id("Ġworld")})
    monkeypatch.setattr(np.random, "default_rng", refused)
    assert generate(model, tok, "hello", max_tokens=2, **GREEDY).ids[0] == token_id("Ġworld")
    assert next_token(np.array([0.0, 2.0, 1.0]), [], SamplingOptions(temperature=0.0), None) == 1
    with pytest.raises(ValueError, match="next_token: sampling at a temperature above 0 needs rng"):
        next_token(np.array([0.0, 2.0, 1.0]), [], SamplingOptions(temperature=0.5), None)


def test_bad_options_are_refused():
    for bad in ({"temperature": -1}, {"top_k": -1}, {"top_k": 1.5}, {"top_p": 1.5}, {"repeat_penalty": 0}):
        with pytest.raises(ValueError):
            SamplingOptions(**bad)


# a real model through the registry: a tiny random GPT-2 folder ------------------------------------------


def _gpt2_folder(folder, vocab_size: int):
    import json

    import verigrad as vg
    from verigrad.models.gpt2 import GPT2, GPT2Config

    vg.manual_seed(0)
    c = GPT2Config(vocab_size=vocab_size, n_positions=24, n_embd=24, n_layer=2, n_head=3)
    model = GPT2(c)
    config = {"vocab_size": c.vocab_size, "n_positions": c.n_positions, "n_embd": c.n_embd}
    config |= {"n_layer": c.n_layer, "n_head": c.n_head, "eos_token_id": 2, "bos_token_id": 1}
    (folder / "config.json").write_text(json.dumps(config))
    vg.io.save(
        {f"transformer.{k}": v.numpy() for k, v in model.state_dict().items()}, folder / "model.safetensors"
    )
    (folder / "tokenizer.json").write_text(tokenizer(folder).backend.to_str())


def test_cached_generation_equals_recomputing_the_whole_sequence(tmp_path):
    from verigrad.models.catalog import load_language_model

    vocab = tokenizer(tmp_path).vocab_size
    _gpt2_folder(tmp_path, vocab)
    model, tok = load_language_model(tmp_path)
    assert type(model).__name__ == "GPT2" and tok.eos_id == 2
    prompt = tok.encode("hello world")
    result = generate(model, tok, prompt, max_tokens=8, **GREEDY)
    ids = list(prompt)
    for _ in range(len(result.ids)):  # greedy without a cache: the whole sequence every step
        ids.append(int(np.argmax(model(np.array([ids])).numpy()[0, -1])))
    assert result.ids == ids[len(prompt) :] and len(result.ids) >= 1
    assert result.text == tok.decode(result.ids)


@pytest.mark.parametrize("replay", [True, False])
def test_generating_again_and_again_on_the_cpu_backend_gives_the_same_tokens(tmp_path, monkeypatch, replay):
    """The decode step's plans run once per generation: generated a dozen times, they replay their
    recorded calls (ir/replay.py; where vg_call records them: not with VERIGRAD_CTYPES=1) and the
    tokens stay those of the first run, with replay on or off."""
    import verigrad as vg
    from verigrad.backends import cpu
    from verigrad.ir.plan import Plan
    from verigrad.models.catalog import load_language_model

    monkeypatch.setattr(Plan, "replay", replay)
    _gpt2_folder(tmp_path, tokenizer(tmp_path).vocab_size)
    model, tok = load_language_model(tmp_path)
    prompt = tok.encode("hello world")
    with vg.backend("cpu"):
        runs = [generate(model, tok, prompt, max_tokens=6, **GREEDY).ids for _ in range(12)]
    assert all(ids == runs[0] for ids in runs) and len(runs[0]) >= 1
    plans = list(model.cached_step.decode["f32"]._plans.values())
    assert plans and all(p.runs >= 12 for p in plans)
    recorded = replay and cpu.cpu.tape() is not None
    assert any(type(p._replay).__name__ == "Replay" for p in plans) == recorded


def test_registry_errors_name_what_is_missing(tmp_path):
    from verigrad.errors import WeightFileError
    from verigrad.models.catalog import load_language_model

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(WeightFileError, match=r"needs model\.safetensors"):
        load_language_model(tmp_path)
    with pytest.raises(WeightFileError, match="no model 'nope': give a name"):
        load_language_model("nope")
    with pytest.raises(ValueError, match="activations must be one of f32, q8"):
        load_language_model("smollm2", activations="q4")


def test_language_models_take_f32_activations_by_default(monkeypatch):
    """load_language_model and the generate, chat and serve commands: f32 activations unless q8 is asked."""
    from verigrad.cli import build_parser
    from verigrad.models import catalog

    asked = []
    monkeypatch.setitem(catalog.LANGUAGE_MODELS, "probe", lambda activations: asked.append(activations))
    catalog.load_language_model("probe")
    catalog.load_language_model("probe", "q8")
    assert asked == ["f32", "q8"]
    parser = build_parser()
    for command in (["generate", "hi"], ["chat"], ["serve"]):
        assert parser.parse_args(command).activations == "f32"
        assert parser.parse_args([*command, "--activations", "q8"]).activations == "q8"


def test_generate_keeps_its_cache_in_the_kv_cache_dtype(tmp_path, capsys):
    from verigrad.cli import main
    from verigrad.models.catalog import load_language_model

    _gpt2_folder(tmp_path, tokenizer(tmp_path).vocab_size)
    model, tok = load_language_model(tmp_path)
    made, new_cache = [], model.new_cache

    def spy(*args, **kwargs):
        made.append(new_cache(*args, **kwargs))
        return made[-1]

    object.__setattr__(model, "new_cache", spy)
    prompt = tok.encode("hello world")
    half = generate(model, tok, prompt, max_tokens=6, kv_cache="f16", **GREEDY)
    full = generate(model, tok, prompt, max_tokens=6, **GREEDY)
    assert [c.keys[0].dtype for c in made] == [np.float16, np.float32]
    assert half.ids == full.ids  # f16's rounding moves no greedy choice of this small model
    with pytest.raises(ValueError, match="a cache's dtype must be one of f32, f16, q8_0, got 'q4'"):
        generate(model, tok, prompt, max_tokens=6, kv_cache="q4", **GREEDY)
    args = ["--model", str(tmp_path), "--max-tokens", "3", "--temperature", "0", "--kv-cache", "f16"]
    assert main(["generate", *args, "--raw", "hello"]) == 0
    with pytest.raises(SystemExit):
        main(["generate", "--model", str(tmp_path), "--kv-cache", "q4", "hello"])
    assert "invalid choice: 'q4'" in capsys.readouterr().err
