"""`verigrad.multiprocessing`, as torch.multiprocessing: Python's multiprocessing under PyTorch's name, with
what PyTorch adds that makes sense here: `spawn`/`start_processes` (run fn(i, *args) in nprocs processes,
an error in one raised in the parent with its traceback) and the sharing-strategy settings.

Not as PyTorch: a tensor sent to another process (through a Queue, a Pipe, spawn's args) is pickled by
value, not moved into shared memory, so a write to it in one process is not seen in the other; Hogwild
training (`model.share_memory()` and workers updating one model) does not share its updates."""

from __future__ import annotations

import multiprocessing as _mp
import traceback
from multiprocessing import *  # noqa: F403  (Process, Queue, Pool, get_context, ...: PyTorch's re-export)
from typing import Any

__all__ = [*_mp.__all__, "set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies",
           "spawn", "start_processes", "ProcessContext", "ProcessException", "ProcessRaisedException",
           "ProcessExitedException"]  # fmt: skip

_STRATEGIES = {"file_descriptor", "file_system"}
_SHARING = ["file_descriptor"]


def get_all_sharing_strategies() -> set[str]:
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    return _SHARING[0]


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepted as PyTorch's (verigrad sends tensors by value: the strategy changes nothing)."""
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"set_sharing_strategy: {new_strategy!r} is not one of {sorted(_STRATEGIES)}")
    _SHARING[0] = new_strategy


class ProcessException(Exception):
    def __init__(self, msg: str, error_index: int, error_pid: int) -> None:
        super().__init__(msg)
        self.msg, self.error_index, self.error_pid = msg, error_index, error_pid

    def __reduce__(self) -> Any:
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A spawned process raised: its traceback is the message."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a non-zero code without raising."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None) -> None:  # fmt: skip
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name


def _wrap(fn: Any, i: int, args: tuple, errors: Any) -> None:
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        errors.put(traceback.format_exc())
        raise SystemExit(1) from None


class ProcessContext:
    """The processes `spawn` started (join=False): `join()` waits for them, raising the first failure."""

    def __init__(self, processes: list[Any], error_queues: list[Any]) -> None:
        self.processes, self.error_queues = processes, error_queues

    def pids(self) -> list[int]:
        return [int(p.pid) for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every process (at most `timeout` seconds each); True when all have ended. A process that
        failed ends the others and raises ProcessRaisedException (its traceback) or
        ProcessExitedException."""
        for p in self.processes:
            p.join(timeout)
        failed = [i for i, p in enumerate(self.processes) if p.exitcode not in (None, 0)]
        if failed:
            for p in self.processes:
                if p.is_alive():
                    p.terminate()
            i = failed[0]
            p, queue = self.processes[i], self.error_queues[i]
            if not queue.empty():
                message = f"\n\n-- Process {i} terminated with the following error:\n{queue.get()}"
                raise ProcessRaisedException(message, i, p.pid)
            raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}", i, p.pid,
                                         p.exitcode)  # fmt: skip
        return all(p.exitcode is not None for p in self.processes)


def start_processes(fn: Any, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn") -> ProcessContext | None:  # fmt: skip
    """Run fn(i, *args) for i in range(nprocs), each in a process of its own (`start_method`: spawn, fork
    or forkserver); with `join`, wait for them all and return None, else return their ProcessContext."""
    context = _mp.get_context(start_method)
    processes, queues = [], []
    for i in range(nprocs):
        errors = context.SimpleQueue()
        process = context.Process(target=_wrap, args=(fn, i, args, errors), daemon=daemon)
        process.start()
        processes.append(process)
        queues.append(errors)
    done = ProcessContext(processes, queues)
    if not join:
        return done
    while not done.join():
        pass
    return None


def spawn(fn: Any, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext | None:  # fmt: skip
    """PyTorch's torch.multiprocessing.spawn: start_processes with the spawn start method by default."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
