"""`verigrad serve` against llama.cpp's server (llama-cpp-python[server]) on SmolLM2-135M-Instruct (the Q4_1
GGUF of `verigrad.models.fetch.fetch("smollm2")`), over loopback HTTP with OpenAI's chat API.

Each server runs in a child process with the same thread count. For 1, 4 and 8 concurrent clients, every
client (a task of one asyncio loop in this process, serve_client.py: cheap, as it shares the cores with the
server) sends `--requests` streaming chat completions in a loop (a different question each, greedy,
`--max-tokens` tokens at most), and the table gives the aggregate output tokens/s (all clients' completion
tokens over the level's wall time), the median time to first token, the speedup over one client, the
server process's CPU milliseconds per output token (all its threads; Linux; in brackets verigrad's pool
workers', threads vg-pool-<k>) and the clients' own: on a shared machine the wall-clock figures measure
the neighbours too, the CPU time much less so. For verigrad,
from its /metrics counters, the share of the level's wall time its engine thread spent in decode steps and
in prefill (the rest it waited for requests; printed per level: of the steps' share, the part choosing
tokens and sending events, and the engine thread's CPU ms per token, all of it and that part's, the part
inside the model's forwards, and `outside_cpu_ms_per_token`: the server's CPU less the forwards' and the
pool workers') and the
decode steps' average rows, beside the most they
could average under this load (all tokens over the busiest client's: the clients whose answers end sooner
finish first, and the busiest one's last tokens run in smaller batches).
Goal: at 8 clients at least 4x one client's tokens/s, and ahead of llama.cpp's server at every count.
One warm-up round at each count runs first, a request per client as long as the measured ones: verigrad
builds a compiled step per batch size and window (64, 128, ... positions), and a warm-up of shorter
requests left the measured level building the longer window's plans.

llama.cpp's server runs from a virtual environment of its own, `llama-cpp-server` in verigrad's cache
folder (`VERIGRAD_CACHE`, else ~/.cache/verigrad): its server extra needs a newer Starlette than verigrad's
pin. The script makes it when it is missing (`python -m venv`, then `pip install llama-cpp-python[server]`,
the version this interpreter has where it has one: pip reuses the wheel it built for it, else it builds
one, about 9 minutes on 2 cores) and says what it does, unless `--no-llama-cpp` is given.
`--llama-no-repack` starts it with llama.cpp's `--no-repack` (the model parameter use_extra_bufts off: no
repacked or AMX weight buffers), for a CPU that reports AMX to a build that then cannot use it (a virtual
machine's: SIGILL at the first product).

`--steps` measures the batched decode step alone instead (no HTTP, no engine): `forward_rows` of B
sequences at different lengths for each B of `--clients`, medians of alternated repetitions, and the
tokens/s each B gives over B = 1's: the ceiling the server's scaling meets; the same in the process's CPU
time (all threads), which a busy machine's neighbours move much less. The cache's pages are written first
(`resident`), as a server's are.

    python benchmarks/serve.py                       # both servers, 1/4/8 clients
    python benchmarks/serve.py --no-llama-cpp --requests 2 --max-tokens 48
    python benchmarks/serve.py --seconds 30          # a steady load: clients busy for 30 s each level
    python benchmarks/serve.py --steps --clients 1,2,4,8 [--activations f32,q8]
    python benchmarks/serve.py --steps --clients 1,8 --model q4km.gguf   # another GGUF (e.g. Q4_K_M)
    python benchmarks/serve.py --stall 1024 --clients 4

The server's engine takes `--activations q8` (the products on 8-bit activations, as `verigrad generate
--activations q8`) and `--join-last` (see below); the table's last column gives the plans the server's
compiled steps built during each level (from /metrics).

`--engine` runs the engine alone (no HTTP) under the same clients and prompts, on `--threads` (1 for a figure
the machine's other work hardly moves): the engine thread's CPU time in prefill (admitting prompts, their
chunks run apart from the steps) and in decode steps per output token, the decode steps' average batch, the
median time to first token and the plans built by kind; `--seconds` for a steady load, `--activations`,
`--warm-positions N` (the plans built at start-up for windows of up to N positions, as `verigrad serve` does
for 128), `--batch-prompts` (a round's chunks of several prompts as one forward); `--block` sets the engine's
prefill block (its default, 16, or 64: what it was before). It runs an older tree's engine too (PYTHONPATH).

    python benchmarks/serve.py --engine --threads 1 --clients 8 --block 64
    python benchmarks/serve.py --engine --threads 1 --clients 8 --seconds 60 [--warm-positions 128]

`--no-join` runs the engine's prompt chunks apart from the decode steps (`join_chunks=False`; by default a
whole block that is not its prompt's last joins the step where it spends the rest of the prefill budget,
through the ragged step), with `--engine` and `--stall`; `--join-last` joins the prompts' last chunks too
(their first token from the step; the server's too), `--ragged-pad N` rounds a ragged step's tokens up to
a multiple of N (the engine's default 8: fewer plans), with `--engine`;
`--prefill-tokens N` sets the engine's prompt tokens between two steps for `--engine`. `--joined` times a
chunk of 5 and of 16 tokens joined to a step of B rows (`forward_mixed`) against the two run apart, for
each B of `--clients` (the process's CPU time, medians of alternated repetitions), and through the ragged
step (`forward_ragged`).

    python benchmarks/serve.py --joined --threads 1 --clients 1,4,7,8

`--stream-events` times the event loop's own work per token of a stream, without HTTP or a model: an
engine event through the dispatch to the request's queue and out of the stream as its server-sent event
(thread CPU microseconds; run it with each tree on PYTHONPATH to compare them).

    python benchmarks/serve.py --stream-events

`--steps --loop S` runs `--clients`' last B's steps for S s once warm, for a profiler to attach (its process
id printed first): `serve.py --steps --clients 8 --threads 1 --loop 8`, then `perf record -p PID`.

`--steps --kernels` runs the step kernel by kernel instead, on one thread: each op's CPU time in a step
(its plan's calls one at a time from Python), beside the whole step's (replayed) and the calls' sum.

    python benchmarks/serve.py --steps --kernels --clients 1,8

`--attention` times the batched step's cached attention alone (30 layers' calls on 8 rows of different
lengths, 1 and 2 threads: threads take bands of rows of equal work, not equal counts), over a common window
and as the step runs it (`ragged`: one `ragged_attention` call), and a prompt chunk's (16 tokens of one
sequence: its rows read their hidden tail once). serve_attention.py holds it.

    python benchmarks/serve.py --attention

`--stall N` measures a long prompt's cost to the running sequences instead (the engine alone): `--clients`'
largest count of sequences decode while an N-token prompt arrives; the longest wait between two of their
tokens and the prompt's time to first token, prefilled one 16-token chunk or 64 tokens (the engine's
default) between two steps, and all at once, and the prompt's CPU: the engine thread's from its arrival to
its first token, less that of the steps run meanwhile at a step's CPU before it came (`--threads 1` for
all of it: a pool worker's is not counted).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from _common import console as make_console
from _common import describe_machine, positive_ints, verigrad
from rich.table import Table
from serve_attention import attention
from serve_client import chat_body, run_clients
from serve_engine import engine_cpu, stall

QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain gravity to a child.",
    "Name three fruits and their colours.",
    "Who wrote Hamlet, and when?",
    "Why is the sky blue?",
    "Give me a tip for learning to cook.",
    "Describe a cat in two sentences.",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_cpp_python() -> Path:
    """The interpreter of the virtual environment llama.cpp's server runs from (see above)."""
    from verigrad.backends.cpu.cache import cache_dir

    folder = cache_dir() / "llama-cpp-server"
    return folder / ("Scripts" if os.name == "nt" else "bin") / "python"


