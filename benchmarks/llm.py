"""SmolLM2-135M-Instruct (the Q4_1 GGUF of `verigrad.models.fetch.fetch("smollm2")`, or `--model`'s GGUF)
in verigrad, in llama.cpp (through llama-cpp-python) and in transformers (f32, the same GGUF loaded with
`gguf_file=`). verigrad runs once per `--activations` mode (a row each): f32 activations (the default of
`verigrad generate`) and q8 (activations to 8 bits per block of 32, llama.cpp's scheme).

Every framework runs the same ~100-token prompt (token ids made by verigrad's tokenizer, so the three
see the same tokens) in one forward pass, then decodes `--decode-tokens` tokens greedily, one forward
pass per token on its key/value cache, ignoring end tokens. Each (framework, thread count) pair runs
in a child process of its own, so that its peak resident memory (`ru_maxrss`; VmHWM on Linux) is its
own: the child loads the model (timed), runs one short untimed warm-up, then `--repeats` timed repetitions
from an empty cache, and the table gives the medians of prompt tokens/s and decode tokens/s, the load time and
the child's peak RSS, the ratios verigrad / llama.cpp next to the project's targets (decode >= 1.0x,
prompt >= 0.8x, peak RSS <= 1.2x), and how many of the greedy tokens match llama.cpp's.

llama-cpp-python is needed only by this script: if it is missing, it is installed with the running
interpreter's pip (a source build: about 9 minutes on 2 cores), unless `--no-llama-cpp` is given.

    python benchmarks/llm.py                        # 5 repeats, 1 and 2 threads, three frameworks
    python benchmarks/llm.py --repeats 3 --no-transformers
    python benchmarks/llm.py --threads 1 --decode-tokens 32 --no-llama-cpp --activations f32
    python benchmarks/llm.py --model SmolLM2.Q4_K_M.gguf --no-transformers  # a file of your own
    python benchmarks/llm.py --chat --repeats 3     # verigrad's start-up and a chat's peak memory
    python benchmarks/llm.py --chat --no-llama-cpp --chat-fill 244  # carried on to 244 positions
    python benchmarks/llm.py --startup --repeats 7  # where verigrad's start-up goes, stage by stage

`--chat` measures one fresh process per repetition and KV cache storage (f32, f16, q8_0): the seconds from
the process's start to verigrad imported, to load the model, to the first token of the first reply (its
prompt and the first plans), then a greedy chat of `CHAT_TURNS` turns on a cache of the whole context, as
`verigrad chat` makes it (grown as the conversation grows), and the process's peak RSS (VmHWM); then, where
llama-cpp-python is installed, llama.cpp's chat of the same turns (greedy, its own chat template, its
default f16 KV cache for a context of the positions verigrad's caches were allocated for by the end) in a
process that imports nothing else.

`--startup` measures one fresh process per repetition: the seconds from the process's start to verigrad
imported, then to import the loaders, to read the GGUF file's header (`read_gguf`), to build the tokenizer,
to build the model, and to the first token of a one-turn chat (the prompt's forward pass: compute, not
start-up), and gives their medians, beside llama.cpp's load (importing llama_cpp and `Llama(path)`, in
processes alternating with verigrad's) where llama-cpp-python is installed (`--no-llama-cpp`: not; the
table then has verigrad's row alone). Both also give the whole start, from this script starting the child
to the model loaded (`to_loaded`: the interpreter, its imports and the load) and the child's CPU seconds by
then, and their ratio, verigrad / llama.cpp. verigrad's modules are byte-compiled first, as `pip install`
compiles them (llama_cpp's were when it was installed): a checkout run with PYTHONDONTWRITEBYTECODE=1 and no
`__pycache__` otherwise compiles every module from source in every process, about 0.2 s of CPU.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import console as make_console
from _common import describe_machine, ensure_torch, positive_ints, table, verigrad
from llm_chat import CHAT_TURNS, MORE, llama_cpp_plain, peak_rss_mib
from rich.table import Table

FRAMEWORKS = ("verigrad", "llama.cpp", "transformers")
ACTIVATIONS = ("f32", "q8")  # verigrad's modes (`--activations`)
TARGETS = {"decode": 1.0, "prompt": 0.8, "rss": 1.2}  # verigrad / llama.cpp: >=, >=, <=
CHAT_WORKER = str(Path(__file__).with_name("llm_chat.py"))  # --chat's and --startup's child processes

# Text for the prompt, cut to `--prompt-tokens` tokens.
PROMPT = (
    "The history of computing is a story of ideas that took decades to become practical. Charles "
    "Babbage designed a mechanical engine that could be programmed with punched cards, and Ada Lovelace "
    "wrote what many consider the first algorithm intended for such a machine. A century later, Alan "
    "Turing described a universal machine that could simulate any other, and during the Second World War "
    "engineers built electronic computers to break codes and compute artillery tables. The transistor, "
    "the integrated circuit and the microprocessor then made computers smaller, cheaper and faster, "
    "until they fit in a pocket. Explain in a few sentences why each of these steps mattered."
)


# --- the child processes: one framework at one thread count -----------------------------------------


def run_verigrad(
    path: str, threads: int, activations: str = "f32"
) -> Callable[[list[int], int], tuple[float, float, list[int]]]:
    from verigrad.autograd import no_grad
    from verigrad.models.catalog import load_language_model

    verigrad.set_threads(threads)
    model, _ = load_language_model(path, activations)

    def last(ids: Any, cache: Any) -> int:  # as generation does: the prompt's last row of logits alone
        return int(np.argmax(model.last_logits(np.asarray(ids, dtype=np.int64), cache)[0]))

    def run(ids: list[int], steps: int) -> tuple[float, float, list[int]]:
        cache = model.new_cache(1, len(ids) + steps)
        with no_grad():
            t0 = time.perf_counter()
            token = last([ids], cache)
            t1 = time.perf_counter()
            out = [token]
            for _ in range(steps - 1):
                token = last([[token]], cache)
                out.append(token)
            t2 = time.perf_counter()
        return t1 - t0, t2 - t1, out

    return run


def run_llama_cpp(
    path: str, threads: int, mode: str = ""
) -> Callable[[list[int], int], tuple[float, float, list[int]]]:
    """mode "plain": without llama.cpp's extra buffer types (llm_chat.llama_cpp_plain)."""
    if mode == "plain":
        os.environ["VERIGRAD_LLAMA_PLAIN"] = "1"
    llama_cpp_plain()
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(
        model_path=path,
        n_ctx=1024,
        n_batch=512,
        n_threads=threads,
        n_threads_batch=threads,
        n_gpu_layers=0,
        verbose=False,
    )
    vocab = llm.n_vocab()

    def last() -> int:  # Llama.scores is only filled with logits_all=True, which computes every row
        return int(
            np.argmax(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(vocab,)))
        )

    def run(ids: list[int], steps: int) -> tuple[float, float, list[int]]:
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        token = last()
        t1 = time.perf_counter()
        out = [token]
        for _ in range(steps - 1):
            llm.eval([token])
            token = last()
            out.append(token)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, out

    return run


