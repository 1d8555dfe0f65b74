"""What the profiler recorded: each op call's and each `record_function` range's wall time (its own and its
children's), their averages by name (PyTorch's `key_averages()`), PyTorch's table of them and the Chrome
trace (the JSON that chrome://tracing, Perfetto and TensorBoard read)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FunctionEvent:
    """One op call or range: times in microseconds from the profile's start, as PyTorch's FunctionEvent."""

    name: str
    start_us: float
    end_us: float
    self_cpu_time_total: float
    thread: int
    input_shapes: list[list[int]] = field(default_factory=list)
    is_user_annotation: bool = False

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def device_time_total(self) -> float:
        return 0.0  # verigrad runs on the CPU

    cuda_time_total = self_device_time_total = self_cuda_time_total = device_time_total


@dataclass
class FunctionEventAvg:
    """The events of one name (and input shapes, when grouped so) summed: PyTorch's FunctionEventAvg."""

    key: str
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    input_shapes: Any = None
    is_user_annotation: bool = False
    device_time_total: float = 0.0
    self_device_time_total: float = 0.0
    cpu_memory_usage: int = 0
    self_cpu_memory_usage: int = 0
    flops: int = 0

    @property
    def cpu_time(self) -> float:
        """The average time of one call, children included."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cpu_time_str = property(lambda self: format_time(self.cpu_time))
    cpu_time_total_str = property(lambda self: format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: format_time(self.self_cpu_time_total))

    def add(self, event: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        self.count += getattr(event, "count", 1)
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        return self


def format_time(us: float) -> str:
    """PyTorch's rendering of a time given in microseconds."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    """The recorded events (or their averages), as PyTorch's EventList: `table()`, `key_averages()`,
    `export_chrome_trace()`, `self_cpu_time_total`."""

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """The events summed by name (and input shapes), in the order the names first appear."""
        groups: dict[Any, FunctionEventAvg] = {}
        for e in self:
            shapes = str(e.input_shapes) if group_by_input_shape else None
            key = (e.key, shapes)
            if key not in groups:
                groups[key] = FunctionEventAvg(
                    e.key, input_shapes=e.input_shapes if group_by_input_shape else None,
                    is_user_annotation=e.is_user_annotation,
                )  # fmt: skip
            groups[key].add(e)
        return EventList(groups.values())

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def table(
        self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
        max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
        top_level_events_only: bool = False, **_: Any,
    ) -> str:  # fmt: skip
        """PyTorch's table: a row per entry (the averages, where this list holds them), sorted descending by
        `sort_by` (an attribute: cpu_time_total, self_cpu_time_total, count, ...), at most `row_limit`."""
        rows = _averaged(self)
        if sort_by is not None:
            if rows and not hasattr(rows[0], sort_by):
                raise AttributeError(f"table: sort_by={sort_by!r} is no attribute of the profiler's events")
            rows = sorted(rows, key=lambda e: getattr(e, sort_by), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        return _render(rows, self.self_cpu_time_total, max_name_column_width, max_shapes_column_width, header)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as a Chrome trace (JSON) to `path`."""
        write_chrome_trace(self, path)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total


def _averaged(events: Iterable[Any]) -> list[FunctionEventAvg]:
    events = list(events)
    if events and isinstance(events[0], FunctionEvent):
        return list(EventList(events).key_averages())
    return events


def _render(rows: list[FunctionEventAvg], self_total: float, name_width: int, shapes_width: int,
            header: str | None) -> str:  # fmt: skip
    shapes = any(r.input_shapes is not None for r in rows)
    width = min(max([len(r.key) for r in rows] + [4]) + 4, name_width)
    columns = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
    widths = [width] + [12] * len(columns)
    titles = ["Name", *columns]
    if shapes:
        shape_width = min(max([len(str(r.input_shapes)) for r in rows] + [12]) + 2, shapes_width)
        widths.append(shape_width)
        titles.append("Input Shapes")
    line = "  ".join("-" * w for w in widths) + "  "
    total = self_total or sum(r.self_cpu_time_total for r in rows)

    def row(cells: list[str]) -> str:
        return "  ".join(c[:w].rjust(w) for c, w in zip(cells, widths)) + "  "

    def percent(t: float) -> str:
        return f"{100.0 * t / total:.2f}%" if total else "0.00%"

    out = ([header] if header else []) + [line, row(titles), line]
    for r in rows:
        name = r.key if len(r.key) <= width else r.key[: width - 3] + "..."
        cells = [name, percent(r.self_cpu_time_total), format_time(r.self_cpu_time_total),
                 percent(r.cpu_time_total), format_time(r.cpu_time_total), format_time(r.cpu_time),
                 str(r.count)]  # fmt: skip
        if shapes:
            cells.append(str(r.input_shapes))
        out.append(row(cells))
    out += [line, f"Self CPU time total: {format_time(self_total)}", ""]
    return "\n".join(out)


def write_chrome_trace(events: Iterable[FunctionEvent], path: str) -> None:
    """The events as Chrome's trace format: a complete ("X") event each, on its thread."""
    trace = [
        {
            "ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op", "name": e.name,
            "pid": 0, "tid": e.thread, "ts": e.start_us, "dur": e.cpu_time_total,
            "args": {"Input Dims": e.input_shapes} if e.input_shapes else {},
        }
        for e in events
    ]  # fmt: skip
    with open(path, "w") as f:
        json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)
