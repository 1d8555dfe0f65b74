"""Files written whole or not at all: into a temporary file beside the target, renamed over it.

A crash that Python sees removes its temporary file; a SIGKILL or a power cut cannot, so each temporary
is named for its target and its writer's process id (`.NAME.PID.RANDOM.tmp`), and every save or load of
a target first removes the temporaries of that target left by processes that are gone, or untouched for
STALE_AFTER seconds (a process id may have been reused, or the writer was on another machine).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

STALE_AFTER = 3600.0


def write_atomically(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """`write` into a temporary file beside `path`, then the file renamed over `path`: `path` is the old
    file or the new one, whole, whatever happens."""
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; the file to write must be named")
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp, fd = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _create_temporary(path: Path) -> tuple[Path, int]:
    """A new file `.NAME.PID.RANDOM.tmp` beside `path`, opened for writing, with the permissions the
    umask gives (as `open` would make the target)."""
    import secrets  # here: it imports hashlib and OpenSSL, which a process that writes nothing never needs

    while True:
        tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except FileExistsError:
            continue


def temporaries(path: Path) -> list[tuple[Path, int | None]]:
    """The temporary files of `path`'s saves beside it, each with its writer's process id (None for
    those of earlier verigrad versions, which did not name it)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(?:(\d+)\.)?([a-z0-9_]{{8}})\.tmp")
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    found = []
    for name in names:
        match = pattern.fullmatch(name)
        if match is not None:
            found.append((path.parent / name, None if match[1] is None else int(match[1])))
    return found


def remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary files of `path` whose writer is gone or which are untouched for STALE_AFTER
    seconds; what cannot be removed (a read-only folder) is left."""
    now = time.time()
    for tmp, pid in temporaries(path):
        try:
            if (pid is not None and not _alive(pid)) or now - tmp.stat().st_mtime > STALE_AFTER:
                tmp.unlink()
        except OSError:
            pass  # gone already, or not ours to remove


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (this process counts: another thread may be saving)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    except OverflowError:  # an id past any real one
        return False
    if sys.platform.startswith("linux"):  # a killed process nobody has waited for yet is a zombie
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
        except (OSError, IndexError):
            return True
    return True
