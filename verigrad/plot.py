"""The training picture: loss and accuracy curves, and a grid of test digits with their labels.

Needs matplotlib (`pip install "verigrad[plot]"`); `have_matplotlib()` says whether it is there.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np


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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(12, 5.5), dpi=100)
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

    cells = outer[1].subgridspec(grid, grid, wspace=0.1, hspace=0.45)
    for i in range(min(grid * grid, len(images))):
        cell = fig.add_subplot(cells[i // grid, i % grid])
        cell.imshow(images[i, 0], cmap="gray_r")
        right = predicted[i] == labels[i]
        cell.set_title(f"{predicted[i]} ({labels[i]})", fontsize=8, color="green" if right else "red")
        cell.axis("off")
    fig.text(0.77, 0.95, "test digits: predicted (true)", ha="center", fontsize=10)
    path = Path(path)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path
