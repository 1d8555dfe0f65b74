"""Find repeated code: runs of at least N identical lines (leading and trailing spaces ignored) that two
or more places share, in the Python (or C) files given; or, with --count, how many lines lie in such runs.

    python tools/dups.py verigrad/cli                # the shared runs, longest first
    python tools/dups.py --count verigrad/cli tests/llama_gguf.py

A run is a place to look, not a verdict: PyTorch's signatures repeat on purpose."""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

SUFFIXES = (".py", ".c", ".h")


def sources(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for p in map(Path, paths):
        found += sorted(f for f in p.rglob("*") if f.suffix in SUFFIXES) if p.is_dir() else [p]
    return list({f.resolve(): f for f in reversed(found)}.values())[::-1]  # each once, however often named


def shared_windows(files: list[Path], n: int) -> dict[tuple[str, ...], list[tuple[Path, int]]]:
    """Each window of `n` stripped lines (of which at least n - 1 hold more than punctuation) found in
    two or more places, with those places (file, first line from 1)."""
    places: dict[tuple[str, ...], list[tuple[Path, int]]] = defaultdict(list)
    for f in files:
        lines = [line.strip() for line in f.read_text(errors="replace").splitlines()]
        for i in range(len(lines) - n + 1):
            window = tuple(lines[i : i + n])
            if sum(len(line) > 3 for line in window) >= n - 1:
                places[window].append((f, i + 1))
    return {w: p for w, p in places.items() if len(p) > 1}


def runs(windows: dict[tuple[str, ...], list[tuple[Path, int]]], n: int) -> list[list[tuple[Path, int, int]]]:
    """Overlapping shared windows joined into runs: each a list of (file, first line, last line), one
    per place, longest first."""
    by_start = {tuple(p): w for w, p in windows.items()}
    seen: set[tuple[Path, int]] = set()
    found = []
    for places in sorted(by_start, key=lambda p: (str(p[0][0]), p[0][1])):
        if places[0] in seen:
            continue
        length = n
        while tuple((f, line + length - n + 1) for f, line in places) in by_start:
            seen.add((places[0][0], places[0][1] + length - n + 1))
            length += 1
        found.append([(f, line, line + length - 1) for f, line in places])
    return sorted(found, key=lambda r: -(r[0][2] - r[0][1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="files or folders")
    parser.add_argument("--min", type=int, default=6, help="the shortest run (default 6 lines)")
    parser.add_argument("--count", action="store_true", help="only the lines in shared runs, and all lines")
    args = parser.parse_args()
    files = sources(args.paths)
    windows = shared_windows(files, args.min)
    if args.count:
        places = [place for found in windows.values() for place in found]
        covered = {(f, line + k) for f, line in places for k in range(args.min)}
        total = sum(len(f.read_text(errors="replace").splitlines()) for f in files)
        print(f"{len(covered)} of {total} lines in a run of {args.min}+ lines shared by two places or more")
        return
    for run in runs(windows, args.min):
        print(" ~ ".join(f"{f}:{a}-{b}" for f, a, b in run))


if __name__ == "__main__":
    main()