def ensure_llama_cpp_server() -> tuple[Path, str]:
    """(its interpreter, llama-cpp-python's version) of the server's virtual environment, made and
    installed first where they are missing."""
    python = llama_cpp_python()
    folder = python.parent.parent
    if not python.exists():
        print(f"making a virtual environment for llama.cpp's server: {sys.executable} -m venv {folder}")
        subprocess.check_call([sys.executable, "-m", "venv", str(folder)])
    probe = [
        str(python),
        "-c",
        "import llama_cpp, llama_cpp.server, sse_starlette; print(llama_cpp.__version__)",
    ]
    found = subprocess.run(probe, capture_output=True, text=True)
    if found.returncode != 0:
        spec = importlib.util.find_spec("llama_cpp")
        version = importlib.import_module("llama_cpp").__version__ if spec else None
        package = "llama-cpp-python[server]" + (f"=={version}" if version else "")
        print(f"installing {package} there: {python} -m pip install '{package}' (pip reuses a wheel it built "
              "for this version; else a source build, about 9 minutes on 2 cores)", flush=True)  # fmt: skip
        subprocess.check_call([str(python), "-m", "pip", "install", package])
        found = subprocess.run(probe, capture_output=True, text=True, check=True)
    return python, found.stdout.strip()


# llama.cpp's server with the model parameter use_extra_bufts off (its --no-repack; llama-cpp-python's
# Llama does not take it): the default parameters patched, then the server's module run as __main__
NO_REPACK = """
import runpy, sys
import llama_cpp.llama_cpp as lib
defaults = lib.llama_model_default_params
def params():
    p = defaults()
    p.use_extra_bufts = False
    return p
lib.llama_model_default_params = params
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__")
"""


