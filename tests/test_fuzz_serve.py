"""Fuzzed request bodies to `verigrad serve` (a live server on 127.0.0.1, test_serve_http's): fields of
the wrong type, huge numbers, NaN and infinities, nested junk, lone surrogates, unhashable models, deeply
nested JSON, bytes that are not UTF-8. Each answer is a 200 with a completion or a 4xx with OpenAI's error
JSON, within the client's timeout; never a 500, and the server answers a plain request after each."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_serve_http import KEY, MODEL, model_path, server  # noqa: F401  (fixtures)

httpx = pytest.importorskip("httpx")

CASES = int(os.environ.get("VERIGRAD_FUZZ_CASES", "40"))
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
AUTH = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
FIELDS = ["model", "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p"]
FIELDS += ["seed", "stop", "stream", "stream_options", "n", "logprobs", "top_logprobs", "presence_penalty"]
FIELDS += ["frequency_penalty", "logit_bias", "tools", "tool_choice", "response_format", "echo", "user"]
EDGE_NUMBERS = [0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, 1e308, -1e308, 0.5, 2.5, -0.0]
EDGE_TEXT = ["", "hi", "\ud800", "\udfff x", "\x00", "<|im_start|>", "\u0004", "😀" * 50, "x" * 500]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(EDGE_NUMBERS),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    st.integers(),
    st.floats(),
    st.sampled_from(EDGE_TEXT),
    st.text(max_size=20),
)
junk = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["role", "content", "type", "text", "x"]), inner, max_size=4)
    ),
    max_leaves=12,
)
messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant", "system", "tool", ""]) | junk,
            "content": st.sampled_from(EDGE_TEXT) | junk,
        }
    ),
    max_size=3,
)


def valid(chat: bool) -> dict:
    if chat:
        return {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}
    return {"model": MODEL, "prompt": "hello", "max_tokens": 2}


def check_answer(response, chat: bool) -> None:
    status = response.status_code
    assert status == 200 or 400 <= status < 500, f"{status}: {response.text[:300]}"
    if status != 200:
        error = response.json()["error"]
        assert isinstance(error["message"], str) and error["message"] and isinstance(error["type"], str)
    elif "text/event-stream" not in response.headers.get("content-type", ""):
        assert response.json()["object"] == ("chat.completion" if chat else "text_completion")


def post(url: str, chat: bool, content: bytes) -> httpx.Response:
    route = "/v1/chat/completions" if chat else "/v1/completions"
    return httpx.post(url + route, content=content, headers=AUTH, timeout=60)


def still_serving(url: str) -> None:
    response = post(url, False, json.dumps(valid(False)).encode())
    assert response.status_code == 200, response.text


@FUZZ
@given(
    chat=st.booleans(),
    changes=st.dictionaries(st.sampled_from(FIELDS), junk, min_size=1, max_size=3),
    data=st.data(),
)
def test_fuzzed_fields_get_a_completion_or_an_openai_error(server, chat, changes, data):  # noqa: F811
    body = valid(chat) | changes
    if chat and data.draw(st.booleans()):
        body["messages"] = data.draw(messages)
    if body.get("stream") is True and data.draw(st.booleans()):
        body["stream"] = False  # the streamed answers are read whole below all the same
    content = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    check_answer(post(server[1], chat, content), chat)


HOSTILE_BODIES = {  # each under the fixture's 4096-byte limit
    "deep array": b"[" * 2000 + b"]" * 2000,
    "deep model": b'{"model": ' + b"[" * 1900 + b"]" * 1900 + b"}",
    "not UTF-8": b'{"model": "tiny", "prompt": "\xff\xfe"}',
    "huge integer": b'{"model": "tiny", "prompt": "hi", "max_tokens": 1' + b"0" * 4400 + b"}",
    "list model": b'{"model": ["tiny"], "prompt": "hi"}',
    "dict model": b'{"model": {"a": 1}, "prompt": "hi"}',
    "surrogate prompt": b'{"model": "tiny", "prompt": "\\ud800"}',
    "negative id": b'{"model": "tiny", "prompt": [-1, 5]}',
    "nested ids": b'{"model": "tiny", "prompt": [[1, 2], [3]]}',
    "surrogate message": b'{"model": "tiny", "messages": [{"role": "user", "content": "\\udfff"}]}',
    "surrogate stop": b'{"model": "tiny", "prompt": "hi", "stop": ["\\ud800"]}',
    "NaN temperature": b'{"model": "tiny", "prompt": "hi", "temperature": NaN}',
    "infinite seed": b'{"model": "tiny", "prompt": "hi", "seed": Infinity}',
}


@pytest.mark.parametrize("name", list(HOSTILE_BODIES))
@pytest.mark.parametrize("chat", [False, True])
def test_hostile_bodies_get_a_4xx_and_the_server_keeps_serving(server, name, chat):  # noqa: F811
    check_answer(post(server[1], chat, HOSTILE_BODIES[name]), chat)
    still_serving(server[1])


def test_the_server_serves_after_the_fuzz(server):  # noqa: F811
    still_serving(server[1])
