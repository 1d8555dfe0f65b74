"""The process group: MPI's world communicator (mpi4py, imported only when `init_process_group` runs),
this process's rank and the world's size, and the waits on MPI's non-blocking requests.

Every wait is a polling loop with a deadline (`VERIGRAD_DIST_TIMEOUT` seconds, default 300, or the
`timeout` given to `init_process_group`): a rank that died or hangs makes the others print what they
waited for and abort the whole job (`MPI.COMM_WORLD.Abort`) instead of hanging silently."""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time
from typing import Any

from ..errors import VerigradError

BACKENDS = ("mpi",)
REFUSED = {"gloo": "Gloo", "nccl": "NCCL", "ucc": "UCC", "xccl": "XCCL"}
DEFAULT_TIMEOUT = 300.0
SPIN_S = 0.05  # a wait tests without pausing this long, then backs off to 1 ms pauses


class DistributedError(VerigradError, RuntimeError):
    """A process group used wrongly (not initialized, twice, a backend verigrad has not)."""


class NotInitializedError(DistributedError, ValueError):
    """A collective or query before `init_process_group` (a ValueError, as PyTorch's)."""


class _World:
    """The initialized group: the communicator, rank, size and the deadline of a wait."""

    def __init__(self, comm: Any, mpi: Any, timeout: float) -> None:
        self.comm, self.mpi, self.timeout = comm, mpi, timeout
        self.rank, self.size = comm.Get_rank(), comm.Get_size()


_LOCK = threading.Lock()
_WORLD: _World | None = None


def _env_timeout() -> float:
    raw = os.environ.get("VERIGRAD_DIST_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"VERIGRAD_DIST_TIMEOUT must be a positive number of seconds, got {raw!r}")
    return value


def is_available() -> bool:
    """Whether mpi4py can be imported (the `distributed` extra is installed)."""
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | float | None = None,
    world_size: int = -1,
    rank: int = -1,
    **_: Any,
) -> None:
    """PyTorch's `init_process_group`, for the "mpi" backend only: the ranks are those `mpiexec` started
    (world_size and rank, if given, must agree with them); `timeout` (a timedelta or seconds) bounds every
    wait, else `VERIGRAD_DIST_TIMEOUT`."""
    global _WORLD
    name = "mpi" if backend is None else str(backend).lower()
    if name in REFUSED:
        raise DistributedError(
            f"init_process_group: backend {backend!r} ({REFUSED[name]}) is not available in verigrad; "
            "use backend='mpi' (run the program with mpiexec)"
        )
    if name not in BACKENDS:
        raise DistributedError(f"init_process_group: unknown backend {backend!r}; verigrad has 'mpi'")
    if init_method not in (None, "env://") and not str(init_method).startswith("mpi"):
        raise DistributedError(
            f"init_process_group: init_method {init_method!r} is not used by the mpi backend: mpiexec "
            "starts the ranks; leave it out"
        )
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    seconds = float(timeout) if timeout is not None else _env_timeout()
    with _LOCK:
        if _WORLD is not None:
            raise DistributedError("init_process_group: the default process group is already initialized")
        if not is_available():
            raise DistributedError(
                "init_process_group: mpi4py is not installed; pip install 'verigrad[distributed]' "
                "(mpi4py and the mpich wheel) or mpi4py built against your MPI"
            )
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        world = _World(comm, MPI, seconds)
        for given, actual, what in ((world_size, world.size, "world_size"), (rank, world.rank, "rank")):
            if given not in (-1, None) and given != actual:
                raise DistributedError(
                    f"init_process_group: {what}={given}, but mpiexec started this process with "
                    f"{what} {actual}"
                )
        _WORLD = world


LAUNCHER_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")  # MPICH's Hydra, Open MPI


def launched_size() -> int:
    """How many ranks mpiexec started this process among (1 when it was not started by mpiexec), read
    from the launcher's environment without importing mpi4py."""
    for name in LAUNCHER_SIZE:
        value = os.environ.get(name, "")
        if value.isdecimal() and int(value) > 0:
            return int(value)
    return 1


def is_initialized() -> bool:
    return _WORLD is not None


def world() -> _World:
    """The initialized group, or a DistributedError naming what to call first."""
    if _WORLD is None:
        raise NotInitializedError(
            "Default process group has not been initialized, please make sure to call init_process_group. "
            "(verigrad: init_process_group('mpi'), in a program started by mpiexec)"
        )
    return _WORLD


def get_rank(group: Any = None) -> int:
    return world().rank


def get_world_size(group: Any = None) -> int:
    return world().size


def size_or_one() -> int:
    """The world's size, 1 without a process group (what the collectives' rules see)."""
    return 1 if _WORLD is None else _WORLD.size


def destroy_process_group(group: Any = None) -> None:
    """Forget the default group (MPI itself is finalized when the process exits)."""
    global _WORLD
    with _LOCK:
        world()
        _WORLD = None


def abort(message: str) -> None:
    """Print `message` and end every rank of the job."""
    w = world()
    print(f"verigrad.distributed: rank {w.rank} of {w.size}: {message}", file=sys.stderr, flush=True)
    w.comm.Abort(1)


def wait(request: Any, what: str) -> None:
    """Wait for a non-blocking MPI request, polling up to the group's timeout; then abort the job."""
    w = world()
    if request.Test():
        return
    start = time.monotonic()
    deadline, spin_until = start + w.timeout, start + SPIN_S
    pause = 1e-5
    while not request.Test():  # each Test also moves MPI's transfers on: long pauses would slow them
        now = time.monotonic()
        if now > deadline:
            abort(
                f"{what} did not complete within {w.timeout:g} s (VERIGRAD_DIST_TIMEOUT): another rank "
                "died, hangs or called a different collective; aborting the job"
            )
        if now < spin_until:
            time.sleep(0)  # yield the core (ranks may share cores) and test again
        else:
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)


def barrier(group: Any = None) -> None:
    """Wait until every rank reaches the barrier (within the timeout)."""
    w = world()
    wait(w.comm.Ibarrier(), "barrier")