def start(
    which: str,
    model: Path,
    port: int,
    threads: int,
    batch: int,
    llama: tuple[Path, bool] | None = None,
    options: tuple[str, ...] = (),
) -> subprocess.Popen:
    """The server `which` on `port`; llama.cpp's with `llama` = (its interpreter, whether --no-repack);
    verigrad's with its engine's `options` (`verigrad serve`'s arguments)."""
    if which == "verigrad":
        python, args = Path(sys.executable), ["-m", "verigrad", "serve", "--model", str(model), *options]
        args += [
            "--port",
            str(port),
            "--threads",
            str(threads),
            "--max-batch",
            str(batch),
            "--context",
            "1024",
        ]
        # the child serves this verigrad: run from its root too, as `-m` puts the working folder first on
        # the path (run from another checkout, the child served that checkout's package)
        cwd = root = str(Path(verigrad.__file__).resolve().parent.parent)
        path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
    else:
        assert llama is not None
        python, no_repack = llama
        args = ["-c", NO_REPACK] if no_repack else ["-m", "llama_cpp.server"]
        args += ["--model", str(model), "--port", str(port), "--host", "127.0.0.1"]
        args += ["--n_threads", str(threads), "--n_ctx", "1024", "--verbose", "False"]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # its own environment's packages
        cwd = None
    quiet, errors = subprocess.DEVNULL, subprocess.PIPE
    proc = subprocess.Popen([str(python), *args], stdout=quiet, stderr=errors, env=env, cwd=cwd)
    for _ in range(1200):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            said = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
            raise RuntimeError(f"{which}'s server exited: {said}")
        time.sleep(0.25)
    proc.kill()
    raise RuntimeError(f"{which}'s server did not answer within 5 minutes")


def cpu_seconds(pid: int, thread: int | None = None) -> float | None:
    """The process's CPU time so far (user and system, all its threads; or its thread `thread`'s), from
    /proc (Linux), else None."""
    where = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        fields = Path(where).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def pool_cpu_seconds(pid: int) -> float | None:
    """The CPU time so far of process `pid`'s threads named vg-pool-<k> (verigrad's pool workers; Linux),
    else None."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0.0
    for task in tasks:
        try:
            named = Path(f"/proc/{pid}/task/{task}/comm").read_text().startswith("vg-pool-")
        except OSError:
            continue  # the thread ended
        total += (cpu_seconds(pid, int(task)) or 0.0) if named else 0.0
    return total


def engine_metrics(url: str) -> dict[str, float]:
    """verigrad's engine counters from the server's /metrics (empty for a server without them)."""
    try:
        text = httpx.get(f"{url}/metrics", timeout=10).text
    except httpx.HTTPError:
        return {}
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("verigrad_") and "{" not in name:
            found[name.removeprefix("verigrad_")] = float(value)
    return found


def engine_share(before: dict[str, float], after: dict[str, float], wall: float) -> dict:
    """Of the level's wall time, the engine thread's share in decode steps and in prefill, and the
    decode steps' average rows (where the server gives the counters)."""
    if "decode_seconds_total" not in before or "decode_seconds_total" not in after:
        return {}
    d = {k: after[k] - before[k] for k in before if k in after}
    out = {
        "decode_share": d["decode_seconds_total"] / wall,
        "prefill_share": d["prefill_seconds_total"] / wall,
        "rows_per_step": d["decode_rows_total"] / max(d["decode_steps_total"], 1),
    }
    if "plans_built_total" in d:  # the compiled steps' plans built during the level
        out["plans_built"] = d["plans_built_total"]
    if "sampling_seconds_total" in d:  # of the decode steps' time, choosing tokens and sending events
        tokens = max(d["completion_tokens_total"], 1)
        out |= {
            "sampling_share": d["sampling_seconds_total"] / wall,
            "engine_cpu_ms_per_token": 1000 * d["engine_cpu_seconds_total"] / tokens,
            "sampling_cpu_ms_per_token": 1000 * d["sampling_cpu_seconds_total"] / tokens,
        }
    if "step_cpu_seconds_total" in d:  # the engine thread's CPU inside the model's forwards
        tokens = max(d["completion_tokens_total"], 1)
        out |= {
            "step_cpu_ms_per_token": 1000 * d["step_cpu_seconds_total"] / tokens,
            "chunk_cpu_ms_per_token": 1000 * d["chunk_cpu_seconds_total"] / tokens,
        }
    return out


