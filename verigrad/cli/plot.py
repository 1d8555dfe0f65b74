"""The training picture: loss and accuracy curves, and a grid of test digits with their labels.

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
    steps = np.arange(1, len(history["loss"]) + 1)
    ax.plot(steps, history["loss"], color="tab:blue", alpha=0.35, lw=0.8, label="loss (each step)")
    window = max(1, len(steps) // 30)
    smooth = np.convolve(history["loss"], np.ones(window) / window, mode="valid")
    ax.plot(steps[window - 1 :], smooth, color="tab:blue", lw=2, label="loss (moving mean)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
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
