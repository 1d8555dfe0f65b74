"""`verigrad serve` over HTTP: the server runs on 127.0.0.1 (a free port) in a thread, with a tiny random
Llama GGUF, and the official `openai` client talks to it: completions, chat, streaming, log-probabilities,
stop strings, each error (OpenAI-shaped JSON, the server serving on), a client leaving mid-stream (its
row freed), and 8 concurrent clients each getting the tokens it gets alone."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from llama_gguf import SERVED, write_llama_gguf

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from verigrad.models.catalog import load_language_model  # noqa: E402
from verigrad.models.lm import generate  # noqa: E402
from verigrad.serve import app as serve_app  # noqa: E402
from verigrad.serve import protocol  # noqa: E402
from verigrad.serve.app import create_app  # noqa: E402
from verigrad.serve.engine import Engine, Event, Request  # noqa: E402

KEY, MODEL = "test-key", "tiny"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    return write_llama_gguf(tmp_path_factory.mktemp("serve") / "tiny.gguf", **SERVED)


@pytest.fixture(scope="module")
def server(model_path):
    model, tokenizer = load_language_model(model_path)
    engine = Engine(model, tokenizer, max_batch=4, capacity=256, block=16).start()
    app = create_app(engine, MODEL, api_key=KEY, max_body=4096)
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.02)
    yield engine, f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)
    engine.close()


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server[1] + "/v1", api_key=KEY, max_retries=0, timeout=60)


def ask(client, prompt: str, **options):
    return client.completions.create(model=MODEL, prompt=prompt, **options)


def test_models_health_and_metrics(server, client):
    assert [m.id for m in client.models.list().data] == [MODEL]
    assert httpx.get(server[1] + "/health").json() == {"status": "ok"}
    ask(client, "hello", max_tokens=3, temperature=0)
    text = httpx.get(server[1] + "/metrics").text
    names = ("requests_total", "completion_tokens_total", "queue_depth", "tokens_per_second")
    for name in (*names, "joined_chunks_total", "joined_tokens_total"):
        assert f"# TYPE verigrad_{name} " in text and f"\nverigrad_{name} " in text
    found = {
        line.split()[0].removeprefix("verigrad_"): float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("verigrad_") and "{" not in line
    }
    # where the engine's thread spent its time: steps of at least one row each, and prefill
    assert found["decode_steps_total"] >= 2 and found["decode_rows_total"] >= found["decode_steps_total"]
    assert found["decode_seconds_total"] > 0 and found["prefill_seconds_total"] > 0


def test_a_completion_is_generates_greedy_answer(server, client):
    engine = server[0]
    want = generate(engine.model, engine.tokenizer, "hello world", max_tokens=8, temperature=0)
    got = ask(client, "hello world", max_tokens=8, temperature=0)
    assert got.choices[0].text == want.text and got.choices[0].finish_reason == "length"
    assert got.object == "text_completion" and got.model == MODEL
    assert got.usage.prompt_tokens == len(want.prompt_ids) and got.usage.completion_tokens == 8
    assert got.usage.total_tokens == got.usage.prompt_tokens + 8


def test_a_chat_completion_follows_the_chat_template(server, client):
    engine, tok = server[0], server[0].tokenizer
    messages = [{"role": "user", "content": "hello"}]
    prompt = tok.encode(tok.apply_chat_template(messages), add_special=False)
    want = generate(engine.model, tok, prompt, max_tokens=6, temperature=0)
    got = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=6, temperature=0)
    assert got.choices[0].message.content == want.text and got.choices[0].message.role == "assistant"
    assert got.usage.prompt_tokens == len(prompt) and got.object == "chat.completion"


def test_streaming_gives_the_same_text_in_pieces_then_done(server, client):
    whole = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "world"}], max_tokens=10, seed=3, temperature=0.8
    )
    chunks = list(
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "world"}], max_tokens=10, seed=3,
            temperature=0.8, stream=True, stream_options={"include_usage": True},
        )
    )  # fmt: skip
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10
    # the raw stream: server-sent events ending with [DONE] (seeded: no end token drawn in 4)
    body = {"model": MODEL, "prompt": "hello", "max_tokens": 4, "stream": True, "seed": 3}
    raw = httpx.post(server[1] + "/v1/completions", json=body, headers={"Authorization": f"Bearer {KEY}"})
    assert raw.headers["content-type"].startswith("text/event-stream")
    events = [e for e in raw.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    assert json.loads(events[-2][6:])["choices"][0]["finish_reason"] == "length"


def test_log_probabilities_chat_and_completions(client):
    got = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=4, temperature=0,
        logprobs=True, top_logprobs=3,
    )  # fmt: skip
    content = got.choices[0].logprobs.content
    assert len(content) == 4
    for item in content:
        tops = [t.logprob for t in item.top_logprobs]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True)
        assert item.logprob == tops[0] and item.token == item.top_logprobs[0].token  # greedy: the best
    streamed = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=4, temperature=0,
        logprobs=True, top_logprobs=3, stream=True,
    )  # fmt: skip
    chunks = [c.choices[0].logprobs for c in streamed if c.choices and c.choices[0].logprobs]
    values = [i.logprob for lp in chunks for i in lp.content]
    assert values == [i.logprob for i in content]
    plain = ask(client, "hello", max_tokens=3, temperature=0, logprobs=2).choices[0].logprobs
    assert len(plain.tokens) == 3 and len(plain.token_logprobs) == 3
    assert all(len(t) <= 2 for t in plain.top_logprobs) and plain.text_offset[0] == 0


def test_a_seed_repeats_the_answer_even_a_negative_one(client):
    a, b, c = (ask(client, "hello", max_tokens=8, seed=s).choices[0].text for s in (-5, -5, 5))
    assert a == b and a != c


def test_a_stop_string_ends_the_text_and_is_not_returned(client):
    full = ask(client, "hello", max_tokens=30, temperature=0).choices[0].text
    stop = full[8:11]
    got = ask(client, "hello", max_tokens=30, temperature=0, stop=[stop]).choices[0]
    assert got.text == full[: full.index(stop)] and got.finish_reason == "stop"


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(server, client):
    url, auth = server[1], {"Authorization": f"Bearer {KEY}"}
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.completions.create(model="gpt-9", prompt="hi", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        ask(client, "hi", max_tokens=-1)
    with pytest.raises(openai.BadRequestError, match="lower 'max_tokens' to 254"):
        ask(client, "hi", max_tokens=10**6)
    with pytest.raises(openai.BadRequestError, match="shorten"):
        ask(client, "hello " * 300, max_tokens=2)
    with pytest.raises(openai.AuthenticationError, match="incorrect API key"):
        openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0).models.list()
    missing = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "hi"})
    assert missing.status_code == 401 and error_of(missing)["code"] == "invalid_api_key"
    broken = httpx.post(url + "/v1/completions", content=b'{"model": "tiny", "prompt": ', headers=auth)
    assert broken.status_code == 400 and "JSON" in error_of(broken)["message"]
    big = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "x" * 5000}, headers=auth)
    assert big.status_code == 413 and "4096" in error_of(big)["message"]
    odd = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "hi", "n": 2}, headers=auth)
    assert odd.status_code == 400 and error_of(odd)["param"] == "n"
    unknown = httpx.post(url + "/v1/completions", json={"model": MODEL, "promt": "hi"}, headers=auth)
    assert unknown.status_code == 400 and error_of(unknown)["param"] == "promt"
    ids = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": [5, 10**6]}, headers=auth)
    assert ids.status_code == 400 and "vocabulary" in error_of(ids)["message"]
    assert httpx.get(url + "/v1/nothing", headers=auth).status_code == 404
    assert ask(client, "hello", max_tokens=2, temperature=0).choices[0].finish_reason == "length"


def test_a_full_queue_answers_429(model_path):
    model, tokenizer = load_language_model(model_path)
    engine = Engine(model, tokenizer, max_batch=1, max_queue=1, capacity=64)  # not started: nothing leaves
    engine.submit(Request([5, 6], 2), lambda e: None)
    with TestClient(create_app(engine, MODEL)) as http:
        r = http.post("/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 2})
    assert r.status_code == 429 and error_of(r)["code"] == "rate_limit_exceeded"


def test_a_client_leaving_mid_stream_frees_its_row(server, client):
    engine, url = server
    body = {"model": MODEL, "prompt": "hello", "max_tokens": 200, "temperature": 0, "stream": True}
    before = engine.completion_tokens_total
    http = httpx.Client(timeout=30, headers={"Authorization": f"Bearer {KEY}"})
    with http, http.stream("POST", f"{url}/v1/completions", json=body) as r:
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
    for _ in range(200):  # the engine notices between steps
        if engine.running == 0:
            break
        time.sleep(0.05)
    assert engine.running == 0
    assert engine.completion_tokens_total - before < 200
    assert ask(client, "hello", max_tokens=2, temperature=0).usage.completion_tokens == 2


def test_eight_concurrent_clients_each_get_what_they_get_alone(server, client):
    prompts = ["hello", "world", "hello world", "hell", "wor", "lo", "he said hello", "o"]
    options = [{"temperature": 0} if i % 2 else {"temperature": 0.9, "seed": i} for i in range(8)]

    def one(i):
        got = ask(client, prompts[i], max_tokens=6 + i, logprobs=1, **options[i]).choices[0]
        return got.text, got.logprobs.token_logprobs

    alone = [one(i) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(one, range(8)))
    assert together == alone


def test_every_chunk_of_a_stream_gives_the_time_the_completion_was_created(server, monkeypatch):
    """OpenAI's chunks of one completion all carry its `created`; they took the clock at each chunk."""
    clock = iter(range(1_000_000, 2_000_000))
    monkeypatch.setattr(protocol.time, "time", lambda: next(clock))  # a second passes at every reading
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "seed": 1}
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    with TestClient(create_app(server[0], MODEL)) as http:
        raw = http.post("/v1/chat/completions", json=body).text
    chunks = [json.loads(e[6:]) for e in raw.split("\n\n") if e and e != "data: [DONE]"]
    assert len(chunks) >= 3 and len({c["created"] for c in chunks}) == 1


