"""Compile the package's C sources into a shared library once, cache it on disk, and load it.

The compiler is `CC` when set, else the first of cc, gcc and clang on the PATH. All `.c` files of this
package are compiled (each on its own, as many at once as there are CPUs) and linked into
`<cache>/cpu-<hash>.so`, the hash covering the sources, the
compiler (path and version) and the flags, so a change to any of them builds anew. `build` also builds
one other C source (the fused kernels of fused.py, which include this package's headers; the vg_call
extension of fastcall.py) the same way, into `<cache>/<prefix>-<hash>.so`. The cache folder is
`VERIGRAD_CACHE`, else `verigrad` in the user's cache directory (cache.py). The library is written to a
temporary file and moved into place, holding the folder's lock, so processes building at once build it
once and never see half a file. Beside each library, `<prefix>-<hash>.json` (the hash covering the sources
and flags, not the compiler) records the size and SHA-256 of each library built for them and the compiler
of the last, so that a cached library is loaded only when it is whole (one cut short or damaged is built
anew, with one line on stderr naming it, as is one that does not load), and without a compiler the
library last built for these sources and flags still serves (`compiler_missing` in the build's info then
says why), and never one built from other sources or flags.

Default flags give the reference's bits: no FMA contraction, no fast-math. `VERIGRAD_NATIVE=1` allows
contraction and tunes for this machine (results may then differ in the last bits, never with the thread
count): `contracted` says what a kernel then states.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ... import settings
from ..kernel_table import Exactness, tolerance
from . import cache
from .cache import cache_dir

HERE = Path(__file__).resolve().parent
# -fno-math-errno after -fno-fast-math, which turns errno back on (and so keeps sqrt a call, unvectorised)
BASE_FLAGS = ["-O3", "-fPIC", "-shared", "-std=c11", "-pthread", "-fno-fast-math", "-fno-math-errno"]
EXACT_FLAGS = ["-ffp-contract=off"]
NATIVE_FLAGS = ["-ffp-contract=fast", "-march=native", "-DVG_NATIVE"]
RECORD_FORMAT = "checksums"  # in a record's name: a record of an earlier format (without them) is not read


class BuildError(RuntimeError):
    """No compiler, or the build failed; the message is one line."""


# A build with contraction computes a * b + c with one rounding where the reference rounds twice, so a
# float kernel stated exact (or within k ulps) in the default build differs in the last bits, the most
# where terms cancel (1 - x * x near x = 1). It states a tolerance instead: CONTRACTED_UNITS units of
# rounding of the result (2k for one stated within k ulps, if more), and as many absolute, for a result
# near 0 left by cancelling terms of magnitude about 1. Measured on the verification suite's cases: the
# largest error is 0.58 of that (rms_norm_grad in f32, the gradient of a row of one element, where
# 1 / rms and x^2 / rms^3 cancel), the next 0.33.
CONTRACTED_UNITS = 64
UNIT_ROUNDOFF = {"f32": 2.0**-24, "f64": 2.0**-53}


def native() -> bool:
    return settings.env_flag("VERIGRAD_NATIVE", False)


def contracted(exactness: Exactness, dtype: str | None, with_contraction: bool) -> Exactness:
    """What a kernel stated `exactness` for `dtype` (a dtype name; None: every dtype) in the default build
    states in a build `with_contraction`."""
    if not with_contraction or dtype not in UNIT_ROUNDOFF or not (exactness.is_exact or exactness.ulps):
        return exactness
    units = max(CONTRACTED_UNITS, 2 * exactness.ulps) * UNIT_ROUNDOFF[dtype]
    return tolerance(units, units)


def flags() -> list[str]:
    return BASE_FLAGS + (NATIVE_FLAGS if native() else EXACT_FLAGS)


def find_compiler() -> list[str]:
    """The compiler command (a list: `CC` may carry options), or BuildError."""
    if os.environ.get("CC"):
        cmd = shlex.split(os.environ["CC"])
        path = shutil.which(cmd[0])
        if path is None:
            raise BuildError(f"the C compiler CC={os.environ['CC']!r} was not found")
        return [path, *cmd[1:]]
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path is not None:
            return [path]
    raise BuildError("no C compiler found (set CC, or install gcc or clang)")


def compiler_version(cc: list[str]) -> str:
    try:
        done = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"cannot run the C compiler {cc[0]}: {e}") from None
    lines = (done.stdout or done.stderr).splitlines()
    return lines[0].strip() if lines else ""


def sources() -> list[Path]:
    return sorted(HERE.glob("*.c"))


def _digest(source: str | None, words: list[str]) -> str:
    """A hash of the package's sources and headers (or the generated `source` and the headers) and
    `words`."""
    h = hashlib.sha256()
    if source is not None:
        h.update(b"generated.c\0" + source.encode() + b"\0")
    for path in sorted(HERE.glob("*.h" if source is not None else "*.[ch]")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update("\0".join(words).encode())
    return h.hexdigest()[:20]


def library_name(
    cc: list[str], version: str, opts: list[str], prefix: str = "cpu", source: str | None = None
) -> str:
    """`<prefix>-<hash>.so`, the hash covering the package's sources and headers (or the generated
    `source` and the headers), the compiler and the flags."""
    return f"{prefix}-{_digest(source, [*cc, version, *opts])}.so"


def record_name(opts: list[str], prefix: str = "cpu", source: str | None = None) -> str:
    """`<prefix>-<hash>.json`, the hash covering what `library_name`'s does but the compiler: the record
    of the last library built (or loaded) for these sources and flags."""
    return f"{prefix}-{_digest(source, [RECORD_FORMAT, *opts])}.json"


def _check(done: subprocess.CompletedProcess, cc: list[str]) -> None:
    if done.returncode != 0:
        first = next((ln for ln in done.stderr.splitlines() if ln.strip()), "no message")
        raise BuildError(f"the C build failed ({cc[0]}): {first.strip()}")


def _compile_and_link(cc: list[str], opts: list[str], objects: str, out: str, srcs: list[Path]) -> None:
    """Each source compiled to an object file, as many at once as there are CPUs; then one link. One
    source is compiled and linked in one call."""
    opts = [*opts, "-I", str(HERE)]
    if len(srcs) == 1:  # compiled from its own folder: the library names the file, not the cache's path,
        # so the same source gives the same bytes in any cache folder
        cmd = [*cc, *opts, srcs[0].name, "-o", os.path.abspath(out), "-lm"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=srcs[0].parent)
        _check(done, cc)
        return
    compile_opts = [o for o in opts if o != "-shared"]
    jobs = []
    for src in srcs:
        obj = os.path.join(objects, src.stem + ".o")
        jobs.append((obj, [*cc, *compile_opts, "-c", str(src), "-o", obj]))
    _run_parallel([cmd for _, cmd in jobs], objects, cc)
    _check(
        subprocess.run(
            [*cc, *opts, *(o for o, _ in jobs), "-o", out, "-lm"], capture_output=True, text=True, timeout=600
        ),
        cc,
    )


def _run_parallel(
    commands: list[list[str]], folder: str, cc: list[str], timeout: float = 600, workers: int | None = None
) -> None:
    """The compiler commands, `workers` at once (as many as there are CPUs), the next one started as soon
    as any finishes (waiting for them in order left a CPU idle behind a long one: 10.0 s against 7.3 s
    for this package with gcc on 2 CPUs). Their messages go to files in `folder`, which no amount of
    output can block; the first that fails raises BuildError with its first line."""
    workers = max(1, min(len(commands), workers or os.cpu_count() or 1))
    waiting = list(enumerate(commands))
    running: list[tuple[subprocess.Popen, Any, float]] = []
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                i, cmd = waiting.pop(0)
                log = open(os.path.join(folder, f"{i}.log"), "w+")  # noqa: SIM115 (closed when the job ends)
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True)
                running.append((proc, log, time.monotonic()))
            finished = [job for job in running if job[0].poll() is not None]
            for job in finished:
                running.remove(job)
                proc, log, _ = job
                log.seek(0)
                err = log.read()
                log.close()
                _check(subprocess.CompletedProcess(proc.args, proc.returncode, "", err), cc)
            if not finished:
                if any(time.monotonic() - started > timeout for _, _, started in running):
                    raise BuildError(f"the C build failed ({cc[0]}): a compilation took over {timeout:.0f} s")
                time.sleep(0.005)
    finally:
        for proc, log, _ in running:  # a failed job: stop the others
            proc.kill()
            proc.wait()
            log.close()


def build(
    prefix: str = "cpu", source: str | None = None, includes: tuple[str, ...] = (), load: bool = True
) -> tuple[ctypes.CDLL | None, dict[str, Any]]:
    """The loaded library (None without `load`: the caller loads it, once it is checked here) and what was
    built how; BuildError with a one-line reason otherwise. The package's sources, or the C `source` (for
    a library named `prefix`), compiled with the `includes` folders besides this package's."""
    opts = flags() + [f"-I{folder}" for folder in includes]
    folder = cache_dir()
    try:
        cc = find_compiler()
        version = compiler_version(cc)
    except BuildError as e:
        return _last_built(folder, opts, prefix, source, load, e)
    path = folder / library_name(cc, version, opts, prefix, source)
    record = folder / record_name(opts, prefix, source)
    lib, _ = _checked(path, record)
    seconds, cached = 0.0, lib is not None
    if lib is None:
        try:
            with cache.locked(folder):  # another process may have built it (or be building it) meanwhile
                lib, why = _checked(path, record)
                cached = lib is not None
                if lib is None:
                    if path.exists():
                        print(
                            f"verigrad: the cached library {path} is damaged ({why}); building it anew",
                            file=sys.stderr,
                        )
                    seconds, built = _compile(cc, opts, folder, path, prefix, source)
                    lib = _open(path)
                    with contextlib.suppress(OSError):  # unrecorded, it is built anew next time: slow, right
                        cache.remember(record, path.name, cc, version, built)
        except OSError as e:
            raise BuildError(f"cannot write to the cache folder {folder}: {e}") from None
    if cache.read_record(record).get("library") != path.name:  # the one a build without a compiler takes
        with contextlib.suppress(OSError), cache.locked(folder):
            cache.remember(record, path.name, cc, version, None)
    info = _info(cc, version, opts, path, cached=cached)
    info["build_seconds"] = seconds
    return (lib if load else None), info


