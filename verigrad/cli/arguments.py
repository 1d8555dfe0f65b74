"""The command line's parser class and argument types: argument errors in one line, numbers checked."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

THREADS_HELP = "default: VERIGRAD_THREADS, else every core (at most 8)"


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line (`verigrad train: error: ...`), without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _bounded(kind: type, what: str, zero: bool = False) -> Callable[[str], Any]:
    """An argparse type: a number of `kind` greater than 0 (or equal to it with `zero`), or a one-line
    error."""
    adjective = "non-negative" if zero else "positive"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {adjective} {what}, got {text!r}") from None
        if not (value >= 0 if zero else value > 0):
            raise argparse.ArgumentTypeError(f"expected a {adjective} {what}, got {value}")
        return value

    return parse


positive_int = _bounded(int, "integer")
positive_float = _bounded(float, "number")
non_negative_int = _bounded(int, "integer", zero=True)
non_negative_float = _bounded(float, "number", zero=True)