def level(
    url: str,
    model: str,
    clients: int,
    requests: int,
    max_tokens: int,
    pid: int = 0,
    seconds: float | None = None,
) -> dict:
    """Every client sends `requests` requests one after the other (with `seconds`, it cycles through them
    starting new ones until that many seconds have passed); the level's aggregate figures, with
    the server's CPU milliseconds per output token (process `pid`'s, where /proc has it): on a machine
    shared with other work, what the wall-clock figures cannot separate from the neighbours."""
    count = len(QUESTIONS) if seconds else requests  # with a time limit, every question in turn
    bodies = [
        [chat_body(model, QUESTIONS[(i + j) % len(QUESTIONS)], max_tokens) for j in range(count)]
        for i in range(clients)
    ]
    metrics0 = engine_metrics(url)
    t0, cpu0, mine0 = time.perf_counter(), cpu_seconds(pid), time.process_time()
    main0 = cpu_seconds(pid, pid)  # the main thread: verigrad's and llama-cpp-python's HTTP event loop
    pool0 = pool_cpu_seconds(pid)
    per_client = run_clients(url, bodies, seconds)
    results = [r for mine in per_client for r in mine]
    wall, cpu1, mine = time.perf_counter() - t0, cpu_seconds(pid), time.process_time() - mine0
    main1, pool1 = cpu_seconds(pid, pid), pool_cpu_seconds(pid)
    tokens = sum(r[2] for r in results)
    # the most rows a step can average under this load: clients whose answers are shorter finish first,
    # and the batch runs the longest client's tail alone (each client's tokens are a step row each)
    longest = max(sum(r[2] for r in mine) for mine in per_client)
    cpu_ms = 1000 * (cpu1 - cpu0) / tokens if cpu0 is not None and cpu1 is not None and tokens else None
    loop_ms = 1000 * (main1 - main0) / tokens if main0 is not None and main1 is not None and tokens else None
    pool_ms = 1000 * (pool1 - pool0) / tokens if pool0 is not None and pool1 is not None and tokens else None
    out = {
        "tokens_per_s": tokens / wall,
        "ttft_ms": 1000 * statistics.median(r[0] for r in results),
        "cpu_ms_per_token": cpu_ms,
        "loop_cpu_ms_per_token": loop_ms,  # the server's main thread (its event loop) alone
        "pool_cpu_ms_per_token": pool_ms,  # verigrad's pool workers (their chunks and their waits)
        "client_cpu_ms_per_token": 1000 * mine / max(tokens, 1),  # this process: the clients' own cost
        "rows_possible": tokens / max(longest, 1),
        **engine_share(metrics0, engine_metrics(url), wall),
    }
    if "step_cpu_ms_per_token" in out and None not in (cpu_ms, pool_ms):
        # the server's CPU outside the model's forwards: all its threads' less the engine thread's inside
        # the forwards (decode steps and prompt chunks) and the pool workers' (which run only kernels)
        model_ms = out["step_cpu_ms_per_token"] + out["chunk_cpu_ms_per_token"] + pool_ms
        out["outside_cpu_ms_per_token"] = cpu_ms - model_ms
    return out


