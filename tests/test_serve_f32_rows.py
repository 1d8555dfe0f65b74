"""A served model with f32 products (an F32 or F16 GGUF: its matrices de-quantized to f32) on the cpu
backend: a request's bits do not depend on its batch. The fast GEMM's OpenBLAS tiles, and so an element's
bits, depend on the row count, so the engine holds the backend's row-independent path (`rows_apart`: the
exact GEMM) in its own thread while it runs (other threads keep the fast path); the quantized products need
nothing (their kernels give every row the 1-row kernel's bits)."""

from __future__ import annotations

import threading
from contextlib import nullcontext

import numpy as np
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
        assert not cpu_matmul.exact_default()  # held by the engine's thread alone
    finally:
        engine.close()
    assert not cpu_matmul.exact_default()  # the suite's default comes back


def _product() -> tuple[verigrad.Tensor, verigrad.Tensor, np.ndarray, np.ndarray]:
    """Two f32 operands, and their product's bits on the fast path and on the exact one (which differ)."""
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((48, 200)).astype(np.float32),
        rng.standard_normal((200, 40)).astype(np.float32),
    )
    fast, exact = cpu_matmul.matmul(a, b, exact=False), cpu_matmul.matmul(a, b, exact=True)
    assert not np.array_equal(fast, exact)
    return verigrad.tensor(a), verigrad.tensor(b), fast, exact


@pytest.mark.skipif(not cpu_matmul.fast_available(), reason="no fast path here: every product is exact")
@pytest.mark.parametrize("holder", ["other", "this"])
def test_a_thread_that_holds_the_exact_path_holds_it_for_itself_alone(holder):
    """An engine's thread holds the exact products (rows_apart); a training loop or eager code in another
    thread keeps the fast ones, both ways round, on the eager path in Python and in C (repeated calls)."""
    a, b, fast, exact = _product()
    entered, leave = threading.Event(), threading.Event()
    got: dict[str, list[np.ndarray]] = {}

    def products(name: str) -> None:
        got[name] = [(a @ b).numpy() for _ in range(3)] + [cpu_matmul.matmul(a.numpy(), b.numpy())]

    def other() -> None:
        with verigrad.backend("cpu") as cpu, cpu.rows_apart() if holder == "other" else nullcontext():
            entered.set()
            leave.wait(10)
            products("other")

    thread = threading.Thread(target=other)
    thread.start()
    entered.wait(10)
    with verigrad.backend("cpu") as cpu, cpu.rows_apart() if holder == "this" else nullcontext():
        products("this")
        leave.set()
        thread.join()
        products("this, after")
    assert not cpu_matmul.exact_default()
    for name, results in got.items():
        want = exact if name.startswith(holder) else fast
        for r in results:
            np.testing.assert_array_equal(r.view(np.uint32), want.view(np.uint32), err_msg=name)
