"""The trainer of `verigrad train` and `verigrad eval`: the digits CNN trained with the training step
below, checkpointed and evaluated.

Everything that can be checked is checked before the first step (`prepare`: the config, the data, the
batch against the data, the output folder), a loss that is not finite stops training before any file is
written, and the checkpoint holds what decides the weights (not the output folder or the thread count),
so the same run gives the same file bytes wherever it runs. With it are the optimizer's state, the step,
the generator's state and the history (`train_loop.loop_state`): `resume` continues a run from it with
the bits of a run never stopped, on any rank count."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..autograd import no_grad
from ..backends import backend, default_threads, set_threads
from ..backends.threads import MAX_THREADS
from ..compile import compile as compile_fn
from ..data import DataLoader, load_digits, load_mnist, split
from ..errors import WeightFileError
from ..io import load, save
from ..io.safetensors_format import read_metadata
from ..io.torch_format import is_zip_archive
from ..models import digits_cnn
from ..nn import CrossEntropyLoss, Module
from ..nn.module import StateDictError
from ..ops import from_numpy, manual_seed
from ..optim import SGD, Adam, AdamW, Optimizer
from ..tensor import Tensor
from . import data_parallel
from .data_parallel import Ranks
from .train_loop import (
    check_out_folder,
    check_same_run,
    check_step,
    evaluating,
    loop_state,
    model_tensors,
    option_name,
    restore,
)

OPTIMIZERS = ("adam", "adamw", "sgd")
DATA_SETS = ("digits", "mnist")
DEFAULT_LR = {"adam": 1e-2, "adamw": 1e-2, "sgd": 0.1}


@dataclass
class TrainConfig:
    epochs: int = 12
    batch_size: int = 32
    lr: float | None = None  # None: the optimizer's default in DEFAULT_LR
    optimizer: str = "adam"
    seed: int = 0
    out: str = "runs/digits"
    backend: str = "cpu"
    threads: int = field(default_factory=default_threads)  # VERIGRAD_THREADS, else the usable CPUs
    data: str = "digits"
    data_dir: str | None = None
    compiled: bool = True  # run the training step through verigrad.compile
    shards: int = 1  # of each batch, whose gradients are averaged in shard order (cli/data_parallel.py)
    save_every: int | None = None  # steps between checkpoints (None: at the end only)
    resume: str | None = None  # the checkpoint to continue from

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "threads", "shards", "save_every"):
            value = getattr(self, name)
            if name == "save_every" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.threads > MAX_THREADS:
            raise ValueError(f"threads must be at most {MAX_THREADS}, got {self.threads}")
        if self.lr is not None and not (isinstance(self.lr, int | float) and 0 < self.lr < math.inf):
            raise ValueError(f"lr must be a finite positive number, got {self.lr!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
        # a checkpoint's config is read back into this class: every field of its type
        if self.data not in DATA_SETS:
            raise ValueError(f"unknown data set {self.data!r}: use 'digits' or 'mnist'")
        for name, optional in (("out", False), ("backend", False), ("data_dir", True), ("resume", True)):
            value = getattr(self, name)
            if not (isinstance(value, str) or (optional and value is None)):
                kind = "a string or None" if optional else "a string"
                raise ValueError(f"{name} must be {kind}, got {value!r:.60}")
        if not isinstance(self.compiled, bool):
            raise ValueError(f"compiled must be true or false, got {self.compiled!r:.60}")


@dataclass
class TrainResult:
    config: TrainConfig
    test_accuracy: float
    seconds: float
    checkpoint: Path
    history: dict[str, list[float]] = field(default_factory=dict)
    model: Module | None = None


def load_data(data: str, data_dir: str | None, seed: int) -> tuple[np.ndarray, ...]:
    """(train_x, train_y, test_x, test_y) of the shipped digits (split by seed) or of MNIST."""
    if data == "digits":
        if data_dir is not None:  # else MNIST asked for without --data mnist would train on the digits
            raise ValueError(f"--data-dir {data_dir} is for --data mnist; the digits ship with verigrad")
        return split(*load_digits(), test_fraction=0.2, seed=seed)
    if data == "mnist":
        if data_dir is None:
            raise ValueError("--data mnist needs --data-dir DIR with MNIST's four IDX files")
        return (*load_mnist(data_dir, "train"), *load_mnist(data_dir, "test"))
    raise ValueError(f"unknown data set {data!r}: use {' or '.join(map(repr, DATA_SETS))}")


def make_optimizer(name: str, params: Iterable[Tensor], lr: float | None) -> Optimizer:
    lr = DEFAULT_LR[name] if lr is None else lr
    if name == "adam":
        return Adam(params, lr=lr)
    if name == "adamw":
        return AdamW(params, lr=lr)
    if name == "sgd":
        return SGD(params, lr=lr, momentum=0.9)
    raise ValueError(f"unknown optimizer {name!r}: use one of {', '.join(OPTIMIZERS)}")


def training_step(model: Callable, optimizer: Any, loss_fn: Callable, *, logits: bool = False) -> Callable:
    """step(x, y): the loss of model(x) against y, its gradients and one optimizer update (PyTorch's loop
    body as one function, to run eagerly or through `verigrad.compile`); returns the loss, and the
    logits with `logits=True`."""

    def step(x, y):
        x, y = (from_numpy(a) if isinstance(a, np.ndarray) else a for a in (x, y))  # as PyTorch: tensors
        out = model(x)
        loss = loss_fn(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return (loss, out) if logits else loss

    return step


def cosine_lr(base: float, step: int, total: int) -> float:
    """The learning rate at `step` of `total`: cosine decay from `base` to 0."""
    return base * 0.5 * (1 + math.cos(math.pi * step / total))


def accuracy(model: Module, x: np.ndarray, y: np.ndarray, batch_size: int = 256) -> tuple[float, np.ndarray]:
    """Fraction of correct predictions, and the predictions."""
    predictions = []
    with evaluating(model), no_grad():
        for (xb,) in DataLoader(x, batch_size=batch_size):
            predictions.append(model(xb).argmax(axis=1).numpy())
    predicted = np.concatenate(predictions)
    return float((predicted == y).mean()), predicted


CHECKPOINT, PICTURE = "model.safetensors", "training.png"
SAVED_FIELDS = ("epochs", "batch_size", "lr", "optimizer", "seed", "backend", "data", "data_dir", "compiled")
RESUME_MAY_CHANGE = ("epochs",)  # with threads and the rank count, which are not saved


@dataclass
class CNNRun:
    """What `train_loop.loop_state` saves and `restore_loop_state` restores: `start` is the next step."""

    model: Module
    optimizer: Optimizer
    start: int
    history: dict[str, list[float]]


def prepare(config: TrainConfig) -> tuple[np.ndarray, ...]:
    """The data of `config`, once everything that can be checked before training is: the backend, the
    data, the batch size against it, and the output folder and files. Raises ValueError naming what is
    wrong; nothing is written."""
    from ..backends.active import lookup

    lookup(config.backend)  # a ValueError naming the backends there are
    out = check_out_folder(config.out)
    for name in (CHECKPOINT, PICTURE):
        if (out / name).is_dir():
            raise ValueError(f"{out / name}: is a directory, where the {name} file is to be written")
    data_parallel.check_batch(config.batch_size, config.shards, "--batch-size")
    saved = resume_state(config) if config.resume is not None else None
    data = load_data(config.data, config.data_dir, config.seed)
    if config.batch_size > len(data[0]):
        raise ValueError(
            f"batch size {config.batch_size} is larger than the {len(data[0])} training images of "
            f"{config.data}: an epoch would have no step (whole batches only)"
        )
    steps = config.epochs * (len(data[0]) // config.batch_size)
    if saved is not None:
        check_step(config.resume, int(saved["step"]), steps, f"the {steps} steps of --epochs {config.epochs}")
    return data


def resume_state(config: TrainConfig) -> dict[str, Any]:
    """The metadata of the checkpoint `config.resume`, its JSON decoded, once checked that it holds a
    training state and that it was trained with `config`'s options (but epochs, threads and ranks)."""
    path = Path(config.resume)
    if not path.is_file():
        raise ValueError(f"--resume: {path} is not a checkpoint file to continue from")
    meta = read_metadata(path)
    if meta.get("model") != "digits_cnn" or "step" not in meta:
        raise WeightFileError(
            f"--resume: {path} is not a checkpoint of `verigrad train` with its training state "
            "(optimizer, step, generator)"
        )
    names = [name for name in (*SAVED_FIELDS, "shards") if name not in RESUME_MAY_CHANGE]
    check_same_run(path, asdict(_metadata_config(path, meta)), config, names, _option, _shown)
    try:
        return {k: v if k == "step" else json.loads(v) for k, v in meta.items() if k in _LOOP_KEYS}
    except (ValueError, RecursionError):
        raise WeightFileError(f"--resume: {path}: its training state is not valid JSON") from None


