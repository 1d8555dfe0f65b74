"""Long fuzz runs of verigrad's file readers, outside CI: `python tools/fuzz.py --cases 300`.

For each format, small valid seeds are made here (GGUF with gguf.GGUFWriter, safetensors with the
safetensors package, MNIST IDX, a tokenizer in a GGUF file, real chat templates); each case mutates one
(bytes replaced by interesting values, cut, inserted, chunks repeated or dropped; templates spliced with
jinja constructs) and loads it with verigrad's public loader in a forked child under a time limit and an
address-space limit. The table counts what happened: loaded (and checked), refused cleanly (a VerigradError:
WeightFileError, TemplateError), wrong (loaded, but a check of the result failed), crashed (a signal),
another exception, timeouts; with the largest time and peak memory (RSS) of a child. `--keep DIR` writes
each case that was not loaded or refused cleanly there, to reproduce it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import select
import signal
import struct
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verigrad.errors import VerigradError

FORMATS = ("gguf", "safetensors", "torch", "idx", "tokenizer", "templates")
TEXTS = ["hello world", "héllo wörld 😀\n\tcode: x ** 2", "<|im_start|>user\nhi<|im_end|>"]
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi 😀"},
    {"role": "assistant", "content": "Hello."},
]
INTERESTING = [
    0,
    1,
    2,
    3,
    7,
    8,
    16,
    31,
    32,
    127,
    128,
    255,
    256,
    2**15,
    2**16 - 1,
    2**31 - 1,
    2**31,
    2**32 - 1,
]
INTERESTING += [2**53, 2**63 - 1, 2**63, 2**64 - 1]


# seeds ---------------------------------------------------------------------------------------------------


def gguf_seed(path: Path, tokenizer_only: bool = False) -> bytes:
    """A small GGUF file: metadata of every kind and f32, f16 and q8_0 tensors (or only a tokenizer)."""
    import gguf

    from verigrad.io.tokenizer import byte_alphabet

    w = gguf.GGUFWriter(str(path), "llama")
    if tokenizer_only:
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        merges = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"]
        tokens = [*specials, *byte_alphabet().values(), *(m.replace(" ", "") for m in merges)]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("smollm")
        w.add_token_list(tokens)
        w.add_token_types([3] * 3 + [1] * (len(tokens) - 3))
        w.add_token_merges(merges)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(False)
        w.add_chat_template(TEMPLATES[0])
    else:
        rng = np.random.default_rng(0)
        w.add_context_length(64)
        w.add_embedding_length(32)
        w.add_float32("test.scale", 0.5)
        w.add_bool("test.flag", True)
        w.add_array("test.ints", [1, 2, 3])
        w.add_string("test.name", "fuzz seed")
        w.add_tensor("a.weight", rng.standard_normal((4, 32)).astype(np.float32))
        w.add_tensor("b.weight", rng.standard_normal((2, 32)).astype(np.float16))
        q = gguf.quants.quantize(
            rng.standard_normal((2, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0
        )
        w.add_tensor("c.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def safetensors_seed(path: Path) -> bytes:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    tensors = {
        "w": rng.standard_normal((3, 5)).astype(np.float32),
        "h": rng.standard_normal(7).astype(np.float16),
        "i": np.arange(6, dtype=np.int64).reshape(2, 3),
        "b": np.array([True, False]),
    }
    save_file(tensors, str(path), metadata={"format": "pt"})
    return path.read_bytes()


def torch_seed(path: Path) -> bytes:
    """A torch.save checkpoint (verigrad's writer): f32 with a transposed view sharing its storage, f16,
    bf16, i64 and bool tensors, a parameter that requires grad, and plain values in nested containers."""
    import verigrad

    rng = np.random.default_rng(0)
    base = rng.standard_normal((4, 6)).astype(np.float32)
    state = {
        "w": base,
        "w.T": base.T,
        "h": rng.standard_normal(5).astype(np.float16),
        "bf": verigrad.tensor(rng.standard_normal(3).astype(np.float32)).to(verigrad.bfloat16),
        "i": np.arange(6, dtype=np.int64).reshape(2, 3),
        "b": np.array([True, False]),
        "p": verigrad.tensor(np.ones(2, np.float32), requires_grad=True),
        "meta": {"step": 3, "lr": 0.1, "names": ["a", "b"], "none": None, "pair": (1, 2.5)},
    }
    verigrad.save(state, path)
    return path.read_bytes()


def mutate_archive(data: bytes, rng: random.Random) -> bytes:
    """A zip archive with its records' bytes mutated (data.pkl always, each other record sometimes) and
    written again, so that the mutations get past the archive's checksums; else the file's own bytes."""
    import io
    import zipfile

    if rng.random() < 0.3:
        return mutate_bytes(data, rng)
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for info in source.infolist():
            blob = source.read(info)
            if info.filename.endswith("/data.pkl") or rng.random() < 0.15:
                blob = mutate_bytes(blob, rng)
            archive.writestr(info.filename, blob)
    return out.getvalue()


def idx_seeds() -> dict[str, bytes]:
    from verigrad.data.datasets import IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC

    images = np.random.default_rng(0).integers(0, 256, (3, 28, 28), dtype=np.uint8)
    return {
        "t10k-images-idx3-ubyte": struct.pack(">I3I", IDX_IMAGES_MAGIC, 3, 28, 28) + images.tobytes(),
        "t10k-labels-idx1-ubyte": struct.pack(">II", IDX_LABELS_MAGIC, 3) + bytes([7, 0, 9]),
    }


TEMPLATES = [
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>"
    "system\nYou are a helpful AI assistant<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + "
    "'\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}",
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
    "{%- set ns = namespace(n=0) %}{%- for m in messages %}{%- set ns.n = ns.n + m.content | length %}"
    "{{- m.role | upper }}: {{ m.content | tojson }}{{ '\n' }}{%- endfor %}{{- ns.n }}",
]
SNIPPETS = [
    "{% for i in range(99999) %}",
    "{% endfor %}",
    "{{ 9 ** 99 }}",
    "{{ 'a' * 999999 }}",
    "{% macro f(x) %}",
    "{{ f(x) }}",
    "{% endmacro %}",
    "{{ messages | tojson(indent=99) }}",
    "{{ x.__class__ }}",
    "{% include 'a' %}",
    "{% set ns.s = ns.s ~ ns.s %}",
    "{{ loop(messages) }}",
    " recursive",
    "{% if true %}",
    "{% endif %}",
    "{{ 1 / 0 }}",
    "{{ '%99999d' % 1 }}",
    "{{ range(10**6) | list }}",
    "{{ caller() }}",
    "{% raw %}",
    "(",
    ")",
]


# mutations -----------------------------------------------------------------------------------------------


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """`data` with 1 to 4 mutations: a byte or an integer field set to an interesting value, a cut, an
    insertion, a chunk repeated or dropped."""
    out = bytearray(data)
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4])):
        at = rng.randrange(len(out) + 1)
        kind = rng.randrange(7)
        if kind == 0 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif kind == 1:
            width = rng.choice([1, 2, 4, 8])
            value = rng.choice(INTERESTING) % (1 << (8 * width))
            if rng.random() < 0.2:
                value = (1 << (8 * width)) - 1 - value  # negative, read as signed
            out[at : at + width] = value.to_bytes(width, "little" if rng.random() < 0.7 else "big")
        elif kind == 2:
            del out[at:]
        elif kind == 3:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif kind == 4 and out:
            n = rng.randint(1, 64)
            out[at:at] = out[at : at + n] * rng.randint(1, 4)
        elif kind == 5:
            del out[at : at + rng.randint(1, 64)]
        else:
            out[at : at + 1] = bytes([rng.choice([0, 0x7F, 0x80, 0xFF])])
    return bytes(out)


def mutate_template(source: str, rng: random.Random) -> str:
    out = source
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4])):
        at = rng.randrange(len(out) + 1)
        kind = rng.randrange(4)
        if kind == 0:
            out = out[:at] + rng.choice(SNIPPETS) + out[at:]
        elif kind == 1:
            out = out[:at] + out[at + rng.randint(1, 20) :]
        elif kind == 2:
            b = rng.randrange(len(out) + 1)
            out = out[:at] + out[min(at, b) : max(at, b)] + out[at:]
        else:
            out = (
                out[:at]
                + chr(rng.choice([0x7B, 0x7D, 0x25, 0x27, 0x22, 0x7C, rng.randrange(0x20, 0x3000)]))
                + out[at:]
            )
    return out


# loaders: each runs in the child on one case and returns nothing (loaded) or raises ------------------------


class Wrong(Exception):
    """Loaded, but the result fails a check."""


def load_gguf(path: Path) -> None:
    from verigrad.io.gguf import read_gguf

    g = read_gguf(path)
    for t in g.tensors.values():
        values = t.dequantize()
        if values.shape != t.shape or values.dtype != np.float32:
            raise Wrong(f"tensor {t.name}: {values.shape} {values.dtype}, expected {t.shape} f32")


def load_safetensors(path: Path) -> None:
    import verigrad

    state = verigrad.load(path)
    for name, t in state.items():
        if tuple(t.numpy().shape) != tuple(t.shape):
            raise Wrong(f"tensor {name}: shape {t.shape} but {t.numpy().shape} values")


def load_torch(path: Path) -> None:
    import verigrad

    def check(value: object, where: str) -> None:
        if isinstance(value, verigrad.Tensor):
            if tuple(value.numpy().shape) != tuple(value.shape):
                raise Wrong(f"{where}: shape {tuple(value.shape)} but {value.numpy().shape} values")
        elif isinstance(value, dict):
            for key, item in value.items():
                check(item, f"{where}[{key!r}]")
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                check(item, f"{where}[{i}]")

    check(verigrad.load(path), "the checkpoint")


def load_idx(path: Path) -> None:
    from verigrad.data import load_mnist

    images, labels = load_mnist(path.parent, "test")
    if images.shape != (len(labels), 1, 28, 28) or not ((labels >= 0) & (labels <= 9)).all():
        raise Wrong(f"images {images.shape}, labels {sorted(set(labels.tolist()))[:12]}")
    if not (images.min(initial=0) >= 0 and images.max(initial=0) <= 1):
        raise Wrong("image values outside [0, 1]")


def load_tokenizer(path: Path) -> None:
    from verigrad.io.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf(path)
    for text in TEXTS:
        ids = tok.encode(text, add_special=False)
        if tok.decode(ids) != text:
            raise Wrong(f"{text!r} decodes as {tok.decode(ids)!r}")
    if tok.chat_template:
        tok.apply_chat_template(MESSAGES)


def load_template(path: Path) -> None:
    from verigrad.io.chat_template import ChatTemplate

    text = ChatTemplate(path.read_text(encoding="utf-8"), str(path)).render(
        messages=MESSAGES, add_generation_prompt=True, bos_token="<s>", eos_token="</s>"
    )
    if not isinstance(text, str):
        raise Wrong(f"rendered a {type(text).__name__}")


@dataclass
class Format:
    name: str
    seeds: dict[str, bytes]  # file name -> bytes (the first is mutated, the others stay beside it)
    load: Callable[[Path], None]
    text: bool = False  # mutate as text (templates)
    gzip_too: bool = False  # also gzip the mutated file, half the time
    mutate: Callable[[bytes, random.Random], bytes] = mutate_bytes


def formats(folder: Path) -> dict[str, Format]:
    """The formats with their seeds; the loaders' modules imported here, once, not in every child."""
    import verigrad.data
    import verigrad.io.chat_template
    import verigrad.io.checkpoint
    import verigrad.io.gguf
    import verigrad.io.tokenizer  # noqa: F401

    safetensors = {"model.safetensors": safetensors_seed(folder / "s.safetensors")}
    torch = {"model.pt": torch_seed(folder / "s.pt")}
    tokenizer = {"tok.gguf": gguf_seed(folder / "tok.gguf", tokenizer_only=True)}
    templates = {f"t{i}.jinja": t.encode() for i, t in enumerate(TEMPLATES)}
    return {
        "gguf": Format("gguf", {"model.gguf": gguf_seed(folder / "seed.gguf")}, load_gguf),
        "safetensors": Format("safetensors", safetensors, load_safetensors),
        "torch": Format("torch", torch, load_torch, mutate=mutate_archive),
        "idx": Format("idx", idx_seeds(), load_idx, gzip_too=True),
        "tokenizer": Format("tokenizer", tokenizer, load_tokenizer),
        "templates": Format("templates", templates, load_template, text=True),
    }


# running a case in a child ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str  # loaded, refused, wrong, crashed, other, timeout
    seconds: float
    peak_mib: float
    detail: str = ""


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_case(load: Callable[[Path], None], path: Path, time_limit: float, memory_mib: int) -> Outcome:
    """`load(path)` in a forked child with an address-space limit; killed past `time_limit` seconds."""
    read_end, write_end = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: report one JSON line, then leave without cleanup
        os.close(read_end)
        limit = _address_space() + memory_mib * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        warnings.simplefilter("ignore")  # NumPy's on the NaN a mutated scale gives: the table counts outcomes
        try:
            load(path)
            report = {"kind": "loaded"}
        except Wrong as e:
            report = {"kind": "wrong", "detail": str(e)[:2000]}
        except VerigradError as e:
            report = {"kind": "refused", "detail": f"{type(e).__name__}: {str(e)[:2000]}"}
        except BaseException as e:
            frame = traceback.extract_tb(e.__traceback__)[-1]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            report = {"kind": "other", "detail": f"{type(e).__name__}: {str(e)[:2000]} ({where})"}
        os.write(write_end, json.dumps(report).encode())
        os._exit(0)
    os.close(write_end)
    status, usage, timed_out = None, None, False
    while status is None:
        done, status_, usage_ = os.wait4(pid, os.WNOHANG)
        if done:
            status, usage = status_, usage_
            break
        if time.monotonic() - start > time_limit:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            timed_out = True
            break
        select.select([read_end], [], [], 0.005)
    seconds = time.monotonic() - start
    data = b""
    while chunk := os.read(read_end, 65536):
        data += chunk
    os.close(read_end)
    peak = usage.ru_maxrss / 1024
    if timed_out:
        return Outcome("timeout", seconds, peak)
    if os.WIFSIGNALED(status):
        return Outcome("crashed", seconds, peak, signal.Signals(os.WTERMSIG(status)).name)
    report = json.loads(data or b'{"kind": "crashed", "detail": "no report"}')
    return Outcome(report["kind"], seconds, peak, report.get("detail", ""))


@dataclass
class Tally:
    counts: dict[str, int] = field(default_factory=dict)
    max_seconds: float = 0.0
    max_mib: float = 0.0
    examples: list[str] = field(default_factory=list)

    def add(self, outcome: Outcome, case: str) -> None:
        self.counts[outcome.kind] = self.counts.get(outcome.kind, 0) + 1
        self.max_seconds = max(self.max_seconds, outcome.seconds)
        self.max_mib = max(self.max_mib, outcome.peak_mib)
        if outcome.kind not in ("loaded", "refused") and len(self.examples) < 5:
            self.examples.append(f"{case}: {outcome.kind} {outcome.detail[:300]}")


def fuzz(fmt: Format, cases: int, seed: int, time_limit: float, memory_mib: int, keep: Path | None) -> Tally:
    tally = Tally()
    names = list(fmt.seeds)
    with tempfile.TemporaryDirectory(prefix="verigrad-fuzz-") as tmp:
        folder = Path(tmp)
        for i in range(cases):
            rng = random.Random(f"{seed}-{fmt.name}-{i}")
            target = rng.choice(names) if fmt.text or fmt.name == "idx" else names[0]
            for name, blob in fmt.seeds.items():
                for old in folder.glob(name + "*"):
                    old.unlink()
                if name != target:
                    if not fmt.text:
                        (folder / name).write_bytes(blob)
                    continue
                if fmt.text:
                    mutated = mutate_template(blob.decode(), rng).encode("utf-8", "surrogatepass")
                else:
                    mutated = fmt.mutate(blob, rng)
                gz = fmt.gzip_too and rng.random() < 0.5
                path = folder / (name + (".gz" if gz else ""))
                path.write_bytes(gzip.compress(mutated, mtime=0) if gz else mutated)
            outcome = run_case(fmt.load, path, time_limit, memory_mib)
            case = f"{fmt.name} case {i} ({path.name})"
            tally.add(outcome, case)
            if keep is not None and outcome.kind not in ("loaded", "refused"):
                keep.mkdir(parents=True, exist_ok=True)
                (keep / f"{fmt.name}-{i}-{path.name}").write_bytes(path.read_bytes())
    return tally


def baseline_mib() -> float:
    """Peak RSS of a child that loads nothing: what every child starts from (the parent's pages)."""
    return run_case(lambda path: None, Path("."), 10, 64).peak_mib


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--formats", default=",".join(FORMATS), help=f"comma-separated, of {', '.join(FORMATS)}"
    )
    parser.add_argument("--cases", type=int, default=300, help="cases per format (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per case (default 10)")
    parser.add_argument(
        "--memory-limit", type=int, default=1024, help="MiB of address space per case (default 1024)"
    )
    parser.add_argument("--keep", type=Path, help="write the cases not loaded or refused cleanly here")
    args = parser.parse_args(argv)
    chosen = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = [f for f in chosen if f not in FORMATS]
    if unknown or not chosen:
        parser.error(f"--formats: {', '.join(unknown) or 'none given'}; the formats are {', '.join(FORMATS)}")
    if args.cases < 1 or args.time_limit <= 0 or args.memory_limit < 64:
        parser.error("--cases must be >= 1, --time-limit > 0, --memory-limit >= 64 (MiB)")

    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 120)
    with tempfile.TemporaryDirectory(prefix="verigrad-seeds-") as tmp:
        all_formats = formats(Path(tmp))
    base = baseline_mib()
    table = Table(title=f"verigrad fuzz: {args.cases} cases per format, seed {args.seed}")
    for column in (
        "format",
        "cases",
        "loaded",
        "refused cleanly",
        "wrong",
        "crashed (signal)",
        "other exception",
    ):
        table.add_column(column, justify="left" if column == "format" else "right")
    table.add_column("timeouts", justify="right")
    table.add_column("max time (s)", justify="right")
    table.add_column("max memory (MiB)", justify="right")
    bad = 0
    examples = []
    for name in chosen:
        start = time.monotonic()
        t = fuzz(all_formats[name], args.cases, args.seed, args.time_limit, args.memory_limit, args.keep)
        c = t.counts.get
        bad += sum(c(k, 0) for k in ("wrong", "crashed", "other", "timeout"))
        examples += t.examples
        kinds = ("loaded", "refused", "wrong", "crashed", "other", "timeout")
        counts = [str(c(k, 0)) for k in kinds]
        table.add_row(name, str(args.cases), *counts, f"{t.max_seconds:.2f}", f"{t.max_mib - base:.0f}")
        console.print(f"{name}: {args.cases} cases in {time.monotonic() - start:.1f} s", style="dim")
    console.print(table)
    console.print(
        f"limits per case: {args.time_limit:g} s, {args.memory_limit} MiB of address space; memory is the "
        f"child's peak RSS above the {base:.0f} MiB it starts with"
    )
    for line in examples:
        console.print(line, markup=False, highlight=False)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
