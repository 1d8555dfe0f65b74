"""A served model with f32 products (an F32 or F16 GGUF: its matrices de-quantized to f32) on the cpu
backend: a request's bits do not depend on its batch. The fast GEMM's OpenBLAS tiles, and so an element's
bits, depend on the row count, so the engine holds the backend's row-independent path (`rows_apart`: the
exact GEMM) while it runs; the quantized products need nothing (their kernels give every row the 1-row
kernel's bits)."""

from __future__ import annotations

import threading

import pytest
from llama_gguf import SERVED, write_llama_gguf
from test_serve_engine import prompts, rows_against_alone, run, summary

import verigrad
from verigrad.backends.cpu import matmul as cpu_matmul
from verigrad.models.catalog import load_language_model, matmul_description
from verigrad.serve.engine import Engine, Request


@pytest.fixture(scope="module", params=["F32", "F16"])
def lm(request, tmp_path_factory):
    path = write_llama_gguf(tmp_path_factory.mktemp("f32") / "tiny.gguf", qtype=request.param, **SERVED)
    model, tokenizer = load_language_model(path)
    assert matmul_description(model).startswith("matmul (f32 weights)")
    return model, tokenizer


def test_batched_rows_give_each_sequence_its_own_bits_on_the_row_independent_path(lm):
    with verigrad.backend("cpu") as cpu, cpu.rows_apart():
        rows_against_alone(lm[0], prompts(5, seed=3))


@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"temperature": 0.9, "seed": 7}])
def test_a_request_gets_the_same_bits_alone_and_in_a_batch_on_the_cpu_backend(lm, sampling):
    with verigrad.backend("cpu"):
        engine = Engine(*lm, max_batch=8, capacity=256, block=16).start()
    try:
        mine = Request(prompts(1, seed=5)[0], 10, logprobs=2, **sampling)
        alone = summary(run(engine, [mine])[0])
        neighbours = [
            Request(p, 6 + i, temperature=0.5 * (i % 2), seed=i) for i, p in enumerate(prompts(5, 9))
        ]
        got = run(engine, [*neighbours[:2], mine, *neighbours[2:]])[2]
        assert summary(got) == alone
        assert cpu_matmul.exact_default()  # held while the engine runs
    finally:
        engine.close()
    assert not cpu_matmul.exact_default()  # the suite's default comes back


def test_the_exact_path_is_held_until_the_last_holder_leaves():
    before = cpu_matmul.exact_default()
    entered, leave = threading.Event(), threading.Event()

    def holder() -> None:
        with cpu_matmul.exact_held():
            entered.set()
            leave.wait(10)

    other = threading.Thread(target=holder)
    other.start()
    entered.wait(10)
    with cpu_matmul.exact_held():
        assert cpu_matmul.exact_default()
    assert cpu_matmul.exact_default()  # the other thread still holds it
    leave.set()
    other.join()
    assert cpu_matmul.exact_default() == before
