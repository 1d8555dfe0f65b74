"""Python code run in a fresh process with this checkout on its path (for what a process reads once: the
environment at import, the build cache, thread placement)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code: str, **env: str | None) -> subprocess.CompletedProcess:
    """`code` run by a fresh Python with `env` besides the environment (None: without the variable)."""
    full = {k: v for k, v in {**os.environ, "PYTHONPATH": ROOT, **env}.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full, cwd=ROOT
    )
