"""The training loop shared by `verigrad train lm` and `verigrad finetune`: linear warmup then cosine
decay, gradient accumulation and clipping in one step (compiled or eager), a loss that must stay finite,
evaluations and checkpoints every N steps, and the state a checkpoint needs for a resumed run to continue
with the bits of one never stopped (optimizer state, step, random generator, history).

A run is any object with `config` (steps, lr, min_lr, warmup, clip, eval_every, save_every, threads,
backend, compiled), `model`, `optimizer`, `start` (the next step) and `history` (lists by name).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..backends import backend, set_threads
from ..backends.threads import MAX_THREADS
from ..compile import compile as compile_fn
from ..io import load
from ..io.safetensors_format import read_metadata
from ..nn.utils import clip_grad_norm_
from ..ops import from_numpy
from ..ops.creation import default_generator
from ..optim import Optimizer
from ..shapes import dims, spec
from .checkpoint_checks import check_groups, check_tensors, decoded_meta


def check_options(config: Any, *positive: str) -> None:
    """The loop's options of a config, named as the command's: the `positive` integers, warmup and seed
    non-negative integers, threads at most MAX_THREADS, lr positive and min_lr, clip and weight_decay
    non-negative finite numbers, min_lr at most lr."""
    for name in positive:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
    for name in ("warmup", "seed"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"--{name} must be a non-negative integer, got {value!r}")
    if config.threads > MAX_THREADS:
        raise ValueError(f"--threads must be at most {MAX_THREADS}, got {config.threads}")
    for name in ("lr", "min_lr", "clip", "weight_decay"):
        value = getattr(config, name)
        ok = not isinstance(value, bool) and isinstance(value, int | float) and 0 <= value < math.inf
        if not ok or (name == "lr" and value == 0):
            kind = "positive" if name == "lr" else "non-negative"
            raise ValueError(f"--{name.replace('_', '-')} must be a finite {kind} number, got {value!r}")
    if config.min_lr > config.lr:
        raise ValueError(
            f"min_lr {config.min_lr} is above --lr {config.lr}: the cosine decays from lr to min_lr"
        )


def lr_at(step: int, config: Any) -> float:
    """The learning rate of step `step` (0-based): linear warmup from lr/warmup to lr over `warmup`
    steps, then cosine decay to min_lr at the last step."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    span = max(1, config.steps - 1 - config.warmup)
    progress = min(1.0, (step - config.warmup) / span)
    return config.min_lr + (config.lr - config.min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


@contextmanager
def evaluating(model: Any) -> Iterator[None]:
    """`model` in eval mode (dropout off) inside the block, and in its mode before after it, even when the
    block raises."""
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)


def accumulated_step(loss: Callable, params: list, optimizer: Optimizer, clip: float) -> Callable:
    """step(x, y) on micro-batches x, y [A, ...]: each micro-batch's loss(x[i], y[i]) / A backpropagated
    (the gradients add up, as PyTorch's accumulation), the gradients of `params` clipped to norm `clip`
    (0: not), one optimizer update; returns the mean loss."""

    def step(x, y):
        optimizer.zero_grad()
        total = None
        count = x.shape[0]
        for i in range(count):
            part = loss(x[i], y[i]) / count
            part.backward()
            total = part.detach() if total is None else total + part.detach()
        if clip:
            clip_grad_norm_(params, clip)
        optimizer.step()
        return total

    return step


def check_token_step(step: Callable, accumulate: int) -> None:
    """`step` traced on symbolic token ids [accumulate, B, T] (B and T symbols): a shape or dtype error of
    any batch or sequence length is raised here, before training."""
    from ..ir.trace import trace

    b, t = dims("batch tokens")
    ids = spec([accumulate, b, t], "i64")
    trace(step, ids, ids)


