"""The training pictures: loss and accuracy curves with a grid of test digits and their labels (the
CNN), and the loss, validation loss and bits per byte of a language model.

Needs matplotlib (`pip install "verigrad[plot]"`); `have_matplotlib()` says whether it is there.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from ..io.atomic import write_atomically


def have_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def training_picture(
    history: dict[str, list[float]],
    images: np.ndarray,
    labels: np.ndarray,
    predicted: np.ndarray,
    path: str | Path,
    grid: int = 6,
) -> Path:
    """Write a PNG: curves on the left, `grid` x `grid` test digits (green right, red wrong) on the right."""
    from matplotlib.figure import Figure  # not pyplot: the user's backend and figures stay as they are

    fig = Figure(figsize=(12, 5.5), dpi=100)
    outer = fig.add_gridspec(1, 2, width_ratios=[1.15, 1])
    ax = fig.add_subplot(outer[0])
    steps = _loss_curves(ax, history["loss"])
    ax.set_yscale("log")
    acc = ax.twinx()
    per_epoch = len(steps) // max(1, len(history["test_accuracy"]))
    epochs_at = per_epoch * np.arange(1, len(history["test_accuracy"]) + 1)
    acc.plot(epochs_at, history["test_accuracy"], "o-", color="tab:green", label="test accuracy")
    acc.set_ylim(0, 1)
    acc.set_ylabel("test accuracy")
    lines = ax.get_legend_handles_labels()[0] + acc.get_legend_handles_labels()[0]
    ax.legend(lines, [line.get_label() for line in lines], loc="center right")
    ax.set_title(f"training: final test accuracy {history['test_accuracy'][-1]:.1%}")

    _digit_mosaic(fig.add_subplot(outer[1]), images[: grid * grid, 0], labels, predicted, grid)
    path = Path(path)
    write_atomically(path, lambda f: fig.savefig(f, format="png", bbox_inches="tight"))  # never half a PNG
    return path


def _loss_curves(ax, losses: list[float]) -> np.ndarray:
    """Each step's loss, faint, and its moving mean over a thirtieth of the run; returns the steps."""
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, color="tab:blue", alpha=0.35, lw=0.8, label="loss (each step)")
    window = max(1, len(steps) // 30)
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    ax.plot(steps[window - 1 :], smooth, color="tab:blue", lw=2, label="loss (moving mean)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    return steps


def lm_picture(history: dict[str, list[float]], path: str | Path) -> Path:
    """Write a PNG of a language model's training: the training loss each step, the validation loss at
    each evaluation (nats per token), and the bits per byte on a second axis."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5), dpi=100)
    ax = fig.add_subplot()
    _loss_curves(ax, history["loss"])
    ax.plot(history["eval_step"], history["val_loss"], "o-", color="tab:orange", label="validation loss")
    bpb = ax.twinx()
    bpb.plot(history["eval_step"], history["val_bpb"], "s--", color="tab:green", label="validation bits/byte")
    bpb.set_ylabel("bits per byte")
    lines = ax.get_legend_handles_labels()[0] + bpb.get_legend_handles_labels()[0]
    ax.legend(lines, [line.get_label() for line in lines], loc="upper right")
    last = f": validation {history['val_bpb'][-1]:.3f} bits/byte" if history["val_bpb"] else ""
    ax.set_title(f"language model training{last}")
    path = Path(path)
    write_atomically(path, lambda f: fig.savefig(f, format="png", bbox_inches="tight"))
    return path


def _digit_mosaic(ax, images: np.ndarray, labels: np.ndarray, predicted: np.ndarray, grid: int) -> None:
    """The digits as tiles of one image in one axes, each under its label (one axes, not grid^2: the
    picture takes a tenth of the time to draw)."""
    import matplotlib

    h, w = images.shape[1:]
    gap_x, gap_y = max(1, w // 4), max(3, (h * 3) // 5)  # room between tiles, and for a label above each
    mosaic = np.full((grid * (h + gap_y), grid * (w + gap_x)), np.nan)
    for i, image in enumerate(images):
        top, left = (i // grid) * (h + gap_y) + gap_y, (i % grid) * (w + gap_x)
        mosaic[top : top + h, left : left + w] = image
        right = predicted[i] == labels[i]
        ax.text(
            left + (w - 1) / 2,
            top - 0.8,
            f"{predicted[i]} ({labels[i]})",
            ha="center",
            va="bottom",
            fontsize=8,
            color="green" if right else "red",
        )
    cmap = matplotlib.colormaps["gray_r"].with_extremes(bad="white")
    ax.imshow(mosaic, cmap=cmap, interpolation="nearest")
    ax.set_title("test digits: predicted (true)", fontsize=10)
    ax.axis("off")