def _checked(path: Path, record: Path) -> tuple[ctypes.CDLL | None, str]:
    """The cached library at `path` loaded, where it is whole (`record`'s size and SHA-256) and loads;
    else None and why not."""
    if not path.exists():
        return None, "missing"
    why = cache.damage(path, record)
    if why is not None:
        return None, why
    try:
        return ctypes.CDLL(str(path)), ""
    except OSError as e:
        return None, f"it does not load: {e}"


def _info(cc: list[str], version: str, opts: list[str], path: Path, cached: bool) -> dict[str, Any]:
    return {
        "compiler": " ".join(cc),
        "version": version,
        "flags": opts,
        "native": native(),
        "path": str(path),
        "cached": cached,
        "build_seconds": 0.0,
    }


def _open(path: Path) -> ctypes.CDLL:
    """The library just built loaded: also the check that it loads, for one its caller loads itself
    (vg_call)."""
    try:
        return ctypes.CDLL(str(path))
    except OSError as e:
        raise BuildError(f"cannot load the built library {path}: {e}") from None


def _compile(
    cc: list[str], opts: list[str], folder: Path, path: Path, prefix: str, source: str | None
) -> tuple[float, dict[str, Any]]:
    """Builds the library into a temporary file in `folder`, moved onto `path` when done: the seconds it
    took and its checksum. A failure leaves no part of it (and no temporary) behind."""
    start = time.perf_counter()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=folder)
        os.close(fd)
    except OSError as e:
        raise BuildError(f"cannot write to the cache folder {folder}: {e}") from None
    try:
        with tempfile.TemporaryDirectory(prefix=".objects-", dir=folder) as objects:
            srcs = sources()
            if source is not None:
                srcs = [Path(objects) / f"{prefix}.c"]
                srcs[0].write_text(source)
            _compile_and_link(cc, opts, objects, tmp, srcs)
        built = cache.checksum(Path(tmp))
        os.replace(tmp, path)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"the C build failed ({cc[0]}): {e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return round(time.perf_counter() - start, 3), built


def _last_built(
    folder: Path, opts: list[str], prefix: str, source: str | None, load: bool, missing: BuildError
) -> tuple[ctypes.CDLL | None, dict[str, Any]]:
    """Without a compiler (`missing` says why): the library that the record for these sources and flags
    names, if these sources and flags with the recorded compiler give that name and it is whole; else
    `missing`."""
    record = folder / record_name(opts, prefix, source)
    try:
        found = cache.read_record(record)
        cc, version, name = [str(w) for w in found["compiler"]], str(found["version"]), found["library"]
    except (TypeError, KeyError):
        raise missing from None
    path = folder / library_name(cc, version, opts, prefix, source)
    if name != path.name or not path.exists():
        raise missing
    lib, why = _checked(path, record)
    if lib is None:
        raise BuildError(f"the cached library {path} is damaged ({why}); it cannot be built anew: {missing}")
    return (lib if load else None), {
        **_info(cc, version, opts, path, cached=True),
        "compiler_missing": str(missing),
    }
