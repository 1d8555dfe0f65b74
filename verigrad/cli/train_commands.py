"""`verigrad train` and `verigrad eval`: their options, the progress display and the one-line results."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import plot, trainer
from .arguments import (
    MAX_EPOCHS,
    epoch_count,
    existing_folder,
    non_negative_int,
    positive_float,
    positive_int,
    writable_folder,
)
from .loop_options import add_run_options, add_shards_option, run_config


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`train` and `eval`."""
    train = sub.add_parser("train", help="train the CNN on the shipped digits (or MNIST) and save it")
    train.add_argument("--epochs", type=epoch_count, default=12, help=f"default 12; at most {MAX_EPOCHS}")
    train.add_argument(
        "--batch-size", type=positive_int, default=32, help="default 32; at most the training images"
    )
    train.add_argument(
        "--lr", type=positive_float, default=None, help="default: 1e-2 (adam, adamw), 0.1 (sgd)"
    )
    train.add_argument("--optimizer", choices=trainer.OPTIMIZERS, default="adam")
    train.add_argument("--seed", type=non_negative_int, default=0)
    train.add_argument(
        "--out", type=writable_folder, default="runs/digits", help="folder for the checkpoint and the picture"
    )
    add_run_options(train)
    train.add_argument("--data", choices=("digits", "mnist"), default="digits")
    train.add_argument("--data-dir", default=None, help="folder with MNIST's IDX files (for --data mnist)")
    add_shards_option(train)
    train.add_argument(
        "--save-every", type=positive_int, default=None, help="steps between checkpoints (default: the end)"
    )
    train.add_argument(
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="PATH",
        help="continue the run of a checkpoint (default --out's) with the same options; --epochs may grow",
    )
    train.set_defaults(run=run_train)
    evaluate = sub.add_parser("eval", help="test accuracy of a checkpoint written by `verigrad train`")
    evaluate.add_argument("checkpoint")
    evaluate.add_argument(
        "--data-dir", type=existing_folder, default=None, help="MNIST's folder, for a model trained on it"
    )
    evaluate.set_defaults(run=run_eval)


def run_train(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from . import data_parallel

    ranks = data_parallel.setup(args.shards)
    config = trainer.TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        optimizer=args.optimizer,
        seed=args.seed,
        out=args.out,
        data=args.data,
        data_dir=args.data_dir,
        shards=ranks.shards,
        save_every=args.save_every,
        resume=None if args.resume is None else args.resume or str(Path(args.out) / trainer.CHECKPOINT),
        **run_config(args),
    )
    data = trainer.prepare(config)  # refuses what it can before the first line
    console = Console(quiet=not ranks.leader)  # rank 0 alone prints
    shards = f", {ranks.shards} shards on {ranks.world} rank(s)" if ranks.shards > 1 else ""
    console.print(
        f"[bold]verigrad train[/]: CNN on {config.data}, {config.epochs} epochs, batch {config.batch_size}, "
        f"{config.optimizer}, backend {config.backend}, {config.threads} thread(s), "
        f"seed {config.seed}{shards}" + (f", resuming {escape(config.resume)}" if config.resume else "")
    )
    columns = (
        TextColumn("epoch {task.fields[epoch]}/{task.fields[epochs]}"),
        BarColumn(),
        TextColumn("step {task.completed}/{task.total}"),
        TextColumn("loss {task.fields[loss]:.4f}  acc {task.fields[accuracy]:6.1%}"),
        TextColumn("{task.fields[steps_per_s]:6.1f} steps/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(
            "train",
            total=None,
            epoch=0,
            epochs=config.epochs,
            loss=float("nan"),
            accuracy=0.0,
            steps_per_s=0.0,
        )

        def on_step(s: dict) -> None:
            progress.update(
                task,
                completed=s["step"],
                total=s["steps"],
                epoch=s["epoch"],
                loss=s["loss"],
                accuracy=s["accuracy"],
                steps_per_s=s["steps_per_s"],
            )

        result = trainer.train(config, on_step=on_step, data=data)
    if not ranks.leader:
        return 0
    console.print(
        f"test accuracy [bold]{result.test_accuracy:.2%}[/] after {result.seconds:.1f} s of training; "
        f"checkpoint {escape(str(result.checkpoint))}"
    )
    if plot.have_matplotlib():
        images, labels, predicted = trainer.test_predictions(result.model, config)
        picture = plot.training_picture(
            result.history, images, labels, predicted, Path(config.out) / "training.png"
        )
        console.print(f"picture {escape(str(picture))}")
    else:
        # markup=False: rich would take [plot] for a style tag and drop it
        console.print('no picture: matplotlib is missing (pip install "verigrad[plot]")', markup=False)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    accuracy, count = trainer.evaluate(args.checkpoint, data_dir=args.data_dir)
    print(f"{args.checkpoint}: test accuracy {accuracy:.2%} on {count} images")
    return 0
