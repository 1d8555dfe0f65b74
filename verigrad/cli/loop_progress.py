"""The shared training loop's progress bar on the command line (`verigrad train lm`, `verigrad finetune`):
step, loss, throughput, time elapsed and left."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def loop_progress(
    console: Any, name: str, steps: int, start: int, unit: str
) -> Iterator[tuple[Any, Callable]]:
    """rich's progress bar of a run of `steps` steps at step `start` (its throughput in `unit` per
    second) on `console`; yields it (to print beside it) and the `on_step` that moves it."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = (
        BarColumn(),
        TextColumn("step {task.completed}/{task.total}"),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TextColumn(f"{{task.fields[tokens_per_s]:,.0f}} {unit}/s"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(name, total=steps, completed=start, loss=float("nan"), tokens_per_s=0.0)

        def on_step(s: dict) -> None:
            progress.update(task, completed=s["step"], loss=s["loss"], tokens_per_s=s["tokens_per_s"])

        yield progress, on_step
