"""Every C source of the cpu backend compiles without a warning under each C compiler on the machine.

One library holds all the sources, so a source that one compiler rejects leaves the whole backend to
the reference wherever that compiler is `cc` (Clang's `__builtin_cpu_supports` knows no "f16c", which
GCC's does). CI installs Clang beside GCC where it can."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from verigrad.backends.cpu import build


def compilers() -> list[str]:
    """The distinct C compilers on the PATH (by the file they resolve to)."""
    found: dict[str, str] = {}
    for name in ("gcc", "clang", "cc"):
        path = shutil.which(name)
        if path is not None:
            found.setdefault(os.path.realpath(path), path)
    return list(found.values())


@pytest.mark.parametrize("compiler", compilers() or ["no C compiler on the PATH"])
def test_every_source_compiles_without_warnings(compiler):
    assert shutil.which(compiler), compiler
    sources = [str(p) for p in build.sources()]
    flags = [f for f in build.flags() if f not in ("-shared", "-fPIC")]  # link options: unused here
    done = subprocess.run(
        [compiler, "-fsyntax-only", *flags, "-Wall", "-Wextra", "-Werror", f"-I{build.HERE}", *sources],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
