"""The command line's parser class and argument types: argument errors in one line, numbers checked
(finite, within their range) and paths checked before any work is done."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..backends.threads import MAX_COUNT, MAX_THREADS

THREADS_HELP = f"default: VERIGRAD_THREADS, else every core (at most 8); at most {MAX_THREADS}"
MAX_EPOCHS = 1_000_000  # a million passes over the data: any more is a typo, not a plan
MAX_STEPS = 100_000_000


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line (`verigrad train: error: ...`), without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _bounded(kind: type, what: str, zero: bool = False, most: float | None = None) -> Callable[[str], Any]:
    """An argparse type: a finite number of `kind` greater than 0 (or equal to it with `zero`), at most
    `most`, or a one-line error."""
    adjective = "non-negative" if zero else "positive"
    expected = f"a {adjective} {what}" + ("" if most is None else f" of at most {most}")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite {adjective} {what}, got {text!r}")
        if not (value >= 0 if zero else value > 0) or (most is not None and value > most):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
        return value

    return parse


positive_int = _bounded(int, "integer")
positive_float = _bounded(float, "number")
non_negative_int = _bounded(int, "integer", zero=True)
non_negative_float = _bounded(float, "number", zero=True)
thread_count = _bounded(int, "integer", most=MAX_THREADS)
epoch_count = _bounded(int, "integer", most=MAX_EPOCHS)
step_count = _bounded(int, "integer", most=MAX_STEPS)
fraction = _bounded(float, "number", most=1)
batch_size = _bounded(int, "integer", most=MAX_COUNT)


def existing_file(text: str) -> str:
    """An argparse type: the path of a file that exists and can be read."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory, not a file")
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{text}: cannot be read (permission denied)")
    return text


def existing_folder(text: str) -> str:
    """An argparse type: the path of a folder that exists."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory")
    return text


def writable_folder(text: str) -> str:
    """An argparse type: a folder that exists and can be written, or that can be made (its nearest
    existing parent is a folder that can be written); nothing is made here."""
    path = Path(text)
    if path.exists():
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text}: exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text}: cannot be written (permission denied)")
        return text
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: cannot be made, {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: cannot be made in {parent} (permission denied)")
    return text