def run_transformers(path: str, threads: int) -> Callable[[list[int], int], tuple[float, float, list[int]]]:
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    file = Path(path)
    model = AutoModelForCausalLM.from_pretrained(str(file.parent), gguf_file=file.name, dtype=torch.float32)
    model.eval()

    def run(ids: list[int], steps: int) -> tuple[float, float, list[int]]:
        with torch.inference_mode():
            t0 = time.perf_counter()
            result = model(torch.tensor([ids]), use_cache=True)
            token = int(result.logits[0, -1].argmax())
            t1 = time.perf_counter()
            out = [token]
            for _ in range(steps - 1):
                result = model(
                    torch.tensor([[token]]), past_key_values=result.past_key_values, use_cache=True
                )
                token = int(result.logits[0, -1].argmax())
                out.append(token)
            t2 = time.perf_counter()
        return t1 - t0, t2 - t1, out

    return run


RUNNERS = {"verigrad": run_verigrad, "llama.cpp": run_llama_cpp, "transformers": run_transformers}


def worker(framework: str, path: str, threads: int, ids: list[int], steps: int, repeats: int) -> dict:
    """Load, warm up, time `repeats` runs; what the parent needs, as a dict."""
    t = time.perf_counter()
    name, _, mode = framework.partition(" ")  # "verigrad f32": verigrad with f32 activations
    run = RUNNERS[name](path, threads, *([mode] if mode else []))
    load = time.perf_counter() - t
    run(ids[:8], 4)  # warm-up: first-call costs (allocations, kernel selection) out of the timings
    prompt, decode, tokens = [], [], []
    for _ in range(repeats):
        p, d, tokens = run(ids, steps)
        prompt.append(len(ids) / p)
        decode.append((steps - 1) / d)  # the first token comes with the prompt
    return {
        "load_s": load,
        "prompt_tps": prompt,
        "decode_tps": decode,
        "tokens": tokens,
        "peak_rss_mib": peak_rss_mib(),
    }


