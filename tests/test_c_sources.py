"""Every C source of the cpu backend, and the C that fused.py generates, compiles without a warning under
each C compiler on the machine.

One library holds all the sources, so a source that one compiler rejects leaves the whole backend to
the reference wherever that compiler is `cc` (Clang's `__builtin_cpu_supports` knows no "f16c", which
GCC's does). The sources are also compiled for 64-bit ARM, where the x86 paths drop out (a function
declared only in an x86 block was called from plain C: an error for GCC 14 and Clang 16). CI installs
Clang and ARM's C headers beside GCC where it can."""

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


ARM64_HEADERS = "/usr/aarch64-linux-gnu/include"  # Debian's libc6-dev-arm64-cross


def targets() -> list[tuple[str, tuple[str, ...]]]:
    """(compiler, its target options): each compiler for this machine, and Clang for 64-bit ARM Linux where
    that C library's headers are installed (the sources' paths without x86 intrinsics)."""
    found = [(cc, ()) for cc in compilers()]
    clang = shutil.which("clang")
    if clang and os.path.isdir(ARM64_HEADERS):
        found.append((clang, ("--target=aarch64-linux-gnu", "-isystem", ARM64_HEADERS)))
    return found


def compiles(compiler: str, sources: list[str], warnings: list[str], target: tuple[str, ...] = ()) -> None:
    assert shutil.which(compiler), compiler
    flags = [f for f in build.flags() if f not in ("-shared", "-fPIC")]  # link options: unused here
    done = subprocess.run(
        [compiler, *target, "-fsyntax-only", *flags, *warnings, "-Werror", f"-I{build.HERE}", *sources],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


TARGETS = targets() or [("no C compiler on the PATH", ())]
TARGET_IDS = [os.path.basename(cc) + ("-arm64" if target else "") for cc, target in TARGETS]


@pytest.mark.parametrize(("compiler", "target"), TARGETS, ids=TARGET_IDS)
def test_every_source_compiles_without_warnings(compiler, target):
    compiles(compiler, [str(p) for p in build.sources()], ["-Wall", "-Wextra"], target)


@pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
@pytest.mark.parametrize(("compiler", "target"), TARGETS, ids=TARGET_IDS)
def test_generated_fused_kernels_compile_without_warnings(compiler, target, tmp_path):
    """The functions fused.py generates for the groups of every op the fusion pass takes (-Wall: a
    group without scalar inputs leaves a parameter unused, which -Wextra would name)."""
    libm = fused.libm_members(cpu.cpu)
    functions = []
    for fn, specs in every_op():
        for instr in fused_instrs(optimize(trace(fn, *specs))):
            op = instr.op.group
            if fused.supported(op, libm) is None:
                dtypes = tuple(s.dtype.name for s in op.inputs)
                functions.append(fused.function(f"vg_fused_{len(functions)}", op, dtypes, fused.scalars(op)))
    assert len(functions) > 20
    source = tmp_path / "fused.c"
    source.write_text(fused.PRELUDE + "\n".join(functions))
    compiles(compiler, [str(source)], ["-Wall"], target)
