"""What the benchmark scripts share: verigrad from the checkout when it is not installed, PyTorch
installed on demand (never a dependency of verigrad), a line describing the machine, and a console."""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

try:
    import verigrad
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import verigrad

TORCH_VERSION = "2.13.0"


def ensure_torch() -> Any:
    """PyTorch, installed first with this interpreter's pip if it is missing."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        print(f"PyTorch is not installed; installing torch=={TORCH_VERSION} for the comparison", flush=True)
        subprocess.check_call([sys.executable, "-m", "pip", "install", f"torch=={TORCH_VERSION}"])
        importlib.invalidate_caches()
        return importlib.import_module("torch")


def describe_machine(torch: Any) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{cpu}, {cores} usable cores, load average {load:.2f}; Python {platform.python_version()}, "
        f"NumPy {np.__version__}, verigrad {verigrad.__version__}, torch {torch.__version__}"
    )


def console(width: int) -> Console:
    """A console; piped to a file, wide enough (`width`) that no table cell wraps."""
    out = Console()
    return out if out.is_terminal else Console(width=width)


def positive_ints(parser: argparse.ArgumentParser, text: str, what: str) -> list[int]:
    """Comma-separated integers, each at least 1 (a parser error otherwise)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(f"{what} takes comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        parser.error(f"{what} needs at least one value, each at least 1")
    return values
