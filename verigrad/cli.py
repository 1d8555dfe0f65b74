"""The `verigrad` command: `train`, `eval`, `demo`, `ir`, `ops`, `version`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def _train(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from .plot import have_matplotlib, training_picture
    from .train import TrainConfig, test_predictions, train

    config = TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        optimizer=args.optimizer,
        seed=args.seed,
        out=args.out,
        backend=args.backend,
        threads=args.threads,
        data=args.data,
        data_dir=args.data_dir,
        compiled=not args.eager,
    )
    console = Console()
    console.print(
        f"[bold]verigrad train[/]: CNN on {config.data}, {config.epochs} epochs, batch {config.batch_size}, "
        f"{config.optimizer}, backend {config.backend}, {config.threads} thread(s), seed {config.seed}"
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

        result = train(config, on_step=on_step)
    console.print(
        f"test accuracy [bold]{result.test_accuracy:.2%}[/] after {result.seconds:.1f} s of training; "
        f"checkpoint {escape(str(result.checkpoint))}"
    )
    if have_matplotlib():
        images, labels, predicted = test_predictions(result.model, config)
        picture = training_picture(
            result.history, images, labels, predicted, Path(config.out) / "training.png"
        )
        console.print(f"picture {escape(str(picture))}")
    else:
        # markup=False: rich would take [plot] for a style tag and drop it
        console.print('no picture: matplotlib is missing (pip install "verigrad[plot]")', markup=False)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .train import evaluate

    accuracy, count = evaluate(args.checkpoint, data_dir=args.data_dir)
    print(f"{args.checkpoint}: test accuracy {accuracy:.2%} on {count} images")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demos import run_demo

    return run_demo(steps=args.steps)


IR_MODELS = ("cnn", "mlp")
IR_SCRIPT_HELP = (
    "a Python file that defines program() returning a verigrad Program, or `model` (a function "
    "or module) and `example_spec` (a verigrad.spec, or a tuple of them, for its arguments)"
)


def _ir(args: argparse.Namespace) -> int:
    from .ir.passes import optimize

    if args.script is not None:
        if args.model is not None or args.train or args.batch is not None:
            raise ValueError("give a SCRIPT or --model (with --train, --optimizer, --batch), not both")
        program = _script_program(Path(args.script))
    else:
        program = _model_program(args.model or "cnn", args.train, args.optimizer, args.batch)
    if args.passes:
        program = optimize(program)
    program.verify()
    print(program)
    return 0


def _model_program(name: str, train: bool, optimizer: str, batch: int | None):
    """The forward program of a model of the repository, or its training step (forward, loss,
    backward, optimizer update), with a symbolic batch `B` unless `batch` is given."""
    from .autograd import no_grad
    from .demos import MLP
    from .ir import trace
    from .models import digits_cnn
    from .nn import CrossEntropyLoss
    from .ops import manual_seed
    from .shapes import dims, spec
    from .train import make_optimizer

    manual_seed(0)
    b = dims("B") if batch is None else batch
    if name == "cnn":
        model, x = digits_cnn(8, 8), spec([b, 1, 8, 8])
    elif name == "mlp":
        model, x = MLP.create(2, 64, 3), spec([b, 2])
    else:
        raise ValueError(f"unknown model {name!r}: use one of {', '.join(IR_MODELS)}")
    if not train:
        with no_grad():  # composite ops stay whole when no gradient is taken
            return trace(model, x)
    opt = make_optimizer(optimizer, model.parameters(), None)
    loss_fn = CrossEntropyLoss()

    def step(x, y):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return trace(step, x, spec([b], "i64"))


def _script_program(path: Path):
    """Run the script and take its Program (see IR_SCRIPT_HELP)."""
    import runpy

    from .errors import VerigradError
    from .ir import Program, trace
    from .shapes import Spec

    if not path.is_file():
        raise ValueError(f"no such script: {path}")
    try:
        namespace = runpy.run_path(str(path), run_name="__verigrad_ir__")
        if callable(namespace.get("program")):
            program = namespace["program"]()
        elif "model" in namespace and "example_spec" in namespace:
            specs = namespace["example_spec"]
            program = trace(namespace["model"], *((specs,) if isinstance(specs, Spec) else specs))
        else:
            program = None
    except VerigradError:
        raise  # a shape or dtype error: main() prints it with the user's line
    except Exception as e:  # the script's own error, in one line with the script's line
        line = _last_frame(e, path)
        raise ValueError(f"{path}{f':{line}' if line else ''}: {type(e).__name__}: {e}") from None
    if program is None:
        raise ValueError(f"{path} defines neither program() nor model and example_spec")
    if not isinstance(program, Program):
        raise ValueError(f"{path}: program() returned {type(program).__name__}, not a verigrad Program")
    return program


def _last_frame(error: BaseException, path: Path) -> int | None:
    """The deepest line of the script in the error's traceback, if any."""
    import traceback

    target = path.resolve()
    frames = traceback.extract_tb(error.__traceback__)
    lines = [f.lineno for f in frames if Path(f.filename).resolve() == target]
    return lines[-1] if lines else None


