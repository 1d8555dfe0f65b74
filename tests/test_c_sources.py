"""Every C source of the cpu backend, and the C that fused.py generates, compiles without a warning under
each C compiler on the machine.

One library holds all the sources, so a source that one compiler rejects leaves the whole backend to
the reference wherever that compiler is `cc` (Clang's `__builtin_cpu_supports` knows no "f16c", which
GCC's does). CI installs Clang beside GCC where it can."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from test_cpu_fused import every_op, fused_instrs

from verigrad.backends import cpu
from verigrad.backends.cpu import build, fused
from verigrad.ir import trace
from verigrad.ir.passes import optimize


def compilers() -> list[str]:
    """The distinct C compilers on the PATH (by the file they resolve to)."""
    found: dict[str, str] = {}
    for name in ("gcc", "clang", "cc"):
        path = shutil.which(name)
        if path is not None:
            found.setdefault(os.path.realpath(path), path)
    return list(found.values())


def compiles(compiler: str, sources: list[str], warnings: list[str]) -> None:
    assert shutil.which(compiler), compiler
    flags = [f for f in build.flags() if f not in ("-shared", "-fPIC")]  # link options: unused here
    done = subprocess.run(
        [compiler, "-fsyntax-only", *flags, *warnings, "-Werror", f"-I{build.HERE}", *sources],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


COMPILERS = compilers() or ["no C compiler on the PATH"]


@pytest.mark.parametrize("compiler", COMPILERS)
def test_every_source_compiles_without_warnings(compiler):
    compiles(compiler, [str(p) for p in build.sources()], ["-Wall", "-Wextra"])


@pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
@pytest.mark.parametrize("compiler", COMPILERS)
def test_generated_fused_kernels_compile_without_warnings(compiler, tmp_path):
    """The functions fused.py generates for the groups of every op the fusion pass takes (-Wall: a
    group without scalar inputs leaves a parameter unused, which -Wextra would name)."""
    libm = fused.libm_members(cpu.cpu)
    functions = []
    for fn, specs in every_op():
        for instr in fused_instrs(optimize(trace(fn, *specs))):
            op = instr.op
            if fused.supported(op, libm) is None:
                dtypes = tuple(s.dtype.name for s in op.inputs)
                functions.append(fused.function(f"vg_fused_{len(functions)}", op, dtypes, fused.scalars(op)))
    assert len(functions) > 20
    source = tmp_path / "fused.c"
    source.write_text(fused.PRELUDE + "\n".join(functions))
    compiles(compiler, [str(source)], ["-Wall"])