def run(
    which: str,
    model: Path,
    threads: int,
    counts: list[int],
    requests: int,
    max_tokens: int,
    llama: tuple[Path, bool] | None = None,
    seconds: float | None = None,
    options: tuple[str, ...] = (),
) -> dict:
    port = free_port()
    proc = start(which, model, port, threads, max(counts), llama, options)
    url, name = (
        f"http://127.0.0.1:{port}",
        httpx.get(f"http://127.0.0.1:{port}/v1/models").json()["data"][0]["id"],
    )
    try:
        out = {}
        for clients in counts:
            level(url, name, clients, 1, max_tokens)  # warm-up: the plans of this level's batches and windows
            out[clients] = level(url, name, clients, requests, max_tokens, proc.pid, seconds)
            print(f"{which}, {clients} client(s): {out[clients]}", flush=True)
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def steps(
    model_path: Path,
    threads: int,
    counts: list[int],
    activations: str = "f32",
    repeats: int = 7,
    loop: float | None = None,
) -> None:
    """The batched decode step alone: ms per step and tokens/s for each batch size, over B = 1's, with the
    quantized products on `activations` (f32 or q8). With `loop`, the steps of the last batch size for that
    many seconds instead, once warm (for a profiler to attach: the process id is printed first)."""
    from verigrad.backends import backend, set_threads
    from verigrad.models.catalog import load_language_model

    set_threads(threads)
    model, _ = load_language_model(model_path, activations)
    with backend("cpu"):
        cache = resident(model.new_cache(max(counts), 512))
        ids = np.full((max(counts), 1), 42)

        def step(b: int) -> None:
            model.forward_rows(ids[:b], cache, [100 + 7 * i for i in range(b)])

        for b in counts:
            for _ in range(12):  # the plan built, then its calls recorded and replayed
                step(b)
        if loop is not None:
            print(f"looping B={counts[-1]} for {loop} s, process {os.getpid()}", flush=True)
            c0, t0, n = time.process_time(), time.perf_counter(), 0
            while time.perf_counter() - t0 < loop:
                step(counts[-1])
                n += 1
            print(
                f"{activations} B={counts[-1]}: CPU {1000 * (time.process_time() - c0) / n:.1f} ms per step"
            )
            return
        times: dict[int, list[float]] = {b: [] for b in counts}
        cpu: dict[int, list[float]] = {b: [] for b in counts}
        for _ in range(repeats):
            for b in counts:
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(3):
                    step(b)
                times[b].append((time.perf_counter() - t0) / 3)
                cpu[b].append((time.process_time() - c0) / 3)
    base = statistics.median(times[counts[0]]) / counts[0]
    cpu_base = statistics.median(cpu[counts[0]]) / counts[0]
    for b in counts:
        ms, cpu_ms = statistics.median(times[b]), statistics.median(cpu[b])
        print(
            f"{activations} B={b}: {1000 * ms:.1f} ms per step, {b / ms:.1f} tokens/s, "
            f"{b / ms * base:.2f}x B={counts[0]}'s; CPU {1000 * cpu_ms:.1f} ms per step, "
            f"{b / cpu_ms * cpu_base:.2f}x B={counts[0]}'s tokens per CPU second"
        )


def resident(cache: Any) -> Any:
    """The cache with every page written (zeros), as a server's is: a fresh cache's untouched pages all read
    the kernel's one zero page from the CPU's caches (8 rows' attention looked 2-3x cheaper)."""
    for a in (*cache.keys, *cache.values):
        a[...] = 0
    return cache


