"""The server's work outside the decode step: a stream's text chunks encoded from a template made once per
request (the same characters as the chunk's dictionary encoded), the engine's counters of its thread's
time (choosing tokens and sending events; its CPU, and of it the model's forwards') and of the tokens per
second, noted once a turn."""

from __future__ import annotations

import threading

import pytest
from llama_gguf import SERVED, write_llama_gguf

pytest.importorskip("starlette")

from verigrad.models.catalog import load_language_model
from verigrad.serve import app as serve_app
from verigrad.serve import protocol
from verigrad.serve.engine import Engine, Event, Request

TEXTS = ["a", " the", 'say "hi"', "back\\slash", "line\nbreak\ttab", "\x00\x1f\x7f", "é中🙂", "\u2028", "}"]


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("usage", [False, True])
@pytest.mark.parametrize("model", ["tiny", 'odd "name" \\ é\x00verigrad-text'])
def test_a_text_chunk_from_the_template_is_the_chunk_encoded(chat, usage, model):
    body = {"model": model, "stream": True, "max_tokens": 3}
    body |= {"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": "hi"}
    if usage:
        body["stream_options"] = {"include_usage": True}
    parsed = protocol.parse(body, chat, lambda _: [1, 2], 256)
    rid = protocol.new_id(chat)
    text_sse = serve_app._text_sse(parsed, rid, model, None)
    assert text_sse is not None
    for text in TEXTS:
        want = serve_app._sse(protocol.chunk(parsed, rid, model, Event(text=text, tokens=[5]), None))
        assert text_sse(text) == want


def test_a_template_whose_placeholder_is_not_found_once_is_not_used():
    parsed = protocol.parse({"model": "m", "prompt": "hi", "stream": True}, False, lambda _: [1], 256)
    mark = '"\\u0000verigrad-text\\u0000"'  # the placeholder's JSON, in the request's id
    assert serve_app._text_sse(parsed, "cmpl-" + mark, "m", None) is not None  # escaped there: not found
    assert serve_app._text_sse(parsed, "x", "\x00verigrad-text\x00", None) is None  # the model's name


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return load_language_model(write_llama_gguf(tmp_path_factory.mktemp("serve") / "tiny.gguf", **SERVED))


def test_the_engine_counts_its_threads_time_and_the_tokens_per_second(lm):
    engine = Engine(*lm, max_batch=4, capacity=256, block=16).start()
    try:
        done, tokens, lock = threading.Semaphore(0), [], threading.Lock()

        def on_event(event: Event) -> None:
            with lock:
                tokens.extend(event.tokens)
            if event.finish_reason:
                done.release()

        requests = [Request([3 + i, 40, 7, 9], 6 + 3 * i, temperature=0.0) for i in range(3)]
        for r in requests:
            engine.submit(r, on_event)
        for _ in requests:
            assert done.acquire(timeout=60)
        engine.submit(Request([5], 1, temperature=0.0), on_event)  # a turn after the last's
        assert done.acquire(timeout=60)
    finally:
        engine.close()
    assert engine.completion_tokens_total == len(tokens) == sum(r.max_tokens for r in requests) + 1
    # each chosen token counted once in the last minute's (a few turns' entries, not one a token)
    assert round(engine.tokens_per_second(60.0) * 60) == engine.completion_tokens_total
    assert 0 < len(engine._recent) < engine.completion_tokens_total
    assert 0 < engine.sampling_seconds < engine.decode_seconds
    assert 0 < engine.sampling_cpu_seconds <= engine.engine_cpu_seconds
    assert engine.engine_cpu_seconds > engine.sampling_cpu_seconds * 2  # the steps' kernels too
    # the forwards' CPU: within the thread's, the steps' beside the prompts' chunks (run apart: 4 tokens)
    inside = engine.step_cpu_seconds + engine.chunk_cpu_seconds
    assert engine.chunk_cpu_seconds > 0 and engine.step_cpu_seconds > 0
    assert inside + engine.sampling_cpu_seconds <= engine.engine_cpu_seconds


def test_metrics_give_the_engine_threads_time(lm):
    from starlette.testclient import TestClient

    from verigrad.serve.app import create_app

    engine = Engine(*lm, max_batch=2, capacity=64, block=16).start()
    try:
        engine.sampling_seconds, engine.sampling_cpu_seconds, engine.engine_cpu_seconds = 0.25, 0.125, 2.5
        engine.step_cpu_seconds, engine.chunk_cpu_seconds = 1.5, 0.5
        with TestClient(create_app(engine, "tiny")) as http:
            text = http.get("/metrics").text
    finally:
        engine.close()
    found = dict(line.split() for line in text.splitlines() if line.startswith("verigrad_"))
    assert found["verigrad_sampling_seconds_total"] == "0.25"
    assert found["verigrad_sampling_cpu_seconds_total"] == "0.125"
    assert found["verigrad_engine_cpu_seconds_total"] == "2.5"
    assert found["verigrad_step_cpu_seconds_total"] == "1.5"
    assert found["verigrad_chunk_cpu_seconds_total"] == "0.5"
    names = ("sampling_seconds", "sampling_cpu_seconds", "engine_cpu_seconds", "step_cpu_seconds")
    for name in [f"{n}_total" for n in (*names, "chunk_cpu_seconds")]:
        assert f"# TYPE verigrad_{name} counter" in text
