"""`verigrad.profiler`, as torch.profiler: `profile` records the wall time of every op call made on its
thread (its kernel, and the ops a composite op is written with, as children) and of each
`record_function` range; `key_averages().table()` prints PyTorch's table, `export_chrome_trace` writes
the trace, `schedule` and `step()` record chosen steps of a training loop and hand each finished cycle
to `on_trace_ready` (`tensorboard_trace_handler` writes it to a folder).

Not as PyTorch: only the ops of the thread that entered the profile are recorded (a DataLoader's workers
are not), a `verigrad.compile`d step is recorded as the ops it runs only where it runs eagerly, and memory,
stacks, FLOPs and devices other than the CPU are not measured (their columns are zeros)."""

from __future__ import annotations

import enum
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from .. import modes
from ..eager import EagerMode
from .events import EventList, FunctionEvent, FunctionEventAvg, format_time

__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "LegacyProfile",
    "ProfilerAction",
    "ProfilerActivity",
    "format_time",
    "profile",
    "record_function",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
]


class ProfilerActivity(enum.Enum):
    """What PyTorch's profiler can record: here the CPU's ops (the others record nothing)."""

    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


def supported_activities() -> set[ProfilerActivity]:
    return {ProfilerActivity.CPU}


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(
    *, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0, skip_first_wait: int = 0
) -> Callable[[int], ProfilerAction]:
    """PyTorch's schedule: after `skip_first` steps, cycles of `wait` idle steps, `warmup` steps and `active`
    recorded ones (the last of which saves), `repeat` times (0: for ever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("schedule: invalid arguments (active must be positive, the rest non-negative)")

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:  # the first cycle's wait skipped
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class _Frame:
    """An open op call or range: its start, and the time its children took."""

    __slots__ = ("annotation", "children", "name", "shapes", "start")

    def __init__(self, name: str, shapes: list, annotation: bool) -> None:
        self.name, self.shapes, self.annotation = name, shapes, annotation
        self.children = 0
        self.start = time.perf_counter_ns()


class _State(threading.local):
    def __init__(self) -> None:
        self.recording: list[profile] = []  # the profiles recording on this thread, innermost last


_STATE = _State()


class _Recorder(EagerMode):
    """The eager mode with each op call timed: pushed on the mode stack by a recording profile (its name is
    "eager", so everything that asks for the eager mode gets it)."""

    def __init__(self, owner: profile) -> None:
        self.owner = owner

    def run(self, op: Any, args: tuple, params: dict, plan: Any) -> Any:
        shapes = [list(a.shape) for a in args] if self.owner.record_shapes else []
        frame = self.owner._open(op.name, shapes, False)
        try:
            return EagerMode.run(self, op, args, params, plan)
        finally:
            self.owner._close(frame)


class profile:
    """PyTorch's torch.profiler.profile: a context (or start()/stop()) recording the ops' wall times."""

    def __init__(
        self, *, activities: Iterable[ProfilerActivity] | None = None,
        schedule: Callable[[int], ProfilerAction] | None = None,
        on_trace_ready: Callable[[profile], Any] | None = None, record_shapes: bool = False,
        profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
        with_modules: bool = False, experimental_config: Any = None, execution_trace_observer: Any = None,
        acc_events: bool = False, use_cuda: bool | None = None, custom_trace_id_callback: Any = None,
    ) -> None:  # fmt: skip
        self.activities = set(activities) if activities is not None else supported_activities()
        self.schedule = schedule or _always
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.acc_events = acc_events
        self.step_num = 0
        self._events: list[FunctionEvent] = []
        self._stack: list[_Frame] = []
        self._origin = time.perf_counter_ns()
        self._recorder = _Recorder(self)
        self._action = ProfilerAction.NONE
        self._step_frame: _Frame | None = None
        self._thread = threading.get_ident()
        self._started = False

    # the context -------------------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        if self._started:
            raise RuntimeError("profile: already started")
        self._started, self._thread = True, threading.get_ident()
        self._origin = time.perf_counter_ns()
        self._enter(self.schedule(self.step_num))

    def stop(self) -> None:
        if not self._started:
            return
        recording = self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        self._enter(ProfilerAction.NONE)
        self._started = False
        if recording:
            self._save()

    def step(self) -> None:
        """The training loop's step ended: the schedule's next action (a finished cycle is handed to
        on_trace_ready)."""
        saving = self._action == ProfilerAction.RECORD_AND_SAVE
        self.step_num += 1
        if saving:
            self._enter(ProfilerAction.NONE)
            self._save()
        self._enter(self.schedule(self.step_num))

    # recording -------------------------------------------------------------------------------------
    def _enter(self, action: ProfilerAction) -> None:
        """Go to `action`: recording starts (the recorder on the mode stack) or stops (the open step's
        range closed, the recorder taken off)."""
        recording = action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        was = self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if was and self._step_frame is not None:
            self._close(self._step_frame)
            self._step_frame = None
        if recording and not was:
            if not self.acc_events and self._action in (ProfilerAction.NONE, ProfilerAction.WARMUP):
                self._events = []
            modes.LOCAL.stack.append(self._recorder)
            _STATE.recording.append(self)
        elif was and not recording:
            _remove(modes.LOCAL.stack, self._recorder)
            _remove(_STATE.recording, self)
        self._action = action
        if recording and self.record_steps:
            self._step_frame = self._open(f"ProfilerStep#{self.step_num}", [], True)

    def _save(self) -> None:
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _open(self, name: str, shapes: list, annotation: bool) -> _Frame:
        frame = _Frame(name, shapes, annotation)
        self._stack.append(frame)
        return frame

    def _close(self, frame: _Frame) -> None:
        end = time.perf_counter_ns()
        if not any(f is frame for f in self._stack):
            return  # closed already (with a range it was left open in)
        while self._stack.pop() is not frame:  # a range left open inside: closed with it
            pass
        took = end - frame.start
        if self._stack:
            self._stack[-1].children += took
        self._events.append(
            FunctionEvent(
                frame.name, (frame.start - self._origin) / 1e3, (end - self._origin) / 1e3,
                (took - frame.children) / 1e3, self._thread, frame.shapes, frame.annotation,
            )
        )  # fmt: skip

    # what was recorded -----------------------------------------------------------------------------
    def events(self) -> EventList:
        """Every op call and range recorded (of the last cycle, with a schedule), in the order they ended."""
        return EventList(self._events)

    def key_averages(
        self, group_by_input_shape: bool = False, group_by_stack_n: int = 0, **_: Any
    ) -> EventList:
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        raise NotImplementedError("profile.export_stacks: verigrad's profiler records no stacks")

    @property
    def profiler(self) -> profile:  # PyTorch's prof.profiler.function_events, ...
        return self

    @property
    def function_events(self) -> EventList:
        return self.events()

    @property
    def self_cpu_time_total(self) -> float:
        return self.events().self_cpu_time_total


def _remove(stack: list, item: Any) -> None:
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is item:
            del stack[i]
            return


class LegacyProfile(profile):
    """torch.autograd.profiler.profile: `profile(enabled=True, *, record_shapes=...)`, the same recording
    (nothing where not `enabled`)."""

    def __init__(
        self, enabled: bool = True, *, use_cuda: bool = False, use_device: Any = None,
        record_shapes: bool = False, with_flops: bool = False, profile_memory: bool = False,
        with_stack: bool = False, with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
        experimental_config: Any = None, acc_events: bool = False, custom_trace_id_callback: Any = None,
    ) -> None:  # fmt: skip
        super().__init__(record_shapes=record_shapes, acc_events=acc_events)
        self.enabled = enabled

    def start(self) -> None:
        if self.enabled:
            super().start()


class record_function:
    """A named range in the profile (PyTorch's record_function): a context manager or a decorator; the
    time of the ops inside is counted in its total, not in its own."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name, self.args = name, args
        self._frames: list[tuple[profile, _Frame]] = []

    def __enter__(self) -> record_function:
        self._frames = [(p, p._open(self.name, [], True)) for p in _STATE.recording]
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, frame in self._frames:
            if owner._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
                owner._close(frame)
        self._frames = []

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)

        return wrapped


def tensorboard_trace_handler(
    dir_name: str, worker_name: str | None = None, use_gzip: bool = False
) -> Callable[[profile], None]:
    """An on_trace_ready that writes each cycle's Chrome trace to `dir_name` as
    `<worker>.<time in ms>.pt.trace.json` (what TensorBoard's profiler plugin reads)."""
    if use_gzip:
        raise NotImplementedError("tensorboard_trace_handler: use_gzip=True is not supported; leave it False")

    def handler(prof: profile) -> None:
        import socket

        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json"
        prof.export_chrome_trace(os.path.join(dir_name, name))

    return handler