def train_steps(
    run: Any,
    batches: Callable[[int], tuple[np.ndarray, np.ndarray]],
    step: Callable,
    tokens_per_step: Callable[[np.ndarray, np.ndarray], int],
    evaluate: Callable[[], dict[str, float]],
    save: Callable[[], Any],
    on_step: Callable[[dict[str, Any]], None] | None = None,
    on_eval: Callable[[dict[str, Any]], None] | None = None,
    eval_extra: Callable[[int], dict[str, Any]] | None = None,
    stop_after: int | None = None,
    leader: bool = True,
) -> Any:
    """Run `step` (compiled unless config.compiled is false) on `batches(s)` from `run.start` to
    config.steps (or to step `stop_after`: an interrupted run), the learning rate set by `lr_at`;
    `evaluate()`'s numbers are recorded every `eval_every` steps and at the end (and passed to `on_eval`
    with `eval_extra(step)`'s), `save()` is called every `save_every` steps and at the last one run; a rank
    that is not the `leader` (data-parallel training) neither evaluates nor saves."""
    c, optimizer, history = run.config, run.optimizer, run.history
    for key in ("loss", "lr", "eval_step"):
        history.setdefault(key, [])
    end = c.steps if stop_after is None else min(c.steps, stop_after)
    set_threads(c.threads)
    with backend(c.backend):
        step_fn = compile_fn(step) if c.compiled else step
        start_time, first, tokens = time.perf_counter(), run.start, 0
        for s in range(run.start, end):
            lr = lr_at(s, c)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = batches(s)
            loss = float(step_fn(from_numpy(x), from_numpy(y)))
            if not math.isfinite(loss):
                raise ValueError(
                    f"the loss is {loss} at step {s + 1}: training diverged, no checkpoint written; "
                    f"try a smaller --lr than {c.lr}"
                )
            history["loss"].append(loss)
            history["lr"].append(lr)
            run.start = s + 1
            tokens += tokens_per_step(x, y)
            if on_step is not None:
                elapsed = time.perf_counter() - start_time
                on_step(
                    {
                        "step": s + 1,
                        "steps": c.steps,
                        "loss": loss,
                        "lr": lr,
                        "tokens_per_s": tokens / elapsed if elapsed > 0 else 0.0,
                        "done": s + 1 - first,
                    }
                )
            if not leader:
                continue
            if (s + 1) % c.eval_every == 0 or s + 1 == c.steps:
                numbers = evaluate()
                history["eval_step"].append(s + 1)
                for key, value in numbers.items():
                    history.setdefault(key, []).append(value)
                if on_eval is not None:
                    on_eval({"step": s + 1, **numbers, **(eval_extra(s + 1) if eval_extra else {})})
            if (s + 1) % c.save_every == 0 or s + 1 == end:
                save()
    return run


