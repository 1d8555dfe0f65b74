"""The child processes of `llm.py --chat` and `--startup` (`python benchmarks/llm_chat.py JOB`): each
imports verigrad (or llama_cpp) and nothing of the benchmark scripts (rich, their helpers), as `verigrad
chat` would run, so that the memory and start-up they measure are verigrad's alone; llama.cpp's chat runs
in a process of its own likewise (`llm.py`'s LLAMA_CPP_CHAT)."""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys
import time
from pathlib import Path

if importlib.util.find_spec("verigrad") is None:  # run from a checkout that is not installed (not imported
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # here: llama.cpp's processes too)


def llama_cpp_plain() -> None:
    """Where VERIGRAD_LLAMA_PLAIN is 1 (`llm.py --llama-plain`, or set by `llm.py` after llama.cpp's
    default stopped): llama.cpp without its extra buffer types (its AMX kernels and repacked weights), for a
    machine where they stop the process (a virtual machine that lists AMX: SIGILL or SIGSEGV at the first
    product). Call it before making a `Llama`."""
    if os.environ.get("VERIGRAD_LLAMA_PLAIN") != "1":
        return
    bindings = importlib.import_module("llama_cpp.llama_cpp")  # what Llama() builds its parameters from
    default = bindings.llama_model_default_params

    def plain() -> object:
        params = default()
        params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = plain


def peak_rss_mib() -> float:
    """This process's peak resident memory. On Linux, VmHWM: ru_maxrss is the same peak, except that
    Linux carries into it the parent's resident memory at the fork before the exec of this child."""
    try:
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 2**10
    except (OSError, StopIteration):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        return peak / (2**20 if sys.platform == "darwin" else 2**10)


CHAT_TURNS = ("What is the capital of France?", "And of Germany?", "Tell me about both in two sentences.")


MORE = "Tell me more."  # the turns that carry a chat on to `fill` positions


def chat_worker(path: str, kv_cache: str, steps: int, fill: int = 0) -> dict:
    """Start-up seconds (the interpreter and imports, load, first token) and a chat's peak RSS, in this
    fresh process; with `fill`, the chat goes on with MORE turns until its cache holds `fill` positions (the
    context another chat of the same turns used), the last reply cut there."""
    import verigrad as vg
    from verigrad.cli.lm_commands import CHAT_ALLOCATE
    from verigrad.models.catalog import load_language_model
    from verigrad.models.lm import generate

    vg.set_threads(1)
    started, t1, c1 = process_age(), time.perf_counter(), time.process_time()
    model, tokenizer = load_language_model(path)
    t2, c2 = time.perf_counter(), time.process_time()
    cache = model.new_cache(1, model.context_length, allocate=CHAT_ALLOCATE, dtype=kv_cache)
    messages: list[dict] = []
    first: list[float] = []  # when the first piece of text came

    def stream(_: str) -> None:
        first.append(first[0] if first else time.perf_counter())

    for turn in CHAT_TURNS:
        messages.append({"role": "user", "content": turn})
        ids = tokenizer.encode(tokenizer.apply_chat_template(messages), add_special=False)
        result = generate(
            model, tokenizer, ids, cache=cache, max_tokens=steps, temperature=0.0, stream=stream
        )
        messages.append({"role": "assistant", "content": result.text})
    while cache.length < fill:
        messages.append({"role": "user", "content": MORE})
        ids = tokenizer.encode(tokenizer.apply_chat_template(messages), add_special=False)
        if len(ids) >= fill:
            break
        result = generate(
            model, tokenizer, ids, cache=cache, max_tokens=min(steps, fill - len(ids)), temperature=0.0
        )
        messages.append({"role": "assistant", "content": result.text})
    return {
        "start_s": started,
        "load_s": t2 - t1,
        "load_cpu_s": c2 - c1,
        "first_token_s": first[0] - t2,
        "positions": cache.length,
        "allocated": cache.allocated,
        "peak_rss_mib": peak_rss_mib(),
        **resident_mib(),
    }


def resident_mib() -> dict:
    """This process's resident memory now, anonymous (its own allocations) and of mapped files (the model's
    pages, the libraries), from Linux's /proc (empty elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            found = {ln.split(":")[0]: int(ln.split()[1]) / 2**10 for ln in f if ln.startswith("Rss")}
        return {"anon_mib": found["RssAnon"], "file_mib": found["RssFile"]}
    except (OSError, KeyError):
        return {}


def startup_worker(path: str, launched: float) -> dict:
    """Seconds of each start-up stage in this fresh process (1 thread): import, the loaders' imports,
    read_gguf, tokenizer, model, first token; and from `launched` (the parent's clock when it started this
    process) to the model loaded, with the process's CPU seconds by then."""
    import verigrad as vg

    started, t, cpu = process_age(), time.perf_counter(), time.process_time()
    from verigrad.io.gguf import read_gguf
    from verigrad.io.tokenizer import Tokenizer
    from verigrad.models.catalog import load_language_model  # noqa: F401 (what a load imports)
    from verigrad.models.llama import Llama
    from verigrad.models.lm import generate

    vg.set_threads(1)
    t0 = time.perf_counter()
    gguf = read_gguf(path)
    t1 = time.perf_counter()
    tokenizer = Tokenizer.from_gguf(gguf)
    t2 = time.perf_counter()
    model = Llama.from_gguf(gguf)
    t3, load_cpu = time.perf_counter(), time.process_time() - cpu
    loaded = {"to_loaded_s": time.time() - launched, "to_loaded_cpu_s": time.process_time()}
    ids = tokenizer.encode(
        tokenizer.apply_chat_template([{"role": "user", "content": CHAT_TURNS[0]}]), add_special=False
    )
    generate(model, tokenizer, ids, max_tokens=1, temperature=0.0)
    t4 = time.perf_counter()
    return {
        "start_s": started,
        "imports_s": t0 - t,
        "read_s": t1 - t0,
        "tokenizer_s": t2 - t1,
        "model_s": t3 - t2,
        "load_s": t3 - t,
        "load_cpu_s": load_cpu,
        "first_token_s": t4 - t3,
        **loaded,
    }


def llama_cpp_load_worker(path: str, launched: float) -> dict:
    """llama.cpp's load in this fresh process, as the main table times it: importing llama_cpp, then
    Llama(path) (1 thread); and from `launched` to the model loaded, as startup_worker's."""
    started, t, cpu = process_age(), time.perf_counter(), time.process_time()
    llama_cpp_plain()
    from llama_cpp import Llama

    Llama(model_path=path, n_ctx=1024, n_threads=1, n_threads_batch=1, n_gpu_layers=0, verbose=False)
    return {
        "start_s": started,
        "load_s": time.perf_counter() - t,
        "load_cpu_s": time.process_time() - cpu,
        "to_loaded_s": time.time() - launched,
        "to_loaded_cpu_s": time.process_time(),
    }


def process_age() -> float:
    """Seconds since this process started (the interpreter's start and the imports; Linux's /proc, to a
    clock tick), NaN elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return float("nan")


def main(job: dict) -> dict:
    if "chat" in job:
        return chat_worker(job["path"], job["chat"], job["steps"], job.get("fill", 0))
    if "startup" in job:
        return startup_worker(job["path"], job["launched"])
    return llama_cpp_load_worker(job["path"], job["launched"])


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
