"""The trainer of `verigrad train` and `verigrad eval`: the digits CNN trained with the training step
below, checkpointed and evaluated."""

from __future__ import annotations

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
from ..compile import compile as compile_fn
from ..data import DataLoader, load_digits, load_mnist, split
from ..errors import WeightFileError
from ..io import load, save
from ..models import digits_cnn
from ..nn import CrossEntropyLoss, Module
from ..ops import from_numpy, manual_seed
from ..optim import SGD, Adam, AdamW, Optimizer
from ..tensor import Tensor

OPTIMIZERS = ("adam", "adamw", "sgd")
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

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "threads"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}: use one of {', '.join(OPTIMIZERS)}")


@dataclass
class TrainResult:
    config: TrainConfig
    test_accuracy: float
    seconds: float
    checkpoint: Path
    history: dict[str, list[float]] = field(default_factory=dict)
    model: Module | None = None
    diverged_at: int | None = None  # the first step (from 1) whose loss was not finite (NaN or inf)


def load_data(data: str, data_dir: str | None, seed: int) -> tuple[np.ndarray, ...]:
    """(train_x, train_y, test_x, test_y) of the shipped digits (split by seed) or of MNIST."""
    if data == "digits":
        return split(*load_digits(), test_fraction=0.2, seed=seed)
    if data == "mnist":
        if data_dir is None:
            raise ValueError("--data mnist needs --data-dir DIR with MNIST's four IDX files")
        return (*load_mnist(data_dir, "train"), *load_mnist(data_dir, "test"))
    raise ValueError(f"unknown data set {data!r}: use 'digits' or 'mnist'")


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
    model.eval()
    predictions = []
    with no_grad():
        for (xb,) in DataLoader(x, batch_size=batch_size):
            predictions.append(model(xb).argmax(axis=1).numpy())
    model.train()
    predicted = np.concatenate(predictions)
    return float((predicted == y).mean()), predicted


def train(config: TrainConfig, on_step: Callable[[dict[str, Any]], None] | None = None) -> TrainResult:
    """Train the CNN; `on_step` receives a dict (epoch, step, loss, accuracy, steps_per_s) each step."""
    set_threads(config.threads)
    train_x, train_y, test_x, test_y = load_data(config.data, config.data_dir, config.seed)
    height, width = train_x.shape[2:]
    manual_seed(config.seed)
    out = Path(config.out)
    with backend(config.backend):
        model = digits_cnn(height, width)
        optimizer = make_optimizer(config.optimizer, model.parameters(), config.lr)
        step = training_step(model, optimizer, CrossEntropyLoss(), logits=True)
        loader = DataLoader(
            train_x, train_y, batch_size=config.batch_size, shuffle=True, seed=config.seed, drop_last=True
        )
        history: dict[str, list[float]] = {"loss": [], "train_accuracy": [], "test_accuracy": []}
        start, steps, total = time.perf_counter(), 0, config.epochs * len(loader)
        diverged_at: int | None = None
        base_lr = optimizer.lr

        def step_and_accuracy(xb: Tensor, yb: Tensor) -> tuple[Tensor, Tensor]:
            loss, logits = step(xb, yb)
            return loss, (logits.argmax(axis=1) == yb).cast("f32").mean()

        # compiled once (a plan per batch size); on the reference backend the same bits as eager
        step_fn = compile_fn(step_and_accuracy) if config.compiled else step_and_accuracy
        for epoch in range(config.epochs):
            for xb, yb in loader:
                optimizer.lr = cosine_lr(base_lr, steps, total)
                loss, batch_accuracy = step_fn(xb, yb)
                steps += 1
                history["loss"].append(float(loss))
                if diverged_at is None and not math.isfinite(history["loss"][-1]):
                    diverged_at = steps
                history["train_accuracy"].append(float(batch_accuracy))
                if on_step is not None:
                    elapsed = time.perf_counter() - start
                    on_step(
                        {
                            "epoch": epoch + 1,
                            "epochs": config.epochs,
                            "step": steps,
                            "steps": config.epochs * len(loader),
                            "loss": history["loss"][-1],
                            "accuracy": history["train_accuracy"][-1],
                            "steps_per_s": steps / elapsed,
                        }
                    )
            history["test_accuracy"].append(accuracy(model, test_x, test_y)[0])
        seconds = time.perf_counter() - start
        test_accuracy = history["test_accuracy"][-1]
    meta = {
        "model": "digits_cnn",
        "height": str(height),
        "width": str(width),
        "config": json.dumps(asdict(config)),
    }
    checkpoint = save(model.state_dict(), out / "model.safetensors", metadata=meta)
    return TrainResult(config, test_accuracy, seconds, checkpoint, history, model, diverged_at)


def load_model(path: str | Path) -> tuple[Module, TrainConfig]:
    """The CNN saved by `train`, and the config it was trained with."""
    from safetensors import safe_open

    path = Path(path)
    state = load(path)  # checks that the file exists and is valid
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata() or {}
    if meta.get("model") != "digits_cnn":
        raise WeightFileError(
            f"{path}: not a checkpoint written by `verigrad train` (no digits_cnn metadata)"
        )
    model = digits_cnn(int(meta["height"]), int(meta["width"]))
    model.load_state_dict(state)
    return model, TrainConfig(**json.loads(meta["config"]))


def evaluate(path: str | Path, data_dir: str | None = None) -> tuple[float, int]:
    """Test accuracy of a saved model on the test split it was trained against; (accuracy, count)."""
    model, config = load_model(path)
    _, _, test_x, test_y = load_data(config.data, data_dir or config.data_dir, config.seed)
    return accuracy(model, test_x, test_y)[0], len(test_y)


def test_predictions(model: Module, config: TrainConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _, _, test_x, test_y = load_data(config.data, config.data_dir, config.seed)
    return test_x, test_y, accuracy(model, test_x, test_y)[1]
