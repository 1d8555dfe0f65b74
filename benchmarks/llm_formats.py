"""Decode speed of verigrad's 8-bit-activation mode (`--activations q8`) against llama.cpp on one model
stored in each GGUF type: SmolLM2-135M-Instruct (the fetched Q4_1 file, or `--model`) requantized by
`verigrad quantize` (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k) and by llama.cpp's
quantizer (iq4_nl, iq4_xs: from an f16 copy), into a temporary folder.

For each type, llm.py's child processes (`measure`: load, one untimed warm-up, `--repeats` timed runs of a
~100-token prompt and `--decode-tokens` greedy tokens) run verigrad q8 and llama.cpp one after the other, then
again in the other order (`--rounds` times: a busy machine slows both alike); the table gives the medians
of all their decode tokens/s, the ratio verigrad / llama.cpp against the target (1.3x), and the formats
of the model's matrices with the code verigrad's qmatmul_q8 runs on each for one row (`quant.q8_path`).
SmolLM2's 576-wide rows are not whole 256-value blocks: a k-quant type keeps them in q5_0, q6_k or q8_0
(llama.cpp's fallbacks), its k-quants only where k = 1536 (ffn_down).

    python benchmarks/llm_formats.py                       # every type, 1 thread, 3 repeats, 2 rounds
    python benchmarks/llm_formats.py --types q4_0 iq4_xs --threads 2
"""

from __future__ import annotations

import argparse
import collections
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import console, table
from llm import measure, prompt_ids

OURS = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k")  # verigrad's
LLAMA_CPP = {"iq4_nl": 25, "iq4_xs": 30}  # llama.cpp's LLAMA_FTYPE_MOSTLY_*
# llama.cpp's quantizer, in a child process (it prints a line per tensor)
QUANTIZE = """import ctypes, sys, llama_cpp
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = int(sys.argv[3])
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(params)))
"""
TARGET = 1.3


def make(source: Path, qtype: str, folder: Path) -> Path:
    """source requantized to qtype in folder."""
    out = folder / f"{qtype}.gguf"
    if qtype in OURS:
        command = [sys.executable, "-m", "verigrad", "quantize", str(source), str(out), "--type", qtype]
        subprocess.run(command, check=True, capture_output=True)
        return out
    f16 = folder / "f16.gguf"
    if not f16.exists():
        command = [sys.executable, "-m", "verigrad", "quantize", str(source), str(f16), "--type", "f16"]
        subprocess.run(command, check=True, capture_output=True)
    command = [sys.executable, "-c", QUANTIZE, str(f16), str(out), str(LLAMA_CPP[qtype])]
    if subprocess.run(command, capture_output=True).returncode:
        raise SystemExit(f"llama.cpp could not quantize to {qtype}")
    return out


def formats(path: Path) -> str:
    """The matrices' formats (how many of each) and the code qmatmul_q8 runs on them for one row."""
    from verigrad.backends.cpu import quant as cpu_quant
    from verigrad.io.gguf import read_gguf

    counts = collections.Counter(t.qtype for t in read_gguf(path).tensors.values() if len(t.shape) == 2)
    cells = []
    for qtype, n in counts.most_common():
        path_name = cpu_quant.q8_path(qtype, 1) if qtype in cpu_quant.QTYPES else "f32"
        cells.append(f"{n} {qtype} ({path_name})")
    return ", ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--types", nargs="+", default=[*OURS, *LLAMA_CPP], choices=[*OURS, *LLAMA_CPP])
    parser.add_argument("--model", help="the GGUF file to requantize (default: the fetched SmolLM2 Q4_1)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per child process")
    parser.add_argument("--rounds", type=int, default=2, help="child processes per framework, alternating")
    parser.add_argument("--decode-tokens", type=int, default=64)
    args = parser.parse_args()
    from verigrad.models.fetch import fetch

    source = Path(args.model) if args.model else fetch("smollm2")
    import verigrad

    verigrad.backends.cpu.available()  # loads the kernels (q8_path)
    out = table(
        f"{source.name} requantized, decode tokens/s at {args.threads} thread(s): medians of {args.rounds} x "
        f"{args.repeats} runs",
        ["type", "verigrad q8", "llama.cpp", "ratio", f">= {TARGET}x", "matrices (verigrad's q8 code)"],
        left=("matrices (verigrad's q8 code)",),
    )
    with tempfile.TemporaryDirectory() as folder:
        for qtype in args.types:
            path = make(source, qtype, Path(folder))
            ids = prompt_ids(path, 100)
            job = argparse.Namespace(
                model=path, decode_tokens=args.decode_tokens, repeats=args.repeats, timeout=900.0
            )
            speeds: dict[str, list[float]] = {"verigrad q8": [], "llama.cpp": []}
            for r in range(args.rounds):
                for framework in list(speeds)[:: 1 if r % 2 == 0 else -1]:
                    result = measure(framework, job, args.threads, ids)
                    if "error" in result:
                        raise SystemExit(f"{qtype}, {framework}: {result['error']}")
                    speeds[framework] += result["decode_tps"]
            ours, theirs = (statistics.median(v) for v in speeds.values())
            ratio = ours / theirs
            row = [qtype, f"{ours:.1f}", f"{theirs:.1f}", f"{ratio:.2f}x", "yes" if ratio >= TARGET else "NO"]
            out.add_row(*row, formats(path))
            console(150).print(f"  {' '.join(row)}", style="dim")
            path.unlink()
    console(150).print(out)


if __name__ == "__main__":
    main()
