"""The folder of built libraries (build.py's cache): where it is, its lock, and the records that say
which library was built last for some sources and flags, with the size and SHA-256 of each one built.

A library is loaded only when its size and SHA-256 are the ones recorded when it was built: dlopen of a
library cut short or with damaged bytes can crash the process (SIGBUS, SIGSEGV) or run wrong code, where
a damaged file found by its checksum is built anew. Every write goes to a temporary file moved into place,
and builds and record updates hold the folder's lock (`.lock`, flock), so processes building at once
neither corrupt each other's files nor lose each other's records; a reader needs no lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LOCK = ".lock"
TEMPORARY = (".build-", ".objects-", ".record-")  # the prefixes of this module's and build.py's temporaries
STALE_SECONDS = 3600  # a temporary this old is a killed process's: removed when the lock is next taken


def cache_dir() -> Path:
    """`VERIGRAD_CACHE`, else `verigrad` in the user's cache folder (`XDG_CACHE_HOME`, else ~/.cache)."""
    if os.environ.get("VERIGRAD_CACHE"):
        return Path(os.environ["VERIGRAD_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "verigrad"


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """The folder's lock held (made if need be; OSError where it cannot be), and the temporaries that
    killed processes left in it removed."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: temporary names and renames alone keep the files whole
        yield
        return
    with open(folder / LOCK, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            _sweep(folder)
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _sweep(folder: Path) -> None:
    now = time.time()
    for entry in folder.iterdir():
        if not entry.name.startswith(TEMPORARY):
            continue
        with contextlib.suppress(OSError):
            if now - entry.lstat().st_mtime > STALE_SECONDS:
                if entry.is_dir():
                    for inner in entry.iterdir():
                        inner.unlink()
                    entry.rmdir()
                else:
                    entry.unlink()


def checksum(path: Path) -> dict[str, Any]:
    """{"size": bytes, "sha256": hex digest} of the file at `path` (OSError where it cannot be read)."""
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
        return {"size": f.tell(), "sha256": digest}


def read_record(record: Path) -> dict[str, Any]:
    """The record's fields ({} where it is missing or not a record)."""
    try:
        found = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def damage(path: Path, record: Path) -> str | None:
    """Why the library at `path` may not be loaded (it is missing, or its size or SHA-256 is not the
    one `record` gives for it), in a few words; None where it may."""
    expected = read_record(record).get("libraries", {})
    expected = expected.get(path.name) if isinstance(expected, dict) else None
    if not isinstance(expected, dict) or not {"size", "sha256"} <= expected.keys():
        return f"no size and SHA-256 recorded for it in {record.name}"
    try:
        size = path.stat().st_size
        if size != expected["size"]:
            return f"{size} bytes where {expected['size']} were recorded"
        if checksum(path)["sha256"] != expected["sha256"]:
            return "its SHA-256 is not the one recorded"
    except OSError as e:
        return f"it cannot be read: {e.strerror or e}"
    return None


def remember(record: Path, name: str, cc: list[str], version: str, built: dict[str, Any] | None) -> None:
    """Records library `name` as the last built or loaded for the record's sources and flags (with
    compiler `cc` of `version`), and its checksum `built` where it was just built (the others' kept
    while their files exist). Called with the folder's lock held; the record is moved into place."""
    old = read_record(record)
    libraries = old.get("libraries", {})
    libraries = {
        k: v
        for k, v in (libraries if isinstance(libraries, dict) else {}).items()
        if (record.parent / k).exists()
    }
    if built is not None:
        libraries[name] = built
    new = {"library": name, "compiler": cc, "version": version, "libraries": libraries}
    if new == old:
        return
    write_atomically(record, json.dumps(new).encode(), ".record-")


def write_atomically(path: Path, data: bytes, prefix: str) -> None:
    """`data` written to a temporary file beside `path` (named `prefix`...), then moved onto `path`: a
    reader sees the old file or the whole new one, and a failure leaves no part of it."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