def run_startup(args: argparse.Namespace, console: Any) -> Table:
    """`--startup`: medians over `--repeats` fresh processes of each start-up stage, verigrad's and (where
    llama-cpp-python is installed) llama.cpp's load, the two alternating."""
    jobs = [("verigrad", {"startup": True, "path": str(args.model)})]
    compileall.compile_dir(str(Path(verigrad.__file__).parent), quiet=1)  # as pip install: see the docstring
    with_llama_cpp = not args.no_llama_cpp and importlib.util.find_spec("llama_cpp") is not None
    if with_llama_cpp:
        jobs.append(("llama.cpp", {"llama_cpp_load": True, "path": str(args.model)}))
    runs: dict[str, list[dict]] = {name: [] for name, _ in jobs}
    for _ in range(args.repeats):
        for name, job in jobs:
            done = subprocess.run(
                [sys.executable, CHAT_WORKER, json.dumps({**job, "launched": time.time()})],
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise SystemExit(f"--startup {name}: {last}")
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    stages = list(runs["verigrad"][0])
    result = table(
        f"start-up, 1 thread, medians of {args.repeats} fresh processes (seconds)", ["", *stages], [""]
    )
    medians = {
        name: {k: statistics.median(r[k] for r in found) for k in found[0]} for name, found in runs.items()
    }
    for name, med in medians.items():
        result.add_row(name, *(f"{med[k]:.3f}" if k in med else "" for k in stages))
    if with_llama_cpp:
        ours, theirs = medians["verigrad"], medians["llama.cpp"]
        result.add_row(
            "verigrad / llama.cpp",
            *(f"{ours[k] / theirs[k]:.2f}x" if k in theirs and theirs[k] > 0 else "" for k in stages),
        )
    console.print(result)
    console.print(
        "start: the process's start to verigrad imported; imports: the loaders' modules; load = imports + "
        "read (the GGUF header) + tokenizer + model; load_cpu: the load's CPU seconds (what a loaded machine "
        "inflates least); first token: the one-turn chat prompt's forward pass. llama.cpp's load: importing "
        "llama_cpp and Llama(path), as the main table times it. to_loaded: from the moment this script "
        "starts the child process (the interpreter's start, its imports) to the model loaded, its CPU "
        "seconds (to_loaded_cpu) the process's own."
    )
    if not with_llama_cpp:
        console.print("llama-cpp-python is not installed (or --no-llama-cpp): verigrad's row alone.")
    return result


# llama.cpp's chat, run by `python -c` so that its process imports neither verigrad nor this script's
# modules (their memory would count in its peak): the same turns, greedy, its own chat template, a context
# of the positions verigrad's caches were allocated for (llama.cpp allocates its f16 KV cache for all of it
# at the start)
LLAMA_CPP_CHAT = """
import json, sys, time
job = json.loads(sys.argv[1])
t, cpu = time.perf_counter(), time.process_time()
sys.path.insert(0, job["here"])
from llm_chat import llama_cpp_plain  # imports neither verigrad nor llama_cpp
llama_cpp_plain()
from llama_cpp import Llama
llm = Llama(model_path=job["path"], n_ctx=job["n_ctx"], n_threads=1, n_threads_batch=1, n_gpu_layers=0,
            verbose=False)
load, load_cpu = time.perf_counter() - t, time.process_time() - cpu
messages = []
for turn in job["turns"]:
    messages.append({"role": "user", "content": turn})
    out = llm.create_chat_completion(messages, max_tokens=job["steps"], temperature=0.0)
    messages.append({"role": "assistant", "content": out["choices"][0]["message"]["content"]})
with open("/proc/self/status") as f:
    status = {ln.split(":")[0]: int(ln.split()[1]) / 2**10 for ln in f if ln.startswith(("VmHWM", "Rss"))}
print(json.dumps({"load_s": load, "load_cpu_s": load_cpu, "positions": llm.n_tokens,
                  "peak_rss_mib": status["VmHWM"], "anon_mib": status["RssAnon"],
                  "file_mib": status["RssFile"]}))
"""


def run_chat(args: argparse.Namespace, console: Any) -> Table:
    """`--chat`: medians over `--repeats` fresh processes for each KV cache storage, then llama.cpp's chat
    for the context verigrad's used (where llama-cpp-python is installed), then verigrad's again carried on
    to the positions llama.cpp's used where it used more (its replies differ: the same context used)."""
    rows, allocated, used = [], 0, 0
    for kv_cache in ("f32", "f16", "q8_0"):
        med = _verigrad_chat(args, kv_cache)
        seconds = [f"{med[k]:.2f}" for k in ("start_s", "load_s", "load_cpu_s", "first_token_s")]
        rows.append([kv_cache, *seconds, f"{med['positions']:.0f}", *_memory(med)])
        allocated, used = max(allocated, int(med["allocated"])), max(used, int(med["positions"]))
    if not args.no_llama_cpp and importlib.util.find_spec("llama_cpp") is not None:
        context = allocated  # the positions verigrad's caches were allocated for
        job = {"path": str(args.model), "n_ctx": context, "turns": CHAT_TURNS, "steps": args.decode_tokens,
               "here": str(Path(__file__).resolve().parent)}  # fmt: skip
        runs = [_child([sys.executable, "-c", LLAMA_CPP_CHAT, json.dumps(job)], args, "llama.cpp")]
        runs += [_child(runs[0]["command"], args, "llama.cpp") for _ in range(args.repeats - 1)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "command"}
        row = [f"llama.cpp f16, n_ctx {context}", "", f"{med['load_s']:.2f}", f"{med['load_cpu_s']:.2f}", ""]
        rows.append([*row, f"{med['positions']:.0f}", *_memory(med)])
        fill = int(med["positions"])
        rows += _carried_on(args, fill, used)
    if args.chat_fill:
        rows += _carried_on(args, args.chat_fill, used)
    headers = ["KV cache", "start s", "load s", "load CPU s", "first token s", "positions", "peak RSS MiB"]
    headers += ["anon MiB", "file MiB"]
    result = table(f"chat, {len(CHAT_TURNS)} turns, medians of {args.repeats}", headers, ["KV cache"])
    for row in rows:
        result.add_row(*row)
    console.print(result)
    console.print(
        "peak RSS: VmHWM at the chat's end; anon and file: the resident memory then, the process's own "
        "allocations and the mapped files' pages (the model's, the libraries'). positions: those the "
        f"cache holds at the end; 'then {MORE!r}': verigrad's chat carried on with such turns to the "
        "positions llama.cpp's used."
    )
    return result


def _carried_on(args: argparse.Namespace, fill: int, used: int) -> list[list[str]]:
    """Rows of verigrad's chats carried on to `fill` positions, for each KV cache storage (none where the
    chats used as many already)."""
    rows = []
    for kv_cache in ("f32", "f16", "q8_0") if fill > used else ():
        more = _verigrad_chat(args, kv_cache, fill)
        rows.append([f"{kv_cache}, then {MORE!r} to {fill}", "", "", "", ""])
        rows[-1] += [f"{more['positions']:.0f}", *_memory(more)]
    return rows


def _verigrad_chat(args: argparse.Namespace, kv_cache: str, fill: int = 0) -> dict:
    """The medians of `--repeats` fresh processes' chats (llm_chat.chat_worker)."""
    job = {"chat": kv_cache, "path": str(args.model), "steps": args.decode_tokens, "fill": fill}
    runs = [
        _child([sys.executable, CHAT_WORKER, json.dumps(job)], args, kv_cache) for _ in range(args.repeats)
    ]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "command"}