def joined(
    model_path: Path, threads: int, counts: list[int], chunks: tuple[int, ...] = (5, 16), repeats: int = 9
):
    """A prompt's chunk of T tokens joined to a decode step of B rows (`forward_mixed`) against the two
    run apart (`forward_rows`, then `forward_chunk`), for each B of `counts` and T of `chunks`: the
    process's CPU ms, medians of alternated repetitions, on plans already built and replaying."""
    from verigrad.backends import backend, set_threads
    from verigrad.models.catalog import load_language_model

    set_threads(threads)
    model, _ = load_language_model(model_path)
    with backend("cpu"):
        cache, row = model.new_cache(max(counts) + 1, 512), model.new_cache(1, 512)
        for b in counts:
            lengths, ids = [100 + 7 * i for i in range(b)], np.full((b, 1), 42)
            for t in chunks:
                chunk = np.arange(1000, 1000 + t).reshape(1, t)

                def apart(ids=ids, chunk=chunk, lengths=lengths) -> None:
                    model.forward_rows(ids, cache, lengths)
                    row.length = 32  # the chunk at positions 32 ... of its own cache
                    model.forward_chunk(chunk, row)

                def together(ids=ids, chunk=chunk, lengths=lengths) -> None:
                    model.forward_mixed(ids, chunk, cache, lengths, 32)

                def ragged(chunk=chunk, lengths=lengths) -> None:
                    runs = [[42]] * len(lengths) + [list(chunk[0])]
                    model.forward_ragged(runs, cache, list(range(len(runs))), [*lengths, 32])

                ways = {"apart": apart, "joined": together, "ragged": ragged}
                cpu: dict[str, list[float]] = {way: [] for way in ways}
                for r in range(repeats + 6):  # the plans built, then recorded and replayed
                    for way, run in ways.items():
                        c0 = time.process_time()
                        run()
                        if r >= 6:
                            cpu[way].append(time.process_time() - c0)
                ms_apart, ms_joined, ms_ragged = (1000 * statistics.median(cpu[way]) for way in ways)
                print(
                    f"B={b} rows + a {t}-token chunk: apart {ms_apart:.1f} ms, joined {ms_joined:.1f} ms "
                    f"({ms_apart / ms_joined:.2f}x), ragged {ms_ragged:.1f} ms ({ms_apart / ms_ragged:.2f}x)"
                )


def kernels(model_path: Path, counts: list[int], activations: str = "f32", repeats: int = 5) -> None:
    """The batched decode step kernel by kernel, one thread: its plan's calls run one at a time from Python
    on a step's inputs (the loop a plan runs before it replays), each call's thread CPU time summed per op
    (view ops included: a replay makes most of them once), beside the whole step as it runs (replayed)
    and the sum of its calls: their difference is what the replay saves of the loop's Python per call."""
    from verigrad.backends import backend, set_threads
    from verigrad.models.catalog import load_language_model

    set_threads(1)
    model, _ = load_language_model(model_path, activations)
    with backend("cpu"):
        cache = resident(model.new_cache(max(counts), 512))
        ids = np.full((max(counts), 1), 42)
        for b in counts:
            lengths = [100 + 7 * i for i in range(b)]
            for _ in range(12):  # the plan built, then its calls recorded and replayed
                model.forward_rows(ids[:b], cache, lengths)
            plans = list(model.cached_step.decode_rows["f32"]._plans.values())
            before = [p.runs for p in plans]
            model.forward_rows(ids[:b], cache, lengths)
            (plan,) = [p for p, runs in zip(plans, before) if p.runs > runs]  # this batch's
            given: list = []
            run = plan.run_locked
            plan.run_locked = lambda arrays: given.append(list(arrays)) or run(arrays)
            whole = []
            for _ in range(3 * repeats):
                c0 = time.thread_time()
                model.forward_rows(ids[:b], cache, lengths)
                whole.append(time.thread_time() - c0)
            del plan.run_locked
            per_op: dict[str, list[float]] = {}
            for _ in range(repeats):
                env = plan._template.copy()
                for slot, array in zip(plan.input_slots, given[-1]):
                    env[slot] = array
                spent: dict[str, float] = {}
                for call, (kernel, ins, out) in zip(plan.calls, plan._loop):
                    c0 = time.thread_time()
                    result = kernel(*[env[i] for i in ins])
                    spent[call.op.name] = spent.get(call.op.name, 0.0) + time.thread_time() - c0
                    for slot, value in zip(out, result) if type(out) is tuple else [(out, result)]:
                        env[slot] = value
                for name, t in spent.items():
                    per_op.setdefault(name, []).append(t)
            calls = {name: sum(c.op.name == name for c in plan.calls) for name in per_op}
            ms = {name: 1000 * statistics.median(ts) for name, ts in per_op.items()}
            print(
                f"{activations} B={b}, 1 thread: the step {1000 * statistics.median(whole):.2f} ms CPU "
                f"(replayed), its {len(plan.calls)} calls one by one {sum(ms.values()):.2f} ms"
            )
            for name in sorted(ms, key=ms.get, reverse=True):
                each = 1000 * ms[name] / calls[name]
                print(f"  {name:>20}: {ms[name]:6.2f} ms, {calls[name]} calls, {each:.1f} us each")