def _ops(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from .backends import get_backend
    from .registry import OPS

    table = Table("op", "kind", "grad", "exact", "torch", "doc", title="verigrad ops")
    for name, op in sorted(OPS.items()):
        doc = (op.__doc__ or "").split("\n")[0]
        table.add_row(
            name,
            "composite" if op.is_composite else "primitive",
            "yes" if op.differentiable else "",
            "yes" if op.exact else "",
            "yes" if op.torch else "",
            doc,
        )
    console = Console()
    console.print(table)
    report = get_backend().report()
    console.print(
        f"{len(OPS)} ops; backend {get_backend().name}: {len(report['native'])} native, "
        f"{len(report['fallback'])} on the reference"
    )
    return 0


def _version(args: argparse.Namespace) -> int:
    import verigrad

    print(f"verigrad {verigrad.__version__}")
    return 0


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line (`verigrad train: error: ...`), without the usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="verigrad",
        description="verigrad: every op has one NumPy definition; shapes are checked for every size.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from .backends import available
    from .train import OPTIMIZERS

    train = sub.add_parser("train", help="train the CNN on the shipped digits (or MNIST) and save it")
    train.add_argument("--epochs", type=_positive_int, default=12)
    train.add_argument("--batch-size", type=_positive_int, default=32)
    train.add_argument(
        "--lr", type=_positive_float, default=None, help="default: 1e-2 (adam, adamw), 0.1 (sgd)"
    )
    train.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", default="runs/digits", help="folder for the checkpoint and the picture")
    train.add_argument("--backend", choices=available(), default="reference")
    train.add_argument("--threads", type=_positive_int, default=1)
    train.add_argument("--eager", action="store_true", help="run each step eagerly instead of compiled")
    train.add_argument("--data", choices=("digits", "mnist"), default="digits")
    train.add_argument("--data-dir", default=None, help="folder with MNIST's IDX files (for --data mnist)")
    train.set_defaults(run=_train)
    evaluate = sub.add_parser("eval", help="test accuracy of a checkpoint written by `verigrad train`")
    evaluate.add_argument("checkpoint")
    evaluate.add_argument("--data-dir", default=None)
    evaluate.set_defaults(run=_eval)
    demo = sub.add_parser("demo", help="train a small MLP eagerly and print the loss falling")
    demo.add_argument("--steps", type=_positive_int, default=300, help="SGD steps (default 300)")
    demo.set_defaults(run=_demo)
    ir = sub.add_parser(
        "ir",
        help="print the IR program of a model (forward or training step) or of a script",
        description="Print a traced program: a model of the repository (its forward pass, or with "
        "--train its training step) with a symbolic batch B, or what SCRIPT defines.",
    )
    ir.add_argument("script", nargs="?", metavar="SCRIPT.py", help=IR_SCRIPT_HELP)
    ir.add_argument("--model", choices=IR_MODELS, default=None, help="default: cnn (the digits CNN)")
    ir.add_argument("--train", action="store_true", help="the training step: forward, backward, update")
    ir.add_argument("--optimizer", choices=OPTIMIZERS, default="adam", help="with --train (default adam)")
    ir.add_argument(
        "--passes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="print after the default pass pipeline (default), or as traced (--no-passes)",
    )
    ir.add_argument("--batch", type=_positive_int, default=None, help="a concrete batch (default: symbol B)")
    ir.set_defaults(run=_ir)
    sub.add_parser("ops", help="list every op in the registry").set_defaults(run=_ops)
    sub.add_parser("version", help="print the version").set_defaults(run=_version)
    return parser


def _positive(kind: type, what: str):
    """An argparse type: a number of `kind` greater than 0, or a one-line error."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {what}, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive {what}, got {value}")
        return value

    return parse


_positive_int = _positive(int, "integer")
_positive_float = _positive(float, "number")


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import VerigradError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 0
    try:
        return args.run(args)
    except (VerigradError, ValueError, OSError) as e:  # a one-line error, never a traceback
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if getattr(e, "where", None) is not None:
            message += f" (at {e.where})"  # the user's line of a shape or dtype error
        print(f"verigrad {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"verigrad {args.command}: interrupted", file=sys.stderr)
        return 130