class _Loop:
    """A loop's `call_soon_threadsafe`, counted and run when asked."""

    def __init__(self):
        self.calls: list = []

    def call_soon_threadsafe(self, fn, *args):
        self.calls.append((fn, args))


def test_the_engines_events_wake_the_event_loop_once_for_all_those_waiting():
    loop = _Loop()
    dispatch = serve_app._Dispatch(loop)
    queues = [asyncio.Queue() for _ in range(8)]
    for i, q in enumerate(queues):  # a step's tokens for 8 clients
        dispatch.put(q, Event(tokens=[i]))
    dispatch.put(queues[0], Event(tokens=[8]))
    assert len(loop.calls) == 1 and all(q.empty() for q in queues)
    fn, args = loop.calls.pop()
    fn(*args)
    assert [[q.get_nowait().tokens[0] for _ in range(q.qsize())] for q in queues] == [
        [0, 8],
        *[[i] for i in range(1, 8)],
    ]
    dispatch.put(queues[1], Event(tokens=[9]))  # the next step's: a new wake-up
    assert len(loop.calls) == 1


def test_events_queued_together_are_streamed_in_one_write_chunk_by_chunk(server):
    engine = server[0]
    parsed = protocol.parse(
        {"model": MODEL, "prompt": "hi", "stream": True, "max_tokens": 3}, False, engine.tokenizer.encode, 256
    )
    events = asyncio.Queue()
    for text in ("a", "b"):
        events.put_nowait(Event(text=text, tokens=[1]))
    events.put_nowait(Event(text="c", tokens=[2], finish_reason="length", completion_tokens=3))

    async def writes():
        return [
            w
            async for w in serve_app._stream(engine, None, events, parsed, "cmpl-1", MODEL, engine.tokenizer)
        ]

    got = asyncio.run(writes())
    assert len(got) == 1
    chunks = [e for e in got[0].split("\n\n") if e]
    assert [json.loads(c[6:])["choices"][0]["text"] for c in chunks[:-1]] == ["a", "b", "c"]
    assert chunks[-1] == "data: [DONE]"


def test_the_serve_command_answers_over_http(model_path):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    command = [sys.executable, "-c", "from verigrad.cli import main; raise SystemExit(main())"]
    args = ["serve", "--model", str(model_path), "--port", str(port), "--max-batch", "2", "--threads", "1"]
    proc = subprocess.Popen([*command, *args], env=env, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        assert [m.id for m in c.models.list().data] == ["tiny"]
        got = c.completions.create(model="tiny", prompt="hello", max_tokens=3, temperature=0)
        assert got.usage.completion_tokens == 3
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_serve_command_freezes_the_loaded_model_out_of_the_collector(model_path, monkeypatch):
    """Before serving, the objects made so far (the model's, which live as long as the server) are frozen
    (gc.freeze): the collector's full collections, pauses of every stream, no longer scan them."""
    import gc

    from verigrad.cli import main

    frozen: list[int] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: frozen.append(gc.get_freeze_count()))
    try:
        assert main(["serve", "--model", str(model_path), "--max-batch", "2", "--threads", "1"]) == 0
    finally:
        gc.unfreeze()
    assert frozen and frozen[0] > 1000
