"""`verigrad ir`: print the traced program of a model of the repository (its forward pass or its training
step) or of a user's script."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arguments import batch_size
from .trainer import OPTIMIZERS

IR_MODELS = ("cnn", "mlp")
IR_SCRIPT_HELP = (
    "a Python file that defines program() returning a verigrad Program, or `model` (a function "
    "or module) and `example_spec` (a verigrad.spec, or a tuple of them, for its arguments)"
)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`ir`."""
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
    ir.add_argument("--batch", type=batch_size, default=None, help="a concrete batch (default: symbol B)")
    ir.set_defaults(run=run_ir)


def run_ir(args: argparse.Namespace) -> int:
    from ..ir.passes import optimize

    if args.script is not None:
        if args.model is not None or args.train or args.batch is not None:
            raise ValueError("give a SCRIPT or --model (with --train, --optimizer, --batch), not both")
        program = script_program(Path(args.script))
    else:
        program = model_program(args.model or "cnn", args.train, args.optimizer, args.batch)
    if args.passes:
        program = optimize(program)
    program.verify()
    print(program)
    return 0


def model_program(name: str, train: bool, optimizer: str, batch: int | None):
    """The forward program of a model of the repository, or its training step (forward, loss,
    backward, optimizer update), with a symbolic batch `B` unless `batch` is given."""
    from ..autograd import no_grad
    from ..ir import trace
    from ..models import digits_cnn
    from ..nn import CrossEntropyLoss
    from ..ops import manual_seed
    from ..shapes import dims, spec
    from .demo import MLP
    from .trainer import make_optimizer, training_step

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
    step = training_step(model, make_optimizer(optimizer, model.parameters(), None), CrossEntropyLoss())
    return trace(step, x, spec([b], "i64"))


def script_program(path: Path):
    """Run the script and take its Program (see IR_SCRIPT_HELP)."""
    import runpy

    from ..errors import VerigradError
    from ..ir import Program, trace
    from ..shapes import Spec

    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not a script")
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
