"""The serve benchmark's clients (benchmarks/serve_client.py): the tokens they count are those the server
reports, and their minimal parsing of server-sent events reads OpenAI's chunks as both servers write them."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
from pathlib import Path

import pytest
from llama_gguf import SERVED, write_llama_gguf

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from verigrad.models.catalog import load_language_model  # noqa: E402
from verigrad.serve.app import create_app  # noqa: E402
from verigrad.serve.engine import Engine  # noqa: E402

SOURCE = Path(__file__).resolve().parents[1] / "benchmarks" / "serve_client.py"


@pytest.fixture(scope="module")
def client_module():
    spec = importlib.util.spec_from_file_location("serve_client", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = write_llama_gguf(tmp_path_factory.mktemp("client") / "tiny.gguf", **SERVED)
    model, tokenizer = load_language_model(path)
    engine = Engine(model, tokenizer, max_batch=4, capacity=256).start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(engine, "tiny"), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    engine.close()


def test_the_clients_count_the_tokens_the_server_reports(client_module, url):
    questions = ["hello", "a b c", "what is it", "tell me"]
    bodies = [[client_module.chat_body("tiny", q, 9) for q in questions[i::2]] for i in range(2)]
    got = [r for mine in client_module.run_clients(url, bodies) for r in mine]
    want = []
    for mine in bodies:
        for body in mine:
            plain = {**json.loads(body), "stream": False}
            del plain["stream_options"]
            answer = httpx.post(f"{url}/v1/chat/completions", json=plain, timeout=60).json()
            want.append(answer["usage"]["completion_tokens"])
    assert [tokens for _, _, tokens in got] == want and sum(want) > 4
    assert all(0 < first <= total for first, total, _ in got)


def test_clients_with_a_time_limit_cycle_through_their_requests_until_it_passes(client_module, url):
    bodies = [[client_module.chat_body("tiny", q, 3)] for q in ("hello", "tell me")]
    t0 = time.perf_counter()
    got = client_module.run_clients(url, bodies, seconds=0.5)
    wall = time.perf_counter() - t0
    assert [len(mine) >= 2 for mine in got] == [True, True]  # each started more requests than it has
    # each client's last request started before the limit: at most one request's time past it
    assert wall < 0.5 + max(total for mine in got for _, total, _ in mine) + 0.5


def test_the_events_are_read_with_or_without_spaces_and_empty_contents_are_not_text(client_module):
    events = b"\n\n".join(
        [
            b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}',
            b'data: {"choices":[{"delta":{"role":"assistant","content":null}}]}',
            b'data: {"choices": [{"delta": {"content": "a"}}]}',
            b'data: {"choices":[{"delta":{"content":"\\n"}}]}',
            b'data: {"choices": [{"delta": {}, "finish_reason": "length"}]}',
            b'data: {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 17}}',
            b"data: [DONE]",
        ]
    )
    first, pieces, usage = client_module.read_events(events, None, 0, None)
    assert first is not None and pieces == 2 and usage == 17
    compact = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}'
    assert client_module.read_events(compact, None, 0, None) == (None, 0, 4)