def _child(command: list[str], args: argparse.Namespace, what: str) -> dict:
    """The JSON line a child process printed last (with the command), or SystemExit with its error."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        raise SystemExit(f"--chat {what}: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "command": command}


def _memory(med: dict) -> list[str]:
    """The peak RSS, and the anonymous and file-backed resident MiB at the end, where measured."""
    return [f"{med[k]:.0f}" if k in med else "" for k in ("peak_rss_mib", "anon_mib", "file_mib")]


# --- the parent ---------------------------------------------------------------------------------------


def ensure_llama_cpp() -> str:
    """llama-cpp-python's version, installed first with this interpreter's pip if it is missing."""
    if importlib.util.find_spec("llama_cpp") is None:
        print(
            "llama-cpp-python is not installed; installing it for the comparison "
            "(python -m pip install llama-cpp-python; it builds llama.cpp from source: about 9 minutes "
            "on 2 cores)",
            flush=True,
        )
        subprocess.check_call([sys.executable, "-m", "pip", "install", "llama-cpp-python"])
        importlib.invalidate_caches()
    return importlib.import_module("llama_cpp").__version__


def prompt_ids(path: Path, count: int) -> list[int]:
    from verigrad.io.gguf import read_gguf
    from verigrad.io.tokenizer import Tokenizer

    ids = Tokenizer.from_gguf(read_gguf(path)).encode(PROMPT)
    if len(ids) < count:
        raise SystemExit(f"--prompt-tokens {count}: the prompt text has only {len(ids)} tokens")
    return ids[:count]


def measure(framework: str, args: argparse.Namespace, threads: int, ids: list[int]) -> dict:
    """One child process's results, or {"error": why}."""
    command = [
        sys.executable,
        __file__,
        "--worker",
        json.dumps(
            {
                "framework": framework,
                "path": str(args.model),
                "threads": threads,
                "ids": ids,
                "steps": args.decode_tokens,
                "repeats": args.repeats,
            }
        ),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    stopped = done.returncode in (-signal.SIGILL, -signal.SIGSEGV)
    if stopped and framework == "llama.cpp" and os.environ.get("VERIGRAD_LLAMA_PLAIN") != "1":  # see "plain"
        return measure("llama.cpp plain", args, threads, ids)
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail}"}
    plain = framework == "llama.cpp" and os.environ.get("VERIGRAD_LLAMA_PLAIN") == "1"  # --llama-plain
    return {**json.loads(lines[-1]), "framework": framework + " plain" * plain}


