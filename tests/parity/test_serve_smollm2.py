"""`verigrad serve` with the real SmolLM2-135M-Instruct: a chat completion, asked with the official `openai`
client, is `verigrad generate`'s greedy answer (the same chat template, the same tokens); and the server's
batch gives every request what it gets alone (token ids and log-probability bits)."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

from starlette.testclient import TestClient  # noqa: E402

from verigrad.backends import backend  # noqa: E402
from verigrad.models.catalog import load_language_model  # noqa: E402
from verigrad.models.lm import generate  # noqa: E402
from verigrad.serve.app import create_app  # noqa: E402
from verigrad.serve.engine import Engine  # noqa: E402

QUESTIONS = ["What is the capital of France?", "Write a haiku about the sea.", "Name three fruits."]


@pytest.fixture(scope="module")
def served(smollm2_gguf):
    with backend("cpu"):
        model, tokenizer = load_language_model(smollm2_gguf)
        engine = Engine(model, tokenizer, max_batch=4, capacity=512).start()
        with TestClient(create_app(engine, "smollm2")) as http:
            client = openai.OpenAI(base_url="http://testserver/v1", api_key="-", http_client=http)
            yield model, tokenizer, client
        engine.close()


def test_a_chat_completion_is_generates_greedy_answer(served):
    model, tokenizer, client = served
    for question in QUESTIONS:
        messages = [{"role": "user", "content": question}]
        prompt = tokenizer.encode(tokenizer.apply_chat_template(messages), add_special=False)
        with backend("cpu"):
            want = generate(model, tokenizer, prompt, max_tokens=40, temperature=0)
        got = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=40, temperature=0)
        assert got.choices[0].message.content == want.text
        assert got.usage.completion_tokens == len(want.ids) and got.usage.prompt_tokens == len(prompt)


def test_concurrent_chats_get_their_answers_alone(served):
    from concurrent.futures import ThreadPoolExecutor

    _, _, client = served

    def ask(i):
        got = client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": QUESTIONS[i % 3]}], max_tokens=16 + i,
            temperature=0 if i % 2 else 0.8, seed=i, logprobs=True, top_logprobs=2,
        )  # fmt: skip
        return got.choices[0].message.content, [t.logprob for t in got.choices[0].logprobs.content]

    alone = [ask(i) for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(ask, range(6))) == alone