_LOOP_KEYS = ("step", "generator", "param_groups", "history")


def _option(name: str) -> str:
    """A config field's command-line option: `--batch-size`; `compiled` is `--eager`'s opposite."""
    return "--eager" if name == "compiled" else option_name(name)


def _shown(name: str, value: Any) -> str:
    """A config field's value as its option's: `--eager` is on or off."""
    if name == "compiled":
        return "off" if value else "on"
    return repr(value)


def train(
    config: TrainConfig,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    data: tuple[np.ndarray, ...] | None = None,
    stop_after: int | None = None,
) -> TrainResult:
    """Train the CNN; `on_step` receives a dict (epoch, step, loss, accuracy, steps_per_s) each step.
    `data`: what `prepare(config)` returned (else it is called here). With `config.shards` > 1 each batch
    is split in that many shards, computed by the MPI ranks of an initialized process group or by this
    process (the same bits); rank 0 alone evaluates and writes the checkpoint, every `config.save_every`
    steps and at the end (or after step `stop_after`: an interrupted run). `config.resume`: the checkpoint
    whose run this one continues."""
    ranks = data_parallel.current(config.shards)
    train_x, train_y, test_x, test_y = prepare(config) if data is None else data
    saved = resume_state(config) if config.resume is not None else None
    set_threads(config.threads)
    height, width = train_x.shape[2:]
    manual_seed(config.seed)
    out = Path(config.out)
    with backend(config.backend):
        model = digits_cnn(height, width)
        optimizer = make_optimizer(config.optimizer, model.parameters(), config.lr)
        base_lr = optimizer.lr  # a restored optimizer holds the last step's
        history: dict[str, list[float]] = {"loss": [], "train_accuracy": [], "test_accuracy": []}
        run = CNNRun(model, optimizer, 0, history)
        if saved is not None:
            restore(run, config.resume, saved)
            history = run.history
        step = training_step(model, optimizer, CrossEntropyLoss(), logits=True)
        if ranks.shards > 1:
            step = _sharded_step(model, optimizer, CrossEntropyLoss(), ranks)
        loader = DataLoader(
            train_x, train_y, batch_size=config.batch_size, shuffle=True, seed=config.seed, drop_last=True
        )
        per_epoch = len(loader)
        first, total = run.start, config.epochs * per_epoch
        end = total if stop_after is None else min(total, stop_after)
        for _ in range(first // per_epoch):  # the epochs done drew their orders
            iter(loader.sampler)
        meta = {
            "model": "digits_cnn",
            "height": str(height),
            "width": str(width),
            "config": json.dumps({name: asdict(config)[name] for name in _saved_fields(config)}),
        }
        start = time.perf_counter()

        def step_and_accuracy(xb: Tensor, yb: Tensor) -> tuple[Tensor, Tensor]:
            if ranks.shards > 1:
                return step(xb, yb)
            loss, logits = step(xb, yb)
            return loss, (logits.argmax(axis=1) == yb).cast("f32").mean()

        # compiled once (a plan per batch size); on the reference backend the same bits as eager
        step_fn = compile_fn(step_and_accuracy) if config.compiled else step_and_accuracy
        checkpoint = out / CHECKPOINT
        for epoch in range(first // per_epoch, config.epochs):
            if run.start == end:
                break
            # a run resumed within an epoch skips the batches it took
            for xb, yb in itertools.islice(loader, run.start - epoch * per_epoch, None):
                optimizer.lr = cosine_lr(base_lr, run.start, total)
                loss, batch_accuracy = step_fn(xb, yb)
                run.start += 1
                history["loss"].append(float(loss))
                if not math.isfinite(loss := history["loss"][-1]):
                    raise ValueError(
                        f"the loss is {loss} at step {run.start} (epoch {epoch + 1}): training "
                        f"diverged, no checkpoint written; try a smaller learning rate than {base_lr}"
                    )
                history["train_accuracy"].append(float(batch_accuracy))
                if on_step is not None:
                    elapsed = time.perf_counter() - start
                    on_step(
                        {
                            "epoch": epoch + 1,
                            "epochs": config.epochs,
                            "step": run.start,
                            "steps": total,
                            "loss": history["loss"][-1],
                            "accuracy": history["train_accuracy"][-1],
                            "steps_per_s": (run.start - first) / elapsed,
                        }
                    )
                if ranks.leader and run.start % per_epoch == 0:
                    history["test_accuracy"].append(accuracy(model, test_x, test_y)[0])
                if run.start == end:
                    break
                if ranks.leader and config.save_every and run.start % config.save_every == 0:
                    _save_checkpoint(run, checkpoint, meta)
        seconds = time.perf_counter() - start
        done = ranks.leader and history["test_accuracy"]
        test_accuracy = history["test_accuracy"][-1] if done else math.nan
    if ranks.leader:
        _save_checkpoint(run, checkpoint, meta)
    return TrainResult(config, test_accuracy, seconds, checkpoint, history, model)


def _save_checkpoint(run: CNNRun, path: Path, meta: dict[str, str]) -> None:
    """The weights, the optimizer's state (`optimizer.<index>.<name>`), and in the metadata the model's,
    the config and the loop's state (`loop_state`); written atomically."""
    optimizer_tensors, loop_meta = loop_state(run)
    save(dict(run.model.state_dict()) | optimizer_tensors, path, metadata=meta | loop_meta)


def _saved_fields(config: TrainConfig) -> tuple[str, ...]:
    """SAVED_FIELDS, and `shards` where it is not 1 (it decides the bits; a one-shard file keeps its
    bytes)."""
    return (*SAVED_FIELDS, "shards") if config.shards != 1 else SAVED_FIELDS


def _sharded_step(model: Module, optimizer: Optimizer, loss_fn: Callable, ranks: Ranks) -> Callable:
    """step(x, y) on a global batch: its shards' gradients averaged in shard order (`data_parallel`), one
    update; returns the loss and the batch accuracy, so averaged."""
    params = [p for p in model.parameters() if p.requires_grad]
    net = data_parallel.wrap(model, ranks)

    def step(x, y):
        x, y = (from_numpy(a) if isinstance(a, np.ndarray) else a for a in (x, y))

        def compute(s: int) -> tuple[Tensor, Tensor]:
            xs, ys = data_parallel.shard(x, s, ranks), data_parallel.shard(y, s, ranks)
            logits = net(xs)
            loss = loss_fn(logits, ys)
            loss.backward()
            return loss.detach(), (logits.argmax(axis=1) == ys).cast("f32").mean()

        optimizer.zero_grad()
        loss, batch_accuracy = data_parallel.averaged(compute, params, ranks)
        optimizer.step()
        return loss, batch_accuracy

    return step


def load_model(path: str | Path) -> tuple[Module, TrainConfig]:
    """The CNN saved by `train`, and the config it was trained with; a file that is not one (no verigrad
    metadata, or metadata that does not describe the CNN) is refused naming the file and the field."""
    path = Path(path)
    state = load(path)  # checks that the file exists and is a valid checkpoint
    with open(path, "rb") as f:
        if is_zip_archive(f.read(16)):
            raise WeightFileError(
                f"{path}: a PyTorch checkpoint of {len(state)} entries, not one written by `verigrad train` "
                "(it writes model.safetensors with the model's metadata)"
            )
    state = model_tensors(state)  # not the training state's
    meta = read_metadata(path)
    if meta.get("model") != "digits_cnn":
        raise WeightFileError(
            f"{path}: not a checkpoint written by `verigrad train` (no digits_cnn metadata; "
            f"its metadata keys: {sorted(meta) or 'none'})"
        )
    height, width = (_metadata_size(path, meta, name) for name in ("height", "width"))
    config = _metadata_config(path, meta)
    model = digits_cnn(height, width)
    try:
        model.load_state_dict(state)
    except StateDictError as e:  # one line per tensor: given as one line, the first few
        problems = [line.strip() for line in str(e).splitlines()[1:]]
        more = f"; and {len(problems) - 4} more" if len(problems) > 4 else ""
        raise WeightFileError(
            f"{path}: its tensors do not fit the digits CNN ({'; '.join(problems[:4])}{more})"
        ) from None
    return model, config


def _metadata_size(path: Path, meta: dict[str, str], name: str) -> int:
    text = meta.get(name)
    if text is None or not (text.isascii() and text.isdecimal()) or not 0 < int(text) <= 4096:
        raise WeightFileError(
            f"{path}: its metadata field {name!r} is {text!r}: expected a size from 1 to 4096"
        )
    return int(text)


def _metadata_config(path: Path, meta: dict[str, str]) -> TrainConfig:
    try:
        fields = json.loads(meta.get("config", ""))
    except (ValueError, RecursionError):
        fields = None
    if not isinstance(fields, dict) or not set(fields) <= {f.name for f in dataclasses.fields(TrainConfig)}:
        raise WeightFileError(
            f"{path}: its metadata field 'config' is not a `verigrad train` config: "
            f"{meta.get('config')!r:.200}"
        )
    fields.pop("threads", None)  # written by earlier versions; not the reader's
    try:
        return TrainConfig(**fields)
    except (TypeError, ValueError) as e:
        raise WeightFileError(f"{path}: its metadata field 'config' is not valid ({e})") from None


def evaluate(path: str | Path, data_dir: str | None = None) -> tuple[float, int]:
    """Test accuracy of a saved model on the test split it was trained against; (accuracy, count)."""
    model, config = load_model(path)
    _, _, test_x, test_y = load_data(config.data, data_dir or config.data_dir, config.seed)
    return accuracy(model, test_x, test_y)[0], len(test_y)


def test_predictions(model: Module, config: TrainConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _, _, test_x, test_y = load_data(config.data, config.data_dir, config.seed)
    return test_x, test_y, accuracy(model, test_x, test_y)[1]