def agreement(ours: list[int], theirs: list[int]) -> str:
    """How many leading greedy tokens are the same."""
    n = 0
    for a, b in zip(ours, theirs):
        if a != b:
            break
        n += 1
    return f"{n}/{len(theirs)}"


def ratio_row(name: str, ours: float, theirs: float, target: float, higher_is_better: bool) -> list[str]:
    r = ours / theirs
    met = r >= target if higher_is_better else r <= target
    sign = ">=" if higher_is_better else "<="
    return [name, f"{r:.2f}x", f"{sign} {target:.1f}x", "yes" if met else "NO"]


def run(args: argparse.Namespace, console: Any) -> Table:
    ids = prompt_ids(args.model, args.prompt_tokens)
    speeds = table(
        f"{Path(args.model).name}, {args.prompt_tokens}-token prompt, {args.decode_tokens} greedy "
        f"tokens: medians of {args.repeats} runs (min-max)",
        [
            "threads",
            "framework",
            "load s",
            "prompt tok/s",
            "decode tok/s",
            "peak RSS MiB",
            "tokens = llama.cpp",
        ],
        left=("framework",),
        no_wrap=True,
    )
    ratios = table(
        "verigrad / llama.cpp (medians) against the targets",
        ["threads", "measure", "ratio", "target", "met"],
        left=("measure",),
        no_wrap=True,
    )
    for n in args.threads:
        results = {}
        for framework in args.frameworks:
            console.print(f"  {framework}, {n} thread(s)...", style="dim")
            results[framework] = measure(framework, args, n, ids)
        reference = results.get("llama.cpp", {}).get("tokens")
        for i, (framework, res) in enumerate(results.items()):
            first = str(n) if i == 0 else ""
            if "error" in res:
                speeds.add_row(first, framework, f"failed: {res['error']}", "", "", "", "")
                continue
            p, d = res["prompt_tps"], res["decode_tps"]
            speeds.add_row(
                first,
                res.get("framework", framework),  # "llama.cpp plain" where it had to run so
                f"{res['load_s']:.2f}",
                f"{statistics.median(p):.1f} ({min(p):.0f}-{max(p):.0f})",
                f"{statistics.median(d):.1f} ({min(d):.1f}-{max(d):.1f})",
                f"{res['peak_rss_mib']:.0f}",
                agreement(res["tokens"], reference) if reference else "",
            )
        speeds.add_section()
        theirs = results.get("llama.cpp", {})
        for framework, ours in results.items():
            if not framework.startswith("verigrad") or "prompt_tps" not in ours or "prompt_tps" not in theirs:
                continue
            rows = [
                ratio_row(
                    f"{framework} decode tokens/s",
                    statistics.median(ours["decode_tps"]),
                    statistics.median(theirs["decode_tps"]),
                    TARGETS["decode"],
                    True,
                ),
                ratio_row(
                    f"{framework} prompt tokens/s",
                    statistics.median(ours["prompt_tps"]),
                    statistics.median(theirs["prompt_tps"]),
                    TARGETS["prompt"],
                    True,
                ),
                ratio_row(
                    f"{framework} peak RSS",
                    ours["peak_rss_mib"],
                    theirs["peak_rss_mib"],
                    TARGETS["rss"],
                    False,
                ),
            ]
            for i, row in enumerate(rows):
                ratios.add_row(str(n) if i == 0 else "", *row)
            ratios.add_section()
    console.print(speeds)
    if ratios.row_count:
        console.print(ratios)
    return speeds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (default 5)")
    parser.add_argument("--prompt-tokens", type=int, default=100, help="prompt length (default 100)")
    parser.add_argument("--decode-tokens", type=int, default=64, help="tokens decoded per run (default 64)")
    parser.add_argument(
        "--activations",
        default="f32,q8",
        help="verigrad's quantized products, a row each: f32 activations, q8 (8-bit, llama.cpp's scheme) "
        "(default f32,q8)",
    )
    parser.add_argument("--model", help="a GGUF file (default: the fetched SmolLM2-135M-Instruct Q4_1)")
    parser.add_argument("--no-llama-cpp", action="store_true", help="leave llama.cpp out (no install)")
    parser.add_argument(
        "--llama-plain",
        action="store_true",
        help="llama.cpp without its extra buffer types (AMX kernels, repacked weights) everywhere: for a "
        "machine where they stop it (the main table falls back to it by itself, --chat and --startup do not)",
    )
    parser.add_argument("--no-transformers", action="store_true", help="leave transformers out")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per child process (900)")
    parser.add_argument("--chat", action="store_true", help="verigrad's start-up and a chat's peak memory")
    parser.add_argument(
        "--chat-fill",
        type=int,
        default=0,
        help="--chat: carry verigrad's chats on to this many positions too (default: llama.cpp's, where "
        "it runs: issue 31 measured 244)",
    )
    parser.add_argument("--startup", action="store_true", help="verigrad's start-up, stage by stage")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return args
    if args.llama_plain:
        os.environ["VERIGRAD_LLAMA_PLAIN"] = "1"  # this process's llama.cpp runs and every child's
    args.threads = positive_ints(parser, args.threads, "--threads")
    if args.repeats < 1 or args.prompt_tokens < 1 or args.decode_tokens < 2 or args.timeout <= 0:
        parser.error("--repeats and --prompt-tokens must be at least 1, --decode-tokens at least 2")
    if args.prompt_tokens + args.decode_tokens > 1024:
        parser.error("--prompt-tokens + --decode-tokens must be at most 1024 (llama.cpp's context here)")
    modes = [m.strip() for m in args.activations.split(",") if m.strip()]
    if not modes or any(m not in ACTIVATIONS for m in modes):
        parser.error(
            f"--activations: a comma-separated list of {', '.join(ACTIVATIONS)}, got {args.activations!r}"
        )
    left_out = {"llama.cpp": args.no_llama_cpp, "transformers": args.no_transformers}
    args.frameworks = [f"verigrad {m}" for m in dict.fromkeys(modes)]
    args.frameworks += [f for f in FRAMEWORKS[1:] if not left_out.get(f, False)]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        job = json.loads(args.worker)
        result = worker(
            job["framework"], job["path"], job["threads"], job["ids"], job["steps"], job["repeats"]
        )
        print(json.dumps(result))
        return
    from verigrad.models.fetch import fetch

    args.model = Path(args.model) if args.model else fetch("smollm2")
    if args.chat:
        run_chat(args, make_console(130))
        return
    if args.startup:
        run_startup(args, make_console(130))
        return
    versions = []
    if not args.no_llama_cpp:
        versions.append(f"llama-cpp-python {ensure_llama_cpp()}")
    if args.no_transformers:
        torch: Any = types.SimpleNamespace(__version__="not used")
    else:
        torch = ensure_torch()
        versions.append(f"transformers {importlib.import_module('transformers').__version__}")
    console = make_console(130)
    console.print(describe_machine(torch) + "".join(f", {v}" for v in versions))
    run(args, console)
    console.print(
        "tok/s: tokens per second (higher is better). Prompt: one forward pass over the prompt; decode: "
        "one token per forward pass, from the second generated token on. Peak RSS: of the framework's own "
        "process (ru_maxrss; VmHWM on Linux), the Python interpreter included. tokens = llama.cpp: leading "
        "greedy tokens equal to llama.cpp's. llama.cpp plain: without its extra buffer types (AMX kernels, "
        "repacked weights), after its default stopped on SIGILL."
    )


if __name__ == "__main__":
    main()
