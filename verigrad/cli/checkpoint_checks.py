"""A trainer's checkpoint checked whole before `--resume` restores any of it: its metadata (the step, the
generator's state, the optimizer's groups, the history, the config), the model's tensors and the
optimizer's, each against what this run holds. A file that fails is a WeightFileError naming it and the
entry at fault; a checkpoint the trainers wrote always passes (they never save non-finite values: a
diverging run stops without saving)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import WeightFileError
from ..io.gguf import shown
from ..ops import from_numpy
from ..ops.creation import Generator
from ..optim import Optimizer
from ..shapes import shape_text

LOOP_KEYS = ("step", "generator", "param_groups", "history", "config")
MAX_STEP = 2**53  # a step count a float32 step tensor and JSON both hold... up to its precision


def decoded_meta(path: Any, meta: Mapping[str, str], model: str, command: str) -> dict[str, Any]:
    """A trainer's checkpoint metadata (`meta`: the file's, strings), JSON decoded and checked: `model`
    names `command`'s checkpoints, every entry of `LOOP_KEYS` is there and of its type."""
    if meta.get("model") != model:
        raise WeightFileError(f"{path}: not a checkpoint of `{command}`")
    missing = [k for k in LOOP_KEYS if k not in meta]
    if missing:
        raise WeightFileError(f"{path}: its metadata has no {', '.join(missing)}")
    decoded = {"model": model}
    for key, text in meta.items():
        if key == "model":
            continue
        try:
            decoded[key] = json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise WeightFileError(f"{path}: its metadata {key} is not valid JSON: {shown(text)}") from None
    step = decoded["step"]
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= MAX_STEP:
        raise WeightFileError(f"{path}: its step is {shown(step)}, not a count of steps")
    for key, kind in (("config", dict), ("history", dict), ("param_groups", list), ("generator", dict)):
        if not isinstance(decoded[key], kind):
            raise WeightFileError(f"{path}: its {key} is {shown(decoded[key])}, not a {kind.__name__}")
    history = decoded["history"]
    for name, values in history.items():
        if not (isinstance(values, list) and all(_is_number(v) for v in values)):
            raise WeightFileError(f"{path}: its history's {shown(name)} is not a list of numbers")
    try:
        Generator(0).set_state(from_numpy(np.frombuffer(json.dumps(decoded["generator"]).encode(), np.uint8)))
    except (ValueError, TypeError, OverflowError):
        raise WeightFileError(f"{path}: its generator state is not one verigrad saves") from None
    return decoded


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_groups(path: Any, groups: list[Any], optimizer: Optimizer) -> None:
    """The saved optimizer groups: as many as the optimizer's, each with its parameters' indices and its
    settings, every setting of the type the optimizer's has (a number finite)."""
    own = optimizer.state_dict()["param_groups"]
    if len(groups) != len(own):
        raise WeightFileError(
            f"{path}: {len(groups)} optimizer groups saved, this run's optimizer has {len(own)}"
        )
    for i, (saved, mine) in enumerate(zip(groups, own)):
        where = f"{path}: optimizer group {i}"
        if not isinstance(saved, dict) or set(saved) != set(mine):
            raise WeightFileError(f"{where} is {shown(saved)}; its settings are {', '.join(sorted(mine))}")
        if saved["params"] != mine["params"]:
            raise WeightFileError(f"{where} holds parameters {shown(saved['params'])}, not {mine['params']}")
        for key, value in saved.items():
            if key != "params" and not _same_kind(value, mine[key]):
                raise WeightFileError(f"{where}: {key} is {shown(value)}, where this run has {mine[key]!r}")


def _same_kind(saved: Any, mine: Any) -> bool:
    if isinstance(mine, bool) or mine is None or isinstance(mine, str):
        return type(saved) is type(mine)
    if _is_number(mine):
        return _is_number(saved) and math.isfinite(saved)
    if isinstance(mine, list | tuple):
        return isinstance(saved, list) and len(saved) == len(mine) and all(map(_same_kind, saved, mine))
    return saved == mine


def check_tensors(
    path: Any, tensors: Mapping[str, Any], model: Mapping[str, Any], optimizer: Optimizer
) -> None:
    """The checkpoint's tensors: the model's (`model`: name -> the run's tensor, those the checkpoint must
    hold) of their shapes and dtypes, and the optimizer's `optimizer.<index>.<name>`, a parameter's
    moments of its shape and dtype, its step a scalar count; every value finite."""
    params = optimizer.params
    weights = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    problems = [f"no tensor {k}" for k in model if k not in weights]
    problems += [f"unexpected tensor {k}" for k in weights if k not in model]
    for name, value in tensors.items():
        if name in model:
            expected = model[name]
        elif name.startswith("optimizer."):
            _, index, slot = [*name.split(".", 2), "", ""][:3]
            if not (index.isdigit() and int(index) < len(params) and slot):
                problems.append(
                    f"unexpected tensor {name} (this run's optimizer has {len(params)} parameters)"
                )
                continue
            expected = None if slot == "step" else params[int(index)]
        else:
            continue
        shape, dtype = (() if expected is None else tuple(expected.shape)), getattr(expected, "dtype", None)
        if tuple(value.shape) != shape or (dtype is not None and value.dtype is not dtype):
            want = f"{dtype.name if dtype is not None else 'a'} {shape_text(shape)}"
            problems.append(
                f"tensor {name}: {value.dtype.name} {shape_text(tuple(value.shape))}, expected {want}"
            )
            continue
        values = value.numpy()
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            problems.append(f"tensor {name} holds non-finite values")
        elif expected is None and not (
            values.dtype.kind in "fiu" and 0 <= values <= MAX_STEP and values == int(values)
        ):
            problems.append(f"tensor {name}: {values} is not a count of steps")
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise WeightFileError(f"{path}: " + "; ".join(problems[:5]) + more)