def stream_events(tokens: int = 64, repeats: int = 300) -> None:
    """The event loop's own work per token of a stream, no HTTP: the engine's event through `_Dispatch`
    into the request's queue, then the stream's server-sent event (`app._stream`) of a greedy chat
    completion with the usage; thread CPU microseconds per event over `repeats` streams of `tokens`."""
    import asyncio

    from verigrad.serve import app, protocol
    from verigrad.serve.engine import Event

    class Engine:
        def cancel(self, handle: Any) -> None:
            pass

    async def streams() -> float:
        model = "SmolLM2-135M-Instruct.Q4_1"
        body = json.loads(chat_body(model, QUESTIONS[0], tokens))
        parsed = protocol.parse(body, True, lambda messages: [1, 2, 3], 1024)
        dispatch, words = app._Dispatch(asyncio.get_running_loop()), QUESTIONS[0].split()
        spent = 0.0
        for _ in range(repeats):
            queue: asyncio.Queue = asyncio.Queue()
            stream = app._stream(Engine(), None, queue, parsed, protocol.new_id(True), model, None)
            await stream.__anext__()  # the assistant's role
            t0 = time.thread_time()
            for i in range(tokens):
                last = i == tokens - 1
                text = " " + words[i % len(words)]
                dispatch.put(queue, Event(text, [i], finish_reason="length" if last else None))
                dispatch._deliver()  # what the loop's wake-up runs
                await stream.__anext__()
            spent += time.thread_time() - t0
        return spent

    per_token = 1e6 * asyncio.run(streams()) / (tokens * repeats)
    print(f"the event loop's work per streamed token (no HTTP): {per_token:.2f} us CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="1,4,8", help="concurrent client counts (default 1,4,8)")
    parser.add_argument("--requests", type=int, default=3, help="requests per client per level (default 3)")
    parser.add_argument(
        "--seconds",
        type=float,
        help="instead of --requests: each client cycles through the questions, starting requests for this "
        "many seconds (a steady load: every client busy until the end, no tail run by a few)",
    )
    parser.add_argument("--max-tokens", type=int, default=64, help="per request (default 64)")
    parser.add_argument("--threads", type=int, default=2, help="each server's threads (default 2)")
    parser.add_argument("--no-llama-cpp", action="store_true", help="verigrad's side only (no install)")
    parser.add_argument("--llama-no-repack", action="store_true", help="llama.cpp's --no-repack (see above)")
    parser.add_argument("--steps", action="store_true", help="the batched decode step alone (see above)")
    parser.add_argument(
        "--loop", type=float, help="--steps: the last B's steps for this many seconds (see above)"
    )
    parser.add_argument("--engine", action="store_true", help="the engine alone, its CPU time (see above)")
    parser.add_argument("--attention", action="store_true", help="the batched attention alone (see above)")
    parser.add_argument(
        "--joined", action="store_true", help="a chunk joined to a step, or apart (see above)"
    )
    parser.add_argument(
        "--stream-events", action="store_true", help="the event loop's work per streamed token (see above)"
    )
    parser.add_argument(
        "--kernels", action="store_true", help="--steps: the step kernel by kernel, one thread (see above)"
    )
    parser.add_argument("--block", type=int, default=16, help="--engine: the prefill block (default 16)")
    parser.add_argument(
        "--no-join", action="store_true", help="--engine, --stall: prompt chunks run alone, not in the steps"
    )
    parser.add_argument("--prefill-tokens", type=int, help="--engine: prompt tokens between two steps")
    parser.add_argument(
        "--batch-prompts", action="store_true", help="--engine: several prompts' chunks as one forward"
    )
    parser.add_argument(
        "--warm-positions",
        type=int,
        help="--engine: plans built at start-up for windows of up to N positions",
    )
    parser.add_argument(
        "--join-last", action="store_true", help="--engine, the server: prompts' last chunks join the steps"
    )
    parser.add_argument(
        "--ragged-pad", type=int, help="--engine: a ragged step's tokens rounded up to a multiple"
    )
    parser.add_argument(
        "--activations",
        default="f32",
        help="the products' activations: f32 or q8 (the server's, --engine's); --steps: comma-separated",
    )
    parser.add_argument(
        "--stall", type=int, metavar="N", help="an N-token prompt among running ones (see above)"
    )
    parser.add_argument(
        "--model",
        type=Path,
        help="a GGUF file instead of the fetched SmolLM2 Q4_1 (e.g. `verigrad quantize ... --type q4_k_m`'s)",
    )
    args = parser.parse_args()
    counts = positive_ints(parser, args.clients, "--clients")
    vg = verigrad
    from verigrad.models.fetch import fetch

    model = args.model or fetch("smollm2")
    if args.attention:
        print(describe_machine())
        attention()
        return
    if args.stream_events:
        print(describe_machine())
        stream_events(args.max_tokens)
        return
    if args.stall:
        print(describe_machine())
        stall(model, args.threads, max(counts), args.stall, not args.no_join)
        return
    if args.joined:
        print(describe_machine())
        joined(model, args.threads, counts)
        return
    if args.engine:
        print(describe_machine())
        loops = (args.requests, args.max_tokens, args.block, not args.no_join, args.prefill_tokens)
        flags = {"join_last": True} if args.join_last else {}
        flags |= {} if args.ragged_pad is None else {"ragged_pad": args.ragged_pad}
        flags |= {} if args.warm_positions is None else {"warm_positions": args.warm_positions}
        flags |= {"batch_prompts": True} if args.batch_prompts else {}
        engine_cpu(model, args.threads, counts, *loops, flags, args.activations, args.seconds, QUESTIONS)
        return
    if args.steps:
        print(describe_machine())
        for activations in args.activations.split(","):
            if activations not in ("f32", "q8"):
                parser.error(f"--activations: comma-separated f32, q8, got {args.activations!r}")
            if args.kernels:
                kernels(model, counts, activations)
            else:
                steps(model, args.threads, counts, activations, loop=args.loop)
        return
    console = make_console(110)
    console.print(describe_machine())
    loops = (args.requests, args.max_tokens)
    if args.activations not in ("f32", "q8"):
        parser.error(f"--activations: the server takes one of f32, q8, got {args.activations!r}")
    options = ("--activations", args.activations) + ("--join-last",) * args.join_last
    if args.activations == "f32":  # the defaults: what a tree without these options is given
        options = options[2:]
    results = {
        "verigrad": run(
            "verigrad", model, args.threads, counts, *loops, seconds=args.seconds, options=options
        )
    }
    if not args.no_llama_cpp:
        python, version = ensure_llama_cpp_server()
        console.print(f"llama-cpp-python {version} ({python})" + (", --no-repack" * args.llama_no_repack))
        llama = (python, args.llama_no_repack)
        results["llama.cpp"] = run("llama.cpp", model, args.threads, counts, *loops, llama, args.seconds)
    table = Table(title=f"verigrad {vg.__version__} serve: {model.name}, {args.threads} threads, "
                  + (f"requests for {args.seconds:g} s" if args.seconds else f"{args.requests} requests")
                  + f" x {args.max_tokens} tokens per client")  # fmt: skip
    columns = ("server", "clients", "tokens/s", "x 1 client", "TTFT ms (median)", "vs llama.cpp")
    for column in (
        *columns,
        "CPU ms/token (pool's)",
        "client CPU ms/token",
        "engine: decode / prefill / rows (most possible), plans built",
    ):
        table.add_column(column, justify="right")
    for which, levels in results.items():
        for clients, r in levels.items():
            base = levels[counts[0]]["tokens_per_s"]
            theirs = results.get("llama.cpp", {}).get(clients)
            versus = ""
            if theirs and which == "verigrad":
                versus = f"{r['tokens_per_s'] / theirs['tokens_per_s']:.2f}x"
            table.add_row(
                which, str(clients), f"{r['tokens_per_s']:.1f}", f"{r['tokens_per_s'] / base:.2f}x",
                f"{r['ttft_ms']:.0f}", versus,
                "" if r["cpu_ms_per_token"] is None else f"{r['cpu_ms_per_token']:.1f}"
                + (f" ({r['pool_cpu_ms_per_token']:.1f})" if r["pool_cpu_ms_per_token"] else ""),
                f"{r['client_cpu_ms_per_token']:.2f}",
                f"{r['decode_share']:.0%} / {r['prefill_share']:.0%} / {r['rows_per_step']:.2f} "
                f"({r['rows_possible']:.2f})"
                + (f", {r['plans_built']:.0f} plans" if "plans_built" in r else "")
                if "decode_share" in r else "",
            )  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