# checkpoints ---------------------------------------------------------------------------------------
def loop_state(run: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The optimizer's state as tensors (`optimizer.<index>.<name>`), and as metadata the step, the
    generator's state, the groups' settings and the history."""
    tensors: dict[str, np.ndarray] = {}
    state = run.optimizer.state_dict()
    for index, entry in state["state"].items():
        for name, value in entry.items():
            array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
            tensors[f"optimizer.{index}.{name}"] = np.array(array)
    groups = [
        {k: v for k, v in g.items() if k != "params"} | {"params": g["params"]} for g in state["param_groups"]
    ]
    meta = {
        "step": str(run.start),
        "generator": default_generator.get_state().numpy().tobytes().decode(),
        "param_groups": json.dumps(groups),
        "history": json.dumps(run.history),
    }
    return tensors, meta


def model_tensors(tensors: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's tensors but `loop_state`'s (the optimizer's): the model's state dict."""
    return {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}


def restore(run: Any, path: Any, meta: dict[str, Any]) -> None:
    """Put the checkpoint's weights (into `run.model`), optimizer state, step, generator state and history
    into `run`; `meta`: its metadata, JSON decoded. The whole file is checked first (`checkpoint_checks`)."""
    tensors = load(path)
    check_checkpoint(path, tensors, run.model.state_dict(), run.optimizer, meta)
    run.model.load_state_dict(model_tensors(tensors))
    restore_loop_state(run, tensors, meta)


def check_checkpoint(
    path: Any, tensors: dict[str, Any], model: dict[str, Any], optimizer: Optimizer, meta: dict[str, Any]
) -> None:
    """The checkpoint's tensors (`model`: the run's tensors it must hold) and optimizer groups checked
    against this run's before anything is restored; a WeightFileError naming `path` and the fault."""
    check_tensors(path, tensors, model, optimizer)
    check_groups(path, meta["param_groups"], optimizer)


def restore_loop_state(run: Any, tensors: dict[str, Any], meta: dict[str, Any]) -> None:
    """Put `loop_state`'s optimizer state, step, generator state and history (meta decoded from JSON)
    into `run` (the model's own tensors are the caller's)."""
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = value
    groups = meta["param_groups"]
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    run.optimizer.load_state_dict({"state": state, "param_groups": groups})
    run.start = int(meta["step"])
    generator = json.dumps(meta["generator"]).encode()  # get_state's JSON text, parsed with the metadata
    default_generator.set_state(from_numpy(np.frombuffer(generator, dtype=np.uint8).copy()))
    run.history = meta["history"]


def read_checkpoint_meta(path: Any, model: str, command: str) -> dict[str, Any]:
    """A trainer's checkpoint metadata, decoded; a file whose `model` is not `model` (not one of
    `command`'s) is refused."""
    return decoded_meta(path, read_metadata(path), model, command)


# resuming ------------------------------------------------------------------------------------------
def option_name(name: str) -> str:
    """A config field's command-line option: `--min-lr`."""
    return f"--{name.replace('_', '-')}"


def check_same_run(
    path: Any,
    saved: dict[str, Any],
    config: Any,
    names: Iterable[str],
    option: Callable[[str], str] = option_name,
    shown: Callable[[str, Any], str] = lambda name, value: repr(value),
) -> None:
    """Refuse to continue the run saved in `path` (`saved`: its config, decoded from JSON) with a `config`
    whose options `names` differ from it (a tuple equals the list JSON made of it): a ValueError naming
    each, `option(name) shown(saved value) -> shown(new value)`."""
    changed = [
        f"{option(name)} {shown(name, saved.get(name))} -> {shown(name, getattr(config, name))}"
        for name in names
        if saved.get(name) != _as_json(getattr(config, name))
    ]
    if changed:
        raise ValueError(f"--resume: {path} was trained with other options ({'; '.join(changed)})")


def _as_json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def check_step(path: Any, step: int, steps: int, limit: str) -> None:
    """Refuse to continue the run saved in `path` at `step` when it is past the run's `steps` (`limit`:
    the options that set them, `--steps 5`)."""
    if step > steps:
        raise ValueError(f"--resume: {path} is at step {step}, past {limit}")


def check_out_folder(out: str | Path) -> Path:
    """The output folder `out`, once checked that it is a folder or nothing yet."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: the output folder exists and is not a directory")
    return out


def saved_run(
    config: Any, checkpoint: str, resume: bool, model: str, command: str, names: Iterable[str]
) -> dict[str, Any] | None:
    """The output folder `config.out` checked (a folder, or nothing yet) and, with `resume`, the metadata
    of its checkpoint `checkpoint` (decoded; its `model` `model`: one of `command`'s), once checked that
    its run was trained with `config`'s options `names` and is not past `config.steps`."""
    out = check_out_folder(config.out)
    if not resume:
        return None
    path = out / checkpoint
    if not path.is_file():
        raise ValueError(f"--resume: {out} has no checkpoint {checkpoint} to continue from")
    saved = read_checkpoint_meta(path, model, command)
    check_same_run(path, saved["config"], config, names)
    check_step(path, int(saved["step"]), config.steps, f"--steps {config.steps}")
    return saved
